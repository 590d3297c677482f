#include <xgrad/lib/array_io.hpp>

#include <xgrad/graph/error.hpp>

namespace xgrad {

StoredArray read_array(const std::string& path) {
  if (ends_with(path, ".npy")) return read_npy(path);
  if (ends_with(path, ".json")) return read_json_array(path);
  throw error(path + ": unknown array file type (expected a name ending in .npy or .json)");
}

}  // namespace xgrad
