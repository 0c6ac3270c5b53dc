// accel/blas on the CPU: the BLAS's threads, buffers of another device, element types the CPU BLAS
// does not multiply.
#include "blas_test_support.hpp"

#include <atomic>

using namespace blas_test;

TEST_CASE("blas threads: set_num_threads holds in the stream thread that runs the GEMM") {
  const int saved = accel::blas::num_threads();
  CHECK(saved >= 1);
  BLAS_CHECK_INVALID(accel::blas::set_num_threads(0), "n = 0");
  BLAS_CHECK_INVALID(accel::blas::set_num_threads(-3), "n = -3");
  CHECK(accel::blas::num_threads() == saved);  // unchanged by the refused calls

  const accel::CpuBackend be;
  accel::cpu::Stream stream;
  const accel::cpu::StreamRef s = stream;
  std::vector<float> a(4, 1.0f), b(4, 2.0f), c(4, 0.0f);
  for (int threads : {2, 1, 3}) {
    accel::blas::set_num_threads(threads);
    CHECK(accel::blas::num_threads() == threads);
    accel::blas::gemm(be, s, Trans::no, Trans::no, 2, 2, 2, 1.0f, a.data(), 2, b.data(), 2, 0.0f, c.data(), 2);
    // OpenMP's count is per thread: the worker that ran the GEMM now has it.
    std::atomic<int> seen{0};
    s.enqueue([&seen] { seen = accel::blas::detail::openmp().get_max_threads(); });
    s.synchronize();
    CHECK(seen == threads);
    CHECK(c == std::vector<float>{4, 4, 4, 4});
  }
  accel::blas::set_num_threads(saved);
}

TEST_CASE("blas: the CPU runs on an OpenMP runtime found in the process") {
  const auto& omp = accel::blas::detail::openmp();
  REQUIRE_MESSAGE(omp.loaded(), omp.error);
  CHECK(omp.get_max_threads() >= 1);
  CHECK((omp.parallel != nullptr));  // GOMP_parallel: batches of small matrices are spread over a team
  CHECK(accel::blas::detail::cpu_blas_name().rfind("oneDNN ", 0) == 0);
}

TEST_CASE("gemm: a buffer of another device than the stream's is refused") {
  const accel::CpuBackend be;
  if (be.device_count() < 2) {
    MESSAGE("SKIPPED: needs 2 CPU devices (ACCEL_CPU_DEVICE_COUNT=2; the test_blas_2dev run)");
    return;
  }
  accel::cpu::Stream s0(0), s1(1);
  accel::Buffer<float, accel::CpuBackend> a(6, s0), b(6, s0), c(4, s0), c1(4, s1);
  BLAS_CHECK_INVALID(accel::blas::gemm(be, s0, Trans::no, Trans::no, 2, 2, 3, 1.0f, a, 0, 3, b, 0, 2, 0.0f, c1, 0, 2),
                     "c is memory of device 1, but the stream is on device 0");
  BLAS_CHECK_INVALID(accel::blas::gemm(be, s1, Trans::no, Trans::no, 2, 2, 3, 1.0f, a, 0, 3, b, 0, 2, 0.0f, c1, 0, 2),
                     "a is memory of device 0, but the stream is on device 1");
  // The same call on the buffers' own device runs.
  std::fill(a.span().begin(), a.span().end(), 1.0f);
  std::fill(b.span().begin(), b.span().end(), 0.5f);
  accel::blas::gemm(be, s0, Trans::no, Trans::no, 2, 2, 3, 1.0f, a, 0, 3, b, 0, 2, 0.0f, c, 0, 2);
  s0.synchronize();
  CHECK(std::vector<float>(c.span().begin(), c.span().end()) == std::vector<float>{1.5f, 1.5f, 1.5f, 1.5f});
}

TEST_CASE("gemm: half through AnyBackend on a CPU stream is NotSupportedError, before anything runs") {
  if constexpr (accel::blas::detail::GemmImpl<accel::AnyBackend>::supports<accel::half>) {
    const accel::AnyBackend be{accel::CpuBackend{}};
    const accel::AnyBackend::StreamRef s = accel::CpuBackend{}.current_stream();
    std::vector<accel::half> a(4), b(4), c(4);
    try {
      accel::blas::gemm(be, s, Trans::no, Trans::no, 2, 2, 2, 1.0f, a.data(), 2, b.data(), 2, 0.0f, c.data(), 2);
      FAIL("no exception");
    } catch (const accel::NotSupportedError& e) {
      CHECK_MESSAGE(mentions(e, "half GEMM is not available on the CPU"), e.what());
      CHECK_MESSAGE(mentions(e, "accel::blas::gemm (cpu:0)"), e.what());
    }
  } else {
    MESSAGE("SKIPPED: no backend of this build multiplies half (a compile-time error here)");
  }
  // On CpuBackend itself half does not compile: GemmImpl says so.
  CHECK_FALSE(accel::blas::detail::GemmImpl<accel::CpuBackend>::supports<accel::half>);
  CHECK(accel::blas::detail::GemmImpl<accel::CpuBackend>::supports<accel::bfloat16>);
}
