#include <xgrad/lib/array_io.hpp>

#include <xgrad/graph/error.hpp>

namespace xgrad {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

StoredArray read_array(const std::string& path) {
  if (ends_with(path, ".npy")) return read_npy(path);
  if (ends_with(path, ".json")) return read_json_array(path);
  throw error(path + ": unknown array file type (expected a name ending in .npy or .json)");
}

}  // namespace xgrad
