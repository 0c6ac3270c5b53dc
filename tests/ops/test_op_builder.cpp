// Op builders on the CPU backend: the op table, names, build commands and keys, compatibility,
// load() through the cache (hit, miss, rebuild), compile errors, two processes, AOT builds.
#include "ops_test_support.hpp"
#include "support/scoped_env.hpp"

#include <accel/concepts/ops.hpp>
#include <accel/cpu/ops.hpp>
#include <accel/ops/nn_abi.hpp>

#include "accel_nn_abi.h"
#include "accel_ops_abi.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <concepts>
#include <cstddef>

#include <sys/wait.h>
#include <unistd.h>

namespace {

using accel::cpu::Ops;
using accel::ops::LoadSource;

bool has_arg(const std::vector<std::string>& argv, const std::string& arg) {
  return std::find(argv.begin(), argv.end(), arg) != argv.end();
}

/// A copy of the kernel directory that a test may edit.
std::filesystem::path kernel_copy() {
  const auto dir = ops_test::temp_dir("kernels");
  std::filesystem::copy(Ops::op_builder_dir(), dir, std::filesystem::copy_options::recursive);
  return dir;
}

struct NoTable {  // everything OpApi needs but op_table()
  static std::string op_builder_dir();
  static accel::ops::OpBuilder create_op_builder(std::string_view);
  template <class Op>
  static accel::ops::TypedOpBuilder<int> get_op_builder();
  static accel::ops::BuildCommand build_extension(std::string_view);
  static std::vector<std::string> op_names();
};

}  // namespace

static_assert(accel::OpApi<accel::cpu::Ops>);
static_assert(!accel::OpApi<NoTable>);
// OpApi names the typed builders through decltype only (they are opt-in); where <accel/op_builders.hpp> is
// included they derive from the common builder.
static_assert(std::derived_from<decltype(accel::cpu::Ops::get_op_builder<accel::ops::FusedAdam>()), accel::ops::OpBuilder>);
static_assert(std::derived_from<decltype(accel::cpu::Ops::get_op_builder<accel::ops::TensorOps>()), accel::ops::OpBuilder>);
static_assert(!accel::OpApi<int>);

// The kernels' ABI header and the host mirror agree.
static_assert(sizeof(accel_adam_hparams) == sizeof(accel::ops::abi::AdamHParams));
static_assert(sizeof(accel_adam_tensor) == sizeof(accel::ops::abi::AdamTensor));
static_assert(sizeof(accel_tensor_ref) == sizeof(accel::ops::abi::TensorRef));
static_assert(sizeof(accel_adam_launch) == sizeof(accel::ops::abi::AdamLaunch));
static_assert(sizeof(accel_tensor_list) == sizeof(accel::ops::abi::TensorList));
static_assert(offsetof(accel_adam_hparams, maximize) == offsetof(accel::ops::abi::AdamHParams, maximize));
static_assert(offsetof(accel_adam_hparams, inv_bc2_sqrt) == offsetof(accel::ops::abi::AdamHParams, inv_bc2_sqrt));
static_assert(offsetof(accel_adam_tensor, numel) == offsetof(accel::ops::abi::AdamTensor, numel));
static_assert(offsetof(accel_adam_launch, t) == offsetof(accel::ops::abi::AdamLaunch, t));
static_assert(offsetof(accel_tensor_list, t) == offsetof(accel::ops::abi::TensorList, t));
// nn_ops' argument structs (kernels/common/accel_nn_abi.h vs ops/nn_abi.hpp).
static_assert(sizeof(accel_nn_embedding_forward_args) == sizeof(accel::ops::abi::NnEmbeddingForward));
static_assert(sizeof(accel_nn_embedding_backward_args) == sizeof(accel::ops::abi::NnEmbeddingBackward));
static_assert(sizeof(accel_nn_layernorm_forward_args) == sizeof(accel::ops::abi::NnLayerNormForward));
static_assert(offsetof(accel_nn_layernorm_forward_args, eps) == offsetof(accel::ops::abi::NnLayerNormForward, eps));
static_assert(sizeof(accel_nn_layernorm_backward_args) == sizeof(accel::ops::abi::NnLayerNormBackward));
static_assert(offsetof(accel_nn_layernorm_backward_args, N) == offsetof(accel::ops::abi::NnLayerNormBackward, N));
static_assert(sizeof(accel_nn_gelu_forward_args) == sizeof(accel::ops::abi::NnGeluForward));
static_assert(sizeof(accel_nn_gelu_backward_args) == sizeof(accel::ops::abi::NnGeluBackward));
static_assert(sizeof(accel_nn_cross_entropy_args) == sizeof(accel::ops::abi::NnCrossEntropy));
static_assert(offsetof(accel_nn_cross_entropy_args, write_grad) == offsetof(accel::ops::abi::NnCrossEntropy, write_grad));
static_assert(sizeof(accel_nn_add_args) == sizeof(accel::ops::abi::NnAdd));
static_assert(sizeof(accel_nn_dropout_args) == sizeof(accel::ops::abi::NnDropout));
static_assert(offsetof(accel_nn_dropout_args, scale) == offsetof(accel::ops::abi::NnDropout, scale));
static_assert(sizeof(accel_nn_clip_args) == sizeof(accel::ops::abi::NnClip));
static_assert(ACCEL_NN_LN_CHUNK == accel::ops::abi::nn_ln_chunk);
static_assert(ACCEL_OPS_ABI_VERSION == accel::ops::abi_version);
static_assert(ACCEL_MT_MAX_TENSORS == accel::ops::abi::mt_max_tensors);

TEST_CASE("cpu op table: names, class names, and unknown names listing the known ones") {
  CHECK(Ops::op_names() == std::vector<std::string>{"fused_adam", "cpu_adam", "tensor_ops", "nn_ops"});
  CHECK(Ops::create_op_builder("FusedAdamBuilder").name() == "fused_adam");
  CHECK(Ops::create_op_builder("CPUAdamBuilder").name() == "cpu_adam");
  CHECK(Ops::create_op_builder("tensor_ops").spec().class_name == "TensorOpsBuilder");
  try {
    (void)Ops::create_op_builder("fused_lamb");
    FAIL("unknown op accepted");
  } catch (const accel::InvalidArgumentError& e) {
    const std::string what = e.what();
    CHECK(what.find("unknown op 'fused_lamb'") != std::string::npos);
    CHECK(what.find("fused_adam (FusedAdamBuilder)") != std::string::npos);
    CHECK(what.find("cpu_adam (CPUAdamBuilder)") != std::string::npos);
    CHECK(what.find("tensor_ops (TensorOpsBuilder)") != std::string::npos);
  }
  CHECK(Ops::op_builder_dir() == std::string(ACCEL_KERNEL_DIR));
  static_assert(std::is_same_v<decltype(Ops::get_op_builder<accel::ops::FusedAdam>().load()), accel::cpu::FusedAdamOp>);
}

TEST_CASE("an op builder's settings read back as set, and default to the environment's") {
  auto b = Ops::create_op_builder("tensor_ops");
  const std::filesystem::path kernels(ACCEL_KERNEL_DIR);
  CHECK(b.kernel_dir() == kernels);
  CHECK(b.sources() == std::vector<std::filesystem::path>{kernels / "cpu/tensor_ops.cpp"});
  CHECK(b.include_dirs() == std::vector<std::filesystem::path>{kernels / "cpu", kernels / "common"});
  CHECK(b.extra_flags().empty());
  CHECK(b.arch() == 0);
  b.set_kernel_dir("/opt/kernels").add_flags({"-DA=1"}).add_flags({"-DB=2", "-DC=3"}).set_arch(90).set_aot_dir("/opt/aot");
  CHECK(b.kernel_dir() == "/opt/kernels");
  CHECK(b.sources() == std::vector<std::filesystem::path>{"/opt/kernels/cpu/tensor_ops.cpp"});
  CHECK(b.include_dirs().front() == "/opt/kernels/cpu");
  CHECK(b.extra_flags() == std::vector<std::string>{"-DA=1", "-DB=2", "-DC=3"});  // appended, in order
  CHECK(b.arch() == 90);
  CHECK(b.aot_dir() == "/opt/aot");
  {
    const ScopedEnv env{{"ACCEL_OPS_AOT_DIR", "/srv/accel-aot"}, {"ACCEL_KERNEL_DIR", "/srv/kernels"}};
    CHECK(accel::ops::default_aot_dir() == "/srv/accel-aot");
    CHECK(accel::ops::default_kernel_dir() == "/srv/kernels");
    CHECK(Ops::create_op_builder("tensor_ops").aot_dir() == "/srv/accel-aot");  // unset: the default
    CHECK(b.aot_dir() == "/opt/aot");  // set: the builder's own
  }
  CHECK(accel::ops::default_kernel_dir() == kernels);
}

TEST_CASE("host_isa: the widest instruction set the host kernels are built for, from CPUID") {
  const accel::CpuFeatures& f = accel::cpu_features();
  const auto isa = accel::ops::host_isa();
  CHECK((isa == accel::ops::HostIsa::avx512) == (f.avx512f && f.avx512bw && f.avx512vl));
  if (isa != accel::ops::HostIsa::avx512) CHECK((isa == accel::ops::HostIsa::avx2) == (f.avx2 && f.fma));
  CHECK(accel::ops::to_string(accel::ops::HostIsa::avx512) == "avx512");
}

TEST_CASE("build_extension describes the host compile; the key follows flags and sources") {
  (void)ops_test::cache_dir();
  const auto cmd = Ops::build_extension("tensor_ops");
  for (const char* flag : {"-O3", "-march=native", "-fopenmp", "-shared", "-fPIC"}) CHECK(has_arg(cmd.argv, flag));
  CHECK(cmd.key.size() == 64);
  CHECK(cmd.output.extension() == ".so");
  CHECK(cmd.output.string().find(cmd.key) != std::string::npos);
  CHECK(cmd.str().find("tensor_ops.cpp") != std::string::npos);
  CHECK(cmd.arch.find("x86_64") == 0);
  // Same inputs, same key; a flag or a source byte changes it.
  CHECK(Ops::build_extension("tensor_ops").key == cmd.key);
  auto flagged = Ops::create_op_builder("tensor_ops");
  flagged.add_flags({"-DACCEL_TEST_FLAG=1"});
  CHECK(flagged.build_command().key != cmd.key);
  CHECK(has_arg(flagged.build_command().argv, "-DACCEL_TEST_FLAG=1"));
  const auto dir = kernel_copy();
  auto moved = Ops::create_op_builder("tensor_ops");
  moved.set_kernel_dir(dir);
  CHECK(moved.build_command().key == cmd.key);  // the key does not depend on where kernels/ lives
  ops_test::write_text(dir / "cpu" / "tensor_ops.cpp", ops_test::read_text(dir / "cpu" / "tensor_ops.cpp") + "\n// edit\n");
  CHECK(moved.build_command().key != cmd.key);
  ops_test::write_text(dir / "common" / "accel_ops_abi.h", ops_test::read_text(dir / "common" / "accel_ops_abi.h") + "\n");
  auto header_edit = Ops::create_op_builder("fused_adam");
  const auto before = header_edit.build_command().key;
  header_edit.set_kernel_dir(dir);
  CHECK(header_edit.build_command().key != before);  // a header is part of the key too
}

TEST_CASE("is_compatible: yes with the SIMD path; no host compiler is a reason, not a throw") {
  const auto c = Ops::create_op_builder("fused_adam").is_compatible();
  CHECK(c.ok);
  CHECK(c.str().find("path") != std::string::npos);
  {
    const ScopedEnv env{{"CXX", "/nonexistent/c++"}};
    const auto missing = Ops::create_op_builder("fused_adam").is_compatible();
    CHECK_FALSE(missing.ok);
    REQUIRE(missing.reasons.size() == 1);
    CHECK(missing.reasons[0].find("/nonexistent/c++") != std::string::npos);
  }
  auto elsewhere = Ops::create_op_builder("fused_adam");
  elsewhere.set_kernel_dir("/nonexistent/kernels");
  CHECK_FALSE(elsewhere.is_compatible().ok);
  CHECK_THROWS_AS((void)elsewhere.build_command(), accel::InvalidArgumentError);
}

TEST_CASE("load: compile on a miss, the cache on a hit, a rebuild when the entry is corrupt") {
  (void)ops_test::cache_dir();
  auto b = Ops::create_op_builder("tensor_ops");
  b.add_flags({"-DACCEL_TEST_LOAD=1"});  // a key of this test's own
  CHECK_FALSE(b.is_cached());
  const auto compiles = accel::ops::JitCache::stats().compiles;
  {
    const auto op = b.load();
    CHECK(op.source() == LoadSource::compiled);
    CHECK(op.function<int()>("accel_ops_abi_version")() == accel::ops::abi_version);
    CHECK(op.find_symbol("no_such_symbol") == nullptr);
    CHECK_THROWS_WITH_AS((void)op.symbol("no_such_symbol"), doctest::Contains("has no entry point 'no_such_symbol'"),
                         accel::InvalidArgumentError);
  }
  CHECK(b.is_cached());
  CHECK(accel::ops::JitCache::stats().compiles == compiles + 1);
  std::filesystem::path path;
  {
    const auto hit = b.load();
    CHECK(hit.source() == LoadSource::cache_hit);
    CHECK(hit.load_seconds() < 0.5);
    path = hit.path();
  }  // unmapped: truncating a mapped library in place would fault its users (the cache never does)
  // Replace the entry with a truncated copy (a new file: the loaded library stays mapped, and
  // truncating a mapped file in place would fault it): the next load detects it and rebuilds.
  std::string bytes = ops_test::read_text(path);
  bytes.resize(bytes.size() / 2);
  std::filesystem::remove(path);
  ops_test::write_text(path, bytes);
  CHECK_FALSE(b.is_cached());
  const auto rebuilt = b.load();
  CHECK(rebuilt.source() == LoadSource::compiled);
  CHECK(accel::ops::JitCache::stats().compiles == compiles + 2);
  CHECK(rebuilt.function<int()>("accel_ops_abi_version")() == accel::ops::abi_version);
}

TEST_CASE("load: a compile error throws CompileError with the log and command and leaves the cache clean") {
  const auto dir = kernel_copy();
  ops_test::write_text(dir / "cpu" / "tensor_ops.cpp", "#include \"cpu_common.h\"\nint broken( { return 0; }\n");
  auto b = Ops::create_op_builder("tensor_ops");
  b.set_kernel_dir(dir).set_cache_dir(ops_test::temp_dir("cache-err"));
  try {
    (void)b.load();
    FAIL("a broken source compiled");
  } catch (const accel::CompileError& e) {
    CHECK(e.code() == accel::Errc::compile_failed);
    CHECK(e.log().find("error") != std::string::npos);
    CHECK(e.command().find("-march=native") != std::string::npos);
    CHECK(e.command().find("tensor_ops.cpp") != std::string::npos);
    CHECK(std::string(e.what()).find(e.log()) != std::string::npos);
  }
  for (const auto& f : std::filesystem::recursive_directory_iterator(b.cache_dir())) {
    if (f.is_regular_file()) CHECK(f.path().extension() == ".lock");
  }
  CHECK_FALSE(b.is_cached());
}

TEST_CASE("load: two processes loading one op at once compile it once") {
  (void)ops_test::cache_dir();
  auto b = Ops::create_op_builder("tensor_ops");
  b.add_flags({"-DACCEL_TEST_CONCURRENT=" + std::to_string(::getpid())});  // a fresh key
  const auto compiles_before = accel::ops::JitCache::stats().compiles;  // inherited by the children
  pid_t children[2];
  for (pid_t& child : children) {
    child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      int rc = 10;
      try {
        const auto op = b.load();
        const bool ok = op.function<int()>("accel_ops_abi_version")() == accel::ops::abi_version;
        rc = ok ? static_cast<int>(accel::ops::JitCache::stats().compiles - compiles_before) : 11;
      } catch (...) {
        rc = 12;
      }
      ::_exit(rc);  // the exit status is the number of compiles this process ran
    }
  }
  int compiles = 0;
  for (pid_t child : children) {
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) <= 1);
    compiles += WEXITSTATUS(status);
  }
  CHECK(compiles == 1);
  CHECK(b.is_cached());
}

TEST_CASE("load: an ahead-of-time build is used when present and compatible") {
  const auto aot = ops_test::temp_dir("aot");
  auto b = Ops::create_op_builder("tensor_ops");
  // Build the AOT library with the builder's own command, into the AOT directory.
  auto argv = b.build_command().argv;
  argv.back() = (aot / "tensor_ops.so").string();
  const auto r = accel::detail::run_program(argv);
  REQUIRE_MESSAGE(r.ok(), r.describe() << "\n" << r.output);
  b.set_aot_dir(aot);
  {
    const auto op = b.load();
    CHECK(op.source() == LoadSource::aot);
    CHECK(op.path() == aot / "tensor_ops.so");
    CHECK(b.is_compatible().str().find("AOT build") != std::string::npos);
  }
  // A library that is not an accel op is ignored (and the JIT takes over).
  const auto bogus = ops_test::temp_dir("aot-bogus");
  ops_test::write_text(bogus / "tensor_ops.so", "not an ELF file");
  b.set_aot_dir(bogus);
  CHECK(b.load().source() != LoadSource::aot);
}

TEST_CASE("op_table: ds_report's rows") {
  (void)ops_test::tensor_ops();
  const auto rows = Ops::op_table();
  REQUIRE(rows.size() == 4);
  for (const auto& r : rows) CHECK(r.compatible.ok);
  CHECK(rows[2].name == "tensor_ops");
  CHECK(rows[2].cached);  // loaded above
  CHECK(rows[3].name == "nn_ops");
  CHECK(rows[3].class_name == "NNOpsBuilder");
  const std::string text = accel::ops::format_op_table(rows);
  CHECK(text.find("fused_adam") != std::string::npos);
  CHECK(text.find("[OKAY]") != std::string::npos);
  MESSAGE("\n" << text);
}
