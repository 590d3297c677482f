// Checkpoints: named float32/float64 tensors and string metadata in a .safetensors or .npz file,
// and a graph's parameters saved and loaded by name through them (docs/checkpoints.md).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <xtensor/xarray.hpp>

#include <xgrad/graph/graph.hpp>
#include <xgrad/lib/array_io.hpp>

namespace xgrad {

// Free-form strings stored beside the tensors: safetensors' "__metadata__", the .npz member
// "__metadata__.json" (a JSON object of strings).
using CheckpointMetadata = std::map<std::string, std::string>;

// The format, chosen by the file name's extension: ".safetensors" or ".npz".
enum class CheckpointFormat { safetensors, npz };
// xgrad::error naming the file for any other name.
CheckpointFormat checkpoint_format(const std::string& path);

// The most bytes of a safetensors header, and of an .npz's "__metadata__.json": 100 MB, the
// limit of the safetensors reference implementation.
inline constexpr std::size_t max_checkpoint_header = 100'000'000;

// A checkpoint as stored: each tensor's dtype ("float32", "float64") and its values, converted
// exactly to double. Tensors are in file order: the order of their data in a safetensors file,
// of the members in an .npz.
struct StoredCheckpoint {
  std::vector<std::pair<std::string, StoredArray>> tensors;
  CheckpointMetadata metadata;
};

// Reads and checks a whole checkpoint (every rule of docs/checkpoints.md) before it returns;
// throws xgrad::error naming the file and, where there is one, the tensor. Declared sizes are
// checked against the file size, and every tensor against max_array_elements, before anything
// of that size is allocated.
StoredCheckpoint read_checkpoint(const std::string& path);
// The same from bytes in memory in the given format; `what` names them in errors.
StoredCheckpoint parse_checkpoint(std::string_view bytes, CheckpointFormat format, const std::string& what);

// A checkpoint's tensors in T, in file order, and its metadata.
template <class T>
struct TensorFile {
  std::vector<std::pair<std::string, xt::xarray<T>>> tensors;
  CheckpointMetadata metadata;
  // The tensor of that name, or nullptr: a linear search (index `tensors` for many lookups).
  const xt::xarray<T>* find(const std::string& name) const;
};

// Reads a checkpoint into T. float64 reads F32 (always exact); float32 reads F64 only when every
// value converts exactly (NaN counts as exact), else xgrad::error naming the file, the tensor, the
// position and the value. A float32 NaN comes back as a NaN (a signalling one as quiet).
template <class T>
TensorFile<T> load_tensors(const std::string& path);
template <class T>
TensorFile<T> parse_tensors(std::string_view bytes, CheckpointFormat format, const std::string& what);

// Writes the tensors (F32 for float, F64 for double) and the metadata, in the format of the
// path's extension, atomically: to a temporary file in the same directory, renamed over the path
// once complete, so that a failure leaves the old file (or none) and never a partial one. Names
// must be non-empty and not "__metadata__"; safetensors names and metadata must be UTF-8.
template <class T>
void save_tensors(const std::string& path, const std::map<std::string, xt::xarray<T>>& tensors,
                  const CheckpointMetadata& metadata = {});
// The bytes save_tensors writes; `what` names them in errors.
template <class T>
std::string checkpoint_bytes(const std::map<std::string, xt::xarray<T>>& tensors, const CheckpointMetadata& metadata,
                             CheckpointFormat format, const std::string& what);

// Saves every parameter of g (Graph::parameters) under its name, and the metadata. Every
// parameter must have a name, and no two the same (xgrad::error otherwise, nothing written).
template <class T>
void save_parameters(Graph<T>& g, const std::string& path, const CheckpointMetadata& metadata = {});
// Sets every parameter of g to the tensor of its name and returns the metadata. All or nothing:
// the file must hold exactly one tensor per parameter, of the parameter's shape, else
// xgrad::error naming the file and the tensor, and no parameter changes. Replay afterwards.
template <class T>
CheckpointMetadata load_parameters(Graph<T>& g, const std::string& path);

// The metadata of a checkpoint; the whole file is checked as read_checkpoint checks it.
CheckpointMetadata read_checkpoint_metadata(const std::string& path);

}  // namespace xgrad
