// The JIT cache: keys, hits and misses, corrupt and truncated entries, failed builds, two processes.
#include "ops_test_support.hpp"
#include "support/scoped_env.hpp"

#include <accel/ops/detail/sha256.hpp>
#include <accel/ops/jit_cache.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

namespace {

using accel::ops::EntryState;
using accel::ops::JitCache;

std::string sha(std::string_view s) { return accel::ops::detail::Sha256().update(s).hex(); }

auto writer(std::string payload, int* calls = nullptr) {
  return [payload = std::move(payload), calls](const std::filesystem::path& tmp) {
    if (calls != nullptr) ++*calls;
    ops_test::write_text(tmp, payload);
  };
}

}  // namespace

TEST_CASE("sha256 matches the FIPS 180-4 test vectors") {
  CHECK(sha("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  std::string million(1000000, 'a');
  CHECK(sha(million) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("jit cache: miss builds, hit loads, and the entry survives verification") {
  JitCache cache(ops_test::temp_dir("jc"));
  const std::string key = sha("key-1");
  int calls = 0;
  const auto before = JitCache::stats();
  CHECK(cache.state("op", key, "bin") == EntryState::missing);
  const auto e1 = cache.get_or_build("op", key, "bin", writer("payload-1", &calls), true);
  CHECK(e1.compiled);
  CHECK(e1.payload == "payload-1");
  CHECK(calls == 1);
  CHECK(JitCache::stats().compiles == before.compiles + 1);
  CHECK(JitCache::stats().hits == before.hits);
  CHECK(cache.state("op", key, "bin") == EntryState::ok);  // state() looks, and counts nothing
  const auto e2 = cache.get_or_build("op", key, "bin", writer("payload-X", &calls), true);
  CHECK_FALSE(e2.compiled);
  CHECK(e2.payload == "payload-1");
  CHECK(calls == 1);
  CHECK(JitCache::stats().hits == before.hits + 1);  // the hit, counted once
  CHECK(JitCache::stats().compiles == before.compiles + 1);
  CHECK(JitCache::stats().rebuilt == before.rebuilt);
  // The entry is the payload plus a 48-byte footer; nothing else is left in the directory.
  CHECK(std::filesystem::file_size(e1.path) == 9 + 48);
  int files = 0;
  for (const auto& f : std::filesystem::directory_iterator(e1.path.parent_path())) {
    const auto name = f.path().filename().string();
    CHECK((name == key + ".bin" || name == key + ".lock"));
    ++files;
  }
  CHECK(files == 2);
  // Another key is another entry.
  const std::string key2 = sha("key-2");
  CHECK(cache.get_or_build("op", key2, "bin", writer("payload-2", &calls), true).compiled);
  CHECK(calls == 2);
}

TEST_CASE("jit cache: corrupt and truncated entries are detected and rebuilt") {
  JitCache cache(ops_test::temp_dir("jc"));
  const std::string key = sha("corrupt");
  int calls = 0;
  const auto e = cache.get_or_build("op", key, "bin", writer(std::string(1000, 'x'), &calls));
  const auto before = JitCache::stats().rebuilt;

  SUBCASE("a flipped payload byte") {
    std::string bytes = ops_test::read_text(e.path);
    bytes[500] = 'y';
    ops_test::write_text(e.path, bytes);
    CHECK(cache.state("op", key, "bin") == EntryState::corrupt);
  }
  SUBCASE("a file cut short") {
    std::filesystem::resize_file(e.path, 700);
    CHECK(cache.state("op", key, "bin") == EntryState::truncated);
  }
  SUBCASE("payload bytes lost before an intact footer") {  // the footer says 1,000 bytes; 990 are there
    const std::string bytes = ops_test::read_text(e.path);
    ops_test::write_text(e.path, bytes.substr(10));
    std::string why;
    CHECK(JitCache::verify(e.path, key, nullptr, nullptr, &why) == EntryState::truncated);
    CHECK(why == "payload length mismatch");
  }
  SUBCASE("bytes inserted before the footer") {  // 1,002 bytes where the footer says 1,000
    std::string bytes = ops_test::read_text(e.path);
    bytes.insert(500, "zz");
    ops_test::write_text(e.path, bytes);
    std::string why;
    CHECK(JitCache::verify(e.path, key, nullptr, nullptr, &why) == EntryState::truncated);
    CHECK(why == "payload length mismatch");
  }
  SUBCASE("an empty file") {
    std::filesystem::resize_file(e.path, 0);
    CHECK(cache.state("op", key, "bin") == EntryState::truncated);
  }
  SUBCASE("an entry copied from another key") {
    const auto other = cache.get_or_build("op", sha("other"), "bin", writer(std::string(1000, 'x')));
    std::filesystem::copy_file(other.path, e.path, std::filesystem::copy_options::overwrite_existing);
    CHECK(cache.state("op", key, "bin") == EntryState::corrupt);
  }
  const int calls_before = calls;
  const auto again = cache.get_or_build("op", key, "bin", writer(std::string(1000, 'x'), &calls), true);
  CHECK(again.compiled);
  CHECK(calls == calls_before + 1);
  CHECK(again.payload == std::string(1000, 'x'));
  CHECK(cache.state("op", key, "bin") == EntryState::ok);
  CHECK(JitCache::stats().rebuilt == before + 1);
}

TEST_CASE("jit cache: an entry's dependency manifest goes with the entry it described") {
  namespace fs = std::filesystem;
  JitCache cache(ops_test::temp_dir("jc"));
  const fs::path deps_dir = ops_test::temp_dir("jc-deps");
  const fs::path dep = deps_dir / "dep.h";
  ops_test::write_text(dep, "#define ONE 1\n");
  const auto recording = [](std::string payload, std::vector<fs::path> files) {
    return [payload = std::move(payload), files = std::move(files)](const fs::path& tmp) -> accel::ops::BuildDependencies {
      ops_test::write_text(tmp, payload);
      return files;
    };
  };
  const std::string key = sha("manifest");
  const auto e = cache.get_or_build("op", key, "bin", recording("payload-1", {dep}));
  const fs::path manifest = JitCache::manifest_path(e.path);
  REQUIRE(fs::exists(manifest));
  CHECK(cache.state("op", key, "bin") == EntryState::ok);

  SUBCASE("a stale entry rebuilt by a build that records none: the old manifest is removed") {
    const auto mtime = fs::last_write_time(dep);
    ops_test::write_text(dep, "#define ONE 2\n");
    fs::last_write_time(dep, mtime + std::chrono::seconds(1));
    CHECK(cache.state("op", key, "bin") == EntryState::stale);
    const auto again = cache.get_or_build("op", key, "bin", writer("payload-2"), true);
    CHECK(again.compiled);
    CHECK(again.payload == "payload-2");
    CHECK_FALSE(fs::exists(manifest));  // left, it would name the old payload: stale for ever
    CHECK(cache.state("op", key, "bin") == EntryState::ok);
    CHECK_FALSE(cache.get_or_build("op", key, "bin", writer("payload-3")).compiled);
  }
  SUBCASE("a corrupt entry whose rebuild fails: neither it nor its manifest is left") {
    std::string bytes = ops_test::read_text(e.path);
    bytes[3] = 'X';
    ops_test::write_text(e.path, bytes);
    CHECK(cache.state("op", key, "bin") == EntryState::corrupt);
    CHECK_THROWS_AS(cache.get_or_build("op", key, "bin",
                                       [](const fs::path&) { throw accel::CompileError("boom", "cc x.c", "x.c:1: error"); }),
                    accel::CompileError);
    CHECK(cache.state("op", key, "bin") == EntryState::missing);
    CHECK_FALSE(fs::exists(manifest));
  }
  SUBCASE("a dependency that cannot be read when the entry is committed fails the build") {
    const std::string key2 = sha("manifest-gone");
    const fs::path gone = deps_dir / "gone.h";  // never written: removed before the commit could hash it
    std::string what;
    try {
      (void)cache.get_or_build("op", key2, "bin", recording("payload", {dep, gone}));
    } catch (const accel::Error& error) {
      CHECK(error.code() == accel::Errc::runtime_failure);
      what = error.what();
    }
    CHECK(what.find(gone.string() + ", which the build of ") != std::string::npos);
    CHECK(what.find("cannot be read now") != std::string::npos);
    CHECK(cache.state("op", key2, "bin") == EntryState::missing);  // no entry that nobody can vouch for
    CHECK_FALSE(fs::exists(JitCache::manifest_path(cache.entry_path("op", key2, "bin"))));
    for (const auto& f : fs::directory_iterator(e.path.parent_path())) {
      CHECK(f.path().filename().string().find(".tmp.") == std::string::npos);
    }
  }
}

TEST_CASE("jit cache: evict() removes the entry it was handed, not one that has replaced it since") {
  namespace fs = std::filesystem;
  JitCache cache(ops_test::temp_dir("jc"));
  const std::string key = sha("evict");
  const auto handed = cache.get_or_build("op", key, "bin", writer("payload"));
  // Another process rebuilt the key meanwhile: a valid entry in a new file (another inode), same path.
  const fs::path replacement = handed.path.string() + ".replacement";
  fs::copy_file(handed.path, replacement);
  fs::rename(replacement, handed.path);
  const auto rebuilt = JitCache::stats().rebuilt;
  CHECK_FALSE(cache.evict("op", key, "bin", handed));
  CHECK(cache.state("op", key, "bin") == EntryState::ok);
  CHECK(JitCache::stats().rebuilt == rebuilt);
  // The entry a lookup hands out now is the replacement: evicting that one removes it, once.
  const auto current = cache.get_or_build("op", key, "bin", writer("other"));
  CHECK_FALSE(current.compiled);
  CHECK(current.file_inode != handed.file_inode);
  CHECK(cache.evict("op", key, "bin", current));
  CHECK(cache.state("op", key, "bin") == EntryState::missing);
  CHECK(JitCache::stats().rebuilt == rebuilt + 1);
  CHECK_FALSE(cache.evict("op", key, "bin", current));  // nothing left to remove
}

TEST_CASE("jit cache: a failing build leaves no entry and no temporary file") {
  JitCache cache(ops_test::temp_dir("jc"));
  const std::string key = sha("failing");
  CHECK_THROWS_AS(cache.get_or_build("op", key, "bin",
                                     [](const std::filesystem::path& tmp) {
                                       ops_test::write_text(tmp, "half-written");
                                       throw accel::CompileError("boom", "cc x.c", "x.c:1: error");
                                     }),
                  accel::CompileError);
  CHECK(cache.state("op", key, "bin") == EntryState::missing);
  for (const auto& f : std::filesystem::directory_iterator(cache.dir() / "v1" / "op")) {
    CHECK(f.path().extension() == ".lock");
  }
  // A stale temporary from a killed build is cleaned up by the next build of the key.
  ops_test::write_text(cache.entry_path("op", key, "bin").string() + ".tmp.99999.0", "stale");
  CHECK(cache.get_or_build("op", key, "bin", writer("ok")).compiled);
  CHECK_FALSE(std::filesystem::exists(cache.entry_path("op", key, "bin").string() + ".tmp.99999.0"));
}

TEST_CASE("jit cache: two processes building one key at once compile it once") {
  const auto dir = ops_test::temp_dir("jc");
  const auto marker = dir / "compiles.txt";
  const std::string key = sha("concurrent");
  pid_t children[2];
  for (pid_t& child : children) {
    child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      int rc = 0;
      try {
        JitCache cache(dir);
        const auto e = cache.get_or_build(
            "op", key, "bin",
            [&](const std::filesystem::path& tmp) {
              {
                std::ofstream m(marker, std::ios::app);
                m << ::getpid() << "\n";
              }
              std::this_thread::sleep_for(std::chrono::milliseconds(300));  // hold the lock a while
              ops_test::write_text(tmp, "built-once");
            },
            true);
        rc = e.payload == "built-once" ? 0 : 2;
      } catch (...) {
        rc = 3;
      }
      ::_exit(rc);
    }
  }
  for (pid_t child : children) {
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  const std::string lines = ops_test::read_text(marker);
  CHECK(std::count(lines.begin(), lines.end(), '\n') == 1);
  CHECK(JitCache(dir).state("op", key, "bin") == EntryState::ok);
}

TEST_CASE("jit cache: the default directory follows ACCEL_CACHE_DIR, XDG_CACHE_HOME, HOME") {
  ScopedEnv env{{"ACCEL_CACHE_DIR", "/x/accel-cache"}};
  CHECK(JitCache::default_dir() == "/x/accel-cache");
  env.unset("ACCEL_CACHE_DIR");
  env.set("XDG_CACHE_HOME", "/x/xdg");
  CHECK(JitCache::default_dir() == "/x/xdg/accel");
  env.unset("XDG_CACHE_HOME");
  if (const char* home = std::getenv("HOME")) CHECK(JitCache::default_dir() == std::filesystem::path(home) / ".cache/accel");
}
