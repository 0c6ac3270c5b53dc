// The JIT in hostile or unlucky environments (issue 19, items 1-5): a cache directory another account
// can write to, a compiler that exits 0 with a broken output, the loading process killed mid-compile,
// SIGCHLD ignored by the host program, a full disk. Each case uses a one-line op ("tiny") or no
// compiler at all, so the file runs in seconds, also under ASan+UBSan and TSan.
// Cases that need root (a second uid, a tmpfs mount) skip, saying so, without it.
#include "jit_reliability_support.hpp"

#include <accel/ops/cache_dir.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <set>
#include <thread>
#include <tuple>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using accel::ops::JitCache;
using jit_test::contains;
using jit_test::ScopedEnv;

const std::string key = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

auto writer(std::string payload) {
  return [payload = std::move(payload)](const fs::path& tmp) { ops_test::write_text(tmp, payload); };
}

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return static_cast<unsigned>(st.st_mode) & 07777u;
}

uid_t owner_of(const fs::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_uid;
}

/// True (and says so) where no real host compiler is found: the case cannot run here.
using jit_test::no_compiler;

bool skipped(const std::string& result) {
  if (result.rfind("SKIP", 0) == 0) {
    MESSAGE("SKIPPED: " << result);
    return true;
  }
  return false;
}

// A directory tree owned by `uid` with `mode`, for another user's cache.
void make_dir(const fs::path& p, uid_t uid, unsigned mode) {
  fs::create_directories(p);
  REQUIRE(::chown(p.c_str(), uid, uid) == 0);
  REQUIRE(::chmod(p.c_str(), mode) == 0);
}

}  // namespace

// ---- 1. The cache cannot be planted by another local user ----------------------------------------------

TEST_CASE("jit cache security: a new cache root and its subdirectories are created with mode 0700") {
  const fs::path base = ops_test::temp_dir("secure-new");
  const fs::path root = base / "a" / "b" / "cache";  // missing parents are created 0700 too
  JitCache cache(root);
  const auto e = cache.get_or_build("op", key, "bin", writer("x"), true);
  CHECK(e.compiled);
  CHECK(e.payload == "x");
  for (const fs::path& d : {base / "a", base / "a" / "b", root, root / "v1", root / "v1" / "op"}) {
    CAPTURE(d);
    CHECK(mode_of(d) == 0700u);
  }
  CHECK(mode_of(root / "v1" / "op" / (key + ".lock")) == 0600u);
}

TEST_CASE("jit cache security: the XDG and HOME defaults are created 0700") {
  const fs::path home = ops_test::temp_dir("secure-home");
  {
    const ScopedEnv env{{"ACCEL_CACHE_DIR", nullptr}, {"XDG_CACHE_HOME", nullptr}, {"HOME", home.c_str()}};
    CHECK(JitCache::default_dir() == home / ".cache" / "accel");
    JitCache().get_or_build("op", key, "bin", writer("home"));
  }
  CHECK(mode_of(home / ".cache") == 0700u);
  CHECK(mode_of(home / ".cache" / "accel") == 0700u);
  const fs::path xdg = home / "xdg";
  {
    const ScopedEnv env{{"ACCEL_CACHE_DIR", nullptr}, {"XDG_CACHE_HOME", xdg.c_str()}};
    JitCache().get_or_build("op", key, "bin", writer("xdg"));
  }
  CHECK(mode_of(xdg / "accel") == 0700u);
}

TEST_CASE("jit cache security: a cache writable by the group or by others is refused, naming path and mode") {
  const fs::path root = ops_test::temp_dir("secure-shared");
  const uid_t me = ::geteuid();
  for (const unsigned mode : {0770u, 0757u, 0777u, 0775u}) {
    CAPTURE(mode);
    REQUIRE(::chmod(root.c_str(), mode) == 0);
    JitCache cache(root);
    try {
      (void)cache.get_or_build("op", key, "bin", writer("x"));
      FAIL("a shared cache root was used");
    } catch (const accel::ops::UnsafeCacheDirError& e) {
      CHECK(e.code() == accel::Errc::invalid_argument);
      CHECK(e.path() == root);
      CHECK(e.mode() == mode);
      CHECK(e.owner_uid() == me);
      const std::string what = e.what();
      CHECK(contains(what, root.string()));
      CHECK(contains(what, accel::ops::detail::mode_text(mode)));
      CHECK(contains(what, "write into it"));
      if (mode == 0777u) MESSAGE(what);
    }
  }
  // Nothing was created below the refused root.
  CHECK_FALSE(fs::exists(root / "v1"));
  // A subdirectory made group-writable (a cache shared by a group) is refused too, on the fast path.
  REQUIRE(::chmod(root.c_str(), 0700) == 0);
  JitCache cache(root);
  (void)cache.get_or_build("op", key, "bin", writer("x"));
  REQUIRE(::chmod((root / "v1" / "op").c_str(), 0770) == 0);
  CHECK_THROWS_AS((void)cache.get_or_build("op", key, "bin", writer("x")), accel::ops::UnsafeCacheDirError);
  REQUIRE(::chmod((root / "v1").c_str(), 0777) == 0);
  REQUIRE(::chmod((root / "v1" / "op").c_str(), 0700) == 0);
  CHECK_THROWS_AS((void)cache.get_or_build("op", key, "bin", writer("x")), accel::ops::UnsafeCacheDirError);
}

TEST_CASE("jit cache security: another user's cache directory is refused, and its planted entry never read") {
  // The victim is a second uid (setresuid in a forked child); the "attacker" is this (root) process,
  // which creates the victim's cache first and plants an entry in it.
  const uid_t victim = jit_test::spare_uid();
  const fs::path base = ops_test::temp_dir("secure-other");
  REQUIRE(::chmod(base.c_str(), 0755) == 0);
  const fs::path planted_root = base / "planted";
  {
    JitCache attacker(planted_root);
    (void)attacker.get_or_build("op", key, "bin", writer("planted code"));
  }
  REQUIRE(::chmod(planted_root.c_str(), 0777) == 0);  // world-writable, so the victim could use it

  SUBCASE("ACCEL_CACHE_DIR names a directory another account owns") {
    const std::string r = jit_test::run_as(victim, [&] {
      const ScopedEnv env{{"ACCEL_CACHE_DIR", planted_root.c_str()}};
      return JitCache().get_or_build("op", key, "bin", writer("mine"), true).payload;
    });
    if (skipped(r)) return;
    CHECK(contains(r, "EXCEPTION UnsafeCacheDirError owner=0 mode=511 path=" + planted_root.string()));
    CHECK(contains(r, "owned by uid 0"));
    CHECK(contains(r, "0777"));
    CHECK_FALSE(contains(r, "planted code"));
  }
  SUBCASE("the /tmp fallback was created first by another account") {
    const fs::path fallback = fs::path("/tmp") / ("accel-cache-" + std::to_string(victim));
    fs::remove_all(fallback);
    fs::copy(planted_root, fallback, fs::copy_options::recursive);
    REQUIRE(::chmod(fallback.c_str(), 0777) == 0);
    const std::string r = jit_test::run_as(victim, [&] {
      const ScopedEnv env{{"ACCEL_CACHE_DIR", nullptr}, {"XDG_CACHE_HOME", nullptr}, {"HOME", nullptr}};
      if (JitCache::default_dir() != fallback) return "wrong default " + JitCache::default_dir().string();
      return JitCache().get_or_build("op", key, "bin", writer("mine"), true).payload;
    });
    fs::remove_all(fallback);
    if (skipped(r)) return;
    CHECK(contains(r, "EXCEPTION UnsafeCacheDirError owner=0 mode=511 path=" + fallback.string()));
    CHECK_FALSE(contains(r, "planted code"));
  }
  SUBCASE("a directory below the victim's own root was planted by another account") {
    const fs::path root = base / "victim-root";
    make_dir(root, victim, 0700);
    make_dir(root / "v1", victim, 0700);
    fs::create_directories(root / "v1" / "op");  // owned by root, mode 0755: not writable by others,
    REQUIRE(::chmod((root / "v1" / "op").c_str(), 0755) == 0);  // but not the victim's either
    fs::copy_file(planted_root / "v1" / "op" / (key + ".bin"), root / "v1" / "op" / (key + ".bin"));
    const std::string r = jit_test::run_as(victim, [&] {
      return JitCache(root).get_or_build("op", key, "bin", writer("mine"), true).payload;
    });
    if (skipped(r)) return;
    CHECK(contains(r, "EXCEPTION UnsafeCacheDirError owner=0 mode=493 path=" + (root / "v1" / "op").string()));
    CHECK_FALSE(contains(r, "planted code"));
  }
  SUBCASE("the victim's own private cache works") {
    const fs::path root = base / "victim-own";
    make_dir(root, victim, 0700);
    const std::string r = jit_test::run_as(victim, [&] {
      const auto e = JitCache(root).get_or_build("op", key, "bin", writer("mine"), true);
      return e.payload + (e.compiled ? " compiled" : " hit");
    });
    if (skipped(r)) return;
    CHECK(r == "mine compiled");
    CHECK(owner_of(root / "v1" / "op") == victim);
    CHECK(mode_of(root / "v1" / "op") == 0700u);
  }
}

// ---- 2. A compiler that exits 0 with a broken output does not poison the cache ----------------------------

TEST_CASE("jit reliability: a compiler that exits 0 but writes a broken shared object commits nothing") {
  if (no_compiler()) return;
  const fs::path dir = ops_test::temp_dir("broken-so");
  // First call: garbage and exit 0 (a wrapper that swallows an error, a disk that lost the write).
  // Later calls: the real compiler.
  const fs::path counter = dir / "calls";
  const fs::path cxx = jit_test::fake_compiler(dir, "flaky-cxx",
                                               "if [ ! -e '" + counter.string() + "' ]; then touch '" +
                                                   counter.string() + "'; echo garbage > \"$out\"; exit 0; fi\n"
                                                   "exec \"$REAL_CXX\" \"$@\"");
  const ScopedEnv env{{"CXX", cxx.c_str()}};
  auto b = jit_test::tiny_builder(jit_test::tiny_kernels(), dir / "cache");
  try {
    (void)b.load();
    FAIL("a broken shared object loaded");
  } catch (const accel::CompileError& e) {
    CHECK(contains(e.what(), "exited with status 0"));
    CHECK(contains(e.what(), "cannot be loaded"));
    CHECK(contains(e.what(), "nothing was committed"));
    CHECK(contains(e.command(), "flaky-cxx"));
  }
  CHECK_FALSE(b.is_cached());  // before the fix: committed, and every later load failed
  CHECK(jit_test::files_containing(dir / "cache", ".tmp.").empty());
  const auto op = b.load();  // the real compiler now
  CHECK(op.source() == accel::ops::LoadSource::compiled);
  CHECK(op.function<int()>("tiny_answer")() == 42);
  CHECK(b.is_cached());
}

TEST_CASE("jit reliability: a committed entry that fails to load is evicted and rebuilt once") {
  if (no_compiler()) return;
  const fs::path dir = ops_test::temp_dir("evict");
  auto b = jit_test::tiny_builder(jit_test::tiny_kernels(7), dir / "cache");
  // An entry with a valid footer but a payload no loader takes (what an older accel, or a compiler that
  // exited 0 with a broken output, committed).
  const auto cmd = b.build_command();
  JitCache(b.cache_dir()).get_or_build("tiny", cmd.key, "so", writer("not an ELF file"));
  REQUIRE(b.is_cached());
  const auto before = JitCache::stats();
  const auto op = b.load();
  CHECK(op.source() == accel::ops::LoadSource::compiled);
  CHECK(op.function<int()>("tiny_answer")() == 7);
  CHECK(JitCache::stats().rebuilt == before.rebuilt + 1);
  CHECK(JitCache::stats().compiles == before.compiles + 1);
  CHECK(b.load().source() == accel::ops::LoadSource::cache_hit);
}

TEST_CASE("jit reliability: an entry that fails to load, rebuilt broken again, gives an error that says so") {
  const fs::path dir = ops_test::temp_dir("evict-twice");
  const fs::path bad = jit_test::fake_compiler(dir, "bad-cxx", "echo garbage > \"$out\"; exit 0");
  const ScopedEnv env{{"CXX", bad.c_str()}};
  auto b = jit_test::tiny_builder(jit_test::tiny_kernels(8), dir / "cache");
  JitCache(b.cache_dir()).get_or_build("tiny", b.build_command().key, "so", writer("not an ELF file"));
  const auto rebuilt = JitCache::stats().rebuilt;
  try {
    (void)b.load();
    FAIL("a broken entry loaded");
  } catch (const accel::CompileError& e) {
    const std::string what = e.what();
    CHECK(contains(what, "cannot be loaded"));
    CHECK(contains(what, "it was evicted, and rebuilding it failed"));
    CHECK(contains(what, "exited with status 0"));
    CHECK(contains(e.command(), "bad-cxx"));
  }
  CHECK(JitCache::stats().rebuilt == rebuilt + 1);  // once, not in a loop
  CHECK_FALSE(b.is_cached());
  CHECK(jit_test::files_containing(dir / "cache", ".tmp.").empty());
}

// ---- 3. Killing the loading process mid-compile kills the compiler --------------------------------------

TEST_CASE("jit reliability: killing the loading process mid-compile kills the compiler and what it started") {
  if (no_compiler()) return;
  const fs::path dir = ops_test::temp_dir("kill");
  const fs::path pids = dir / "pids";
  // A compiler that writes part of its output, starts a child (as g++ starts cc1plus) and waits.
  const fs::path cxx = jit_test::fake_compiler(
      dir, "slow-cxx",
      "echo partial > \"$out\"\nsleep 30 &\necho \"$$ $!\" > '" + pids.string() + ".new'\nmv '" + pids.string() +
          ".new' '" + pids.string() + "'\nwait");
  auto b = jit_test::tiny_builder(jit_test::tiny_kernels(), dir / "cache");
  std::fflush(nullptr);  // a child must not write this process's buffered output again
  const pid_t tester = ::fork();
  REQUIRE(tester >= 0);
  if (tester == 0) {
    // The orphans are re-parented here (a subreaper), so whether they died can be seen by reaping them.
    (void)::prctl(PR_SET_CHILD_SUBREAPER, 1);
    const pid_t loader = ::fork();
    if (loader == 0) {
      ::setenv("CXX", cxx.c_str(), 1);
      try {
        (void)b.load();
      } catch (...) {
      }
      ::_exit(0);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!fs::exists(pids) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::ifstream in(pids);
    pid_t compiler = 0, grandchild = 0;
    in >> compiler >> grandchild;
    if (compiler <= 0 || grandchild <= 0) ::_exit(3);
    ::kill(loader, SIGKILL);
    (void)::waitpid(loader, nullptr, 0);
    // Dead: gone from /proc, or a zombie. The orphans are reaped here; the compiler may also reap its own
    // child itself as both die.
    std::set<pid_t> alive{compiler, grandchild};
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!alive.empty() && std::chrono::steady_clock::now() < give_up) {
      while (::waitpid(-1, nullptr, WNOHANG) > 0) {
      }
      for (auto it = alive.begin(); it != alive.end();) it = jit_test::process_gone(*it) ? alive.erase(it) : std::next(it);
      if (!alive.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const int rc = alive.empty() ? 0 : 1;
    for (const pid_t p : alive) ::kill(p, SIGKILL);  // clean up after a failure
    while (::waitpid(-1, nullptr, 0) > 0) {
    }
    ::_exit(rc);
  }
  int status = 0;
  REQUIRE(::waitpid(tester, &status, 0) == tester);
  REQUIRE(WIFEXITED(status));
  CHECK_MESSAGE(WEXITSTATUS(status) != 3, "the fake compiler never started");
  CHECK_MESSAGE(WEXITSTATUS(status) == 0, "the compiler or its child outlived the killed loading process by 5 s");
  // The killed build left its temporary; the next build of the op (another key: the real compiler)
  // removes it, since no live process holds that key's lock.
  CHECK(jit_test::files_containing(dir / "cache", ".tmp.").size() >= 1);
  const auto op = b.load();
  CHECK(op.function<int()>("tiny_answer")() == 42);
  CHECK(jit_test::files_containing(dir / "cache", ".tmp.").empty());
}

TEST_CASE("jit reliability: the temporaries of a build in progress are left alone") {
  const fs::path root = ops_test::temp_dir("sweep");
  JitCache cache(root);
  (void)cache.get_or_build("op", key, "bin", writer("x"));
  const std::string other = std::string(64, 'a');
  const std::string dead = std::string(64, 'b');
  const fs::path op_dir = root / "v1" / "op";
  // `other` is being built right now (its lock is held); `dead`'s builder is gone (lock free).
  const accel::ops::detail::FileLock held(op_dir / (other + ".lock"));
  { const accel::ops::detail::FileLock released(op_dir / (dead + ".lock")); }
  ops_test::write_text(op_dir / (other + ".bin.tmp.123.0"), "in progress");
  ops_test::write_text(op_dir / (dead + ".bin.tmp.456.0"), "stale");
  ops_test::write_text(op_dir / (dead + ".bin.tmp.456.0.log"), "stale log of an older accel");
  ops_test::write_text(op_dir / (std::string(64, 'c') + ".bin.tmp.789.1"), "stale, lock file gone");
  (void)cache.get_or_build("op", std::string(64, 'd'), "bin", writer("y"));  // any build of the op sweeps
  const auto left = jit_test::files_containing(op_dir, ".tmp.");
  REQUIRE(left.size() == 1);
  CHECK(left[0].filename() == other + ".bin.tmp.123.0");
}

// ---- 4. SIGCHLD ignored by the host program --------------------------------------------------------------

TEST_CASE("jit reliability: with SIGCHLD ignored or reaped by the host, compile errors keep their status and log") {
  if (no_compiler()) return;
  const fs::path dir = ops_test::temp_dir("sigchld");
  struct sigaction saved {};
  REQUIRE(::sigaction(SIGCHLD, nullptr, &saved) == 0);
  struct sigaction host {};
  ::sigemptyset(&host.sa_mask);
  SUBCASE("SIG_IGN (servers, daemons)") { host.sa_handler = SIG_IGN; }
  SUBCASE("a handler that reaps every child") {
    host.sa_handler = [](int) {
      const int saved_errno = errno;
      while (::waitpid(-1, nullptr, WNOHANG) > 0) {
      }
      errno = saved_errno;
    };
    host.sa_flags = SA_RESTART;
  }
  REQUIRE(::sigaction(SIGCHLD, &host, nullptr) == 0);
  auto broken = jit_test::tiny_builder(jit_test::tiny_kernels(0, "int broken( { return 0; }\n"), dir / "cache");
  std::string what, log;
  try {
    (void)broken.load();
  } catch (const accel::CompileError& e) {
    what = e.what();
    log = e.log();
  } catch (const std::exception& e) {
    what = std::string("not a CompileError: ") + e.what();
  }
  auto good = jit_test::tiny_builder(jit_test::tiny_kernels(5), dir / "cache");
  int answer = 0;
  try {
    answer = good.load().function<int()>("tiny_answer")();
  } catch (const std::exception& e) {
    MESSAGE("the good op failed: " << e.what());
  }
  struct sigaction after {};
  REQUIRE(::sigaction(SIGCHLD, nullptr, &after) == 0);
  REQUIRE(::sigaction(SIGCHLD, &saved, nullptr) == 0);
  const bool kept = after.sa_handler == host.sa_handler;
  CHECK(kept);  // the host's disposition was not changed
  CHECK(contains(what, "compile failed"));
  CHECK(contains(what, "exited with status 1"));
  CHECK(contains(log, "error"));
  CHECK(contains(log, "tiny.cpp"));
  CHECK(answer == 5);
}

// ---- 5. A full disk ------------------------------------------------------------------------------------

namespace {

/// Runs `f` in a forked child with a tmpfs mounted (with `flags` and `options`) at `mnt` in a private
/// mount namespace — it disappears with the child, whatever happens — and returns what f returned;
/// "SKIP ..." without root or where mounting is not allowed.
std::string with_tmpfs(const fs::path& mnt, unsigned long flags, const char* options,
                       const std::function<std::string()>& f) {
  if (::geteuid() != 0) return "SKIP: mounting a tmpfs needs root";
  return test_support::report_from_child([&]() -> std::string {
           if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
               ::mount("tmpfs", mnt.c_str(), "tmpfs", flags, options) != 0) {
             return std::string("SKIP: cannot mount a tmpfs here: ") + std::strerror(errno);
           }
           try {
             return f();
           } catch (const std::exception& e) {
             return std::string("EXCEPTION ") + e.what();
           }
         })
      .text;
}

}  // namespace

TEST_CASE("jit reliability: on a full disk the CompileError has the compiler's log and names the directory") {
  if (no_compiler()) return;
  const fs::path mnt = ops_test::temp_dir("full-disk");
  const fs::path kernels = jit_test::tiny_kernels(3);
  const std::string out = with_tmpfs(mnt, 0, "size=256k,mode=0700", [&] {
    const fs::path cache = mnt / "cache";
    JitCache(cache).get_or_build("tiny", key, "bin", writer("x"));  // the op's directory exists before the disk fills
    {
      std::ofstream fill(mnt / "filler", std::ios::binary);
      const std::string block(4096, 'f');
      while (fill.write(block.data(), static_cast<std::streamsize>(block.size()))) {
      }
    }
    auto b = jit_test::tiny_builder(kernels, cache);
    try {
      (void)b.load();
      return std::string("LOADED");
    } catch (const accel::CompileError& e) {
      return std::string(e.what()) + "\x1e" + e.log();
    }  // another exception: with_tmpfs returns "EXCEPTION ...", which the REQUIRE below shows
  });
  if (skipped(out)) return;
  const std::size_t split = out.find('\x1e');
  REQUIRE_MESSAGE(split != std::string::npos, out);
  const std::string what = out.substr(0, split), log = out.substr(split + 1);
  MESSAGE(what);
  CHECK(contains(log, "No space left on device"));  // before the fix: the log file was in the full directory
  CHECK(contains(what, "out of disk space"));
  CHECK(contains(what, (mnt / "cache" / "v1" / "tiny").string() + " is full"));
  CHECK(contains(what, "compile failed"));
}

TEST_CASE("jit reliability: a directory with under 1 MiB free, or no free inode, is named as full; a file system that counts no inodes is not out of them") {
  using accel::ops::detail::disk_space_problem;
  const fs::path mnt = ops_test::temp_dir("low-space");
  const std::string out = with_tmpfs(mnt, 0, "size=2m,nr_inodes=16,mode=0700", [&] {
    std::string result = "[" + disk_space_problem({mnt}, "") + "]";
    {
      std::ofstream fill(mnt / "filler", std::ios::binary);
      const std::string block(3 << 19, 'f');  // 1.5 MiB of the 2: 512 KiB left
      fill.write(block.data(), static_cast<std::streamsize>(block.size()));
    }
    result += "[" + disk_space_problem({mnt}, "") + "]";
    fs::remove(mnt / "filler");
    for (int i = 0;; ++i) {  // every inode taken, the blocks free
      const int fd = ::open((mnt / ("f" + std::to_string(i))).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
      if (fd < 0) break;
      ::close(fd);
    }
    return result + "[" + disk_space_problem({mnt}, "") + "]";
  });
  if (skipped(out)) return;
  CHECK(out == "[][out of disk space: " + mnt.string() + " is full (524288 bytes free)][out of disk space: " +
                   mnt.string() + " is full (2097152 bytes free, no free inode)]");
  // tmpfs with nr_inodes=0 counts no inodes (total 0, free 0), as some other file systems: not "none free".
  const std::string unlimited = with_tmpfs(mnt, 0, "size=2m,nr_inodes=0,mode=0700",
                                           [&] { return "[" + disk_space_problem({mnt}, "") + "]"; });
  CHECK(unlimited == "[]");
}

// ---- 6-7. Missing, hanging and unusable toolchains; the build lock; noexec caches -------------------------

TEST_CASE("jit reliability: CXX naming no program: BackendUnavailableError naming it, and no cache directory made") {
  const fs::path dir = ops_test::temp_dir("nosuchcc");
  const ScopedEnv env{{"CXX", "nosuchcc-accel-test -DX"}};
  auto b = jit_test::tiny_builder(jit_test::tiny_kernels(), dir / "cache");
  CHECK(b.build_command().argv[0] == "nosuchcc-accel-test");
  CHECK(b.build_command().argv[1] == "-DX");
  try {
    (void)b.load();
    FAIL("loaded without a compiler");
  } catch (const accel::BackendUnavailableError& e) {
    CHECK(e.code() == accel::Errc::backend_unavailable);
    CHECK(contains(e.what(), "CXX='nosuchcc-accel-test -DX' names no executable on PATH"));
    CHECK(contains(e.what(), "command: nosuchcc-accel-test -DX -O3"));
  }
  CHECK_FALSE(fs::exists(dir / "cache"));  // before the fix: v1/tiny/<key>.lock was left behind
  CHECK_FALSE(b.is_cached());
}

TEST_CASE("jit reliability: a hung compiler is killed after ACCEL_JIT_COMPILE_TIMEOUT, with a CompileError") {
  const fs::path dir = ops_test::temp_dir("hangcc");
  const fs::path cxx = jit_test::fake_compiler(dir, "hangcc", "sleep 30");
  const ScopedEnv env{{"CXX", cxx.c_str()}, {"ACCEL_JIT_COMPILE_TIMEOUT", "1"}};
  auto b = jit_test::tiny_builder(jit_test::tiny_kernels(), dir / "cache");
  const auto start = std::chrono::steady_clock::now();
  try {
    (void)b.load();
    FAIL("a hung compile returned");
  } catch (const accel::CompileError& e) {
    CHECK(contains(e.what(), "hangcc did not finish within 1 s and was killed"));
    CHECK(contains(e.what(), "ACCEL_JIT_COMPILE_TIMEOUT"));
    CHECK(e.command().rfind(cxx.string() + " ", 0) == 0);
  }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(15));  // before the fix: 30 s
  CHECK(jit_test::files_containing(dir / "cache", ".tmp.").empty());
  CHECK_FALSE(b.is_cached());
  {
    const ScopedEnv bad{{"ACCEL_JIT_COMPILE_TIMEOUT", "ten"}};
    CHECK_THROWS_WITH_AS((void)b.load(), doctest::Contains("ACCEL_JIT_COMPILE_TIMEOUT='ten' is not a number of seconds"),
                         accel::InvalidArgumentError);
  }
}

TEST_CASE("jit reliability: a wait for another process's build gives up after ACCEL_JIT_LOCK_TIMEOUT, naming the lock") {
  if (no_compiler()) return;
  const fs::path dir = ops_test::temp_dir("lock-wait");
  auto b = jit_test::tiny_builder(jit_test::tiny_kernels(), dir / "cache");
  const auto cmd = b.build_command();
  const fs::path lock_path = cmd.output.parent_path() / (cmd.key + ".lock");
  accel::ops::detail::make_cache_dir(cmd.output.parent_path(), /*parents=*/true);
  { const accel::ops::detail::FileLock create(lock_path); }  // exists, so the probe below can see it held
  std::fflush(nullptr);
  // Another process holds the key's lock, building (hung) for 30 s.
  const pid_t holder = ::fork();
  REQUIRE(holder >= 0);
  if (holder == 0) {
    const accel::ops::detail::FileLock lock(lock_path);
    ::sleep(30);
    ::_exit(0);
  }
  struct Reap {  // the holder goes with the test, also when a check ends it early
    pid_t pid;
    void now() {
      if (pid <= 0) return;
      ::kill(pid, SIGKILL);
      (void)::waitpid(pid, nullptr, 0);
      pid = -1;
    }
    ~Reap() { now(); }
  } reap{holder};
  while (accel::ops::detail::FileLock(lock_path, accel::ops::detail::FileLock::TryOnly{}).valid()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // until the holder has it
  }
  {
    const ScopedEnv env{{"ACCEL_JIT_LOCK_TIMEOUT", "0.5"}};
    const auto start = std::chrono::steady_clock::now();
    try {
      (void)b.load();
      FAIL("loaded while another process held the build lock");
    } catch (const accel::ops::BuildLockTimeoutError& e) {
      CHECK(e.code() == accel::Errc::runtime_failure);
      CHECK(e.lock_path() == lock_path);
      CHECK(e.seconds() >= 0.5);
      CHECK(contains(e.what(), "waiting for the lock " + lock_path.string()));
    }
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));  // before the fix: 30 s
  }
  reap.now();
  // The holder gone, the lock is free: the build goes ahead.
  const ScopedEnv env{{"ACCEL_JIT_LOCK_TIMEOUT", "5"}};
  CHECK(b.load().source() == accel::ops::LoadSource::compiled);
}

TEST_CASE("jit reliability: is_cached() and the op table count a usable AOT build, as load() does") {
  if (no_compiler()) return;
  const fs::path dir = ops_test::temp_dir("aot-cached");
  const std::string abi = std::to_string(accel::ops::abi_version);
  const fs::path kernels = jit_test::tiny_kernels(5);
  auto b = jit_test::tiny_builder(kernels, dir / "cache");
  const fs::path good = dir / "aot-good", stale = dir / "aot-stale", newer_isa = dir / "aot-newer-isa";
  // newer_isa: this accel's ABI, built for a SIMD level above this CPU's (what an AOT build made on a
  // newer machine says through accel_ops_isa): refused as the other ABI is.
  const std::string isa_above = std::to_string(static_cast<int>(accel::ops::host_isa()) + 1);
  for (const auto& [aot, version, isa] : {std::tuple{good, abi, std::string("0")}, std::tuple{stale, std::string("1000"), std::string("0")},
                                          std::tuple{newer_isa, abi, isa_above}}) {
    fs::create_directories(aot);
    ops_test::write_text(aot / "src.cpp", "extern \"C\" int tiny_answer() { return 5; }\n"
                                          "extern \"C\" int accel_ops_abi_version() { return " + version + "; }\n"
                                          "extern \"C\" int accel_ops_isa() { return " + isa + "; }\n");
    const auto r = accel::detail::run_program({jit_test::real_cxx(), "-shared", "-fPIC", (aot / "src.cpp").string(), "-o",
                                               (aot / "tiny.so").string()});
    REQUIRE_MESSAGE(r.ok(), r.describe() << "\n" << r.output);
  }
  b.set_aot_dir(stale);  // another ABI: load() compiles, so it is not cached
  CHECK_FALSE(b.is_cached());
  b.set_aot_dir(newer_isa);  // instructions this CPU may not have: not cached either
  CHECK_FALSE(b.is_cached());
  b.set_aot_dir(good);
  CHECK(b.is_cached());  // before the fix: false, though load() compiles nothing
  CHECK_FALSE(fs::exists(dir / "cache"));
  CHECK(b.load().source() == accel::ops::LoadSource::aot);
  const accel::ops::Registry registry("cpu", {{b.spec(), &accel::ops::host_toolchain}});
  {
    const ScopedEnv env{{"ACCEL_OPS_AOT_DIR", good.c_str()}, {"ACCEL_KERNEL_DIR", kernels.c_str()},
                        {"ACCEL_CACHE_DIR", (dir / "cache").c_str()}};
    const auto rows = accel::ops::op_table(registry);
    REQUIRE(rows.size() == 1);
    CHECK(rows[0].cached);
  }
}


TEST_CASE("jit reliability: a cache on a noexec mount is refused, saying so; its valid entries are not evicted") {
  if (no_compiler()) return;
  CHECK(accel::ops::detail::noexec_problem(ops_test::temp_dir("exec-ok")).empty());
  const fs::path dir = ops_test::temp_dir("noexec");
  const fs::path kernels = jit_test::tiny_kernels(9);
  // A valid entry, built where code may run, to copy onto the noexec mount.
  const fs::path built = dir / "built";
  auto good = jit_test::tiny_builder(kernels, built);
  const fs::path entry = good.load().path();
  const fs::path mnt = dir / "mnt";
  fs::create_directories(mnt);
  const std::string out = with_tmpfs(mnt, MS_NOEXEC, "size=8m,mode=0700", [&] {
    std::string result;
    const auto compiles = JitCache::stats().compiles;
    // 1. An empty cache there: refused before compiling.
    auto b = jit_test::tiny_builder(kernels, mnt / "empty");
    try {
      (void)b.load();
      result += "LOADED;";
    } catch (const accel::BackendUnavailableError& e) {
      result += std::string("E1 ") + e.what() + ";";
    }
    if (JitCache::stats().compiles != compiles) result += "COMPILED;";
    if (!b.is_compatible().ok) result += "INCOMPATIBLE;";
    // 2. A valid entry there: refused, and kept.
    fs::copy(built, mnt / "copy", fs::copy_options::recursive);
    auto c = jit_test::tiny_builder(kernels, mnt / "copy");
    const fs::path copied = mnt / "copy" / entry.lexically_relative(built);
    const auto rebuilt = JitCache::stats().rebuilt;
    try {
      (void)c.load();
      result += "LOADED;";
    } catch (const accel::BackendUnavailableError& e) {
      result += std::string("E2 ") + e.what() + ";";
    }
    if (!fs::exists(copied)) result += "EVICTED;";
    if (JitCache::stats().rebuilt != rebuilt) result += "REBUILT;";
    // 3. A directory not made yet: judged by the nearest one above it that exists.
    result += "E3 " + accel::ops::detail::noexec_problem(mnt / "not" / "made") + ";";
    return result;
  });
  if (skipped(out)) return;
  MESSAGE(out);
  CHECK(contains(out, "E1 cpu op 'tiny' cannot be built: the JIT cache directory " + (mnt / "empty" / "v1" / "tiny").string() +
                          " is on a file system mounted noexec"));
  CHECK(contains(out, "set ACCEL_CACHE_DIR"));
  CHECK_FALSE(contains(out, "COMPILED;"));
  CHECK(contains(out, "INCOMPATIBLE;"));
  CHECK(contains(out, "E2 cpu op 'tiny': cannot load the cache entry"));
  CHECK_FALSE(contains(out, "EVICTED;"));
  CHECK_FALSE(contains(out, "REBUILT;"));
  CHECK_FALSE(contains(out, "LOADED;"));
  CHECK(contains(out, "E3 the JIT cache directory " + (mnt / "not" / "made").string() + " is on a file system mounted noexec"));
}
