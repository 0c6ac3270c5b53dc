// accel/blas on CUDA (compiled by the host compiler: cuBLAS is loaded with dlopen, no nvcc needed):
// the cuBLAS table, 16-bit element types, one handle per stream with its workspace. Without a GPU the
// GPU cases skip, saying why; the table is checked everywhere the toolkit is.
#include "blas_test_support.hpp"

#include <list>

using namespace blas_test;

#if defined(ACCEL_HAS_CUDA)

namespace {

template <class T>
void check_16bit_gemm() {
  const accel::CudaBackend be;
  accel::cuda::Stream stream;
  const accel::cuda::StreamRef s = stream;
  for (Trans ta : {Trans::no, Trans::yes}) {
    for (Trans tb : {Trans::no, Trans::yes}) {
      // Small integers: exact in T; the float accumulation is exact, so the one rounding to T at the end
      // gives T(reference) exactly.
      const i64 m = 19, n = 12, k = 65, pad = 3;
      const i64 lda = (ta == Trans::no ? k : m) + pad, ldb = (tb == Trans::no ? n : k) + pad, ldc = n + pad;
      std::vector<float> a(std::size_t((ta == Trans::no ? m : k) * lda)), b(std::size_t((tb == Trans::no ? k : n) * ldb));
      std::vector<float> c(std::size_t(m * ldc));
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = small_int(i64(i), 5);
      for (std::size_t i = 0; i < b.size(); ++i) b[i] = small_int(i64(i), 6);
      for (std::size_t i = 0; i < c.size(); ++i) c[i] = small_int(i64(i), 7);
      std::vector<T> sa, sb, sc;
      auto da = upload<T>(be, s, a, sa);
      auto db = upload<T>(be, s, b, sb);
      auto dc = upload<T>(be, s, c, sc);
      accel::blas::gemm(be, s, ta, tb, m, n, k, 0.75f, da, 0, lda, db, 0, ldb, -0.5f, dc, 0, ldc);
      std::vector<float> want = c;
      reference_gemm(ta, tb, m, n, k, 0.75f, a, lda, 0, b, ldb, 0, -0.5f, want, ldc, 0, 1);
      for (float& w : want) w = from<T>(to<T>(w));
      const std::vector<float> got = download(be, s, dc);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < got.size(); ++i) wrong += bits(got[i]) != bits(want[i]) ? 1 : 0;
      CHECK_MESSAGE(wrong == 0, accel::blas::detail::type_name<T>() << " ta=" << int(ta) << " tb=" << int(tb) << ": "
                                                                   << wrong << " elements differ");
    }
  }
}

}  // namespace

TEST_CASE("cuBLAS: the library and every entry point accel uses load (no GPU needed)") {
  const auto& api = accel::blas::detail::cublas();
  REQUIRE_MESSAGE(api.loaded(), api.error);
  CHECK(api.library.name().find("libcublas.so") != std::string::npos);
  CHECK(bool(api.create));
  CHECK(bool(api.gemm_ex));
  CHECK(bool(api.gemm_strided_batched_ex));
  CHECK(bool(api.set_workspace));
  CHECK(api.describe(CUBLAS_STATUS_INVALID_VALUE).rfind("CUBLAS_STATUS_INVALID_VALUE: ", 0) == 0);
}

TEST_CASE("cuBLASLt: the library and every entry point the GELU epilogues use load (no GPU needed)") {
  const auto& api = accel::blas::detail::cublaslt();
  REQUIRE_MESSAGE(api.loaded(), api.error);
  CHECK(api.library.name().find("libcublasLt.so") != std::string::npos);
  CHECK(bool(api.create));
  CHECK(bool(api.heuristic));
  CHECK(bool(api.matmul));
  CHECK(bool(api.desc_set));
  CHECK(bool(api.preference_set));
  CHECK(api.describe(CUBLAS_STATUS_NOT_SUPPORTED).rfind("CUBLAS_STATUS_NOT_SUPPORTED", 0) == 0);
  // What the heuristic may assume of a pointer: its largest power-of-two alignment up to 256 bytes.
  CHECK(accel::blas::detail::pointer_alignment(reinterpret_cast<const void*>(std::uintptr_t{0x1000})) == 256);
  CHECK(accel::blas::detail::pointer_alignment(reinterpret_cast<const void*>(std::uintptr_t{0x1010})) == 16);
  CHECK(accel::blas::detail::pointer_alignment(reinterpret_cast<const void*>(std::uintptr_t{0x1002})) == 2);
}

TEST_CASE("cuda gemm_gelu: one cuBLASLt plan per distinct problem, reused by later calls") {
  ACCEL_SKIP_UNLESS_AVAILABLE(accel::CudaBackend);
  const accel::CudaBackend be;
  accel::CudaBackend::Stream stream;
  const accel::CudaBackend::StreamRef s = stream;
  std::vector<float> sa, sb;
  auto a = blas_test::upload<float>(be, s, std::vector<float>(64 * 32, 0.5f), sa);
  auto b = blas_test::upload<float>(be, s, std::vector<float>(32 * 48, 0.25f), sb);
  accel::Buffer<float, accel::CudaBackend> c(64 * 48, s), aux(64 * 48, s);
  const std::size_t before = accel::blas::detail::lt_plans().size();
  using accel::blas::Trans;
  for (int i = 0; i < 3; ++i) {
    accel::blas::gemm_gelu(be, s, Trans::no, Trans::no, 64, 48, 32, 1.0f, a.data(), 32, b.data(), 48, 0.0f, c.data(),
                           48, aux.data(), 48);
  }
  CHECK(accel::blas::detail::lt_plans().size() == before + 1);
  accel::blas::gemm_dgelu(be, s, Trans::no, Trans::no, 64, 48, 32, 1.0f, a.data(), 32, b.data(), 48, 0.0f, c.data(),
                          48, static_cast<const float*>(aux.data()), 48);
  CHECK(accel::blas::detail::lt_plans().size() == before + 2);
  // P = 32 * 0.125 = 4 everywhere; C = P * GELU'(P) after the backward.
  const std::vector<float> got = blas_test::download(be, s, c);
  const double x = 4.0, t = std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x));
  const double want = x * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x));
  for (float v : got) REQUIRE(std::abs(v - want) <= 1e-5 * std::abs(want));
}

TEST_CASE("cuda gemm: half and bfloat16 accumulate in float, rounded once") {
  ACCEL_SKIP_UNLESS_AVAILABLE(accel::CudaBackend);
  check_16bit_gemm<accel::half>();
  check_16bit_gemm<accel::bfloat16>();
}

TEST_CASE("cuda gemm: one cuBLAS handle per stream, its workspace from the caching allocator") {
  ACCEL_SKIP_UNLESS_AVAILABLE(accel::CudaBackend);
  const accel::CudaBackend be;
  auto& handles = accel::blas::detail::cublas_handles();
  // The driver may hand a new stream the address of one an earlier test destroyed, whose handle the
  // cache then reuses (its key is the native stream): make streams, all kept alive, until two have
  // addresses no handle was made for.
  std::list<accel::cuda::Stream> streams;
  const auto fresh_stream = [&]() -> accel::cuda::Stream& {
    for (int tries = 0; tries < 1000; ++tries) {
      if (!handles.contains(streams.emplace_back())) return streams.back();
    }
    FAIL("1000 new streams, all at addresses that already have a cuBLAS handle");
    return streams.back();
  };
  accel::cuda::Stream& first = fresh_stream();
  accel::cuda::Stream& second = fresh_stream();
  const int dev = first.device_index();
  accel::Buffer<float, accel::CudaBackend> a(64, first), b(64, first), c(64, first);
  be.synchronize();
  const std::size_t handles0 = handles.size();
  const std::size_t allocated0 = be.memory_allocated(dev);
  const std::size_t workspace = accel::blas::detail::cublas_workspace_bytes(dev);
  accel::blas::gemm(be, first, Trans::no, Trans::no, 8, 8, 8, 1.0f, a, 0, 8, b, 0, 8, 0.0f, c, 0, 8);
  CHECK(handles.contains(first));
  CHECK(handles.size() == handles0 + 1);
  CHECK(be.memory_allocated(dev) == allocated0 + workspace);
  accel::blas::gemm(be, first, Trans::no, Trans::yes, 8, 8, 8, 1.0f, a, 0, 8, b, 0, 8, 0.0f, c, 0, 8);
  CHECK(handles.size() == handles0 + 1);  // cached
  c.record_stream(second);
  accel::blas::gemm(be, second, Trans::no, Trans::no, 8, 8, 8, 1.0f, a, 0, 8, b, 0, 8, 0.0f, c, 0, 8);
  CHECK(handles.contains(second));
  CHECK(handles.size() == handles0 + 2);  // a handle of its own
  CHECK(be.memory_allocated(dev) == allocated0 + 2 * workspace);
  be.synchronize();
}

TEST_CASE("cuda gemm: a buffer of another GPU than the stream's is refused") {
  ACCEL_SKIP_UNLESS_AVAILABLE(accel::CudaBackend);
  const accel::CudaBackend be;
  if (be.device_count() < 2) {
    MESSAGE("SKIPPED: needs 2 GPUs");
    return;
  }
  accel::cuda::Stream s0(0, 0), s1(1, 0);
  accel::Buffer<float, accel::CudaBackend> a(4, s0), b(4, s0), c(4, s1);
  BLAS_CHECK_INVALID(accel::blas::gemm(be, s0, Trans::no, Trans::no, 2, 2, 2, 1.0f, a, 0, 2, b, 0, 2, 0.0f, c, 0, 2),
                     "c is memory of device 1, but the stream is on device 0");
}

TEST_CASE("cuda gemm: sizes past cuBLAS's 32-bit ints are refused at the call, before any memory is touched") {
  ACCEL_SKIP_UNLESS_AVAILABLE(accel::CudaBackend);
  const accel::CudaBackend be;
  accel::cuda::Stream stream;
  const accel::cuda::StreamRef s = stream;
  // Never dereferenced (the check comes first): aligned, non-null, 1 TiB apart so that the overlap check
  // sees separate operands.
  const auto* a = reinterpret_cast<const float*>(std::uintptr_t{1} << 40);
  const auto* b = reinterpret_cast<const float*>(std::uintptr_t{2} << 40);
  auto* c = reinterpret_cast<float*>(std::uintptr_t{3} << 40);
  const i64 big = i64{1} << 31;
  BLAS_CHECK_INVALID(accel::blas::gemm(be, s, Trans::no, Trans::no, big, 1, 1, 1.0f, a, 1, b, 1, 0.0f, c, 1),
                     "m = 2147483648 exceeds cuBLAS's 32-bit limit (2^31 - 1)");
  BLAS_CHECK_INVALID(accel::blas::gemm(be, s, Trans::no, Trans::no, 1, 1, 1, 1.0f, a, big, b, 1, 0.0f, c, 1),
                     "lda = 2147483648 exceeds cuBLAS's 32-bit limit");
  BLAS_CHECK_INVALID(accel::blas::gemm_strided_batched(be, s, Trans::no, Trans::no, 1, 1, 1, 1.0f, a, 1, 1, b, 1, 1,
                                                       0.0f, c, 1, 1, big),
                     "batch_count = 2147483648 exceeds cuBLAS's 32-bit limit");
  stream.synchronize();  // nothing was enqueued that could fault
}

#else

TEST_CASE("accel/blas on CUDA: not built") { MESSAGE("SKIPPED: this build has no CUDA backend"); }

#endif
