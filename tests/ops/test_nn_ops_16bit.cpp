// nn_ops with bfloat16 and float16 storage on the CPU (kernels/cpu/nn_ops.cpp, the _bf16 and _f16
// entry points): every kernel's forward and backward against a float64 reference computed from the
// rounded inputs, within the storage's rounding (bf16: 2^-8 relative, fp16: 2^-11); and, where a kernel
// has no reduction across elements, bit for bit the float32 kernel's result on the widened inputs,
// rounded once. Sums into 16-bit tensors (embedding and LayerNorm weight gradients) are taken in
// float32 and rounded once, as on CUDA. The same bits for 1 and 2 threads.
#include "ops_test_support.hpp"
#include "support/storage16.hpp"

#include <accel/accel.hpp>
#include <accel/ops.hpp>
#include <accel/random/fill.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace {

using Cpu = accel::CpuBackend;
using accel::ops::NnKernels;

using test16::bits16;
using test16::dtype_of;
using test16::rounded_bits;
using test16::to16;
using test16::widen;

/// The storage's unit roundoff: one rounding of a value v is within eps<H> * |v| (bf16 8, fp16 11 bits).
template <class H>
constexpr double eps = test16::unit_roundoff<H>;

/// Half the spacing of the smallest subnormals: the absolute error of rounding a tiny value (fp16's
/// subnormals start below 6.1e-5; bf16 has float's range).
template <class H>
constexpr double tiny = std::is_same_v<H, accel::bfloat16> ? 0.0 : 0x1p-25;

template <class H>
NnKernels<Cpu>& nn16() {
  static NnKernels<Cpu> k = [] {
    (void)ops_test::cache_dir();
    return NnKernels<Cpu>(Cpu{}, dtype_of<H>);
  }();
  return k;
}
NnKernels<Cpu>& nn32() {
  static NnKernels<Cpu> k = [] {
    (void)ops_test::cache_dir();
    return NnKernels<Cpu>(Cpu{});
  }();
  return k;
}

/// max |a - b| / max |b|.
template <class H>
double max_rel(const std::vector<H>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    num = std::max(num, std::fabs(static_cast<double>(static_cast<float>(a[i])) - b[i]));
    den = std::max(den, std::fabs(b[i]));
  }
  return num / std::max(den, 1e-30);
}

std::vector<float> randv(std::size_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
  return ops_test::random_floats(n, seed, lo, hi);
}

}  // namespace

TEST_CASE_TEMPLATE("nn_ops 16-bit embedding: forward rounded once, backward summed in float32 and rounded once", H,
                   accel::bfloat16, accel::half) {
  constexpr long long B = 3, T = 5, C = 37, V = 11, N = B * T;
  const auto wte = to16<H>(randv(V * C, 1)), wpe = to16<H>(randv(T * C, 2)), dout = to16<H>(randv(N * C, 3));
  std::vector<std::int32_t> tok(N);
  for (long long n = 0; n < N; ++n) tok[n] = static_cast<std::int32_t>((n * 7 + 3) % V);
  tok[4] = tok[9] = 2;
  accel::cpu::Stream s;
  std::vector<H> out(N * C);
  nn16<H>().embedding_forward(s, out.data(), tok.data(), wte.data(), wpe.data(), N, T, C, V);
  s.synchronize();
  for (long long n = 0; n < N; ++n) {
    for (long long c = 0; c < C; ++c) {
      const float want = static_cast<float>(wte[tok[n] * C + c]) + static_cast<float>(wpe[(n % T) * C + c]);
      REQUIRE(out[n * C + c].bits() == H(want).bits());
    }
  }
  // Backward into gradients that already hold 0.5 / -0.25: the row sums (float64 here) added once.
  std::vector<H> gte(V * C, H(0.5f)), gpe(T * C, H(-0.25f));
  nn16<H>().embedding_backward(s, gte.data(), gpe.data(), dout.data(), tok.data(), N, T, C, V);
  s.synchronize();
  std::vector<double> rte(V * C, 0.5), rpe(T * C, -0.25);
  for (long long n = 0; n < N; ++n) {
    for (long long c = 0; c < C; ++c) {
      rte[tok[n] * C + c] += static_cast<float>(dout[n * C + c]);
      rpe[(n % T) * C + c] += static_cast<float>(dout[n * C + c]);
    }
  }
  for (std::size_t i = 0; i < rte.size(); ++i) {
    REQUIRE(std::fabs(static_cast<float>(gte[i]) - rte[i]) <= eps<H> * std::fabs(rte[i]) + 1e-6);
  }
  for (std::size_t i = 0; i < rpe.size(); ++i) {
    REQUIRE(std::fabs(static_cast<float>(gpe[i]) - rpe[i]) <= eps<H> * std::fabs(rpe[i]) + 1e-6);
  }
  // A row no token uses keeps its bits (0.5 + 0, rounded, is 0.5).
  CHECK(gte[0 * C + 1].bits() == H(0.5f).bits());
  // 1 and 2 threads: the same bits.
  std::vector<H> g1(V * C, H(0.0f)), g2(V * C, H(0.0f)), p1(T * C, H(0.0f)), p2(T * C, H(0.0f));
  for (const int t : {1, 2}) {
    auto k = nn16<H>();
    k.set_num_threads(t);
    k.embedding_backward(s, (t == 1 ? g1 : g2).data(), (t == 1 ? p1 : p2).data(), dout.data(), tok.data(), N, T, C, V);
    s.synchronize();
  }
  CHECK(bits16(g1) == bits16(g2));
  CHECK(bits16(p1) == bits16(p2));
}

TEST_CASE_TEMPLATE("nn_ops 16-bit layernorm: forward and backward against float64 of the rounded inputs", H,
                   accel::bfloat16, accel::half) {
  constexpr long long N = 70, C = 48;  // more than one 64-row chunk
  const auto x = to16<H>(randv(N * C, 4, -2, 3)), r = to16<H>(randv(N * C, 5));
  const auto w = to16<H>(randv(C, 6, 0.5f, 1.5f)), b = to16<H>(randv(C, 7));
  accel::cpu::Stream s;
  std::vector<H> out(N * C), xsum(N * C);
  std::vector<float> mean(N), rstd(N);
  nn16<H>().layernorm_forward(s, out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 1e-5f,
                              r.data(), xsum.data());
  s.synchronize();
  std::vector<double> xs(N * C);
  for (long long i = 0; i < N * C; ++i) {
    REQUIRE(xsum[i].bits() == H(static_cast<float>(x[i]) + static_cast<float>(r[i])).bits());  // rounded once
    xs[i] = static_cast<float>(xsum[i]);  // the statistics are of the stored sum, as on CUDA
  }
  std::vector<double> ref(N * C), xhat(N * C), m64(N), s64(N);
  for (long long n = 0; n < N; ++n) {
    double m = 0, v = 0;
    for (long long c = 0; c < C; ++c) m += xs[n * C + c];
    m /= C;
    for (long long c = 0; c < C; ++c) v += (xs[n * C + c] - m) * (xs[n * C + c] - m);
    const double sd = 1 / std::sqrt(v / C + 1e-5);
    m64[n] = m;
    s64[n] = sd;
    CHECK(std::fabs(mean[n] - m) < 1e-5);
    CHECK(std::fabs(rstd[n] - sd) < 1e-5 * sd);
    for (long long c = 0; c < C; ++c) {
      xhat[n * C + c] = (xs[n * C + c] - m) * sd;
      ref[n * C + c] = xhat[n * C + c] * static_cast<float>(w[c]) + static_cast<float>(b[c]);
    }
  }
  CHECK(max_rel(out, ref) <= eps<H> + 1e-6);
  // Backward of L = sum(out * dout), accumulated into dx = 0.125, dw = 1, db = -1.
  const auto dout = to16<H>(randv(N * C, 8));
  std::vector<H> dx(N * C, H(0.125f)), dw(C, H(1.0f)), db(C, H(-1.0f));
  std::vector<float> scratch(static_cast<std::size_t>(NnKernels<Cpu>::layernorm_scratch_floats(N, C)));
  nn16<H>().layernorm_backward(s, dx.data(), dw.data(), db.data(), scratch.data(), dout.data(), xsum.data(), w.data(),
                               mean.data(), rstd.data(), N, C);
  s.synchronize();
  std::vector<double> rdx(N * C), rdw(C, 1.0), rdb(C, -1.0);
  for (long long n = 0; n < N; ++n) {
    double mg = 0, mgx = 0;
    for (long long c = 0; c < C; ++c) {
      const double g = static_cast<float>(dout[n * C + c]) * static_cast<double>(static_cast<float>(w[c]));
      mg += g;
      mgx += g * xhat[n * C + c];
    }
    mg /= C;
    mgx /= C;
    for (long long c = 0; c < C; ++c) {
      const double dy = static_cast<float>(dout[n * C + c]);
      const double g = dy * static_cast<float>(w[c]);
      rdx[n * C + c] = 0.125 + (g - mg - xhat[n * C + c] * mgx) * s64[n];
      rdw[c] += dy * xhat[n * C + c];
      rdb[c] += dy;
    }
  }
  CHECK(max_rel(dx, rdx) <= eps<H> + 1e-5);
  CHECK(max_rel(dw, rdw) <= eps<H> + 1e-5);  // summed in float32, rounded once
  CHECK(max_rel(db, rdb) <= eps<H> + 1e-5);
  std::vector<H> a1(N * C, H(0.0f)), a2(N * C, H(0.0f)), w1(C, H(0.0f)), w2(C, H(0.0f)), b1(C, H(0.0f)), b2(C, H(0.0f));
  for (const int t : {1, 2}) {
    auto k = nn16<H>();
    k.set_num_threads(t);
    k.layernorm_backward(s, (t == 1 ? a1 : a2).data(), (t == 1 ? w1 : w2).data(), (t == 1 ? b1 : b2).data(),
                         scratch.data(), dout.data(), xsum.data(), w.data(), mean.data(), rstd.data(), N, C);
    s.synchronize();
  }
  CHECK(bits16(a1) == bits16(a2));
  CHECK(bits16(w1) == bits16(w2));
  CHECK(bits16(b1) == bits16(b2));
}

TEST_CASE_TEMPLATE("nn_ops 16-bit gelu, add, dropout, clip: the float32 kernel's values on the widened inputs, rounded once",
                   H, accel::bfloat16, accel::half) {
  constexpr long long n = 3000;  // several 64-element blocks per thread, and a tail
  auto xf = randv(n, 9, -6, 6);
  xf[0] = 0;
  xf[1] = -20;
  xf[2] = 20;
  const auto x = to16<H>(xf), dy = to16<H>(randv(n, 10)), y2 = to16<H>(randv(n, 11));
  const auto xw = widen(x), dyw = widen(dy), y2w = widen(y2);
  accel::cpu::Stream s;
  std::vector<H> g(n), dg(n), sum(n), drop(n);
  std::vector<float> g32(n), dg32(n);
  std::vector<std::uint32_t> mask(n);
  accel::rng::fill_bits(std::span<std::uint32_t>(mask), 4321, 0);
  nn16<H>().gelu_forward(s, g.data(), x.data(), n);
  nn16<H>().gelu_backward(s, dg.data(), x.data(), dy.data(), n);
  nn16<H>().add(s, sum.data(), x.data(), y2.data(), n);
  nn16<H>().dropout(s, drop.data(), x.data(), mask.data(), n, 0.25f);
  nn32().gelu_forward(s, g32.data(), xw.data(), n);
  nn32().gelu_backward(s, dg32.data(), xw.data(), dyw.data(), n);
  s.synchronize();
  CHECK(bits16(g) == rounded_bits<H>(g32));
  CHECK(bits16(dg) == rounded_bits<H>(dg32));
  std::vector<float> want_sum(n), want_drop(n);
  const float scale = static_cast<float>(1.0 / 0.75);
  for (long long i = 0; i < n; ++i) {
    want_sum[i] = xw[i] + y2w[i];
    want_drop[i] = mask[i] >= 1073741824u ? xw[i] * scale : 0.0f;
  }
  CHECK(bits16(sum) == rounded_bits<H>(want_sum));
  CHECK(bits16(drop) == rounded_bits<H>(want_drop));
  // GELU against float64 too: within one rounding (plus the float32 kernel's own ~3e-7).
  double worst = 0;
  for (long long i = 0; i < n; ++i) {
    const double xi = xw[i];
    const double ref = 0.5 * xi * (1 + std::tanh(std::sqrt(2 / M_PI) * (xi + 0.044715 * xi * xi * xi)));
    worst = std::max(worst, std::fabs(static_cast<float>(g[i]) - ref) / std::max(1.0, std::fabs(ref)));
  }
  CHECK(worst <= eps<H> + 1e-6);
  // Clipping by a norm in memory.
  std::vector<H> c = x;
  float norm = 10.0f;
  nn16<H>().clip(s, c.data(), n, &norm, 1.0f);
  s.synchronize();
  const float coef = 1.0f / (10.0f + 1e-6f);
  std::vector<float> want_clip(n);
  for (long long i = 0; i < n; ++i) want_clip[i] = xw[i] * coef;
  CHECK(bits16(c) == rounded_bits<H>(want_clip));
}

TEST_CASE_TEMPLATE("nn_ops 16-bit cross_entropy: float32 losses of the rounded logits, the gradient rounded once", H,
                   accel::bfloat16, accel::half) {
  constexpr long long N = 9, V = 84, Vp = 96;
  const auto z = to16<H>(randv(N * Vp, 11, -8, 8));
  std::vector<std::int32_t> t(N);
  for (long long n = 0; n < N; ++n) t[n] = static_cast<std::int32_t>((n * 31 + 5) % V);
  accel::cpu::Stream s;
  std::vector<float> losses(N);
  std::vector<H> g = z;
  const float dloss = 1.0f / N;
  nn16<H>().cross_entropy(s, g.data(), losses.data(), t.data(), N, V, Vp, dloss, true);
  s.synchronize();
  for (long long n = 0; n < N; ++n) {
    double m = -1e300, sum = 0;
    for (long long v = 0; v < V; ++v) m = std::max(m, static_cast<double>(static_cast<float>(z[n * Vp + v])));
    for (long long v = 0; v < V; ++v) sum += std::exp(static_cast<float>(z[n * Vp + v]) - m);
    const double loss = std::log(sum) + m - static_cast<float>(z[n * Vp + t[n]]);
    CHECK(std::fabs(losses[n] - loss) < 1e-5 * std::max(1.0, loss));  // float32 arithmetic
    for (long long v = 0; v < V; ++v) {
      const double want = (std::exp(static_cast<float>(z[n * Vp + v]) - m) / sum - (v == t[n] ? 1.0 : 0.0)) * dloss;
      REQUIRE(std::fabs(static_cast<float>(g[n * Vp + v]) - want) <= eps<H> * std::fabs(want) + tiny<H> + 1e-7 * dloss);
    }
    for (long long v = V; v < Vp; ++v) CHECK(g[n * Vp + v].bits() == 0);
  }
}

TEST_CASE("nn_ops: a dtype without kernels is refused when the kernels are loaded") {
  CHECK_THROWS_AS(NnKernels<Cpu>(Cpu{}, accel::Dtype::float64), accel::InvalidArgumentError);
}
