// The two checkpoint formats under lib/checkpoint.hpp: readers from a source of bytes, writers to
// bytes. Internal to lib/checkpoint*.cpp (no libzip type appears here).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <xgrad/graph/shape.hpp>
#include <xgrad/lib/checkpoint.hpp>

namespace xgrad::checkpoint_detail {

// `size` bytes readable `n` at a time from `offset`; `what` names them in errors ("m.npz").
struct ByteSource {
  std::size_t size;
  std::function<std::string(std::size_t offset, std::size_t n)> read;
  std::string what;
};

// A tensor ready to write: its safetensors dtype ("F32", "F64"), shape and little-endian,
// row-major bytes, or (for .npz) its whole .npy file.
struct EncodedTensor {
  std::string name;
  std::string dtype;
  Shape shape;
  std::string bytes;
};

// Refuses a name that is empty or "__metadata__"; `what` names the file.
void check_tensor_name(const std::string& name, const std::string& what);
// Parses a JSON object of strings (the metadata), refusing duplicate keys and anything nested.
CheckpointMetadata parse_metadata_json(std::string_view text, const std::string& what);
// A JSON object of strings; xgrad::error naming `what` if a string is not UTF-8.
std::string metadata_json(const CheckpointMetadata& metadata, const std::string& what);

StoredCheckpoint read_safetensors(const ByteSource& source);
std::string safetensors_bytes(const std::vector<EncodedTensor>& tensors, const CheckpointMetadata& metadata,
                              const std::string& what);

// The file through libzip's file source (nothing read whole), or bytes in memory.
StoredCheckpoint read_npz_file(const std::string& path);
StoredCheckpoint parse_npz(std::string_view bytes, const std::string& what);
// Members NAME.npy (stored, uncompressed, as np.savez writes them) and, for non-empty metadata,
// __metadata__.json.
std::string npz_bytes(const std::vector<EncodedTensor>& tensors, const CheckpointMetadata& metadata,
                      const std::string& what);

}  // namespace xgrad::checkpoint_detail
