// Reading files whole or in part, with the checks every reader of xgrad makes first.
#pragma once

#include <cstddef>
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

}  // namespace xgrad
