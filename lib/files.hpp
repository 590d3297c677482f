// Reading files whole or in part, with the checks every reader of xgrad makes first.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace xgrad {

// True if the file name `s` ends in `suffix` (".npy", ".npz"): how readers choose a format.
inline bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The size of a regular file; xgrad::error naming the file if it is missing or not a regular
// file (a directory, a FIFO, /dev/zero).
std::size_t regular_file_size(const std::string& path);

// n bytes of the file from `offset`; xgrad::error naming the file if they cannot be read.
std::string read_file_range(const std::string& path, std::size_t offset, std::size_t n);

// The whole content of a regular file of at most max_bytes (default 1 GiB); xgrad::error naming
// the file if it is missing, not a regular file, or larger.
std::string read_text_file(const std::string& path, std::size_t max_bytes = std::size_t(1) << 30);

// Writes bytes to a temporary file beside `path` and renames it over `path`, so that the file is
// whole or not there (never half-written), with the mode of the file it replaces (or 0666 less
// the umask). A symbolic link is followed: the file it points to is replaced. xgrad::error naming
// the path if it exists and is not a regular file, or cannot be written.
void write_file_atomically(const std::string& path, const std::string& bytes);

// The little-endian bytes of n values, in order (the layout of .npy, safetensors and ONNX's
// raw_data).
template <class T>
std::string little_endian_bytes(const T* values, std::size_t n) {
  std::string out(n * sizeof(T), '\0');
  const std::uint16_t one = 1;
  unsigned char first;
  std::memcpy(&first, &one, 1);
  for (std::size_t i = 0; i < n; ++i) {
    unsigned char b[sizeof(T)];
    std::memcpy(b, &values[i], sizeof(T));
    if (first != 1) std::reverse(b, b + sizeof(T));
    std::memcpy(out.data() + i * sizeof(T), b, sizeof(T));
  }
  return out;
}

}  // namespace xgrad
