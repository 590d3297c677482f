#include <xgrad/lib/files.hpp>

#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>
#include <streambuf>
#include <stdexcept>
#include <utility>

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <xgrad/graph/error.hpp>

namespace xgrad {

namespace {

// What a stat says a file is, for refusals: "a directory", "a FIFO", "a device".
const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// A descriptor closed when it goes out of scope.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  int release() { return std::exchange(fd, -1); }
};

// Flags of every open for reading: never blocks on a FIFO, never becomes a controlling terminal.
constexpr int read_flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;

// Refuses a location that is not a plain relative path beneath a directory.
void check_relative(const std::string& relative, const std::string& what) {
  const std::string where = what + " location '" + relative.substr(0, 256) + "'";
  if (relative.find('\0') != std::string::npos) throw error(what + " location holds a NUL byte");
  if (relative.empty() || relative[0] == '/') throw error(where + " is not a relative path beside the model");
  std::stringstream parts(relative);
  for (std::string part; std::getline(parts, part, '/');) {
    if (part == "..") throw error(where + " leaves the model's directory (\"..\")");
  }
}

// The directory a model's files are looked up in, open as a descriptor.
int open_directory(const std::string& dir, const std::string& what) {
  const std::string d = dir.empty() ? "." : dir;
  const int fd = ::open(d.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw error(what + ": cannot open the model's directory " + d + ": " + std::strerror(errno));
  return fd;
}

std::string beneath_message(const std::string& dir, const std::string& relative, const std::string& what, int e) {
  const std::string where = what + " location '" + relative + "'";
  const std::string d = dir.empty() ? "." : dir;
  switch (e) {
    case EXDEV: return where + ": a symbolic link on the way leads out of the model's directory " + d + "; refusing to read it";
    case ELOOP: return where + ": a symbolic link on the way (this system has no openat2 to check where it leads, so xgrad follows none beneath " + d + ")";
    case ENOENT: return where + ": no such file in " + d;
    case ENOTDIR: return where + ": a component of it is not a directory";
    default: return where + ": cannot open it: " + std::strerror(e);
  }
}

// The file to replace: the path, or for a symbolic link the file it points to. Refuses what
// write_file_atomically may not replace.
std::string write_target(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return path;
  if (S_ISLNK(st.st_mode)) {
    std::error_code ec;
    const auto target = std::filesystem::canonical(path, ec);
    if (ec || stat(path.c_str(), &st) != 0) throw error(path + ": is a symbolic link to nothing; refusing to write through it");
    if (!S_ISREG(st.st_mode)) throw error(path + ": exists and is " + file_kind(st.st_mode) + "; refusing to replace it");
    return target.string();
  }
  if (!S_ISREG(st.st_mode)) throw error(path + ": exists and is " + file_kind(st.st_mode) + "; refusing to replace it");
  return path;
}

// Refuses a target that is the same file as one of the inputs.
void check_not_an_input(const std::string& path, const std::string& target, const std::vector<std::string>& inputs) {
  struct stat out;
  if (::stat(target.c_str(), &out) != 0) return;  // a new file is no input
  for (const std::string& in : inputs) {
    struct stat st;
    if (!in.empty() && ::stat(in.c_str(), &st) == 0 && st.st_dev == out.st_dev && st.st_ino == out.st_ino) {
      throw error(path + ": is the input " + in + "; refusing to write over it");
    }
  }
}

// The process's umask from /proc/self/status (Linux 4.7 and later), 022 where it is not there.
mode_t current_umask() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Umask:", 0) == 0) return static_cast<mode_t>(std::stoul(line.substr(6), nullptr, 8));
  }
  return 022;
}

// The temporary files being written now, for remove_temporary_files: fixed buffers, claimed and
// cleared without allocating, read from an out-of-memory handler or a signal handler.
struct TemporarySlot {
  std::atomic<bool> used{false};
  char path[PATH_MAX];
};
TemporarySlot temporary_files[4 * max_atomic_files];

// A temporary file beside a target (mkostemp), registered while it lives; removed unless renamed.
struct TemporaryFile {
  std::string path;
  int fd = -1;
  int error = 0;  // mkostemp's errno when fd < 0
  TemporarySlot* slot = nullptr;

  explicit TemporaryFile(std::string pattern) : path(std::move(pattern)) {
    for (auto& s : temporary_files) {
      bool expected = false;
      if (s.used.compare_exchange_strong(expected, true)) {
        slot = &s;
        break;
      }
    }
    if (!slot) throw std::logic_error("write_files_atomically: more temporary files at once than it registers");
    slot->path[0] = '\0';
    fd = mkostemp(path.data(), O_CLOEXEC);
    if (fd < 0) {
      error = errno;
      slot->used = false;
      slot = nullptr;
      return;
    }
    const std::size_t n = std::min(path.size(), sizeof slot->path - 1);
    std::memcpy(slot->path, path.c_str(), n);
    slot->path[n] = '\0';
  }
  TemporaryFile(TemporaryFile&& o) noexcept
      : path(std::move(o.path)), fd(std::exchange(o.fd, -1)), error(o.error), slot(std::exchange(o.slot, nullptr)) {}
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  TemporaryFile& operator=(TemporaryFile&&) = delete;
  int close() { return ::close(std::exchange(fd, -1)); }
  void renamed() { release(false); }
  ~TemporaryFile() { release(true); }

 private:
  void release(bool remove) {
    if (fd >= 0) ::close(std::exchange(fd, -1));
    if (!slot) return;
    if (remove) ::unlink(path.c_str());
    slot->used = false;
    slot = nullptr;
  }
};

// The stream a FileWriter writes a temporary through: a buffer of 64 KiB over its descriptor,
// every write(2) checked. After a failure it takes nothing more, keeps the first errno and says
// the stream is bad.
class FileBuffer : public std::streambuf {
 public:
  explicit FileBuffer(int fd) : m_fd(fd) { setp(m_buffer, m_buffer + sizeof m_buffer); }
  int error() const { return m_error; }

 protected:
  int_type overflow(int_type c) override {
    if (!drain()) return traits_type::eof();
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    *pptr() = traits_type::to_char_type(c);
    pbump(1);
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    if (n <= epptr() - pptr()) {
      std::memcpy(pptr(), s, static_cast<std::size_t>(n));
      pbump(static_cast<int>(n));
      return n;
    }
    return drain() && put(s, static_cast<std::size_t>(n)) ? n : 0;
  }
  int sync() override { return drain() ? 0 : -1; }

 private:
  bool drain() {
    const bool ok = put(pbase(), static_cast<std::size_t>(pptr() - pbase()));
    setp(m_buffer, m_buffer + sizeof m_buffer);
    return ok;
  }
  bool put(const char* bytes, std::size_t size) {
    for (std::size_t done = 0; m_error == 0 && done < size;) {
      const ssize_t n = ::write(m_fd, bytes + done, size - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) m_error = errno;
      else if (n == 0) m_error = EIO;
      else done += static_cast<std::size_t>(n);
    }
    return m_error == 0;
  }

  int m_fd;
  int m_error = 0;
  char m_buffer[1 << 16];
};

// Holds SIGINT, SIGTERM and SIGHUP back while it lives (the thread's mask): a temporary file is
// removed or renamed before such a signal takes effect.
class HeldSignals {
 public:
  HeldSignals() {
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
    pthread_sigmask(SIG_BLOCK, &set, &m_old);
  }
  ~HeldSignals() { pthread_sigmask(SIG_SETMASK, &m_old, nullptr); }
  HeldSignals(const HeldSignals&) = delete;
  HeldSignals& operator=(const HeldSignals&) = delete;

 private:
  sigset_t m_old;
};

int open_for_reading(const std::string& path, const std::string& what) {
  if (path.find('\0') != std::string::npos) throw error(what + ": the file name holds a NUL byte");
  const int fd = ::open(path.c_str(), read_flags);
  if (fd < 0) {
    const int e = errno;
    throw error(what + (e == ENOENT ? std::string(": no such file") : ": cannot open the file: " + std::string(std::strerror(e))));
  }
  return fd;
}

}  // namespace

InputFile::InputFile(const std::string& path, const std::string& what) : InputFile(open_for_reading(path, what), what) {}

InputFile::InputFile(int fd, std::string what) : m_fd(fd), m_what(std::move(what)) {
  struct stat st;
  if (fstat(m_fd, &st) != 0) {
    const int e = errno;
    ::close(std::exchange(m_fd, -1));
    throw error(m_what + ": cannot read its size: " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(std::exchange(m_fd, -1));
    throw error(m_what + ": " + file_kind(st.st_mode) + ", not a regular file");
  }
  m_size = static_cast<std::size_t>(st.st_size);
}

InputFile::InputFile(InputFile&& other) noexcept
    : m_fd(std::exchange(other.m_fd, -1)), m_size(other.m_size), m_what(std::move(other.m_what)) {}

InputFile::~InputFile() {
  if (m_fd >= 0) ::close(m_fd);
}

InputFile InputFile::beneath(const std::string& dir, const std::string& relative, const std::string& what) {
  check_relative(relative, what);
  const Fd base(open_directory(dir, what));
  open_how how{};
  how.flags = static_cast<std::uint64_t>(read_flags);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  const long fd = ::syscall(SYS_openat2, base.fd, relative.c_str(), &how, sizeof how);
  if (fd < 0) {
    const int e = errno;
    // No openat2 (Linux before 5.6, or a sandbox that filters it): the walk that follows no link.
    if (e == ENOSYS || e == EPERM) return beneath_walk(dir, relative, what);
    throw error(beneath_message(dir, relative, what, e));
  }
  return InputFile(static_cast<int>(fd), what + " location '" + relative + "'");
}

InputFile InputFile::beneath_walk(const std::string& dir, const std::string& relative, const std::string& what) {
  check_relative(relative, what);
  Fd at(open_directory(dir, what));
  std::stringstream parts(relative);
  std::vector<std::string> names;
  for (std::string part; std::getline(parts, part, '/');) {
    if (!part.empty() && part != ".") names.push_back(part);
  }
  if (names.empty()) throw error(what + " location '" + relative + "' names no file");
  for (std::size_t i = 0; i < names.size(); ++i) {
    const bool last = i + 1 == names.size();
    const int flags = last ? read_flags | O_NOFOLLOW : O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    const int fd = ::openat(at.fd, names[i].c_str(), flags);
    if (fd < 0) {
      const int e = errno;
      // O_PATH | O_NOFOLLOW on a link to a directory fails with ENOTDIR: a link there too.
      struct stat st;
      const bool link = fstatat(at.fd, names[i].c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
      throw error(beneath_message(dir, relative, what, link ? ELOOP : e));
    }
    Fd next(fd);
    if (last) return InputFile(next.release(), what + " location '" + relative + "'");
    std::swap(at.fd, next.fd);
  }
  throw error(what + " location '" + relative + "' names no file");  // not reached
}

std::string InputFile::read(std::size_t offset, std::size_t n) const {
  if (offset > m_size || n > m_size - offset) {
    throw error(m_what + ": bytes " + std::to_string(offset) + "+" + std::to_string(n) + " lie beyond its end (" +
                std::to_string(m_size) + " bytes)");
  }
  std::string bytes(n, '\0');
  for (std::size_t done = 0; done < n;) {
    const ssize_t got = ::pread(m_fd, bytes.data() + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw error(m_what + ": cannot read it: " + std::strerror(errno));
    if (got == 0) throw error(m_what + ": the file changed while being read (it is shorter than " + std::to_string(m_size) + " bytes now)");
    done += static_cast<std::size_t>(got);
  }
  return bytes;
}

std::string InputFile::read_all(std::size_t max_bytes) const {
  if (m_size > max_bytes) {
    throw error(m_what + ": " + std::to_string(m_size) + " bytes, more than the " + std::to_string(max_bytes) +
                " this reader takes");
  }
  return read(0, m_size);
}

std::size_t regular_file_size(const std::string& path) { return InputFile(path).size(); }

std::string read_file_range(const std::string& path, std::size_t offset, std::size_t n) {
  return InputFile(path).read(offset, n);
}

std::string read_text_file(const std::string& path, std::size_t max_bytes) { return InputFile(path).read_all(max_bytes); }

void check_output_path(const std::string& path, const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  if (path.empty()) throw error("an output path is empty");
  if (path.find('\0') != std::string::npos) throw error("an output path holds a NUL byte");
  const fs::path target(write_target(path));
  check_not_an_input(path, target.string(), inputs);
  const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw error(path + ": its directory " + dir.string() + " does not exist");
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    throw error(path + ": cannot write in its directory " + dir.string() + ": " + std::strerror(errno));
  }
}

void write_file_atomically(const std::string& path, const std::string& bytes, const std::vector<std::string>& inputs) {
  write_files_atomically({{path, bytes}}, inputs);
}

void write_file_atomically(const std::string& path, const FileWriter& write, const std::vector<std::string>& inputs) {
  write_files_atomically({{path, write}}, inputs);
}

void write_files_atomically(const std::vector<std::pair<std::string, std::string>>& files,
                            const std::vector<std::string>& inputs) {
  std::vector<std::pair<std::string, FileWriter>> writers;
  for (const auto& [path, bytes] : files) {
    writers.emplace_back(path, [&bytes = bytes](std::ostream& out) { out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())); });
  }
  write_files_atomically(writers, inputs);
}

void write_files_atomically(const std::vector<std::pair<std::string, FileWriter>>& files,
                            const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  if (files.size() > max_atomic_files) {
    throw error("write_files_atomically: " + std::to_string(files.size()) + " files, more than the " +
                std::to_string(max_atomic_files) + " (max_atomic_files) written at once");
  }
  // Every check before anything is written.
  std::vector<fs::path> targets;
  for (const auto& [path, writer] : files) {
    if (path.find('\0') != std::string::npos) throw error("an output path holds a NUL byte");
    targets.emplace_back(write_target(path));
    check_not_an_input(path, targets.back().string(), inputs);
  }
  const HeldSignals held;
  std::vector<TemporaryFile> temps;
  temps.reserve(files.size());
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string& path = files[i].first;
    temps.emplace_back((targets[i].parent_path() / ("." + targets[i].filename().string() + ".XXXXXX")).string());
    TemporaryFile& temp = temps.back();
    if (temp.fd < 0) throw error(path + ": cannot create a temporary file in its directory: " + std::strerror(temp.error));
    // The mode a new file would get (0666 less the umask, read without changing it: umask() is
    // process-wide), or the mode of the file it replaces.
    struct stat old {};
    const mode_t mode = ::stat(targets[i].c_str(), &old) == 0 ? (old.st_mode & 07777) : (0666 & ~current_umask());
    int e = 0;
    if (fchmod(temp.fd, mode) != 0) e = errno;
    if (e == 0) {
      FileBuffer buffer(temp.fd);
      std::ostream out(&buffer);
      files[i].second(out);
      out.flush();
      e = buffer.error();
    }
    if (e == 0 && fsync(temp.fd) != 0) e = errno;
    if (temp.close() != 0 && e == 0) e = errno;
    if (e != 0) throw error(path + ": cannot write it: " + std::strerror(e) + (e == EFBIG ? " (a file-size limit, ulimit -f)" : ""));
  }
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (::rename(temps[i].path.c_str(), targets[i].c_str()) != 0) {
      throw error(files[i].first + ": cannot replace it: " + std::strerror(errno));
    }
    temps[i].renamed();
  }
}

void remove_temporary_files() noexcept {
  for (auto& slot : temporary_files) {
    if (slot.used.load()) ::unlink(slot.path);
  }
}

void ignore_file_size_signal() { std::signal(SIGXFSZ, SIG_IGN); }

}  // namespace xgrad
