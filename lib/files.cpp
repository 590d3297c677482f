#include <xgrad/lib/files.hpp>

#include <filesystem>
#include <fstream>

#include <xgrad/graph/error.hpp>

namespace xgrad {

std::string read_file_range(const std::string& path, std::size_t offset, std::size_t n) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error(path + ": cannot open the file");
  in.seekg(static_cast<std::streamoff>(offset));
  std::string bytes(n, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(n));
  if (static_cast<std::size_t>(in.gcount()) != n) throw error(path + ": the file changed while being read");
  return bytes;
}

std::size_t regular_file_size(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw error(path + ": " + (std::filesystem::exists(path, ec) ? "not a regular file" : "no such file"));
  }
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw error(path + ": cannot read its size: " + ec.message());
  return static_cast<std::size_t>(size);
}

std::string read_text_file(const std::string& path, std::size_t max_bytes) {
  const std::size_t size = regular_file_size(path);
  if (size > max_bytes) {
    throw error(path + ": " + std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes) +
                " this reader takes");
  }
  return read_file_range(path, 0, size);
}

}  // namespace xgrad
