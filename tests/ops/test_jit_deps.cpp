// The host JIT's dependency manifest: a header that a source includes but the op's spec does not list
// (OpSpec::headers) is not in the cache key, so the compiler's own dependency list (-MD) is recorded
// beside the entry and checked on every hit. Editing such a header rebuilds the op and loads the new
// code in the same process; an unchanged (or merely touched) header is a hit; a deleted one fails the
// rebuild with the compiler's error and never hands out the old entry; a damaged manifest is a rebuild,
// not a crash. One-line ops: each compile is a fraction of a second. (The manifest and the depfile
// parser as data, without a compiler: test_jit_manifest.cpp.)
#include "jit_reliability_support.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using accel::ops::JitCache;
using accel::ops::LoadSource;
using jit_test::contains;

using jit_test::no_compiler;

/// A kernel directory whose tiny.cpp returns DEP_VALUE from "dep.h", a header the spec does not list.
fs::path kernels_with_unlisted_header(int value) {
  const fs::path dir = ops_test::temp_dir("deps-kernels");
  ops_test::write_text(dir / "tiny.cpp", "#include \"dep.h\"\nextern \"C\" int tiny_answer() { return DEP_VALUE; }\n");
  ops_test::write_text(dir / "dep.h", "#define DEP_VALUE " + std::to_string(value) + "\n");
  return dir;
}

/// Rewrites `file` and moves its mtime a second on, so a file system with coarse timestamps still sees
/// a new mtime (the size changes too when the text's length does).
void edit(const fs::path& file, const std::string& text) {
  const auto before = fs::last_write_time(file);
  ops_test::write_text(file, text);
  fs::last_write_time(file, before + std::chrono::seconds(1));
}

int tiny_answer_of(const accel::ops::LoadedOp& op) { return op.function<int()>("tiny_answer")(); }

/// Loads the op in a forked child (another process: its mappings are its own) and returns 0 when the
/// child saw `expected`.
int load_in_child(const fs::path& kernels, const fs::path& cache, int expected) {
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child == 0) {
    int rc = 1;
    try {
      rc = tiny_answer_of(jit_test::tiny_builder(kernels, cache).load()) == expected ? 0 : 2;
    } catch (...) {
      rc = 3;
    }
    ::_exit(rc);
  }
  int status = 0;
  if (::waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

fs::path manifest_of(const accel::ops::OpBuilder& b) { return b.build_command().output.string() + ".deps"; }

}  // namespace

TEST_CASE("jit deps: editing a header the spec does not list rebuilds the op, and the new code is loaded") {
  if (no_compiler()) return;
  const fs::path dir = ops_test::temp_dir("deps-edit");
  const fs::path kernels = kernels_with_unlisted_header(42);
  const auto first = jit_test::tiny_builder(kernels, dir / "cache").load();
  CHECK(first.source() == LoadSource::compiled);
  CHECK(tiny_answer_of(first) == 42);

  edit(kernels / "dep.h", "#define DEP_VALUE 1234\n");
  const auto before = JitCache::stats();
  const auto fresh = jit_test::tiny_builder(kernels, dir / "cache");
  CHECK_FALSE(fresh.is_cached());  // the entry is stale: load() would compile
  const auto second = fresh.load();
  CHECK(second.source() == LoadSource::compiled);
  CHECK(tiny_answer_of(second) == 1234);  // the rebuilt library, not the old mapping of the same path
  CHECK(JitCache::stats().compiles == before.compiles + 1);
  CHECK(JitCache::stats().stale == before.stale + 1);
  CHECK(JitCache::stats().rebuilt == before.rebuilt + 1);
  CHECK(tiny_answer_of(first) == 42);  // the first op's library stays mapped (RTLD_NODELETE)

  // A later load in the same process is a hit on the rebuilt entry and gets the new code too.
  const auto third = jit_test::tiny_builder(kernels, dir / "cache").load();
  CHECK(third.source() == LoadSource::cache_hit);
  CHECK(tiny_answer_of(third) == 1234);
  CHECK(JitCache::stats().compiles == before.compiles + 1);
}

TEST_CASE("jit deps: an unchanged or merely touched header is a cache hit") {
  if (no_compiler()) return;
  const fs::path dir = ops_test::temp_dir("deps-hit");
  const fs::path kernels = kernels_with_unlisted_header(5);
  CHECK(tiny_answer_of(jit_test::tiny_builder(kernels, dir / "cache").load()) == 5);
  REQUIRE(fs::exists(manifest_of(jit_test::tiny_builder(kernels, dir / "cache"))));
  const std::string manifest = ops_test::read_text(manifest_of(jit_test::tiny_builder(kernels, dir / "cache")));
  CHECK(contains(manifest, (kernels / "dep.h").string()));
  CHECK_FALSE(contains(manifest, (kernels / "tiny.cpp").string()));  // a source is in the key already

  const auto before = JitCache::stats();
  const auto b = jit_test::tiny_builder(kernels, dir / "cache");
  CHECK(b.is_cached());
  const auto hit = b.load();
  CHECK(hit.source() == LoadSource::cache_hit);
  CHECK(tiny_answer_of(hit) == 5);

  // Same bytes, new mtime: the content hash decides, so still a hit.
  edit(kernels / "dep.h", "#define DEP_VALUE 5\n");
  const auto touched = jit_test::tiny_builder(kernels, dir / "cache").load();
  CHECK(touched.source() == LoadSource::cache_hit);
  CHECK(tiny_answer_of(touched) == 5);
  CHECK(JitCache::stats().compiles == before.compiles);
  CHECK(JitCache::stats().stale == before.stale);
  CHECK(JitCache::stats().rebuilt == before.rebuilt);
}

TEST_CASE("jit deps: a header the spec lists is in the key, so the manifest does not record it again") {
  if (no_compiler()) return;
  const fs::path dir = ops_test::temp_dir("deps-listed");
  const fs::path kernels = kernels_with_unlisted_header(7);
  ops_test::write_text(kernels / "other.h", "#define OTHER 1\n");
  ops_test::write_text(kernels / "tiny.cpp", "#include \"dep.h\"\n#include \"other.h\"\n"
                                             "extern \"C\" int tiny_answer() { return DEP_VALUE + OTHER; }\n");
  accel::ops::OpSpec spec = jit_test::tiny_builder(kernels, dir / "cache").spec();
  spec.headers = {"dep.h"};
  accel::ops::OpBuilder b(spec, &accel::ops::host_toolchain, "cpu");
  b.set_kernel_dir(kernels).set_cache_dir(dir / "cache").set_aot_dir("");
  CHECK(tiny_answer_of(b.load()) == 8);
  REQUIRE(fs::exists(manifest_of(b)));
  const std::string manifest = ops_test::read_text(manifest_of(b));
  CHECK(contains(manifest, (kernels / "other.h").string()));  // unlisted: recorded
  CHECK_FALSE(contains(manifest, (kernels / "dep.h").string()));  // listed: in the key, not hashed twice a hit
}

TEST_CASE("jit deps: with several sources, an unlisted header of the second one is tracked too") {
  if (no_compiler()) return;
  const fs::path dir = ops_test::temp_dir("deps-two-sources");
  const fs::path kernels = ops_test::temp_dir("deps-two-kernels");
  ops_test::write_text(kernels / "tiny.cpp",
                       "extern \"C\" int other_value();\nextern \"C\" int tiny_answer() { return other_value(); }\n");
  ops_test::write_text(kernels / "other.cpp", "#include \"dep2.h\"\nextern \"C\" int other_value() { return DEP2; }\n");
  ops_test::write_text(kernels / "dep2.h", "#define DEP2 31\n");
  const auto builder = [&] {
    auto b = jit_test::tiny_builder(kernels, dir / "cache");
    auto spec = b.spec();
    spec.sources = {"tiny.cpp", "other.cpp"};
    accel::ops::OpBuilder two(spec, &accel::ops::host_toolchain, "cpu");
    two.set_kernel_dir(kernels).set_cache_dir(dir / "cache").set_aot_dir("");
    return two;
  };
  CHECK(tiny_answer_of(builder().load()) == 31);
  CHECK(contains(ops_test::read_text(manifest_of(builder())), (kernels / "dep2.h").string()));
  edit(kernels / "dep2.h", "#define DEP2 3131\n");
  const auto before = JitCache::stats();
  const auto op = builder().load();
  CHECK(op.source() == LoadSource::compiled);
  CHECK(tiny_answer_of(op) == 3131);
  CHECK(JitCache::stats().stale == before.stale + 1);
  CHECK(jit_test::files_containing(dir / "cache", ".d").size() == 1);  // the manifest (.deps) only
}

TEST_CASE("jit deps: a deleted header fails the rebuild with the compiler's error, and the old entry is not used") {
  if (no_compiler()) return;
  const fs::path dir = ops_test::temp_dir("deps-deleted");
  const fs::path kernels = kernels_with_unlisted_header(6);
  CHECK(tiny_answer_of(jit_test::tiny_builder(kernels, dir / "cache").load()) == 6);
  fs::remove(kernels / "dep.h");

  const auto b = jit_test::tiny_builder(kernels, dir / "cache");
  CHECK_FALSE(b.is_cached());
  for (int attempt = 0; attempt < 2; ++attempt) {  // every load tries again; none hands out the old entry
    try {
      (void)b.load();
      FAIL("a stale entry was loaded although its header is gone");
    } catch (const accel::CompileError& e) {
      CHECK(contains(e.what(), "compile failed"));
      CHECK(contains(e.log(), "dep.h"));
    }
  }
  CHECK(jit_test::files_containing(dir / "cache", ".tmp.").empty());

  // Restored, the header makes the old entry fresh again: a hit, with the old value.
  ops_test::write_text(kernels / "dep.h", "#define DEP_VALUE 6\n");
  const auto back = jit_test::tiny_builder(kernels, dir / "cache").load();
  CHECK(back.source() == LoadSource::cache_hit);
  CHECK(tiny_answer_of(back) == 6);
}

TEST_CASE("jit deps: a damaged or foreign manifest is a rebuild, not a crash") {
  if (no_compiler()) return;
  const fs::path dir = ops_test::temp_dir("deps-corrupt");
  const fs::path kernels = kernels_with_unlisted_header(9);
  CHECK(tiny_answer_of(jit_test::tiny_builder(kernels, dir / "cache").load()) == 9);
  const fs::path manifest = manifest_of(jit_test::tiny_builder(kernels, dir / "cache"));
  const std::string good = ops_test::read_text(manifest);
  REQUIRE_FALSE(good.empty());
  const std::vector<std::string> damaged = {
      "garbage\n",                                 // not a manifest
      good.substr(0, good.size() / 2),            // truncated mid-line
      good.substr(0, good.rfind("end")),          // no end line
      std::string(good).replace(good.find(' ') + 1, 1, "Z"),  // header field damaged
      "",                                          // empty
  };
  for (const auto& text : damaged) {
    ops_test::write_text(manifest, text);
    const auto before = JitCache::stats();
    const auto op = jit_test::tiny_builder(kernels, dir / "cache").load();
    CHECK(op.source() == LoadSource::compiled);
    CHECK(tiny_answer_of(op) == 9);
    CHECK(JitCache::stats().stale == before.stale + 1);
    CHECK(ops_test::read_text(manifest) != text);  // replaced by a good one
    CHECK(jit_test::tiny_builder(kernels, dir / "cache").load().source() == LoadSource::cache_hit);
  }
}

TEST_CASE("jit deps: an entry without a manifest (an older accel's) is used as before") {
  if (no_compiler()) return;
  const fs::path dir = ops_test::temp_dir("deps-none");
  const fs::path kernels = kernels_with_unlisted_header(11);
  CHECK(tiny_answer_of(jit_test::tiny_builder(kernels, dir / "cache").load()) == 11);
  fs::remove(manifest_of(jit_test::tiny_builder(kernels, dir / "cache")));
  edit(kernels / "dep.h", "#define DEP_VALUE 12\n");  // not seen: nothing records it
  const auto op = jit_test::tiny_builder(kernels, dir / "cache").load();
  CHECK(op.source() == LoadSource::cache_hit);
  CHECK(tiny_answer_of(op) == 11);
}

TEST_CASE("jit deps: an entry another process rebuilt is loaded anew, not the old mapping of its path") {
  if (no_compiler()) return;
  const fs::path dir = ops_test::temp_dir("deps-other-process");
  const fs::path kernels = kernels_with_unlisted_header(21);
  // Another process builds the entry; this one loads it as a hit, so dlopen knows it by its path.
  REQUIRE(load_in_child(kernels, dir / "cache", 21) == 0);
  const auto first = jit_test::tiny_builder(kernels, dir / "cache").load();
  CHECK(first.source() == LoadSource::cache_hit);
  CHECK(tiny_answer_of(first) == 21);
  // The header changes and another process rebuilds: a new file under the same path.
  edit(kernels / "dep.h", "#define DEP_VALUE 2222\n");
  REQUIRE(load_in_child(kernels, dir / "cache", 2222) == 0);
  const auto op = jit_test::tiny_builder(kernels, dir / "cache").load();
  CHECK(op.source() == LoadSource::cache_hit);
  CHECK(tiny_answer_of(op) == 2222);
  CHECK(tiny_answer_of(first) == 21);
  CHECK(jit_test::files_containing(dir / "cache", ".tmp.").empty());  // the link it was loaded by is gone
}
