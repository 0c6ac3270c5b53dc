// accel/blas in a translation unit compiled by nvcc: the headers compile there, and a GEMM runs on the
// CPU and, where there is a GPU, on CUDA (the same numbers, bit for bit).
#include "blas_test_support.hpp"

using namespace blas_test;

namespace {

template <class B>
std::vector<float> small_product(const B& be) {
  typename B::Stream stream;
  const typename B::StreamRef s = stream;
  std::vector<float> a(6), b(6), c(4, std::numeric_limits<float>::quiet_NaN());
  for (int i = 0; i < 6; ++i) {
    a[std::size_t(i)] = float(i + 1);  // 2 x 3
    b[std::size_t(i)] = float(6 - i);  // 3 x 2
  }
  std::vector<float> sa, sb, sc;
  auto da = upload<float>(be, s, a, sa);
  auto db = upload<float>(be, s, b, sb);
  auto dc = upload<float>(be, s, c, sc);
  accel::blas::gemm(be, s, Trans::no, Trans::no, 2, 2, 3, 1.0f, da, 0, 3, db, 0, 2, 0.0f, dc, 0, 2);
  return download(be, s, dc);
}

}  // namespace

TEST_CASE("accel/blas under nvcc: a GEMM on the CPU, and on CUDA where there is a GPU") {
  // [1 2 3; 4 5 6] [6 5; 4 3; 2 1] = [20 14; 56 41]
  const std::vector<float> want{20, 14, 56, 41};
  CHECK(small_product(accel::CpuBackend{}) == want);
#if defined(ACCEL_HAS_CUDA)
  ACCEL_SKIP_UNLESS_AVAILABLE(accel::CudaBackend);
  CHECK(small_product(accel::CudaBackend{}) == want);
#endif
}
