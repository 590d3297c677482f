#include <xgrad/lib/files.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <sys/stat.h>
#include <unistd.h>

#include <xgrad/graph/error.hpp>

namespace xgrad {

namespace {

// The file to replace: the path, or for a symbolic link the file it points to.
std::string write_target(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return path;
  if (S_ISLNK(st.st_mode)) {
    std::error_code ec;
    const auto target = std::filesystem::canonical(path, ec);
    if (ec || stat(path.c_str(), &st) != 0) throw error(path + ": is a symbolic link to nothing; refusing to write through it");
    if (!S_ISREG(st.st_mode)) throw error(path + ": exists and is not a regular file; refusing to replace it");
    return target.string();
  }
  if (!S_ISREG(st.st_mode)) throw error(path + ": exists and is not a regular file; refusing to replace it");
  return path;
}

// The process's umask from /proc/self/status (Linux 4.7 and later), 022 where it is not there.
mode_t current_umask() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Umask:", 0) == 0) return static_cast<mode_t>(std::stoul(line.substr(6), nullptr, 8));
  }
  return 022;
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& bytes) {
  namespace fs = std::filesystem;
  const fs::path target(write_target(path));
  std::string temp = (target.parent_path() / ("." + target.filename().string() + ".XXXXXX")).string();
  const int fd = mkstemp(temp.data());
  if (fd < 0) throw error(path + ": cannot create a temporary file in its directory: " + std::strerror(errno));
  // The mode a new file would get (0666 less the umask, read without changing it: umask() is
  // process-wide), or the mode of the file it replaces.
  struct stat old {};
  const mode_t mode = ::stat(target.c_str(), &old) == 0 ? (old.st_mode & 07777) : (0666 & ~current_umask());
  int e = 0;
  if (fchmod(fd, mode) != 0) e = errno;
  for (std::size_t done = 0; e == 0 && done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) e = errno;
    else if (n == 0) e = EIO;
    else done += static_cast<std::size_t>(n);
  }
  if (e == 0 && fsync(fd) != 0) e = errno;
  if (::close(fd) != 0 && e == 0) e = errno;
  if (e != 0) {
    ::unlink(temp.c_str());
    throw error(path + ": cannot write it: " + std::strerror(e));
  }
  if (::rename(temp.c_str(), target.c_str()) != 0) {
    e = errno;
    ::unlink(temp.c_str());
    throw error(path + ": cannot replace it: " + std::strerror(e));
  }
}


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
