// The JIT's file helpers (accel/ops/detail/files.hpp) one by one, without a compiler: the timeout
// variables' parsing, whole-file reads of files whose stat size is not their length, writes that fail,
// the build lock (no limit means waiting, the wait noticed once, a link refused, a probe creating
// nothing, a lock released also for a forked copy of its descriptor, a release noticed promptly), the
// free-space helpers and the compiler's temporary directory; the environment helpers beside them (a flag,
// a command as a shell takes it, the default cache directory). The full-disk and noexec cases that need a
// tmpfs are in test_jit_reliability.cpp.
#include "jit_reliability_support.hpp"

#include <accel/ops/detail/files.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using accel::ops::detail::FileLock;

bool lock_is_free(const fs::path& lock) { return FileLock(lock, FileLock::TryOnly{}).valid(); }

}  // namespace

TEST_CASE("jit files: a timeout variable is a number of seconds from 0 to 1e9, or the fallback when unset") {
  using accel::ops::detail::seconds_from_env;
  const char* const name = "ACCEL_TEST_FILES_TIMEOUT";
  {
    const ScopedEnv unset{{name, nullptr}};
    CHECK(seconds_from_env(name, 42.5) == 42.5);
  }
  for (const auto& value : {std::pair{"", 7.0}, std::pair{"0", 0.0}, std::pair{"2.5", 2.5}, std::pair{"1e9", 1e9},
                            std::pair{" 3", 3.0}}) {
    const ScopedEnv env{{name, value.first}};
    const std::string text = value.first;
    CAPTURE(text);
    CHECK(seconds_from_env(name, 7) == value.second);
  }
  // Each refused for its own reason: trailing text, a sign, not a number, past the limit, infinite, too
  // small to tell from 0 (which would mean no limit at all).
  for (const char* text : {"5s", "-1", "nan", "1e10", "inf", "1e-400", " ", "0x"}) {
    const ScopedEnv env{{name, text}};
    const std::string expected = std::string(name) + "='" + text + "' is not a number of seconds (0 means no limit)";
    CAPTURE(expected);
    CHECK_THROWS_WITH_AS((void)seconds_from_env(name, 7), expected.c_str(), accel::InvalidArgumentError);
  }
}

TEST_CASE("jit files: a whole file is read up to its end, however long stat says it is; a read error is no file") {
  using accel::ops::detail::read_file;
  // sysfs reports 4096 bytes for a file holding a few: read until read(2) says the end.
  const fs::path sysfs = "/sys/devices/system/cpu/possible";
  std::string bytes;
  if (fs::exists(sysfs) && fs::file_size(sysfs) > 64) {
    REQUIRE(read_file(sysfs, bytes));
    CHECK(bytes == ops_test::read_text(sysfs));
    CHECK(bytes.size() < 64);
  } else {
    MESSAGE("SKIPPED: no sysfs file at " << sysfs.string() << " longer by stat than by content");
  }
  CHECK_FALSE(read_file(ops_test::temp_dir("read-dir"), bytes));
  CHECK_FALSE(read_file("/nonexistent/accel-file", bytes));
}

TEST_CASE("jit files: write_all reports a write that fails") {
  using accel::ops::detail::write_all;
  const std::string data(10000, 'x');
  const int full = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  if (full >= 0) {
    CHECK_FALSE(write_all(full, data.data(), data.size()));  // ENOSPC
    ::close(full);
  }
  const fs::path file = ops_test::temp_dir("write-all") / "out";
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  CHECK(write_all(fd, data.data(), data.size()));
  CHECK(write_all(fd, data.data(), 0));
  ::close(fd);
  CHECK(ops_test::read_text(file) == data);
  CHECK_FALSE(write_all(fd, data.data(), 1));  // closed: EBADF
}

TEST_CASE("jit files: the build lock — no limit waits, the wait is noticed once, a link is refused, a probe makes nothing") {
  const fs::path dir = ops_test::temp_dir("file-lock");
  const fs::path lock = dir / "key.lock";
  SUBCASE("free: taken at once, the wait callback not called, the file made 0600") {
    int waits = 0;
    {
      const FileLock taken(lock, 0, [&] { ++waits; });
      CHECK_FALSE(lock_is_free(lock));
    }
    CHECK(waits == 0);
    CHECK(lock_is_free(lock));
    CHECK((fs::status(lock).permissions() & fs::perms::all) == (fs::perms::owner_read | fs::perms::owner_write));
  }
  SUBCASE("held, with no limit (0): waits until released, the callback called once") {
    auto holder = std::make_unique<FileLock>(lock);
    std::atomic<int> waits{0};
    std::thread release([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      holder.reset();
    });
    const auto start = std::chrono::steady_clock::now();
    const FileLock taken(lock, 0, [&] { ++waits; });
    const auto waited = std::chrono::steady_clock::now() - start;
    release.join();
    CHECK(waits == 1);
    CHECK(waited >= std::chrono::milliseconds(250));
  }
  SUBCASE("a release is noticed within the 50 ms the back-off is capped at, however long the wait") {
    auto holder = std::make_unique<FileLock>(lock);
    std::atomic<bool> released{false};
    std::chrono::steady_clock::time_point released_at;
    std::thread release([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(700));
      released_at = std::chrono::steady_clock::now();
      holder.reset();
      released = true;
    });
    const FileLock taken(lock, 10);
    const auto now = std::chrono::steady_clock::now();
    release.join();
    REQUIRE(released);
    // Uncapped doubling would sleep 512 ms from about 0.5 s on: noticed about 0.3 s late.
    CHECK(now - released_at < std::chrono::milliseconds(200));
  }
  SUBCASE("a symbolic link at the lock's path is refused, not followed") {
    fs::create_symlink(dir / "elsewhere", lock);
    const std::string expected = "cannot open lock file " + lock.string() + ": ";
    CHECK_THROWS_WITH_AS((void)FileLock(lock), doctest::Contains(expected.c_str()), accel::Error);
    CHECK_FALSE(fs::exists(dir / "elsewhere"));
  }
  SUBCASE("the probe does not make a missing lock file, and says free or held") {
    CHECK_FALSE(FileLock(lock, FileLock::TryOnly{}).valid());
    CHECK_FALSE(fs::exists(lock));
    { const FileLock made(lock); }
    CHECK(lock_is_free(lock));
    const FileLock held(lock);
    CHECK_FALSE(lock_is_free(lock));
  }
  SUBCASE("released also where a forked child still has the descriptor") {
    auto held = std::make_unique<FileLock>(lock);
    int go[2];
    REQUIRE(::pipe(go) == 0);
    std::fflush(nullptr);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {  // keeps the inherited descriptor open until told to go
      char c = 0;
      (void)!::read(go[0], &c, 1);
      ::_exit(0);
    }
    held.reset();
    const bool free_with_child_alive = lock_is_free(lock);
    (void)!::write(go[1], "x", 1);
    ::close(go[0]);
    ::close(go[1]);
    (void)::waitpid(child, nullptr, 0);
    CHECK(free_with_child_alive);
  }
}

TEST_CASE("jit files: free space, a disk-space reason from the compiler's words, the compiler's temporary directory") {
  using accel::ops::detail::disk_space_problem;
  using accel::ops::detail::free_bytes;
  const fs::path dir = ops_test::temp_dir("space");
  CHECK(free_bytes("/nonexistent/accel-dir") == -1);
  const long long free_now = free_bytes(dir);
  CHECK(free_now > 0);
  // Room enough here (the suite needs more than 1 MiB): only the compiler's log can say the disk was full.
  REQUIRE(free_now > (1 << 20));
  CHECK(disk_space_problem({dir}, "error: something else").empty());
  const std::string enospc = disk_space_problem({dir, "", "/nonexistent/accel-dir"}, "x: No space left on device");
  CHECK(enospc.rfind("out of disk space: the compiler reported 'No space left on device' (" + dir.string() + ": ", 0) == 0);
  CHECK(enospc.find("/nonexistent") == std::string::npos);  // a directory that cannot be judged is left out
  const std::string quota = disk_space_problem({dir, dir}, "Disk quota exceeded");
  CHECK(quota.rfind("out of disk quota: the compiler reported 'Disk quota exceeded' (" + dir.string() + ": ", 0) == 0);
  CHECK(quota.find(" bytes free, " + dir.string() + ": ") != std::string::npos);  // each directory, in order
  CHECK(quota.back() == ')');
  {
    const ScopedEnv env{{"TMPDIR", dir.c_str()}};
    CHECK(accel::ops::detail::compiler_temp_dir() == dir);
  }
  {
    const ScopedEnv env{{"TMPDIR", nullptr}};
    CHECK(accel::ops::detail::compiler_temp_dir() == "/tmp");
  }
}

TEST_CASE("jit files: a flag variable is off for '', 0, false, off and no in any case; commands are shown as a shell takes them") {
  using accel::ops::detail::env_flag;
  const char* const name = "ACCEL_TEST_FILES_FLAG";
  {
    const ScopedEnv unset{{name, nullptr}};
    CHECK_FALSE(env_flag(name));
  }
  for (const char* off : {"", "0", "false", "False", "FALSE", "off", "Off", "OFF", "no", "No", "NO"}) {
    const ScopedEnv env{{name, off}};
    CAPTURE(std::string(off));
    CHECK_FALSE(env_flag(name));
  }
  for (const char* on : {"1", "true", "on", "yes", "2", "verbose"}) {
    const ScopedEnv env{{name, on}};
    CAPTURE(std::string(on));
    CHECK(env_flag(name));
  }
  using accel::ops::detail::join_command;
  using accel::ops::detail::shell_quote;
  CHECK(shell_quote("g++") == "g++");
  CHECK(shell_quote("-I/usr/include,x=1:y@z%") == "-I/usr/include,x=1:y@z%");
  CHECK(shell_quote("") == "''");
  CHECK(shell_quote("out dir/x.so") == "'out dir/x.so'");
  CHECK(shell_quote("$HOME") == "'$HOME'");
  CHECK(shell_quote("a*b") == "'a*b'");
  CHECK(shell_quote("it's") == "'it'\\''s'");
  CHECK(join_command({"g++", "-o", "out dir/x.so", ""}) == "g++ -o 'out dir/x.so' ''");
  CHECK(join_command({}).empty());
}

TEST_CASE("jit files: the default cache directory: ACCEL_CACHE_DIR, XDG_CACHE_HOME, HOME, then /tmp by uid") {
  using accel::ops::detail::default_cache_dir;
  {
    const ScopedEnv env{{"ACCEL_CACHE_DIR", "/a"}, {"XDG_CACHE_HOME", "/x"}, {"HOME", "/h"}};
    CHECK(default_cache_dir() == "/a");
  }
  {
    const ScopedEnv env{{"ACCEL_CACHE_DIR", ""}, {"XDG_CACHE_HOME", "/x"}, {"HOME", "/h"}};
    CHECK(default_cache_dir() == "/x/accel");
  }
  {
    const ScopedEnv env{{"ACCEL_CACHE_DIR", nullptr}, {"XDG_CACHE_HOME", ""}, {"HOME", "/h"}};
    CHECK(default_cache_dir() == "/h/.cache/accel");
  }
  {
    const ScopedEnv env{{"ACCEL_CACHE_DIR", nullptr}, {"XDG_CACHE_HOME", nullptr}, {"HOME", ""}};
    CHECK(default_cache_dir() == "/tmp/accel-cache-" + std::to_string(::getuid()));
  }
}
