// What the JIT cache key covers (ops/op_builder.hpp lists the fields): every header a built-in op's
// sources include, the real compiler behind a wrapper in CXX, and the CPU as -march=native sees it.
// A field the key misses is a stale entry silently reused, so each case here checks one field moves the key.
#include "jit_reliability_support.hpp"

#include <accel/cpu/ops.hpp>
#include <accel/ops/detail/sha256.hpp>
#include <accel/ops/registry.hpp>

#if defined(ACCEL_HAS_CUDA)
#include <accel/cuda/ops.hpp>
#endif

#include <doctest/doctest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <vector>

namespace {

namespace fs = std::filesystem;
using jit_test::ScopedEnv;

/// The files an op's sources include, transitively, as the compiler would find them: "..." beside the
/// including file, then in the include dirs; <...> in the include dirs. Headers found nowhere there
/// (the C++ and CUDA system headers) are not the op's. Paths relative to the kernel directory.
std::set<std::string> include_closure(const accel::ops::OpSpec& spec, const fs::path& kernels) {
  static const std::regex include_line(R"(^\s*#\s*include\s*([<"])([^">]+)[">])");
  std::vector<fs::path> dirs;
  for (const auto& d : spec.include_dirs) dirs.push_back(kernels / d);
  std::set<std::string> seen;
  std::vector<fs::path> todo;
  for (const auto& s : spec.sources) todo.push_back(kernels / s);
  while (!todo.empty()) {
    const fs::path file = todo.back();
    todo.pop_back();
    std::ifstream in(file);
    REQUIRE_MESSAGE(in.good(), "cannot read " << file);
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (!std::regex_search(line, m, include_line)) continue;
      std::vector<fs::path> where;
      if (m[1] == "\"") where.push_back(file.parent_path());
      where.insert(where.end(), dirs.begin(), dirs.end());
      for (const auto& d : where) {
        const fs::path candidate = (d / m[2].str()).lexically_normal();
        if (!fs::is_regular_file(candidate)) continue;
        const std::string rel = candidate.lexically_relative(kernels.lexically_normal()).generic_string();
        if (seen.insert(rel).second) todo.push_back(candidate);
        break;
      }
    }
  }
  for (const auto& s : spec.sources) seen.erase(fs::path(s).lexically_normal().generic_string());
  return seen;
}

void check_headers_are_closure(const accel::ops::Registry& registry) {
  const fs::path kernels = accel::ops::default_kernel_dir();
  REQUIRE_MESSAGE(fs::is_directory(kernels), "no kernel directory (ACCEL_KERNEL_DIR)");
  for (const auto& e : registry.entries()) {
    CAPTURE(registry.backend());
    CAPTURE(e.spec.name);
    std::set<std::string> listed;
    for (const auto& h : e.spec.headers) listed.insert(fs::path(h).lexically_normal().generic_string());
    CHECK(listed == include_closure(e.spec, kernels));
  }
}

}  // namespace

TEST_CASE("op specs: each built-in op lists exactly the headers its sources include (so each is in the key)") {
  check_headers_are_closure(accel::cpu::detail::OpsImpl::registry());
#if defined(ACCEL_HAS_CUDA)
  check_headers_are_closure(accel::cuda::detail::OpsImpl::registry());
#endif
  // The walk itself: random_fill reaches the normal fill's math through distributions.hpp.
  const auto closure = include_closure(accel::ops::specs::cuda_random_fill(), accel::ops::default_kernel_dir());
  CHECK(closure.count("../include/accel/random/detail/portable_math.hpp") == 1);
}

TEST_CASE("jit key: the compiler behind a wrapper in CXX is part of the key") {
  if (jit_test::real_cxx().empty()) {
    MESSAGE("SKIPPED: no host C++ compiler found (CXX, c++, g++): this JIT case needs one");
    return;
  }
  const fs::path dir = ops_test::temp_dir("wrapper");
  // `wrap` runs its arguments (as ccache and distcc do); the compiler it is given is a script of ours.
  const fs::path wrap = jit_test::fake_compiler(dir, "wrap", "exec \"$@\"");
  const fs::path target = jit_test::fake_compiler(dir, "target-cc", "exec \"$REAL_CXX\" \"$@\"");
  const std::string cxx = wrap.string() + " " + target.string();
  const ScopedEnv env{{"CXX", cxx.c_str()}};
  auto b = jit_test::tiny_builder(jit_test::tiny_kernels(), dir / "cache");
  const auto before = b.build_command();
  CHECK(before.argv[0] == wrap.string());
  CHECK(before.argv[1] == target.string());
  const auto op = b.load();
  CHECK(op.source() == accel::ops::LoadSource::compiled);
  CHECK(op.function<int()>("tiny_answer")() == 42);
  CHECK(b.is_cached());
  // Another compiler behind the same wrapper (an upgrade, a different version on PATH): a new key, no reuse.
  jit_test::fake_compiler(dir, "target-cc", "exec \"$REAL_CXX\" -DCOMPILER_B \"$@\"");
  CHECK(b.build_command().key != before.key);
  CHECK_FALSE(b.is_cached());
  // The wrapper itself still counts.
  jit_test::fake_compiler(dir, "target-cc", "exec \"$REAL_CXX\" \"$@\"");
  jit_test::fake_compiler(dir, "wrap", "exec \"$@\" # another wrapper version");
  CHECK(b.build_command().key != before.key);
}

TEST_CASE("jit key: the CPU signature is the CPUID leaves -march=native reads, once per process") {
  const std::string& signature = accel::ops::detail::host_cpu_signature();
  CHECK(&signature == &accel::ops::detail::host_cpu_signature());
#if defined(__x86_64__)
  // Leaf 1 (family/model/stepping, base features) and leaf 7 (AVX2, AVX-512...) are always present on x86-64.
  CHECK(signature.find("1.0:") != std::string::npos);
  CHECK(signature.find("7.0:") != std::string::npos);
  CHECK(signature.find("80000001.0:") != std::string::npos);
  // Stable within a process, so a hit stays a hit.
  const fs::path dir = ops_test::temp_dir("cpu-key");
  auto b = jit_test::tiny_builder(jit_test::tiny_kernels(), dir / "cache");
  CHECK(b.build_command().key == b.build_command().key);
  // And in the key: the key is SHA-256 over the fields op_builder.hpp lists, in its order — the signature
  // after the compiler's identity and the architecture (a key without it would hand an entry built for
  // one CPU to another that a copied cache directory or a shared home reaches).
  const auto cmd = b.build_command();
  accel::ops::detail::Sha256 h;
  h.field("accel-jit/1").field(std::to_string(accel::ops::abi_version)).field("tiny").field("host");
  b.hash_sources(h);
  for (const auto& f : accel::ops::detail::host_base_flags()) h.field(f);
  h.field(accel::ops::HostCompiler::find().identity).field(cmd.arch).field(signature).field("deps:-MD");
  CHECK(cmd.key == h.hex());
#endif
}

TEST_CASE("jit key: the op's own flags and include directories are part of the key") {
  const fs::path dir = ops_test::temp_dir("spec-key");
  const fs::path kernels = jit_test::tiny_kernels();
  const auto key_with = [&](std::vector<std::string> flags, std::vector<std::string> include_dirs) {
    accel::ops::OpSpec spec = jit_test::tiny_builder(kernels, dir / "cache").spec();
    spec.flags = std::move(flags);
    spec.include_dirs = std::move(include_dirs);
    accel::ops::OpBuilder b(spec, &accel::ops::host_toolchain, "cpu");
    b.set_kernel_dir(kernels).set_cache_dir(dir / "cache").set_aot_dir("");
    return b.build_command().key;
  };
  const std::string plain = key_with({}, {});
  CHECK(key_with({}, {}) == plain);
  CHECK(key_with({"-DTINY=1"}, {}) != plain);
  CHECK(key_with({"-DTINY=1"}, {}) != key_with({"-DTINY=2"}, {}));
  CHECK(key_with({"-DA", "-DB"}, {}) != key_with({"-DB", "-DA"}, {}));  // in order: a later -D wins
  CHECK(key_with({}, {"include"}) != plain);
  CHECK(key_with({}, {"include"}) != key_with({}, {"other"}));
}
