// Whether the engine's outputs can be written (examples/engine/writable.hpp), found by trying: the
// path as the file system resolves it, a probe file or directory made and removed, an existing file
// opened for writing, file kinds in words, one path within another, and each reason an output file
// is refused.
#include "writable.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;

fs::path writable_scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("accel-writable-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return fs::canonical(d);
}

bool writable_dir_empty(const fs::path& d) { return fs::directory_iterator(d) == fs::directory_iterator(); }

}  // namespace

TEST_CASE("engine outputs: canonical_path follows links and '..' as far as the path exists") {
  const fs::path d = writable_scratch("canonical");
  fs::create_directories(d / "real");
  fs::create_directory_symlink(d / "real", d / "link");
  CHECK(engine::canonical_path((d / "link" / "f.csv").string()) == d / "real" / "f.csv");
  CHECK(engine::canonical_path((d / "real" / ".." / "real" / "x" / "y").string()) == d / "real" / "x" / "y");
  const fs::path cwd = fs::current_path();
  fs::current_path(d);
  CHECK(engine::canonical_path("link/../real/a") == d / "real" / "a");  // relative: from the working directory
  fs::current_path(cwd);
  // Where the file system cannot resolve it (a link that points at itself): the path as written, normalised.
  fs::create_symlink(d / "loop", d / "loop");
  CHECK(engine::canonical_path((d / "loop" / "x" / ".." / "y").string()) == d / "loop" / "y");
  fs::remove_all(d);
}

TEST_CASE("engine outputs: creation_error makes a probe file or directory, removes it, and says why it cannot") {
  const fs::path d = writable_scratch("create");
  CHECK(engine::creation_error(d, false) == "");
  CHECK(engine::creation_error(d, true) == "");
  CHECK(writable_dir_empty(d));  // the probes are gone
  // Probe names already taken (another process's probes): the next name is tried.
  for (int n = 0; n < 3; ++n) {
    std::ofstream(d / (".engine-probe-" + std::to_string(::getpid()) + "-" + std::to_string(n))) << "x";
  }
  CHECK(engine::creation_error(d, false) == "");
  CHECK(engine::creation_error(d, true) == "");
  CHECK(std::distance(fs::directory_iterator(d), fs::directory_iterator()) == 3);
  CHECK(engine::creation_error(d / "missing", false) == "No such file or directory");
  CHECK(engine::creation_error(d / "missing", true) == "No such file or directory");
  std::ofstream(d / "plain") << "x";
  CHECK(engine::creation_error(d / "plain", false) == "Not a directory");
  // Nothing can be created in /proc, not even by root (whom access(W_OK) lets through).
  CHECK(engine::creation_error("/proc", false) != "");
  CHECK(engine::creation_error("/proc", true) != "");
  fs::remove_all(d);
}

TEST_CASE("engine outputs: write_error opens an existing file for appending, writes nothing") {
  const fs::path d = writable_scratch("write");
  std::ofstream(d / "m.csv") << "kept";
  CHECK(engine::write_error(d / "m.csv") == "");
  std::ifstream in(d / "m.csv");
  std::string text;
  std::getline(in, text);
  CHECK(text == "kept");
  CHECK(engine::write_error(d) == "Is a directory");
  CHECK(engine::write_error(d / "missing") == "No such file or directory");
  fs::remove_all(d);
}

TEST_CASE("engine outputs: file kinds in words") {
  CHECK(std::string(engine::file_kind(fs::file_type::regular)) == "a file");
  CHECK(std::string(engine::file_kind(fs::file_type::directory)) == "a directory");
  CHECK(std::string(engine::file_kind(fs::file_type::character)) == "a character device");
  CHECK(std::string(engine::file_kind(fs::file_type::block)) == "a block device");
  CHECK(std::string(engine::file_kind(fs::file_type::fifo)) == "a FIFO");
  CHECK(std::string(engine::file_kind(fs::file_type::socket)) == "a socket");
  CHECK(std::string(engine::file_kind(fs::file_type::symlink)) == "not a regular file");
  CHECK(std::string(engine::file_kind(fs::file_type::unknown)) == "not a regular file");
}

TEST_CASE("engine outputs: path_within compares whole components") {
  CHECK(engine::path_within("/a/b/c", "/a/b"));
  CHECK(engine::path_within("/a/b", "/a/b"));
  CHECK_FALSE(engine::path_within("/a/bc", "/a/b"));  // not a prefix of the text
  CHECK_FALSE(engine::path_within("/a", "/a/b"));
  CHECK_FALSE(engine::path_within("/x/b/c", "/a/b"));
  CHECK(engine::path_within("/a/b/c", "/"));
}

TEST_CASE("engine outputs: output_file_error for each kind of path") {
  const fs::path d = writable_scratch("output");
  CHECK(engine::output_file_error(d / "new.csv") == "");  // created at the run's start
  CHECK(writable_dir_empty(d));                                    // the probe, not the file
  std::ofstream(d / "old.csv") << "rows";
  CHECK(engine::output_file_error(d / "old.csv") == "");
  CHECK(engine::output_file_error(d) == "it is a directory, not a file");
  CHECK(engine::output_file_error("/dev/null") == "it is a character device, not a file");
  REQUIRE(::mkfifo((d / "fifo").c_str(), 0600) == 0);
  CHECK(engine::output_file_error(d / "fifo") == "it is a FIFO, not a file");
  const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(s >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sock = (d / "sock").string();
  REQUIRE(sock.size() < sizeof addr.sun_path);
  sock.copy(addr.sun_path, sock.size());
  REQUIRE(::bind(s, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
  CHECK(engine::output_file_error(d / "sock") == "it is a socket, not a file");
  ::close(s);
  CHECK(engine::output_file_error(d / "missing" / "m.csv") == "the directory " + (d / "missing").string() + " does not exist");
  CHECK(engine::output_file_error(d / "old.csv" / "m.csv") == (d / "old.csv").string() + " is a file, not a directory");
  CHECK(engine::output_file_error("/proc/m.csv").rfind("cannot create a file in /proc: ", 0) == 0);
  // A read-only sysfs attribute: a regular file that even root cannot open for writing.
  const fs::path online = "/sys/devices/system/cpu/online";
  if (fs::is_regular_file(online)) {
    CHECK(engine::output_file_error(online) == "cannot write it: Permission denied");
  } else {
    MESSAGE("no " << online.string() << " here: the unwritable-file case is not checked");
  }
  fs::remove_all(d);
}
