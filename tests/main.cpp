#define BOOST_TEST_MODULE xgrad
#include <boost/test/unit_test.hpp>
