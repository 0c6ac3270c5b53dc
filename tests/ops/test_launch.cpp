// A user's own op through the public path (ops/launch.hpp): b.create_op_builder(spec) picks the
// backend's toolchain, ops::Kernel resolves an entry point once, b.launch_kernel(s, kernel, shape,
// args) runs it in stream order — on the CPU backend (created and default streams, graph capture and
// replay, AnyBackend), and on CUDA (NVRTC compile here; launches where a GPU exists, else skipped).
#include "ops_test_support.hpp"

#include <accel/accel.hpp>
#include <accel/ops.hpp>

#include "kernels/launch_test.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace {

const std::filesystem::path test_kernel_dir = std::filesystem::path(ACCEL_OPS_TEST_KERNEL_DIR);

accel::ops::OpSpec axpy_spec(accel::ops::OpKind kind) {
  accel::ops::OpSpec s;
  s.name = "launch_test";
  s.class_name = "LaunchTestBuilder";
  s.kind = kind;
  s.sources = {kind == accel::ops::OpKind::host ? "launch_test.cpp" : "launch_test.cu"};
  s.headers = {"launch_test.h"};
  s.entry_points = {"launch_test_axpy_kernel"};
  return s;
}

template <class B>
accel::ops::Kernel load_axpy(B b) {
  (void)ops_test::cache_dir();
  auto builder = b.create_op_builder(axpy_spec(accel::ops::OpKind::host));
  builder.set_kernel_dir(test_kernel_dir);
  return accel::ops::Kernel(builder.load(), "launch_test_axpy_kernel");
}

}  // namespace

TEST_CASE("launch_kernel: a user's host op runs in stream order with a copy of its arguments") {
  const accel::CpuBackend b;
  const accel::ops::Kernel k = load_axpy(b);
  CHECK(k.valid());
  CHECK(k.kind() == accel::ops::OpKind::host);
  CHECK(k.name() == "launch_test_axpy_kernel");
  CHECK(k.device() == -1);
  CHECK(k.describe() == "op 'launch_test' kernel 'launch_test_axpy_kernel'");

  constexpr long long n = 1000;
  accel::cpu::Stream stream;
  accel::Buffer<float, accel::CpuBackend> x(n, stream), y(n + 1, stream);
  for (long long i = 0; i < n; ++i) {
    x.data()[i] = static_cast<float>(i);
    y.data()[i] = 1.0f;
  }
  for (const int threads : {1, 2}) {
    CAPTURE(threads);
    launch_test_axpy args{y.data(), x.data(), n, 2.0f, 0};
    b.launch_kernel(stream, k, accel::ops::LaunchShape::linear(n, 256, threads), args);
    args.a = 100.0f;  // the launch copied the arguments: this does not reach the kernel
    stream.synchronize();
    CHECK(y.data()[n] == static_cast<float>(threads));  // the team size the kernel saw
  }
  for (long long i = 0; i < n; ++i) REQUIRE(y.data()[i] == 1.0f + 4.0f * static_cast<float>(i));

  // The default stream runs the task inline: the result is there when the call returns.
  launch_test_axpy args{y.data(), x.data(), n, -4.0f, 0};
  b.launch_kernel(b.default_stream(), k, accel::ops::LaunchShape{}, &args, sizeof args);
  CHECK(y.data()[7] == 1.0f);
  CHECK(y.data()[n - 1] == 1.0f);
}

TEST_CASE("launch_kernel: a host kernel's refusal is the stream's task failure, naming the kernel") {
  const accel::CpuBackend b;
  const accel::ops::Kernel k = load_axpy(b);
  accel::cpu::Stream stream;
  std::vector<float> y(2, 0.0f), x(1, 1.0f);
  b.launch_kernel(stream, k, accel::ops::LaunchShape{}, launch_test_axpy{y.data(), x.data(), 1, 1.0f, 7});
  try {
    stream.synchronize();
    FAIL("no error");
  } catch (const accel::TaskError& e) {
    const std::string what = e.what();
    CHECK(what.find("op 'launch_test' kernel 'launch_test_axpy_kernel' refused its arguments (code 7)") !=
          std::string::npos);
  }
  CHECK(y[0] == 0.0f);
  // The stream stays usable.
  b.launch_kernel(stream, k, accel::ops::LaunchShape{}, launch_test_axpy{y.data(), x.data(), 1, 1.0f, 0});
  stream.synchronize();
  CHECK(y[0] == 1.0f);
}

TEST_CASE("launch_kernel: wrong kinds, empty kernels and missing entry points are clear errors") {
  const accel::CpuBackend b;
  CHECK_THROWS_WITH_AS((void)b.create_op_builder(axpy_spec(accel::ops::OpKind::cuda)),
                       "cpu: op 'launch_test' is a cuda op, which the cpu backend does not build",
                       accel::InvalidArgumentError);
  float y[2] = {0, 0};
  CHECK_THROWS_WITH_AS(b.launch_kernel(b.default_stream(), accel::ops::Kernel{}, accel::ops::LaunchShape{},
                                       launch_test_axpy{y, y, 1, 1.0f, 0}),
                       "cpu: launch_kernel of an empty ops::Kernel", accel::InvalidArgumentError);
  const accel::ops::Kernel k = load_axpy(b);
  CHECK_THROWS_WITH_AS(b.launch_kernel(b.default_stream(), k, accel::ops::LaunchShape{}, nullptr, 8),
                       doctest::Contains("args is null but bytes is 8"), accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(accel::ops::Kernel(k.op(), "no_such_kernel"), doctest::Contains("has no entry point 'no_such_kernel'"),
                       accel::InvalidArgumentError);
  CHECK(y[0] == 0.0f);
}

TEST_CASE("launch_kernel: captured into a CPU graph, each replay runs the kernel again") {
  const accel::CpuBackend b;
  const accel::ops::Kernel k = load_axpy(b);
  accel::cpu::Stream stream;
  std::vector<float> x(64, 1.0f), y(65, 0.0f);
  auto g = b.create_graph();
  {
    auto capture = b.capture_to_graph(g, stream);
    b.launch_kernel(stream, k, accel::ops::LaunchShape::linear(64, 64, 1),
                    launch_test_axpy{y.data(), x.data(), 64, 3.0f, 0});
    capture.end();
  }
  stream.synchronize();
  CHECK(y[5] == 0.0f);  // recorded, not run
  for (int r = 1; r <= 3; ++r) {
    b.replay_graph(g, stream);
    stream.synchronize();
    CHECK(y[5] == 3.0f * static_cast<float>(r));
  }
}

TEST_CASE("launch_kernel through AnyBackend: the op follows the active backend, the launch the stream's") {
  const accel::AnyBackend any{accel::CpuBackend{}};
  auto builder = any.create_op_builder(axpy_spec(accel::ops::OpKind::host));
  CHECK(builder.backend() == "cpu");
  builder.set_kernel_dir(test_kernel_dir);
  const accel::ops::Kernel k(builder.load(), "launch_test_axpy_kernel");
  auto stream = any.create_stream();
  std::vector<float> x(10, 2.0f), y(11, 1.0f);
  any.launch_kernel(stream, k, accel::ops::LaunchShape::linear(10, 32, 1), launch_test_axpy{y.data(), x.data(), 10, 0.5f, 0});
  stream.synchronize();
  CHECK(y[9] == 2.0f);
}

#if defined(ACCEL_HAS_CUDA)
TEST_CASE("launch_kernel on CUDA: NVRTC builds the user's op; on a GPU it computes the host kernel's values") {
  if (!accel::ops::nvrtc().loaded) {
    MESSAGE("skipped: " << accel::ops::nvrtc().error);
    return;
  }
  const accel::CudaBackend b;
  (void)ops_test::cache_dir();
  auto builder = b.create_op_builder(axpy_spec(accel::ops::OpKind::cuda));
  builder.set_kernel_dir(test_kernel_dir);
  CHECK(builder.toolchain().name == "nvrtc");
  CHECK(b.create_op_builder(axpy_spec(accel::ops::OpKind::host)).toolchain().name == "host");
  builder.set_arch(90);
  const auto built = accel::ops::nvrtc_build(builder, 90);
  CHECK(built.payload.find("launch_test_axpy_kernel") != std::string::npos);
  if (b.device_count() == 0) {
    MESSAGE("skipped the CUDA launch: no CUDA device");
    CHECK_THROWS_AS((void)builder.load(), accel::BackendUnavailableError);
    return;
  }
  builder.set_arch(0);
  const accel::ops::Kernel k(builder.load(), "launch_test_axpy_kernel");
  CHECK(k.kind() == accel::ops::OpKind::cuda);
  // A host kernel is refused by the CUDA backend.
  const accel::ops::Kernel host = load_axpy(accel::CpuBackend{});
  accel::cuda::Stream stream;
  CHECK_THROWS_AS(b.launch_kernel(stream, host, accel::ops::LaunchShape{}, launch_test_axpy{}), accel::InvalidArgumentError);
  constexpr long long n = 1000;
  std::vector<float> hx(n), hy(n + 1, 1.0f);
  for (long long i = 0; i < n; ++i) hx[i] = static_cast<float>(i);
  accel::Buffer<float, accel::CudaBackend> x(n, stream), y(n + 1, stream);
  b.copy_async(stream, x.data(), hx.data(), n * 4);
  b.copy_async(stream, y.data(), hy.data(), (n + 1) * 4);
  b.launch_kernel(stream, k, accel::ops::LaunchShape::linear(n, 128), launch_test_axpy{y.data(), x.data(), n, 2.0f, 0});
  b.copy_async(stream, hy.data(), y.data(), (n + 1) * 4);
  stream.synchronize();
  for (long long i = 0; i < n; ++i) REQUIRE(hy[i] == 1.0f + 2.0f * static_cast<float>(i));
  CHECK(hy[n] == 8.0f * 128.0f);  // the grid the kernel saw: ceil(1000 / 128) blocks of 128
}
#endif

TEST_CASE("LaunchShape: linear covers n items with whole blocks (at least one), blocks sets what it is given") {
  static_assert(accel::ops::LaunchShape::linear(1000, 256).grid[0] == 4);  // 3 full blocks and a partial one
  static_assert(accel::ops::LaunchShape::linear(1024, 256).grid[0] == 4);
  static_assert(accel::ops::LaunchShape::linear(1025, 256).grid[0] == 5);
  static_assert(accel::ops::LaunchShape::linear(0, 256).grid[0] == 1);  // an empty launch is still one block
  static_assert(accel::ops::LaunchShape::linear(-5, 256).grid[0] == 1);
  constexpr auto l = accel::ops::LaunchShape::linear(1 << 20, 128, 3);
  CHECK(l.grid[0] == 8192);
  CHECK((l.grid[1] == 1 && l.grid[2] == 1));
  CHECK((l.block[0] == 128 && l.block[1] == 1 && l.block[2] == 1));
  CHECK(l.shared_bytes == 0);
  CHECK(l.threads == 3);
  constexpr auto b = accel::ops::LaunchShape::blocks(12, 1024, 48 * 1024, 2);
  CHECK(b.grid[0] == 12);
  CHECK(b.block[0] == 1024);
  CHECK(b.shared_bytes == 48 * 1024);
  CHECK(b.threads == 2);
  CHECK((b.grid[1] == 1 && b.block[1] == 1));
  CHECK_THROWS_WITH_AS((void)accel::ops::LaunchShape::linear(100, 0), "LaunchShape::linear: block must be > 0",
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS((void)accel::ops::LaunchShape::linear(std::int64_t{1} << 40, 256),
                       doctest::Contains("need 4294967296 blocks, more than a grid holds"), accel::InvalidArgumentError);
  CHECK(accel::ops::LaunchShape::linear(std::int64_t{2147483647} * 256, 256).grid[0] == 2147483647u);
}
