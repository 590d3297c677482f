// lib/files: the one way xgrad opens a file to read (regular files only, never blocking, a range
// read exactly) or a model's file beneath its directory, and the one atomic writer.
#include <boost/test/unit_test.hpp>

#include <csignal>
#include <ctime>
#include <filesystem>
#include <fstream>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <xgrad/lib/files.hpp>

#include "../check.hpp"

namespace fs = std::filesystem;
using namespace xgrad;
using test::check_error;

namespace {

// A fresh directory per case: dir/model (the model's directory) and dir/outside.
struct Dirs {
  fs::path root, model, outside;
  Dirs() {
    std::string name = boost::unit_test::framework::current_test_case().p_name;
    root = fs::path(XGRAD_TEST_OUTPUT) / ("files_" + name + "_" + std::to_string(getpid()));
    fs::remove_all(root);
    model = root / "model";
    outside = root / "outside";
    fs::create_directories(model / "sub");
    fs::create_directories(outside / "dir");
    write(model / "w.bin", "inside!!");
    write(model / "sub" / "x.bin", "sub file");
    write(outside / "secret.bin", "SECRET!!");
    write(outside / "dir" / "x.bin", "SECRET!!");
  }
  ~Dirs() { fs::remove_all(root); }
  static void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }
  std::string m() const { return model.string(); }
};

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The files in dir whose names begin with prefix: the writer's temporaries (".NAME.XXXXXX").
std::size_t files_named(const fs::path& dir, const std::string& prefix) {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().filename().string().rfind(prefix, 0) == 0;
  return n;
}

// Both ways of opening beneath a directory: openat2 and the walk that follows no link.
using Opener = InputFile (*)(const std::string&, const std::string&, const std::string&);
const Opener openers[] = {&InputFile::beneath, &InputFile::beneath_walk};

}  // namespace

BOOST_AUTO_TEST_SUITE(files)

BOOST_AUTO_TEST_CASE(reads_exactly_the_range_asked_for) {
  const Dirs d;
  const InputFile f((d.model / "w.bin").string());
  BOOST_TEST(f.size() == 8u);
  BOOST_TEST(f.read(2, 4) == "side");
  BOOST_TEST(f.read(8, 0) == "");
  check_error([&] { f.read(6, 3); }, {"w.bin: bytes 6+3 lie beyond its end (8 bytes)"});
  check_error([&] { f.read(std::size_t(-1), 2); }, {"lie beyond its end"});
  check_error([&] { f.read_all(7); }, {"w.bin: 8 bytes, more than the 7 this reader takes"});
  BOOST_TEST(f.read_all(8) == "inside!!");
}

BOOST_AUTO_TEST_CASE(refuses_what_is_not_a_regular_file_without_blocking) {
  const Dirs d;
  const fs::path fifo = d.model / "fifo";
  BOOST_TEST_REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  // A FIFO with no writer: a plain open for reading would wait for one for ever.
  check_error([&] { InputFile f(fifo.string()); }, {"fifo: a FIFO, not a regular file"});
  check_error([&] { InputFile f(d.m()); }, {"model: a directory, not a regular file"});
  check_error([&] { InputFile f("/dev/zero"); }, {"/dev/zero: a device, not a regular file"});
  check_error([&] { InputFile f((d.model / "none").string()); }, {"none: no such file"});
  check_error([&] { read_text_file("/dev/zero"); }, {"/dev/zero: a device, not a regular file"});
  check_error([&] { regular_file_size(fifo.string()); }, {"a FIFO, not a regular file"});
}

BOOST_AUTO_TEST_CASE(opens_files_beneath_a_directory) {
  const Dirs d;
  for (const Opener open : openers) {
    BOOST_TEST(open(d.m(), "w.bin", "m.onnx: initializer 'w': external data").read(0, 8) == "inside!!");
    BOOST_TEST(open(d.m(), "sub/x.bin", "m").read(0, 8) == "sub file");
    BOOST_TEST(open(d.m(), "./sub//x.bin", "m").read(4, 4) == "file");
    check_error([&] { open(d.m(), "../outside/secret.bin", "m.onnx: initializer 'w': external data"); },
                {"m.onnx: initializer 'w': external data location '../outside/secret.bin' leaves the model's directory"});
    check_error([&] { open(d.m(), "sub/../../outside/secret.bin", "m"); }, {"leaves the model's directory"});
    check_error([&] { open(d.m(), (d.outside / "secret.bin").string(), "m"); }, {"is not a relative path beside the model"});
    check_error([&] { open(d.m(), "", "m"); }, {"m location '' is not a relative path"});
    check_error([&] { open(d.m(), std::string("w.bin\0x", 7), "m"); }, {"m location holds a NUL byte"});
    check_error([&] { open(d.m(), "missing.bin", "m.onnx: initializer 'w': external data"); },
                {"m.onnx: initializer 'w': external data location 'missing.bin': no such file in", "model"});
    check_error([&] { open(d.m(), "w.bin/x", "m"); }, {"m location 'w.bin/x'"});
    check_error([&] { open(d.m(), "sub", "m.onnx: initializer 'w': external data"); },
                {"m.onnx: initializer 'w': external data location 'sub': a directory, not a regular file"});
  }
}

BOOST_AUTO_TEST_CASE(symbolic_links_out_of_the_directory_are_refused) {
  // ONNX's CVE-2024-27318: a location that is a link beside the model to a file elsewhere, or a
  // path through a link to a directory elsewhere, must not be read.
  const Dirs d;
  fs::create_symlink(d.outside / "secret.bin", d.model / "leak.bin");
  fs::create_directory_symlink(d.outside / "dir", d.model / "linked");
  fs::create_symlink("../outside/secret.bin", d.model / "relative_leak.bin");
  fs::create_symlink("/dev/zero", d.model / "zero.bin");
  for (const Opener open : openers) {
    for (const char* location : {"leak.bin", "linked/x.bin", "relative_leak.bin", "zero.bin", "sub/../leak.bin"}) {
      BOOST_TEST_CONTEXT(location) {
        check_error([&] { open(d.m(), location, "m.onnx: initializer 'w': external data"); },
                    {"m.onnx: initializer 'w': external data location '" + std::string(location) + "'"});
        bool read = false;
        try {
          read = open(d.m(), location, "m").read(0, 8) == "SECRET!!";
        } catch (const error& e) {
          const std::string what = e.what();
          BOOST_TEST((what.find("symbolic link") != std::string::npos || what.find("leaves the model's") != std::string::npos), what);
        }
        BOOST_TEST(!read);
      }
    }
  }
  check_error([&] { InputFile::beneath(d.m(), "leak.bin", "m"); }, {"m location 'leak.bin': a symbolic link on the way leads out of the model's directory"});
  check_error([&] { InputFile::beneath_walk(d.m(), "linked/x.bin", "m"); }, {"m location 'linked/x.bin': a symbolic link on the way"});
}

BOOST_AUTO_TEST_CASE(a_link_that_stays_beneath_is_followed_where_openat2_checks_it) {
  const Dirs d;
  fs::create_symlink("sub/x.bin", d.model / "alias.bin");
  BOOST_TEST(InputFile::beneath(d.m(), "alias.bin", "m").read(0, 3) == "sub");
  // Without openat2 no link is followed: where it leads is not checked race-free otherwise.
  check_error([&] { InputFile::beneath_walk(d.m(), "alias.bin", "m"); }, {"m location 'alias.bin': a symbolic link on the way"});
}

BOOST_AUTO_TEST_CASE(check_output_path_refuses_before_anything_is_written) {
  const Dirs d;
  const fs::path fifo = d.model / "fifo";
  BOOST_TEST_REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  fs::create_symlink(d.model / "nothing", d.model / "dangling");
  check_error([&] { check_output_path(d.m()); }, {"model: exists and is a directory; refusing to replace it"});
  check_error([&] { check_output_path(fifo.string()); }, {"fifo: exists and is a FIFO; refusing to replace it"});
  check_error([&] { check_output_path("/dev/null"); }, {"/dev/null: exists and is a device; refusing to replace it"});
  check_error([&] { check_output_path((d.model / "dangling").string()); }, {"dangling: is a symbolic link to nothing"});
  check_error([&] { check_output_path((d.root / "no" / "such" / "f.svg").string()); }, {"f.svg: its directory", "does not exist"});
  check_error([&] { check_output_path(""); }, {"an output path is empty"});
  const std::string data = (d.model / "w.bin").string();
  check_error([&] { check_output_path(data, {data}); }, {"w.bin: is the input", "refusing to write over it"});
  // Through another name for the same file: a symbolic link, a hard link.
  fs::create_symlink(data, d.model / "same.bin");
  fs::create_hard_link(data, d.model / "hard.bin");
  check_error([&] { check_output_path((d.model / "same.bin").string(), {data}); }, {"same.bin: is the input"});
  check_error([&] { check_output_path((d.model / "hard.bin").string(), {data}); }, {"hard.bin: is the input"});
  check_output_path((d.model / "new.bin").string(), {data});
  check_output_path(data, {(d.model / "sub" / "x.bin").string()});
}

BOOST_AUTO_TEST_CASE(write_file_atomically_never_writes_over_an_input) {
  const Dirs d;
  const std::string data = (d.model / "w.bin").string();
  check_error([&] { write_file_atomically(data, "overwritten", {data}); }, {"w.bin: is the input"});
  BOOST_TEST(read_all(data) == "inside!!");
  write_file_atomically((d.model / "out.csv").string(), "a,b\n", {data});
  BOOST_TEST(read_all(d.model / "out.csv") == "a,b\n");
  // No temporary is left beside it.
  BOOST_TEST(files_named(d.model, ".out.csv") == 0u);
}

BOOST_AUTO_TEST_CASE(a_file_size_limit_is_an_error_and_leaves_no_temporary) {
  const Dirs d;
  const fs::path out = d.model / "big.bin";
  write_file_atomically(out.string(), "old");
  {
    const test::FileSizeLimit limit(4096);  // SIGXFSZ ignored, as ignore_file_size_signal does
    check_error([&] { write_file_atomically(out.string(), std::string(100000, 'x')); },
                {"big.bin: cannot write it: File too large (a file-size limit, ulimit -f)"});
  }
  BOOST_TEST(read_all(out) == "old");
  BOOST_TEST(files_named(d.model, ".big.bin.") == 0u);
}

BOOST_AUTO_TEST_CASE(a_streamed_file_is_whole_or_not_there) {
  // A FileWriter writes through the buffer as it goes: more than the buffer's 64 KiB, in pieces
  // of every size, arrives whole; a writer that throws half-way, or a write past a file-size
  // limit, leaves the old file and no temporary.
  const Dirs d;
  const fs::path out = d.model / "streamed.txt";
  std::string expected;
  for (std::size_t i = 0; i < 3000; ++i) expected += std::string(i % 97, char('a' + i % 26)) + "\n";
  BOOST_TEST_REQUIRE(expected.size() > (std::size_t(1) << 17));
  write_file_atomically(out.string(), [&](std::ostream& file) {
    for (std::size_t i = 0; i < 3000; ++i) file << std::string(i % 97, char('a' + i % 26)) << '\n';
  });
  BOOST_TEST(read_all(out) == expected);
  check_error([&] {
    write_file_atomically(out.string(), [&](std::ostream& file) {
      file << std::string(200000, 'x');
      throw xgrad::error("the writer failed half-way");
    });
  }, {"the writer failed half-way"});
  BOOST_TEST(read_all(out) == expected);
  {
    const test::FileSizeLimit limit(4096);
    check_error([&] { write_file_atomically(out.string(), [](std::ostream& file) { file << std::string(100000, 'y'); }); },
                {"streamed.txt: cannot write it: File too large (a file-size limit, ulimit -f)"});
  }
  BOOST_TEST(read_all(out) == expected);
  BOOST_TEST(files_named(d.model, ".streamed.txt.") == 0u);
}

BOOST_AUTO_TEST_CASE(an_interrupt_during_a_write_takes_effect_after_it) {
  // A SIGTERM that arrives while the temporary exists is held back until it is renamed: the
  // file is whole or absent and no temporary remains when the signal ends the process. In a
  // child, which writes 32 MiB files in a loop until a timer's SIGTERM, 30 ms in, ends it
  // (almost always during a write: the writes are nearly all of its time).
  const Dirs d;
  const fs::path out = d.model / "ckpt.bin";
  const std::size_t size = std::size_t(32) << 20;
  const pid_t child = fork();
  BOOST_TEST_REQUIRE(child >= 0);
  if (child == 0) {
    const std::string bytes(size, 'y');
    sigevent ev{};
    ev.sigev_notify = SIGEV_SIGNAL;
    ev.sigev_signo = SIGTERM;
    timer_t timer;
    itimerspec at{};
    at.it_value.tv_nsec = 30'000'000;
    if (timer_create(CLOCK_MONOTONIC, &ev, &timer) != 0 || timer_settime(timer, 0, &at, nullptr) != 0) _exit(7);
    for (int i = 0; i < 1000; ++i) write_file_atomically(out.string(), bytes);
    _exit(6);
  }
  int status = 0;
  waitpid(child, &status, 0);
  BOOST_TEST_REQUIRE(WIFSIGNALED(status));
  BOOST_TEST(WTERMSIG(status) == SIGTERM);
  BOOST_TEST((!fs::exists(out) || fs::file_size(out) == size));
  BOOST_TEST(files_named(d.model, ".ckpt.bin.") == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
