// accel/blas: GEMM and strided-batched GEMM on every enabled backend and through AnyBackend, against a
// double-precision reference; the argument checks; the CPU BLAS's threads; cuBLAS's handles (on a GPU).
#include "blas_test_support.hpp"

#include <accel/blas/detail/cpu_openblas.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <thread>
#include <tuple>
#include <vector>

using namespace blas_test;
using accel::blas::Trans;

namespace {

constexpr Trans both[] = {Trans::no, Trans::yes};

/// One GEMM problem on the host: operands with padded rows and a tail, C with sentinels in its padding.
struct Problem {
  Trans ta, tb;
  i64 m, n, k;
  float alpha, beta;
  i64 lda, ldb, ldc;
  i64 stride_a = 0, stride_b = 0, stride_c = 0, batch = 1;
  std::vector<float> a, b, c;

  Problem(Trans ta_, Trans tb_, i64 m_, i64 n_, i64 k_, float alpha_, float beta_, i64 pad, i64 batch_ = 1,
          bool fractions = false)
      : ta(ta_), tb(tb_), m(m_), n(n_), k(k_), alpha(alpha_), beta(beta_), batch(batch_) {
    const i64 a_rows = ta == Trans::no ? m : k, a_cols = ta == Trans::no ? k : m;
    const i64 b_rows = tb == Trans::no ? k : n, b_cols = tb == Trans::no ? n : k;
    lda = std::max<i64>(a_cols, 1) + pad;
    ldb = std::max<i64>(b_cols, 1) + pad;
    ldc = std::max<i64>(n, 1) + pad;
    // Batches are spaced beyond the minimum, so that the gaps show any write out of place.
    stride_a = span(a_rows, a_cols, lda) + 5;
    stride_b = span(b_rows, b_cols, ldb) + 3;
    stride_c = span(m, n, ldc) + 7;
    a.resize(static_cast<std::size_t>(stride_a * batch + 2));
    b.resize(static_cast<std::size_t>(stride_b * batch + 2));
    c.resize(static_cast<std::size_t>(stride_c * batch + 2));
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = fractions ? fraction(i64(i), 1) : small_int(i64(i), 1);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = fractions ? fraction(i64(i), 2) : small_int(i64(i), 2);
    for (std::size_t i = 0; i < c.size(); ++i) c[i] = 1000.0f + float(i % 17);  // padding sentinels
    for (i64 i = 0; i < batch; ++i) {
      for (i64 r = 0; r < m; ++r) {
        for (i64 col = 0; col < n; ++col) {
          // beta == 0: C must not be read, so NaNs there must not reach the result.
          c[std::size_t(i * stride_c + r * ldc + col)] =
              beta == 0.0f ? std::numeric_limits<float>::quiet_NaN() : small_int(r * 31 + col, 3);
        }
      }
    }
  }

  [[nodiscard]] std::vector<float> expected() const {
    std::vector<float> out = c;
    reference_gemm(ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, out, ldc, stride_c, batch);
    return out;
  }
};

/// Runs the problem on backend B (pointer API: gemm for batch 1, else gemm_strided_batched); returns C.
template <class T, class B>
std::vector<float> run(const B& be, typename B::StreamRef s, const Problem& p, bool batched_api) {
  std::vector<T> sa, sb, sc;
  auto a = upload<T>(be, s, p.a, sa);
  auto b = upload<T>(be, s, p.b, sb);
  auto c = upload<T>(be, s, p.c, sc);
  if (batched_api) {
    accel::blas::gemm_strided_batched(be, s, p.ta, p.tb, p.m, p.n, p.k, p.alpha, a.data(), p.lda, p.stride_a,
                                      b.data(), p.ldb, p.stride_b, p.beta, c.data(), p.ldc, p.stride_c, p.batch);
  } else {
    accel::blas::gemm(be, s, p.ta, p.tb, p.m, p.n, p.k, p.alpha, a.data(), p.lda, b.data(), p.ldb, p.beta, c.data(),
                      p.ldc);
  }
  return download(be, s, c);
}

/// Every element of C, padding and gaps included, has the expected bits (the sign of a zero aside: BLAS
/// implementations order alpha * AB + beta * C differently, and -0 + +0 is +0).
void check_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  REQUIRE(got.size() == want.size());
  std::size_t wrong = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (bits(got[i]) != bits(want[i]) && !(got[i] == 0.0f && want[i] == 0.0f)) {
      if (wrong++ == 0) first = i;
    }
  }
  CHECK_MESSAGE(wrong == 0, what << ": " << wrong << " elements differ, the first at " << first << ": got "
                                  << got[first] << ", want " << want[first]);
}

std::string describe(const Problem& p) {
  return "ta=" + std::to_string(int(p.ta)) + " tb=" + std::to_string(int(p.tb)) + " m=" + std::to_string(p.m) +
         " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k) + " lda=" + std::to_string(p.lda) +
         " ldb=" + std::to_string(p.ldb) + " ldc=" + std::to_string(p.ldc) + " alpha=" + std::to_string(p.alpha) +
         " beta=" + std::to_string(p.beta) + " batch=" + std::to_string(p.batch);
}

}  // namespace

using BlasBackends = accel::enabled_backends_t<std::tuple, accel::AnyBackend>;

TEST_CASE_TEMPLATE_DEFINE("gemm: every transpose, odd sizes, padded rows, beta 0/1/other — bit for bit", B, gemm_exact) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B be;
  typename B::Stream stream;
  const typename B::StreamRef s = stream;
  struct Shape {
    i64 m, n, k;
  };
  const Shape shapes[] = {{1, 1, 1}, {7, 5, 3}, {33, 17, 65}, {64, 48, 32}, {3, 70, 1}};
  const float scalars[][2] = {{1.0f, 0.0f}, {0.75f, 1.0f}, {-2.0f, -0.5f}};
  int runs = 0;
  for (Trans ta : both) {
    for (Trans tb : both) {
      for (const Shape& sh : shapes) {
        for (i64 pad : {0, 3}) {
          for (const auto& ab : scalars) {
            const Problem p(ta, tb, sh.m, sh.n, sh.k, ab[0], ab[1], pad);
            check_bits(run<float>(be, s, p, false), p.expected(), describe(p));
            ++runs;
          }
        }
      }
    }
  }
  CHECK(runs == 4 * 5 * 2 * 3);
}

TEST_CASE_TEMPLATE_DEFINE("gemm: full-mantissa values within float rounding of the double reference", B, gemm_rounding) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B be;
  typename B::Stream stream;
  const typename B::StreamRef s = stream;
  for (Trans ta : both) {
    for (Trans tb : both) {
      const Problem p(ta, tb, 96, 80, 200, 0.5f, 0.25f, 1, 1, true);
      const std::vector<float> got = run<float>(be, s, p, false);
      const std::vector<float> want = p.expected();
      // |a|, |b| < 1: each sum of k products is within k * 2^-24 * k of exact after float rounding.
      const double tolerance = double(p.k) * double(p.k) * std::ldexp(1.0, -24) * 0.5;
      double worst = 0;
      for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(double(got[i]) - double(want[i])));
      CHECK_MESSAGE(worst <= tolerance, describe(p) << ": max |error| " << worst);
      CHECK(worst < 1e-3);
      double magnitude = 0;
      for (float v : want) magnitude = std::max(magnitude, double(std::abs(v)));
      CHECK(magnitude > 1.0);  // the products are not trivially small
    }
  }
}

TEST_CASE_TEMPLATE_DEFINE("gemm_strided_batched: spaced batches, a shared operand, gaps untouched", B, gemm_batched) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B be;
  typename B::Stream stream;
  const typename B::StreamRef s = stream;
  for (Trans ta : both) {
    for (Trans tb : both) {
      Problem p(ta, tb, 9, 6, 4, 0.75f, -0.5f, 2, 5);
      check_bits(run<float>(be, s, p, true), p.expected(), describe(p));
      p.stride_b = 0;  // one B for the whole batch (a broadcast weight)
      check_bits(run<float>(be, s, p, true), p.expected(), describe(p) + " stride_b=0");
    }
  }
  // C matrices side by side in each row (heads interleaved in a [T, heads x n] array): stride_c = n,
  // ldc = batch x n (+ padding); legal, and each matrix lands in its own columns.
  Problem side(Trans::no, Trans::yes, 4, 3, 5, 1.0f, 0.5f, 8, 3);  // ldc = 3 + 8 = 11 >= 2 x 3 + 3
  side.stride_c = 3;
  check_bits(run<float>(be, s, side, true), side.expected(), describe(side) + " side by side");
  // ... and without padding: the last matrix's columns end where the row does (ldc = 3 x 3 = 9).
  Problem packed(Trans::no, Trans::yes, 4, 3, 5, 1.0f, 0.5f, 6, 3);
  packed.stride_c = 3;
  check_bits(run<float>(be, s, packed, true), packed.expected(), describe(packed) + " side by side, packed");
  // batch 1 through the batched call equals gemm; batch 0 changes nothing.
  Problem one(Trans::no, Trans::yes, 5, 7, 3, 1.0f, 1.0f, 1, 1);
  check_bits(run<float>(be, s, one, true), one.expected(), "batch 1");
  Problem none(Trans::no, Trans::no, 5, 7, 3, 1.0f, 1.0f, 1, 1);
  none.batch = 0;
  check_bits(run<float>(be, s, none, true), none.c, "batch 0");
}

TEST_CASE_TEMPLATE_DEFINE("gemm_strided_batched: the attention shapes, on 1 and 2 threads", B, gemm_attention) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B be;
  typename B::Stream stream;
  const typename B::StreamRef s = stream;
  const int saved = accel::blas::num_threads();
  for (int threads : {1, 2}) {
    accel::blas::set_num_threads(threads);
    // tiny: batch 12 x 4 heads, scores = Q K^T (64 x 64 x 32), then P V (64 x 32 x 64)
    const Problem qk(Trans::no, Trans::yes, 64, 64, 32, 0.125f, 0.0f, 0, 48);
    check_bits(run<float>(be, s, qk, true), qk.expected(), "QK^T, threads " + std::to_string(threads));
    const Problem pv(Trans::no, Trans::no, 64, 32, 64, 1.0f, 0.0f, 0, 48);
    check_bits(run<float>(be, s, pv, true), pv.expected(), "PV, threads " + std::to_string(threads));
    // backward: dP = dO V^T, dV = P^T dO
    const Problem dv(Trans::yes, Trans::no, 64, 32, 64, 1.0f, 1.0f, 0, 7);
    check_bits(run<float>(be, s, dv, true), dv.expected(), "P^T dO, threads " + std::to_string(threads));
  }
  accel::blas::set_num_threads(saved);
}

TEST_CASE_TEMPLATE_DEFINE("gemm: k == 0 scales C by beta; m or n == 0 touches nothing", B, gemm_degenerate) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B be;
  typename B::Stream stream;
  const typename B::StreamRef s = stream;
  for (float beta : {0.0f, 2.0f, 1.0f}) {
    const Problem p(Trans::no, Trans::yes, 4, 3, 0, 1.0f, beta, 1);
    const std::vector<float> got = run<float>(be, s, p, false);
    check_bits(got, p.expected(), "k=0 beta=" + std::to_string(beta));
    if (beta == 0.0f) CHECK(bits(got[0]) == 0u);  // +0, not the NaN that was there
    // A and B are not read when k == 0: null pointers are accepted.
    std::vector<float> sc;
    auto c = upload<float>(be, s, p.c, sc);
    accel::blas::gemm(be, s, Trans::no, Trans::no, p.m, p.n, 0, 1.0f, static_cast<const float*>(nullptr), 1,
                      static_cast<const float*>(nullptr), p.n, beta, c.data(), p.ldc);
    check_bits(download(be, s, c), p.expected(), "k=0 with null A and B");
  }
  for (auto [m, n] : {std::pair<i64, i64>{0, 5}, {5, 0}}) {
    const Problem p(Trans::no, Trans::no, m, n, 3, 1.0f, 0.0f, 0);
    check_bits(run<float>(be, s, p, false), p.c, "m=" + std::to_string(m) + " n=" + std::to_string(n));
    // Nothing is read or written: even null pointers are accepted.
    accel::blas::gemm(be, s, Trans::no, Trans::no, m, n, 3, 1.0f, static_cast<const float*>(nullptr), 3,
                      static_cast<const float*>(nullptr), std::max<i64>(n, 1), 0.0f, static_cast<float*>(nullptr),
                      std::max<i64>(n, 1));
  }
  s.synchronize();
}

TEST_CASE_TEMPLATE_DEFINE("gemm: Buffer operands at offsets, in stream order", B, gemm_buffers) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B be;
  typename B::Stream stream;
  const typename B::StreamRef s = stream;
  Problem p(Trans::yes, Trans::no, 13, 11, 9, 1.0f, 1.0f, 2, 3);
  const i64 off_a = 10, off_b = 4, off_c = 6;
  // The operands sit inside larger buffers, at offsets.
  std::vector<float> big_a(p.a.size() + off_a, 0.0f), big_b(p.b.size() + off_b), big_c(p.c.size() + off_c, -1.0f);
  std::copy(p.b.begin(), p.b.end(), big_b.begin() + off_b);
  std::copy(p.c.begin(), p.c.end(), big_c.begin() + off_c);
  std::vector<float> sa, sb, sc, late(big_a.size(), 0.0f);
  auto a = upload<float>(be, s, big_a, sa);  // zeros for now
  auto b = upload<float>(be, s, big_b, sb);
  auto c = upload<float>(be, s, big_c, sc);
  s.synchronize();
  // A's real contents arrive after a delay, on the stream: the GEMM must see them (stream order).
  std::copy(p.a.begin(), p.a.end(), late.begin() + off_a);
  s.enqueue([] { std::this_thread::sleep_for(std::chrono::milliseconds(30)); });
  be.copy_async(s, a.data(), late.data(), late.size() * sizeof(float));
  accel::blas::gemm_strided_batched(be, s, p.ta, p.tb, p.m, p.n, p.k, p.alpha, a, off_a, p.lda, p.stride_a, b, off_b,
                                    p.ldb, p.stride_b, p.beta, c, off_c, p.ldc, p.stride_c, p.batch);
  std::vector<float> want(big_c.size(), -1.0f);
  const std::vector<float> expected = p.expected();
  std::copy(expected.begin(), expected.end(), want.begin() + off_c);
  check_bits(download(be, s, c), want, "batched over buffers");

  // gemm over buffers: the first matrix of the batch, once more (C accumulates: beta = 1).
  const Problem first(p.ta, p.tb, p.m, p.n, p.k, p.alpha, p.beta, 2, 1);
  accel::blas::gemm(be, s, p.ta, p.tb, p.m, p.n, p.k, p.alpha, a, off_a, p.lda, b, off_b, p.ldb, p.beta, c, off_c,
                    p.ldc);
  std::vector<float> twice = want;
  std::vector<float> head(want.begin() + off_c, want.begin() + off_c + std::ptrdiff_t(p.stride_c));
  reference_gemm(p.ta, p.tb, p.m, p.n, p.k, p.alpha, p.a, p.lda, 0, p.b, p.ldb, 0, p.beta, head, p.ldc, 0, 1);
  std::copy(head.begin(), head.end(), twice.begin() + off_c);
  check_bits(download(be, s, c), twice, "gemm over buffers");
}

TEST_CASE_TEMPLATE_DEFINE("gemm: a graph capture records the GEMM; each replay runs it", B, gemm_graph) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B be;
  typename B::Stream stream;
  const typename B::StreamRef s = stream;
  const Problem p(Trans::no, Trans::yes, 17, 12, 8, 1.0f, 1.0f, 1);
  std::vector<float> sa, sb, sc;
  auto a = upload<float>(be, s, p.a, sa);
  auto b = upload<float>(be, s, p.b, sb);
  auto c = upload<float>(be, s, p.c, sc);
  s.synchronize();
  auto g = be.create_graph();
  {
    auto capture = be.capture_to_graph(g, s);
    accel::blas::gemm(be, s, p.ta, p.tb, p.m, p.n, p.k, p.alpha, a, 0, p.lda, b, 0, p.ldb, p.beta, c, 0, p.ldc);
    capture.end();
  }
  check_bits(download(be, s, c), p.c, "captured, not run");
  be.replay_graph(g, s);
  be.replay_graph(g, s);
  std::vector<float> want = p.expected();  // C + AB, then + AB again
  reference_gemm(p.ta, p.tb, p.m, p.n, p.k, p.alpha, p.a, p.lda, 0, p.b, p.ldb, 0, p.beta, want, p.ldc, 0, 1);
  check_bits(download(be, s, c), want, "two replays");
}

TEST_CASE_TEMPLATE_DEFINE("gemm: bad arguments are InvalidArgumentErrors naming them, and enqueue nothing", B,
                          gemm_bad_arguments) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B be;
  typename B::Stream stream;
  const typename B::StreamRef s = stream;
  const Problem p(Trans::no, Trans::no, 4, 5, 6, 1.0f, 1.0f, 0, 2);
  std::vector<float> sa, sb, sc;
  auto a = upload<float>(be, s, p.a, sa);
  auto b = upload<float>(be, s, p.b, sb);
  auto c = upload<float>(be, s, p.c, sc);
  s.synchronize();
  const float* pa = a.data();
  const float* pb = b.data();
  float* pc = c.data();
  using accel::blas::gemm;
  using accel::blas::gemm_strided_batched;
  const auto N = Trans::no, T = Trans::yes;

  BLAS_CHECK_INVALID(gemm(be, s, N, N, -1, 5, 6, 1.0f, pa, 6, pb, 5, 1.0f, pc, 5), "m = -1 is negative");
  BLAS_CHECK_INVALID(gemm(be, s, N, N, 4, -5, 6, 1.0f, pa, 6, pb, 5, 1.0f, pc, 5), "n = -5");
  BLAS_CHECK_INVALID(gemm(be, s, N, N, 4, 5, -6, 1.0f, pa, 6, pb, 5, 1.0f, pc, 5), "k = -6");
  BLAS_CHECK_INVALID(gemm(be, s, N, N, 4, 5, 6, 1.0f, pa, 5, pb, 5, 1.0f, pc, 5), "lda = 5 is less than 6");
  BLAS_CHECK_INVALID(gemm(be, s, T, N, 4, 5, 6, 1.0f, pa, 3, pb, 5, 1.0f, pc, 5),
                     "lda = 3 is less than 4, the row length of A (stored 6 x 4, transposed)");
  // k = 0 stores A as 4 x 0: its leading dimension must still be at least 1, as BLAS asks.
  BLAS_CHECK_INVALID(gemm(be, s, N, N, 4, 5, 0, 1.0f, pa, 0, pb, 5, 1.0f, pc, 5), "lda = 0 is less than 1");
  BLAS_CHECK_INVALID(gemm(be, s, N, N, 4, 5, 6, 1.0f, pa, 6, pb, 4, 1.0f, pc, 5), "ldb = 4");
  BLAS_CHECK_INVALID(gemm(be, s, N, T, 4, 5, 6, 1.0f, pa, 6, pb, 5, 1.0f, pc, 5), "ldb = 5 is less than 6");
  BLAS_CHECK_INVALID(gemm(be, s, N, N, 4, 5, 6, 1.0f, pa, 6, pb, 5, 1.0f, pc, 4), "ldc = 4");
  BLAS_CHECK_INVALID(gemm(be, s, N, N, 4, 5, 6, 1.0f, pa, 6, pb, 5, 1.0f, pc, 0), "ldc = 0");
  BLAS_CHECK_INVALID(gemm(be, s, N, N, 4, 5, 6, 1.0f, static_cast<const float*>(nullptr), 6, pb, 5, 1.0f, pc, 5),
                     "a is null");
  BLAS_CHECK_INVALID(gemm(be, s, N, N, 4, 5, 6, 1.0f, pa, 6, static_cast<const float*>(nullptr), 5, 1.0f, pc, 5),
                     "b is null");
  BLAS_CHECK_INVALID(gemm(be, s, N, N, 4, 5, 6, 1.0f, pa, 6, pb, 5, 1.0f, static_cast<float*>(nullptr), 5),
                     "c is null");
  BLAS_CHECK_INVALID(gemm_strided_batched(be, s, N, N, 4, 5, 6, 1.0f, pa, 6, 24, pb, 5, 30, 1.0f, pc, 5, 20, -2),
                     "batch_count = -2");
  BLAS_CHECK_INVALID(gemm_strided_batched(be, s, N, N, 4, 5, 6, 1.0f, pa, 6, -24, pb, 5, 30, 1.0f, pc, 5, 20, 2),
                     "stride_a = -24");
  BLAS_CHECK_INVALID(gemm_strided_batched(be, s, N, N, 4, 5, 6, 1.0f, pa, 6, 24, pb, 5, -1, 1.0f, pc, 5, 20, 2),
                     "stride_b = -1 is negative");
  BLAS_CHECK_INVALID(gemm_strided_batched(be, s, N, N, 4, 5, 6, 1.0f, pa, 6, 24, pb, 5, 30, 1.0f, pc, 5, -20, 2),
                     "stride_c = -20 is negative");
  // C matrices that share elements (written at once: a race on the CPU, undefined in cuBLAS) are
  // refused; A and B may be shared (stride 0)
  BLAS_CHECK_INVALID(gemm_strided_batched(be, s, N, N, 4, 5, 6, 1.0f, pa, 6, 0, pb, 5, 0, 1.0f, pc, 5, 0, 2),
                     "stride_c = 0 makes the batch's C matrices overlap: one C spans 20 elements");
  BLAS_CHECK_INVALID(gemm_strided_batched(be, s, N, N, 4, 5, 6, 1.0f, pa, 6, 24, pb, 5, 30, 1.0f, pc, 5, 19, 2),
                     "stride_c = 19 makes the batch's C matrices overlap");
  BLAS_CHECK_INVALID(gemm_strided_batched(be, s, N, N, 2, 2, 6, 1.0f, pa, 6, 12, pb, 2, 12, 1.0f, pc, 4, 3, 2),
                     "stride_c >= n = 2 and (batch_count - 1) x stride_c + n <= ldc = 4");  // 3 + 2 > 4
  BLAS_CHECK_INVALID(gemm_strided_batched(be, s, N, N, 2, 2, 6, 1.0f, pa, 6, 12, pb, 2, 12, 1.0f, pc, 4, 1, 2),
                     "stride_c = 1 makes the batch's C matrices overlap");  // 1 + 2 <= 4, but the columns interleave
  // The message names the call and the stream's backend and device.
  try {
    gemm(be, s, N, N, -1, 5, 6, 1.0f, pa, 6, pb, 5, 1.0f, pc, 5);
    FAIL("no exception");
  } catch (const accel::InvalidArgumentError& e) {
    const std::string where = "accel::blas::gemm (" + backend_of<B>(s) + ":" + std::to_string(s.device_index()) + ")";
    CHECK_MESSAGE(mentions(e, where), e.what());
  }

  // Buffers: too small for the span, a negative offset.
  BLAS_CHECK_INVALID(gemm(be, s, N, N, 4, 5, 6, 1.0f, a, i64(a.size()) - 23, 6, b, 0, 5, 1.0f, c, 0, 5),
                     "a is too small: the operand spans 24 elements from offset");
  BLAS_CHECK_INVALID(gemm(be, s, N, N, 4, 5, 6, 1.0f, a, 0, 6, b, 0, 5, 1.0f, c, 0, 1000), "c is too small");
  BLAS_CHECK_INVALID(gemm(be, s, N, N, 4, 5, 6, 1.0f, a, -1, 6, b, 0, 5, 1.0f, c, 0, 5), "offset_a = -1");
  // One operand too small at a time (p: batch 2; A spans 29 + 24 = 53 of 60 elements, B 33 + 30 = 63 of 68,
  // C 27 + 20 = 47 of 56).
  REQUIRE(a.size() == 60);
  REQUIRE(b.size() == 68);
  REQUIRE(c.size() == 56);
  BLAS_CHECK_INVALID(gemm_strided_batched(be, s, N, N, 4, 5, 6, 1.0f, a, 8, 6, p.stride_a, b, 0, 5, p.stride_b, 1.0f,
                                          c, 0, 5, p.stride_c, 2),
                     "a is too small: the operand spans 53 elements from offset 8, but the buffer holds 60");
  BLAS_CHECK_INVALID(gemm_strided_batched(be, s, N, N, 4, 5, 6, 1.0f, a, 0, 6, p.stride_a, b, 6, 5, p.stride_b, 1.0f,
                                          c, 0, 5, p.stride_c, 2),
                     "b is too small: the operand spans 63 elements from offset 6, but the buffer holds 68");
  BLAS_CHECK_INVALID(gemm_strided_batched(be, s, N, N, 4, 5, 6, 1.0f, a, 0, 6, p.stride_a, b, 0, 5, p.stride_b, 1.0f,
                                          c, 10, 5, p.stride_c, 2),
                     "c is too small: the operand spans 47 elements from offset 10, but the buffer holds 56");
  BLAS_CHECK_INVALID(gemm_strided_batched(be, s, N, N, 4, 5, 6, 1.0f, a, 0, 6, p.stride_a, b, 0, 5,
                                          std::int64_t{1} << 62, 1.0f, c, 0, 5, p.stride_c, 3),
                     "B spans more than 2^63");

  // A span past 2^63 in the batch's C check is reported as such (m = 3, ldc = 2^62: (m - 1) x ldc overflows).
  BLAS_CHECK_INVALID(gemm_strided_batched(be, s, N, N, 3, 5, 6, 1.0f, pa, 6, 24, pb, 5, 30, 1.0f, pc,
                                          std::int64_t{1} << 62, 3, 2),
                     "C spans more than 2^63 elements (ldc or the stride is too large)");

  // C overlapping A or B (read while C is written) is refused, naming both; over a batch, each operand's
  // whole extent counts (C_0 is A_1 here).
  const auto* pc_read = static_cast<const float*>(pc);
  BLAS_CHECK_INVALID(gemm(be, s, N, N, 4, 4, 4, 1.0f, pc_read, 4, pb, 4, 1.0f, pc, 4),
                     "c overlaps a: C (16 elements from c) is written while A (16 elements from a) is read; they must "
                     "not share memory");
  BLAS_CHECK_INVALID(gemm(be, s, N, N, 4, 4, 4, 1.0f, pa, 4, pc_read + 15, 4, 1.0f, pc, 4),
                     "c overlaps b: C (16 elements from c) is written while B (16 elements from b) is read");
  BLAS_CHECK_INVALID(gemm_strided_batched(be, s, N, N, 2, 2, 2, 1.0f, pc_read, 2, 4, pb, 2, 4, 1.0f, pc + 4, 2, 4, 2),
                     "c overlaps a: C (8 elements from c) is written while A (8 elements from a) is read, over the batch "
                     "of 2");
  BLAS_CHECK_INVALID(gemm(be, s, N, N, 4, 4, 4, 1.0f, c, 0, 4, b, 0, 4, 1.0f, c, 10, 4), "c overlaps a: C (16 elements");
  BLAS_CHECK_INVALID(gemm(be, s, N, N, 4, 4, 4, 1.0f, a, 0, 4, c, 0, 4, 1.0f, c, 15, 4), "c overlaps b: C (16 elements");

  // A pointer not aligned to its elements (cuBLAS faults on one) is refused on every backend.
  const auto off_by = [](const void* q, int bytes) { return reinterpret_cast<std::uintptr_t>(q) + bytes; };
  const auto* odd_a = reinterpret_cast<const float*>(off_by(pa, 2));
  auto* odd_c = reinterpret_cast<float*>(off_by(pc, 1));
  char want[160];
  std::snprintf(want, sizeof want, "a: the pointer %p is not aligned to its 4-byte elements", static_cast<const void*>(odd_a));
  BLAS_CHECK_INVALID(gemm(be, s, N, N, 4, 5, 6, 1.0f, odd_a, 6, pb, 5, 1.0f, pc, 5), want);
  std::snprintf(want, sizeof want, "c: the pointer %p is not aligned to its 4-byte elements", static_cast<void*>(odd_c));
  BLAS_CHECK_INVALID(gemm(be, s, N, N, 4, 5, 6, 1.0f, pa, 6, pb, 5, 1.0f, odd_c, 5), want);
  const auto* odd_b = reinterpret_cast<const float*>(off_by(pb, 3));
  std::snprintf(want, sizeof want, "b: the pointer %p is not aligned to its 4-byte elements", static_cast<const void*>(odd_b));
  BLAS_CHECK_INVALID(gemm(be, s, N, N, 4, 5, 6, 1.0f, pa, 6, odd_b, 5, 1.0f, pc, 5), want);

  // Nothing ran: C is as uploaded.
  check_bits(download(be, s, c), p.c, "after the refused calls");
}

TEST_CASE_TEMPLATE_DEFINE("gemm: operands side by side in one buffer run; A and B may be the same memory", B,
                          gemm_shared_buffer) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B be;
  typename B::Stream stream;
  const typename B::StreamRef s = stream;
  // One buffer: A (4 x 6) at 0, B (6 x 5) at 24, C (4 x 5) at 54, each ending where the next begins.
  std::vector<float> host(74);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = small_int(i64(i), 4);
  std::vector<float> staging;
  auto buf = upload<float>(be, s, host, staging);
  accel::blas::gemm(be, s, Trans::no, Trans::no, 4, 5, 6, 1.0f, buf, 0, 6, buf, 24, 5, 0.0f, buf, 54, 5);
  std::vector<float> want = host;
  const std::vector<float> a(host.begin(), host.begin() + 24), b(host.begin() + 24, host.begin() + 54);
  std::vector<float> c(20, 0.0f);
  reference_gemm(Trans::no, Trans::no, 4, 5, 6, 1.0f, a, 6, 0, b, 5, 0, 0.0f, c, 5, 0, 1);
  std::copy(c.begin(), c.end(), want.begin() + 54);
  check_bits(download(be, s, buf), want, "A, B, C side by side");
  // C = A A^T: A read twice from the same memory (A and B may share it; only C must be apart).
  const float* pa = buf.data();
  accel::blas::gemm(be, s, Trans::no, Trans::yes, 4, 4, 6, 1.0f, pa, 6, pa, 6, 0.0f, buf.data() + 24, 4);
  std::vector<float> aat(16, 0.0f);
  reference_gemm(Trans::no, Trans::yes, 4, 4, 6, 1.0f, a, 6, 0, a, 6, 0, 0.0f, aat, 4, 0, 1);
  const std::vector<float> got = download(be, s, buf);
  check_bits(std::vector<float>(got.begin() + 24, got.begin() + 40), aat, "A A^T");
  // [x | x W] in one array of rows 10 wide: C (T x 4, ldc 10) beside A (T x 6, lda 10) in the same rows.
  // Their address ranges meet but no element is shared, so it runs (as cuBLAS runs it); B lies after.
  // T = 200: the check walks the rows, and a tall layout (the engine's have thousands) is not refused.
  const i64 T = 200;
  const std::size_t t_rows = std::size_t(T);
  std::vector<float> rows(10 * t_rows + 24);
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = small_int(i64(i), 5);
  for (std::size_t r = 0; r < t_rows; ++r) {
    for (std::size_t j = 6; j < 10; ++j) rows[r * 10 + j] = 99.0f;  // C's place: beta 0 ignores it
  }
  auto wide = upload<float>(be, s, rows, staging);
  accel::blas::gemm(be, s, Trans::no, Trans::no, T, 4, 6, 1.0f, wide, 0, 10, wide, 10 * T, 4, 0.0f, wide, 6, 10);
  std::vector<float> xa(6 * t_rows), w(rows.begin() + 10 * T, rows.end()), xw(4 * t_rows, 0.0f);
  for (std::size_t r = 0; r < t_rows; ++r) std::copy_n(rows.begin() + i64(r * 10), 6, xa.begin() + i64(r * 6));
  reference_gemm(Trans::no, Trans::no, T, 4, 6, 1.0f, xa, 6, 0, w, 4, 0, 0.0f, xw, 4, 0, 1);
  std::vector<float> want_rows = rows;
  for (std::size_t r = 0; r < t_rows; ++r) std::copy_n(xw.begin() + i64(r * 4), 4, want_rows.begin() + i64(r * 10 + 6));
  check_bits(download(be, s, wide), want_rows, "[x | x W] in one array");
  // One column further left, C's first column is A's last: refused.
  BLAS_CHECK_INVALID(accel::blas::gemm(be, s, Trans::no, Trans::no, T, 4, 6, 1.0f, wide, 0, 10, wide, 10 * T, 4, 0.0f,
                                       wide, 5, 10),
                     "c overlaps a: C (1994 elements from c) is written while A (1996 elements from a) is read");
}

/// 16-bit operands (H: bfloat16 or half) accumulate in float and round once: the same bits as the
/// reference rounded to H.
template <class H, class B>
void check_16bit_gemm(const char* tag) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B be;
  typename B::Stream stream;
  const typename B::StreamRef s = stream;
  const std::string t = tag;
  const auto rounded = [](std::vector<float> v) {
    for (float& x : v) x = from<H>(to<H>(x));
    return v;
  };
  {
    const Problem probe(Trans::no, Trans::no, 2, 2, 2, 1.0f, 0.0f, 0);
    try {
      (void)run<H>(be, s, probe, false);
    } catch (const accel::NotSupportedError& e) {
      MESSAGE("SKIPPED: " << e.what());
      return;
    }
  }
  // Small integers: exact in bfloat16 and half, and every sum exact in float, so the one rounding of
  // the result gives H(reference) bit for bit.
  const float scalars[][2] = {{1.0f, 0.0f}, {0.75f, 1.0f}, {-2.0f, -0.5f}};
  for (Trans ta : both) {
    for (Trans tb : both) {
      for (const auto& ab : scalars) {
        const Problem p(ta, tb, 19, 12, 65, ab[0], ab[1], 3);
        check_bits(run<H>(be, s, p, false), rounded(p.expected()), t + " " + describe(p));
      }
      Problem batched(ta, tb, 9, 6, 4, 0.75f, -0.5f, 2, 5);
      check_bits(run<H>(be, s, batched, true), rounded(batched.expected()), t + " " + describe(batched));
      batched.stride_b = 0;
      check_bits(run<H>(be, s, batched, true), rounded(batched.expected()), t + " stride_b=0 " + describe(batched));
      // Strides float takes, which a bfloat16 batch in one oneDNN matmul cannot: smaller than one matrix
      // (the matrices overlap; they are only read), and A and B both shared.
      for (const auto& [sa, sb] : {std::pair<i64, i64>{1, 0}, {1, 1}, {0, 1}, {0, 0}, {2, 7}}) {
        batched.stride_a = sa;
        batched.stride_b = sb;
        check_bits(run<H>(be, s, batched, true), rounded(batched.expected()),
                   t + " stride_a=" + std::to_string(sa) + " stride_b=" + std::to_string(sb) + " " + describe(batched));
        check_bits(run<float>(be, s, batched, true), batched.expected(),
                   "float stride_a=" + std::to_string(sa) + " stride_b=" + std::to_string(sb) + " " + describe(batched));
      }
    }
  }
  const Problem empty_k(Trans::no, Trans::yes, 4, 3, 0, 1.0f, 2.0f, 1);
  check_bits(run<H>(be, s, empty_k, false), rounded(empty_k.expected()), t + " k=0");
  // The attention product of the tiny model, the same problem twice (the second call reuses what the
  // first one set up).
  const Problem qk(Trans::no, Trans::yes, 64, 64, 32, 0.125f, 0.0f, 0, 48);
  check_bits(run<H>(be, s, qk, true), rounded(qk.expected()), t + " QK^T");
  check_bits(run<H>(be, s, qk, true), rounded(qk.expected()), t + " QK^T again");
}

TEST_CASE_TEMPLATE_DEFINE("gemm: bfloat16 operands accumulate in float and round once, on every backend", B,
                          gemm_bfloat16) {
  check_16bit_gemm<accel::bfloat16, B>("bf16");
}

TEST_CASE_TEMPLATE_DEFINE("gemm: half operands accumulate in float and round once, on every backend (CPU: F16C)", B,
                          gemm_half) {
  check_16bit_gemm<accel::half, B>("half");
}

// ACCEL_CPU_BLAS_TN: the three names (and unset or empty: auto); anything else is refused by every float32
// GEMM, naming the value, with C untouched — not taken as the default.
TEST_CASE("gemm on the CPU: an unknown ACCEL_CPU_BLAS_TN is an InvalidArgumentError naming it") {
  namespace d = accel::blas::detail;
  CHECK(d::parse_transposed_a_blas("") == d::TransposedABlas::automatic);
  CHECK(d::parse_transposed_a_blas("auto") == d::TransposedABlas::automatic);
  CHECK(d::parse_transposed_a_blas("onednn") == d::TransposedABlas::onednn);
  CHECK(d::parse_transposed_a_blas("openblas") == d::TransposedABlas::openblas);
  for (const char* bad : {"openblass", "OneDNN", "mkl", " auto"}) CHECK(d::parse_transposed_a_blas(bad) == d::TransposedABlas::invalid);

  const d::TransposedABlas saved = d::transposed_a_blas().load();
  const char* env = std::getenv("ACCEL_CPU_BLAS_TN");
  const std::string saved_env = env != nullptr ? env : "";
  ::setenv("ACCEL_CPU_BLAS_TN", "openblass", 1);
  d::transposed_a_blas().store(d::TransposedABlas::invalid);
  const accel::CpuBackend be;
  accel::cpu::Stream stream;
  const accel::cpu::StreamRef s = stream;
  // Every float32 shape is refused ('N','N' too), and C keeps its values.
  for (const Trans ta : {Trans::yes, Trans::no}) {
    const Problem p(ta, Trans::no, 4, 3, 2, 1.0f, 0.0f, 0);
    std::vector<float> sa, sb, sc;
    auto a = upload<float>(be, s, p.a, sa);
    auto b = upload<float>(be, s, p.b, sb);
    auto c = upload<float>(be, s, p.c, sc);
    std::string what;
    try {
      accel::blas::gemm(be, s, p.ta, p.tb, p.m, p.n, p.k, p.alpha, a.data(), p.lda, b.data(), p.ldb, p.beta, c.data(), p.ldc);
    } catch (const accel::InvalidArgumentError& e) {
      what = e.what();
    }
    CHECK_MESSAGE(what.find("ACCEL_CPU_BLAS_TN=openblass is not one of auto, onednn, openblas") != std::string::npos, what);
    check_bits(download(be, s, c), p.c, describe(p) + " refused");
  }
  d::transposed_a_blas().store(saved);
  if (env != nullptr) {
    ::setenv("ACCEL_CPU_BLAS_TN", saved_env.c_str(), 1);
  } else {
    ::unsetenv("ACCEL_CPU_BLAS_TN");
  }
}

// Float32 'T','N' products go to OpenBLAS's OpenMP build on CPUs without AVX-512 (blas/detail/cpu_openblas.hpp).
// Here it is chosen on any CPU, where the library is installed, and must give what oneDNN gives: the exact
// cases to the bit (NaN in C ignored with beta 0, padding untouched), and an engine-like weight gradient
// within float rounding of a double-precision reference.
TEST_CASE("gemm on the CPU: 'T','N' float32 through OpenBLAS where chosen — bit for bit on exact cases") {
  namespace d = accel::blas::detail;
  const d::TransposedABlas saved = d::transposed_a_blas().load();
  const d::Call call{"gemm", "cpu", 0};
  d::GemmArgs<float> g;
  g.ta = Trans::yes;
  g.m = g.n = g.k = g.lda = g.ldb = g.ldc = 8;
  d::transposed_a_blas().store(d::TransposedABlas::onednn);
  CHECK(d::openblas_for(call, g) == nullptr);
  d::transposed_a_blas().store(d::TransposedABlas::automatic);
  if (d::cpu_has_avx512f()) CHECK(d::openblas_for(call, g) == nullptr);  // oneDNN is at its best there
  d::transposed_a_blas().store(d::TransposedABlas::openblas);
  if (!d::openblas().loaded()) {
    CHECK(d::openblas().error.find("libopenblas0-openmp") != std::string::npos);
    CHECK_THROWS_AS((void)d::openblas_for(call, g), accel::BackendUnavailableError);
    d::transposed_a_blas().store(saved);
    MESSAGE("SKIPPED: OpenBLAS's OpenMP build is not installed (" << d::openblas().error << ")");
    return;
  }
  CHECK(d::openblas_for(call, g) == &d::openblas());
  CHECK(d::openblas_name().rfind("OpenBLAS", 0) == 0);
  // Only 'T','N', one matrix, k > 0.
  for (const auto& [ta, tb] : {std::pair{Trans::no, Trans::no}, {Trans::no, Trans::yes}, {Trans::yes, Trans::yes}}) {
    d::GemmArgs<float> other = g;
    other.ta = ta;
    other.tb = tb;
    CHECK(d::openblas_for(call, other) == nullptr);
  }
  d::GemmArgs<float> batched = g, no_k = g;
  batched.batch = 2;
  no_k.k = 0;
  CHECK(d::openblas_for(call, batched) == nullptr);
  CHECK(d::openblas_for(call, no_k) == nullptr);

  const accel::CpuBackend be;
  accel::cpu::Stream stream;
  const accel::cpu::StreamRef s = stream;
  const int threads = accel::blas::num_threads();
  int runs = 0;
  for (int t : {1, 2}) {
    accel::blas::set_num_threads(t);
    for (const auto& [m, n, k] : {std::tuple<i64, i64, i64>{1, 1, 1}, {7, 5, 3}, {33, 17, 65}, {64, 48, 32}, {3, 70, 1}}) {
      for (i64 pad : {0, 3}) {
        for (const auto& ab : {std::pair{1.0f, 0.0f}, {0.75f, 1.0f}, {-2.0f, -0.5f}}) {
          const Problem p(Trans::yes, Trans::no, m, n, k, ab.first, ab.second, pad);
          check_bits(run<float>(be, s, p, false), p.expected(), describe(p) + " on OpenBLAS, threads " + std::to_string(t));
          ++runs;
        }
      }
    }
  }
  CHECK(runs == 2 * 5 * 2 * 3);
  // A weight gradient of the engine's shape (dW += dY^T X over 300 tokens), full-mantissa values.
  const Problem wg(Trans::yes, Trans::no, 96, 40, 300, 1.0f, 1.0f, 0, 1, true);
  const std::vector<float> got = run<float>(be, s, wg, false), want = wg.expected();
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
  CHECK(worst < 2e-5);  // 300 products of values below 1: float's rounding, not a wrong sum
  // OpenBLAS's own results depend on its thread count; accel's blocks (fixed by the shape) do not: the same
  // bits on 1, 2 and 3 threads, here over 3 blocks of rows and over 2 blocks of columns.
  for (const auto& [m, n] : {std::pair<i64, i64>{300, 40}, {40, 200}}) {
    std::vector<float> first;
    for (int t : {1, 2, 3}) {
      accel::blas::set_num_threads(t);
      const Problem p(Trans::yes, Trans::no, m, n, 257, 1.0f, 0.5f, 1, 1, true);
      const std::vector<float> c = run<float>(be, s, p, false);
      if (first.empty()) {
        first = c;
      } else {
        check_bits(c, first, describe(p) + " on OpenBLAS, threads " + std::to_string(t) + " against 1");
      }
    }
  }
  accel::blas::set_num_threads(threads);
  d::transposed_a_blas().store(saved);
}

TEST_CASE_TEMPLATE_APPLY(gemm_exact, BlasBackends);
TEST_CASE_TEMPLATE_APPLY(gemm_bfloat16, BlasBackends);
TEST_CASE_TEMPLATE_APPLY(gemm_half, BlasBackends);
TEST_CASE_TEMPLATE_APPLY(gemm_rounding, BlasBackends);
TEST_CASE_TEMPLATE_APPLY(gemm_batched, BlasBackends);
TEST_CASE_TEMPLATE_APPLY(gemm_attention, BlasBackends);
TEST_CASE_TEMPLATE_APPLY(gemm_degenerate, BlasBackends);
TEST_CASE_TEMPLATE_APPLY(gemm_buffers, BlasBackends);
TEST_CASE_TEMPLATE_APPLY(gemm_graph, BlasBackends);
TEST_CASE_TEMPLATE_APPLY(gemm_bad_arguments, BlasBackends);
TEST_CASE_TEMPLATE_APPLY(gemm_shared_buffer, BlasBackends);
