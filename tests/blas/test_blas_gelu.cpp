// accel/blas: gemm_gelu and gemm_dgelu on every enabled backend and through AnyBackend, against a
// double-precision reference: the product (kept in aux) exactly, the GELU and its gradient within float
// rounding; 16-bit types; Buffer operands; graph capture; the argument checks.
#include "blas_test_support.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

using namespace blas_test;
using accel::blas::Trans;

namespace {

constexpr Trans gelu_transposes[] = {Trans::no, Trans::yes};

double gelu_ref(double x) { return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }

double gelu_grad_ref(double x) {
  const double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
  const double t = std::tanh(u);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x);
}

/// One problem: small-integer operands (every product and sum exact in float) scaled by a power of two,
/// so that the product — what aux keeps — is exact on every backend and lands in GELU's curved range.
struct GeluProblem {
  Trans ta, tb;
  i64 m, n, k, lda, ldb, ldc, ldaux;
  float alpha, beta;
  std::vector<float> a, b, c, aux;

  GeluProblem(Trans ta_, Trans tb_, i64 m_, i64 n_, i64 k_, float beta_, i64 pad)
      : ta(ta_), tb(tb_), m(m_), n(n_), k(k_), beta(beta_) {
    lda = (ta == Trans::no ? k : m) + pad;
    ldb = (tb == Trans::no ? n : k) + pad;
    ldc = n + pad;
    ldaux = (n + 7) / 8 * 8 + (pad > 0 ? 8 : 0);
    alpha = std::ldexp(1.0f, -int(std::ceil(std::log2(double(k) + 1.0))));  // |P| stays within about 3 * 3
    a.resize(std::size_t(span(ta == Trans::no ? m : k, ta == Trans::no ? k : m, lda)));
    b.resize(std::size_t(span(tb == Trans::no ? k : n, tb == Trans::no ? n : k, ldb)));
    c.assign(std::size_t(span(m, n, ldc)), 1000.0f);  // padding sentinels
    aux.assign(std::size_t(span(m, n, ldaux)), -1000.0f);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = small_int(i64(i), 1);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = small_int(i64(i), 2);
    for (i64 r = 0; r < m; ++r) {
      for (i64 col = 0; col < n; ++col) {
        c[std::size_t(r * ldc + col)] = beta == 0.0f ? std::nanf("") : small_int(r * 31 + col, 3) * 0.25f;
      }
    }
  }

  /// P = alpha op(A) op(B) + beta C, exact (small integers times powers of two).
  [[nodiscard]] std::vector<double> product() const {
    std::vector<double> p(std::size_t(m * n));
    for (i64 r = 0; r < m; ++r) {
      for (i64 col = 0; col < n; ++col) {
        double sum = 0;
        for (i64 q = 0; q < k; ++q) sum += op_at(a, 0, lda, ta, r, q) * op_at(b, 0, ldb, tb, q, col);
        p[std::size_t(r * n + col)] = double(alpha) * sum + (beta == 0.0f ? 0.0 : double(beta) * c[std::size_t(r * ldc + col)]);
      }
    }
    return p;
  }

  [[nodiscard]] std::string str() const {
    return "ta=" + std::to_string(int(ta)) + " tb=" + std::to_string(int(tb)) + " m=" + std::to_string(m) +
           " n=" + std::to_string(n) + " k=" + std::to_string(k) + " ldc=" + std::to_string(ldc) +
           " ldaux=" + std::to_string(ldaux) + " beta=" + std::to_string(beta);
  }
};

/// Elementwise: got within tol * max(1, |want|) of want; padding (want NaN marks it) compared by bits.
/// Returns the worst error in those units.
double check_close(const std::vector<float>& got, const std::vector<double>& want, double tol, const std::string& what) {
  REQUIRE(got.size() == want.size());
  std::size_t wrong = 0, first = 0, worst_at = 0;
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(double(got[i]) - want[i]) / std::max(1.0, std::abs(want[i]));
    if (err > worst) worst = err, worst_at = i;
    if (!(err <= tol)) {
      if (wrong++ == 0) first = i;
    }
  }
  CHECK_MESSAGE(wrong == 0, what << ": " << wrong << " elements off, the first at " << first << ": got " << got[first]
                                  << ", want " << want[first] << "; the worst at " << worst_at << ", " << worst);
  return worst;
}

/// The float GELU's tolerance on a stream's backend, relative to max(1, |value|). The CPU's epilogue
/// evaluates tanh to float rounding (2e-6 forward, 3e-6 for the gradient's longer expression; 7.6e-8
/// and 1.9e-7 seen); cuBLASLt's GELU and DGELU epilogues compute it less exactly: on an H200 (CUDA
/// 13.0) the worst at the shapes below was 5.0e-6 forward and 2.5e-5 for the gradient, so 3e-5 and
/// 1e-4 there. The tests print the worst they see.
template <class B>
double gelu_tolerance(typename B::StreamRef s, bool backward) {
  if (backend_of<B>(s) == "cuda") return backward ? 1e-4 : 3e-5;
  return backward ? 3e-6 : 2e-6;
}

/// Runs gemm_gelu (keep_aux: with aux) or gemm_dgelu (aux_in: the pre-activation) on B; returns C and aux.
template <class T, class B>
std::pair<std::vector<float>, std::vector<float>> run_gelu(const B& be, typename B::StreamRef s, const GeluProblem& p,
                                                           bool backward, bool keep_aux) {
  std::vector<T> sa, sb, sc, sx;
  auto a = upload<T>(be, s, p.a, sa);
  auto b = upload<T>(be, s, p.b, sb);
  auto c = upload<T>(be, s, p.c, sc);
  auto aux = upload<T>(be, s, p.aux, sx);
  if (backward) {
    accel::blas::gemm_dgelu(be, s, p.ta, p.tb, p.m, p.n, p.k, p.alpha, a.data(), p.lda, b.data(), p.ldb, p.beta,
                            c.data(), p.ldc, static_cast<const T*>(aux.data()), p.ldaux);
  } else {
    accel::blas::gemm_gelu(be, s, p.ta, p.tb, p.m, p.n, p.k, p.alpha, a.data(), p.lda, b.data(), p.ldb, p.beta,
                           c.data(), p.ldc, keep_aux ? aux.data() : static_cast<T*>(nullptr), p.ldaux);
  }
  std::vector<float> out_c = download(be, s, c);
  return {out_c, download(be, s, aux)};
}

/// C and aux as they should be after a forward (GELU of P into C, P into aux when kept), padding unchanged.
std::pair<std::vector<double>, std::vector<double>> forward_want(const GeluProblem& p, bool keep_aux) {
  const std::vector<double> prod = p.product();
  std::vector<double> c(p.c.begin(), p.c.end()), aux(p.aux.begin(), p.aux.end());
  for (i64 r = 0; r < p.m; ++r) {
    for (i64 col = 0; col < p.n; ++col) {
      const double x = prod[std::size_t(r * p.n + col)];
      c[std::size_t(r * p.ldc + col)] = gelu_ref(x);
      if (keep_aux) aux[std::size_t(r * p.ldaux + col)] = x;
    }
  }
  return {c, aux};
}

/// The backward's aux: a pre-activation in (-4, 4) with full mantissas, as type T stores it (`round`);
/// returns C = P * GELU'(aux), padding unchanged.
template <class Round>
std::vector<double> backward_want(GeluProblem& p, Round round) {
  for (i64 r = 0; r < p.m; ++r) {
    for (i64 col = 0; col < p.n; ++col) p.aux[std::size_t(r * p.ldaux + col)] = round(4.0f * fraction(r * 97 + col, 5));
  }
  const std::vector<double> prod = p.product();
  std::vector<double> c(p.c.begin(), p.c.end());
  for (i64 r = 0; r < p.m; ++r) {
    for (i64 col = 0; col < p.n; ++col) {
      c[std::size_t(r * p.ldc + col)] = prod[std::size_t(r * p.n + col)] * gelu_grad_ref(p.aux[std::size_t(r * p.ldaux + col)]);
    }
  }
  return c;
}

std::vector<double> backward_want(GeluProblem& p) {
  return backward_want(p, [](float x) { return x; });
}

/// Bit for bit, NaNs included.
bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  if (x.size() != y.size()) return false;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (bits(x[i]) != bits(y[i])) return false;
  }
  return true;
}

struct GeluShape {
  i64 m, n, k;
};
constexpr GeluShape gelu_shapes[] = {{1, 1, 1}, {7, 8, 3}, {33, 24, 65}, {64, 48, 32}, {96, 300, 40}};

}  // namespace

using BlasBackends = accel::enabled_backends_t<std::tuple, accel::AnyBackend>;

TEST_CASE_TEMPLATE_DEFINE("gemm_gelu: every transpose and shape: aux holds the product exactly, C its GELU", B,
                          gemm_gelu_forward) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B be;
  typename B::Stream stream;
  const typename B::StreamRef s = stream;
  int runs = 0;
  double worst = 0;
  for (Trans ta : gelu_transposes) {
    for (Trans tb : gelu_transposes) {
      for (const GeluShape& sh : gelu_shapes) {
        for (i64 pad : {0, 3}) {
          for (float beta : {0.0f, 0.5f}) {
            const GeluProblem p(ta, tb, sh.m, sh.n, sh.k, beta, pad);
            const auto [want_c, want_aux] = forward_want(p, true);
            const auto [c, aux] = run_gelu<float>(be, s, p, false, true);
            check_close(aux, want_aux, 0.0, p.str() + ": aux");  // the product, exact
            worst = std::max(worst, check_close(c, want_c, gelu_tolerance<B>(s, false), p.str() + ": C"));
            ++runs;
          }
        }
      }
    }
  }
  CHECK(runs == 4 * 5 * 2 * 2);
  MESSAGE(backend_of<B>(s) << ": C's worst error " << worst);
  // Without aux: the same C, and aux's memory untouched.
  const GeluProblem p(Trans::no, Trans::yes, 33, 24, 65, 0.0f, 3);
  const auto [want_c, want_aux] = forward_want(p, false);
  const auto [c, aux] = run_gelu<float>(be, s, p, false, false);
  check_close(c, want_c, gelu_tolerance<B>(s, false), "no aux: C");
  check_close(aux, want_aux, 0.0, "no aux: aux untouched");
}

TEST_CASE_TEMPLATE_DEFINE("gemm_dgelu: every transpose and shape: C = product * GELU'(aux), aux unchanged", B,
                          gemm_gelu_backward) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B be;
  typename B::Stream stream;
  const typename B::StreamRef s = stream;
  double worst = 0;
  for (Trans ta : gelu_transposes) {
    for (Trans tb : gelu_transposes) {
      for (const GeluShape& sh : gelu_shapes) {
        for (float beta : {0.0f, 0.5f}) {
          GeluProblem p(ta, tb, sh.m, sh.n, sh.k, beta, 3);
          const std::vector<double> want_c = backward_want(p);
          const auto [c, aux] = run_gelu<float>(be, s, p, true, false);
          worst = std::max(worst, check_close(c, want_c, gelu_tolerance<B>(s, true), p.str() + ": C"));
          check_close(aux, std::vector<double>(p.aux.begin(), p.aux.end()), 0.0, p.str() + ": aux unchanged");
        }
      }
    }
  }
  MESSAGE(backend_of<B>(s) << ": C's worst error " << worst);
}

TEST_CASE_TEMPLATE_DEFINE("gemm_gelu / gemm_dgelu: bfloat16 and half within their rounding", B, gemm_gelu_16bit) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B be;
  typename B::Stream stream;
  const typename B::StreamRef s = stream;
  const auto check_type = [&]<class T>(double ulp, const char* name) {
    for (Trans tb : gelu_transposes) {
      const GeluProblem p(Trans::no, tb, 64, 48, 32, 0.0f, 0);
      const auto [want_c, want_aux] = forward_want(p, true);
      const auto [c, aux] = run_gelu<T>(be, s, p, false, true);
      check_close(aux, want_aux, ulp, std::string(name) + " " + p.str() + ": aux");  // P rounded once
      check_close(c, want_c, 3 * ulp, std::string(name) + " " + p.str() + ": C");   // GELU of P, rounded again
      GeluProblem q(Trans::no, tb, 64, 48, 32, 0.0f, 0);
      const std::vector<double> want_d = backward_want(q, [](float x) { return from<T>(to<T>(x)); });
      const auto [d, aux_after] = run_gelu<T>(be, s, q, true, false);
      CHECK(same_bits(aux_after, q.aux));  // read only
      check_close(d, want_d, 3 * ulp, std::string(name) + " " + q.str() + ": dgelu C");
    }
  };
  if constexpr (accel::blas::detail::GemmImpl<B>::template supports<accel::bfloat16>) {
    try {
      check_type.template operator()<accel::bfloat16>(std::ldexp(1.0, -8), "bfloat16");
    } catch (const accel::NotSupportedError& e) {
      MESSAGE("bfloat16 skipped: " << e.what());  // a CPU without bf16 support in oneDNN
    }
  }
  check_type.template operator()<accel::half>(std::ldexp(1.0, -11), "half");
}

TEST_CASE_TEMPLATE_DEFINE("gemm_gelu / gemm_dgelu: Buffer operands at offsets, and a graph replays them", B,
                          gemm_gelu_buffers) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B be;
  typename B::Stream stream;
  const typename B::StreamRef s = stream;
  const GeluProblem p(Trans::no, Trans::yes, 33, 24, 65, 0.0f, 3);
  const i64 off_a = 5, off_b = 9, off_c = 2, off_aux = 16;  // aux's offset keeps it 16-byte aligned
  std::vector<float> big_a(off_a, 0.0f), big_b(off_b, 0.0f), big_c(off_c, -7.0f), big_aux(off_aux, -7.0f);
  big_a.insert(big_a.end(), p.a.begin(), p.a.end());
  big_b.insert(big_b.end(), p.b.begin(), p.b.end());
  big_c.insert(big_c.end(), p.c.begin(), p.c.end());
  big_aux.insert(big_aux.end(), p.aux.begin(), p.aux.end());
  std::vector<float> sa, sb, sc, sx;
  auto a = upload<float>(be, s, big_a, sa);
  auto b = upload<float>(be, s, big_b, sb);
  auto c = upload<float>(be, s, big_c, sc);
  auto aux = upload<float>(be, s, big_aux, sx);
  s.synchronize();
  auto graph = be.create_graph();
  {
    auto capture = be.capture_to_graph(graph, s);
    accel::blas::gemm_gelu(be, s, p.ta, p.tb, p.m, p.n, p.k, p.alpha, a, off_a, p.lda, b, off_b, p.ldb, p.beta, c,
                           off_c, p.ldc, aux, off_aux, p.ldaux);
    capture.end();
  }
  CHECK(same_bits(download(be, s, c), big_c));  // recorded, not run
  be.replay_graph(graph, s);
  const auto [want_c, want_aux] = forward_want(p, true);
  std::vector<double> big_want_c(big_c.begin(), big_c.begin() + off_c), big_want_aux(big_aux.begin(), big_aux.begin() + off_aux);
  big_want_c.insert(big_want_c.end(), want_c.begin(), want_c.end());
  big_want_aux.insert(big_want_aux.end(), want_aux.begin(), want_aux.end());
  check_close(download(be, s, aux), big_want_aux, 0.0, "replayed: aux");
  check_close(download(be, s, c), big_want_c, gelu_tolerance<B>(s, false), "replayed: C");

  // The backward over buffers, reading the aux the forward wrote: C = P * GELU'(P).
  accel::blas::gemm_dgelu(be, s, p.ta, p.tb, p.m, p.n, p.k, p.alpha, a, off_a, p.lda, b, off_b, p.ldb, 0.0f, c, off_c,
                          p.ldc, aux, off_aux, p.ldaux);
  const std::vector<double> prod = p.product();
  std::vector<double> want_d = big_want_c;
  for (i64 r = 0; r < p.m; ++r) {
    for (i64 col = 0; col < p.n; ++col) {
      const double x = prod[std::size_t(r * p.n + col)];
      want_d[std::size_t(off_c + r * p.ldc + col)] = x * gelu_grad_ref(x);
    }
  }
  check_close(download(be, s, c), want_d, gelu_tolerance<B>(s, true), "dgelu over buffers");
}

TEST_CASE_TEMPLATE_DEFINE("gemm_gelu / gemm_dgelu: bad arguments are InvalidArgumentErrors naming them, and enqueue nothing",
                          B, gemm_gelu_bad_arguments) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B be;
  typename B::Stream stream;
  const typename B::StreamRef s = stream;
  const GeluProblem p(Trans::no, Trans::no, 4, 5, 6, 0.0f, 0);
  std::vector<float> sa, sb, sc, sx;
  auto a = upload<float>(be, s, p.a, sa);
  auto b = upload<float>(be, s, p.b, sb);
  auto c = upload<float>(be, s, p.c, sc);
  std::vector<float> aux_host(64, 3.0f);
  auto aux = upload<float>(be, s, aux_host, sx);
  s.synchronize();
  const float* pa = a.data();
  const float* pb = b.data();
  float* pc = c.data();
  float* px = aux.data();
  using accel::blas::gemm_dgelu;
  using accel::blas::gemm_gelu;
  const auto N = Trans::no;
  BLAS_CHECK_INVALID(gemm_gelu(be, s, N, N, 4, 5, 6, 1.0f, pa, 6, pb, 5, 0.0f, pc, 5, px, 4), "ldaux = 4 is less than 5");
  BLAS_CHECK_INVALID(gemm_gelu(be, s, N, N, 4, 5, 6, 1.0f, pa, 6, pb, 5, 0.0f, pc, 5, px, 12), "ldaux = 12 is not a multiple of 8");
  BLAS_CHECK_INVALID(gemm_gelu(be, s, N, N, 4, 5, 6, 1.0f, pa, 6, pb, 5, 0.0f, pc, 5, px + 1, 8), "16-byte aligned");
  BLAS_CHECK_INVALID(gemm_gelu(be, s, N, N, 4, 5, 6, 1.0f, pa, 6, pb, 5, 0.0f, pc, 5, pc, 8), "aux overlaps c");
  // One element shared is an overlap: C starting at aux's last element (3 rows of 8 and 5 = 29 elements).
  BLAS_CHECK_INVALID(gemm_gelu(be, s, N, N, 4, 5, 6, 1.0f, pa, 6, pb, 5, 0.0f, px + 28, 5, px, 8), "aux overlaps c");
  // gemm_gelu writes aux while it reads A and B: they must be apart (aux: 3 rows of 8 and 5 = 29 elements).
  BLAS_CHECK_INVALID(gemm_gelu(be, s, N, N, 4, 5, 6, 1.0f, static_cast<const float*>(px), 6, pb, 5, 0.0f, pc, 5, px, 8),
                     "aux overlaps a: aux (29 elements from aux) is written while A (24 elements from a) is read; "
                     "they must not share memory");
  BLAS_CHECK_INVALID(gemm_gelu(be, s, N, N, 4, 5, 6, 1.0f, pa, 6, static_cast<const float*>(px + 20), 5, 0.0f, pc, 5, px,
                               8),
                     "aux overlaps b: aux (29 elements from aux) is written while B (30 elements from b) is read");
  // Buffers: A at 16 in aux's own buffer (A: elements 16 to 39, aux: 0 to 28).
  BLAS_CHECK_INVALID(gemm_gelu(be, s, N, N, 4, 5, 6, 1.0f, aux, 16, 6, b, 0, 5, 0.0f, c, 0, 5, aux, 0, 8),
                     "aux overlaps a: aux (29 elements from aux) is written while A (24 elements from a) is read");
  BLAS_CHECK_INVALID(gemm_gelu(be, s, N, N, 4, 5, 0, 1.0f, pa, 6, pb, 5, 0.0f, pc, 5, px, 8), "k = 0");
  BLAS_CHECK_INVALID(gemm_gelu(be, s, N, N, 4, 5, 6, 1.0f, pa, 5, pb, 5, 0.0f, pc, 5, px, 8), "lda = 5 is less than 6");
  BLAS_CHECK_INVALID(gemm_dgelu(be, s, N, N, 4, 5, 6, 1.0f, pa, 6, pb, 5, 0.0f, pc, 5, static_cast<const float*>(nullptr), 8),
                     "aux is null");
  BLAS_CHECK_INVALID(gemm_dgelu(be, s, N, N, 4, 5, 6, 1.0f, pa, 6, pb, 5, 0.0f, pc, 5, static_cast<const float*>(px), 7),
                     "ldaux = 7");
  // Buffer operands: aux's buffer must hold its span (3 rows of 8 and 5: 29 elements from offset 40).
  BLAS_CHECK_INVALID(gemm_gelu(be, s, N, N, 4, 5, 6, 1.0f, a, 0, 6, b, 0, 5, 0.0f, c, 0, 5, aux, 40, 8), "aux is too small");
  // The message names the call and the backend.
  try {
    gemm_gelu(be, s, N, N, 4, 5, 6, 1.0f, pa, 6, pb, 5, 0.0f, pc, 5, px, 12);
    FAIL("no error");
  } catch (const accel::InvalidArgumentError& e) {
    CHECK(mentions(e, "accel::blas::gemm_gelu (" + backend_of<B>(s) + ":"));
  }
  // Nothing was enqueued: C and aux are as uploaded.
  CHECK(same_bits(download(be, s, aux), aux_host));
  CHECK(same_bits(download(be, s, c), p.c));
}

TEST_CASE_TEMPLATE_APPLY(gemm_gelu_forward, BlasBackends);
TEST_CASE_TEMPLATE_APPLY(gemm_gelu_backward, BlasBackends);
TEST_CASE_TEMPLATE_APPLY(gemm_gelu_16bit, BlasBackends);
TEST_CASE_TEMPLATE_APPLY(gemm_gelu_buffers, BlasBackends);
TEST_CASE_TEMPLATE_APPLY(gemm_gelu_bad_arguments, BlasBackends);
