// Reading and writing files, with the checks every reader and writer of xgrad makes first: one
// place for them (the readers of .npy, .npz, safetensors, ONNX and JSON, the tool, char_gpt).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

namespace xgrad {

// True if the file name `s` ends in `suffix` (".npy", ".npz"): how readers choose a format.
inline bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A regular file open for reading, held open so that what is checked is what is read (no second
// open between the check and the read). Opening never blocks (a FIFO is opened without waiting for
// a writer, then refused) and refuses anything that is not a regular file: a directory, a FIFO,
// a device (/dev/zero), a socket. read() reads exactly the bytes asked for, from an offset, and
// nothing else. Errors are xgrad::error starting with `what` (the path, by default).
class InputFile {
 public:
  explicit InputFile(const std::string& path) : InputFile(path, path) {}
  InputFile(const std::string& path, const std::string& what);
  // `relative` opened beneath the directory `dir` (a model's directory): relative, no "..", no
  // NUL byte, and no symbolic link on the way that leads out of `dir` (openat2 with
  // RESOLVE_BENEATH; a kernel without openat2 (before Linux 5.6) follows no symbolic link at
  // all there, see beneath_walk). `what` names the model and the value the file is for
  // ("m.onnx: initializer 'W': external data"); every refusal is "<what> location '<relative>'
  // ..." and, where it matters, names `dir`.
  static InputFile beneath(const std::string& dir, const std::string& relative, const std::string& what);
  // The same with the kernel's openat2 left aside: each component opened with O_NOFOLLOW, so a
  // symbolic link anywhere on the way is refused. For kernels without openat2, and for its tests.
  static InputFile beneath_walk(const std::string& dir, const std::string& relative, const std::string& what);

  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&&) = delete;
  InputFile(const InputFile&) = delete;
  ~InputFile();

  std::size_t size() const { return m_size; }
  const std::string& what() const { return m_what; }
  // n bytes from `offset`; xgrad::error naming the file if the range lies beyond its end or the
  // bytes cannot be read (the file shrank).
  std::string read(std::size_t offset, std::size_t n) const;
  // The whole file, if it has at most max_bytes; xgrad::error naming the limit otherwise.
  std::string read_all(std::size_t max_bytes) const;

 private:
  InputFile(int fd, std::string what);  // takes an open descriptor: checks that it is a regular file
  int m_fd = -1;
  std::size_t m_size = 0;
  std::string m_what;
};

// The size of a regular file; xgrad::error naming the file if it is missing or not a regular
// file (a directory, a FIFO, /dev/zero).
std::size_t regular_file_size(const std::string& path);

// n bytes of the regular file from `offset`; xgrad::error naming the file if they cannot be read.
std::string read_file_range(const std::string& path, std::size_t offset, std::size_t n);

// The whole content of a regular file of at most max_bytes (default 1 GiB); xgrad::error naming
// the file if it is missing, not a regular file, or larger.
std::string read_text_file(const std::string& path, std::size_t max_bytes = std::size_t(1) << 30);

// Refuses, before anything is computed or written, a path that write_file_atomically would refuse:
// one that exists and is not a regular file (a directory, a device, a FIFO; a symbolic link is
// judged by what it points to, and one to nothing is refused), one whose directory is missing or
// cannot be written, and one that is the same file as one of `inputs` (the files a program reads:
// writing there would destroy its own input). xgrad::error naming the path and the reason.
void check_output_path(const std::string& path, const std::vector<std::string>& inputs = {});

// Writes bytes to a fresh temporary file beside `path` (mkstemp: a new name each time, never a
// fixed one a link could be planted at) and renames it over `path`, so that the file is whole or
// not there (never half-written), with the mode of the file it replaces (or 0666 less the umask).
// A symbolic link at `path` is followed: the file it points to is replaced. Every write is
// checked (a full device, a file-size limit: see ignore_file_size_signal); on any failure the
// temporary is removed and the old file is left as it was. SIGINT, SIGTERM and SIGHUP are held
// back in the writing thread while the temporary exists (xgrad's own worker threads block them
// always), so such an interruption takes effect after the rename (or the removal) and leaves no
// temporary; SIGKILL, a crash of the machine, or one of those signals taken by a thread of
// another library that does not block them (OpenBLAS's workers, when it runs several) can, as a
// hidden ".NAME.XXXXXX" file beside it that nothing reads. xgrad::error naming the path as for
// check_output_path (with the same `inputs`), or if it cannot be written.
void write_file_atomically(const std::string& path, const std::string& bytes,
                           const std::vector<std::string>& inputs = {});

// A file's bytes made as they are written: the function writes them to the stream it is given
// (write_json streams a graph so, a node at a time), and the whole file is never in memory. An
// exception from it ends the write as a failed write does: the temporary is removed.
using FileWriter = std::function<void(std::ostream&)>;
void write_file_atomically(const std::string& path, const FileWriter& write,
                           const std::vector<std::string>& inputs = {});

// Several (path, bytes) files, each as write_file_atomically writes one; every check is made
// before anything is written, and every temporary is complete before the first rename, so a
// failure while writing (a full device) replaces none of them. At most max_atomic_files.
inline constexpr std::size_t max_atomic_files = 8;
void write_files_atomically(const std::vector<std::pair<std::string, std::string>>& files,
                            const std::vector<std::string>& inputs = {});
void write_files_atomically(const std::vector<std::pair<std::string, FileWriter>>& files,
                            const std::vector<std::string>& inputs = {});

// Removes the temporary files the writers above have open right now. Async-signal-safe and
// allocation-free: for a program's out-of-memory handler, which must not unwind (the xgrad tool's
// does), or a fatal signal's.
void remove_temporary_files() noexcept;

// Ignores SIGXFSZ, so that writing past a file-size limit (ulimit -f) fails the write with EFBIG,
// which write_file_atomically reports, instead of killing the process with a partial file. For
// programs' main functions (the xgrad tool, the examples): a library does not change signal
// dispositions by itself.
void ignore_file_size_signal();

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
