// CUDA ops without a GPU: NVRTC compiles every CUDA kernel to a cubin for sm_80 and sm_90 (through the
// cache), reports compile errors with its log, and the CUDA backend's builders say why they cannot
// load here. Skipped, saying so, where NVRTC is missing.
#include "ops_test_support.hpp"

#include <accel/ops/nvrtc.hpp>
#include <accel/ops/registry.hpp>

#if defined(ACCEL_HAS_CUDA)
#include <accel/cuda/ops.hpp>
#endif

#include <doctest/doctest.h>

namespace {

using accel::ops::OpBuilder;

bool have_nvrtc() {
  if (!accel::ops::nvrtc().loaded) {
    MESSAGE("skipped: " << accel::ops::nvrtc().error);
    return false;
  }
  return true;
}

OpBuilder cuda_builder(const accel::ops::OpSpec& spec) {
  OpBuilder b(spec, &accel::ops::nvrtc_toolchain, "cuda");
  b.set_cache_dir(ops_test::cache_dir());
  return b;
}

}  // namespace

TEST_CASE("NVRTC compiles every CUDA kernel to a cubin for sm_80 and sm_90, once") {
  if (!have_nvrtc()) return;
  MESSAGE(accel::ops::nvrtc().identity() << " from " << accel::ops::nvrtc().library);
  for (const auto& spec : {accel::ops::specs::cuda_fused_adam(), accel::ops::specs::cuda_tensor_ops()}) {
    for (const int sm : {80, 90}) {
      CAPTURE(spec.name);
      CAPTURE(sm);
      auto b = cuda_builder(spec);
      b.set_arch(sm);
      CHECK(b.is_compatible().ok);
      const auto first = accel::ops::nvrtc_build(b, sm);
      REQUIRE(first.payload.size() > 4);
      CHECK(first.payload.compare(0, 4, "\x7f" "ELF") == 0);
      for (const auto& entry : spec.entry_points) {  // every kernel is in the cubin
        CHECK(first.payload.find(entry) != std::string::npos);
      }
      const auto again = accel::ops::nvrtc_build(b, sm);
      CHECK_FALSE(again.compiled);
      CHECK(again.payload == first.payload);
      const auto cmd = b.build_command();
      CHECK(cmd.arch == "sm_" + std::to_string(sm));
      CHECK(cmd.str().find("--fmad=false") != std::string::npos);
      CHECK(b.is_cached());
    }
  }
  // Keys differ by architecture.
  auto b = cuda_builder(accel::ops::specs::cuda_tensor_ops());
  CHECK(accel::ops::nvrtc_build_command(b, 80).key != accel::ops::nvrtc_build_command(b, 90).key);
}

TEST_CASE("NVRTC: PTX for a virtual architecture, and compile errors with the log and options") {
  if (!have_nvrtc()) return;
  const auto out = accel::ops::nvrtc_compile("extern \"C\" __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }",
                                             "k.cu", {"--gpu-architecture=compute_90"});
  CHECK(out.ptx.find(".entry k") != std::string::npos);
  CHECK(out.cubin.empty());
  try {
    (void)accel::ops::nvrtc_compile("__global__ void k( { }", "broken.cu", {"--gpu-architecture=sm_90"});
    FAIL("a broken kernel compiled");
  } catch (const accel::CompileError& e) {
    CHECK(e.log().find("broken.cu") != std::string::npos);
    CHECK(e.command().find("sm_90") != std::string::npos);
  }
  // Through a builder: the cache stays clean.
  const auto dir = ops_test::temp_dir("kernels");
  std::filesystem::copy(accel::ops::default_kernel_dir(), dir, std::filesystem::copy_options::recursive);
  ops_test::write_text(dir / "cuda" / "tensor_ops.cu", "#include \"cuda_common.cuh\"\n__global__ void k( {}\n");
  auto b = cuda_builder(accel::ops::specs::cuda_tensor_ops());
  b.set_kernel_dir(dir).set_cache_dir(ops_test::temp_dir("cache-nvrtc-err")).set_arch(90);
  CHECK_THROWS_AS((void)accel::ops::nvrtc_build(b, 90), accel::CompileError);
  for (const auto& f : std::filesystem::recursive_directory_iterator(b.cache_dir())) {
    if (f.is_regular_file()) CHECK(f.path().extension() == ".lock");
  }
  // An architecture NVRTC does not know is a reason, not a crash.
  b.set_arch(12);
  CHECK_FALSE(b.is_compatible().ok);
}

#if defined(ACCEL_HAS_CUDA)
static_assert(accel::OpApi<accel::cuda::Ops>);

TEST_CASE("cuda op builders: the table, and what happens without a device") {
  using accel::cuda::Ops;
  CHECK(Ops::op_names() == std::vector<std::string>{"fused_adam", "cpu_adam", "tensor_ops"});
  CHECK(Ops::create_op_builder("fused_adam").kind() == accel::ops::OpKind::cuda);
  CHECK(Ops::create_op_builder("CPUAdamBuilder").kind() == accel::ops::OpKind::host);
  CHECK_THROWS_AS((void)Ops::create_op_builder("transformer"), accel::InvalidArgumentError);
  const auto cmd = Ops::build_extension("fused_adam");
  CHECK(cmd.str().find("fused_adam.cu") != std::string::npos);
  if (accel::cuda::Devices::device_count() == 0) {
    MESSAGE("no CUDA device: checking the no-device answers (kernel launches are not tested here)");
    CHECK(cmd.arch == "sm_80");
    auto b = Ops::create_op_builder("fused_adam");
    const auto c = b.is_compatible();
    CHECK_FALSE(c.ok);
    CHECK(c.str().find("no CUDA device") != std::string::npos);
    CHECK_THROWS_AS((void)b.load(), accel::BackendUnavailableError);
    b.set_arch(90);  // compiling for an explicit architecture still works
    CHECK(accel::ops::nvrtc_build(b.set_cache_dir(ops_test::cache_dir()), 90).payload.size() > 0);
    const auto rows = Ops::op_table();
    CHECK_FALSE(rows[0].compatible.ok);
    CHECK(rows[1].compatible.ok);  // cpu_adam is a host op
    MESSAGE("\n" << accel::ops::format_op_table(rows));
  } else {
    MESSAGE("CUDA device present: kernel launches are covered by benchmarks/ops/bench_adam_gpu");
  }
}
#endif
