// nn_ops (ops/nn_ops.hpp, kernels/{cpu,cuda}/nn_ops.*): every kernel's forward and backward against a
// float64 reference — closed forms, and central finite differences of the float64 forward for the
// backward passes — through NnKernels<CpuBackend> on a stream; the same bits for 1 and 2 threads.
// On a GPU, the CUDA kernels (float32 and bfloat16) against the CPU kernels; without one, NVRTC and
// nvcc compile them (test_nvrtc.cpp, CMakeLists.txt) and the GPU case skips, saying so.
#include "nn_ops_device_match.hpp"
#include "ops_test_support.hpp"

#include <accel/accel.hpp>
#include <accel/ops.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <list>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace {

using Cpu = accel::CpuBackend;
using accel::ops::NnKernels;

NnKernels<Cpu>& nn() {
  static NnKernels<Cpu> k = [] {
    (void)ops_test::cache_dir();
    return NnKernels<Cpu>(Cpu{});
  }();
  return k;
}

std::vector<float> randv(std::size_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
  return ops_test::random_floats(n, seed, lo, hi);
}

double rel_err(double got, double want) { return std::fabs(got - want) / std::max(1e-3, std::fabs(want)); }

// max |a - b| / max |b|, the tolerance measure of the engine's checks against torch.
double max_rel(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    num = std::max(num, std::fabs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::fabs(b[i]));
  }
  return num / std::max(den, 1e-30);
}

// float64 LayerNorm of one row set.
void ln_ref(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b, long long N,
            long long C, double eps, std::vector<double>& out) {
  out.assign(static_cast<std::size_t>(N * C), 0);
  for (long long n = 0; n < N; ++n) {
    double m = 0, v = 0;
    for (long long c = 0; c < C; ++c) m += x[n * C + c];
    m /= C;
    for (long long c = 0; c < C; ++c) v += (x[n * C + c] - m) * (x[n * C + c] - m);
    v /= C;
    const double s = 1 / std::sqrt(v + eps);
    for (long long c = 0; c < C; ++c) out[n * C + c] = (x[n * C + c] - m) * s * w[c] + b[c];
  }
}

double gelu_ref(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

std::vector<double> to_d(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Central difference of f at x[i] (float64).
double fd(std::vector<double>& x, std::size_t i, const std::function<double()>& f, double h = 1e-5) {
  const double keep = x[i];
  x[i] = keep + h;
  const double up = f();
  x[i] = keep - h;
  const double down = f();
  x[i] = keep;
  return (up - down) / (2 * h);
}

}  // namespace

TEST_CASE("nn_ops embedding: forward exact, backward sums tokens and positions (FD-checked)") {
  constexpr long long B = 3, T = 5, C = 37, V = 11, N = B * T;
  const auto wte = randv(V * C, 1), wpe = randv(T * C, 2), dout = randv(N * C, 3);
  std::vector<std::int32_t> tok(N);
  for (long long n = 0; n < N; ++n) tok[n] = static_cast<std::int32_t>((n * 7 + 3) % V);
  tok[4] = tok[9] = 2;  // a repeated token
  accel::cpu::Stream s;
  std::vector<float> out(N * C);
  nn().embedding_forward(s, out.data(), tok.data(), wte.data(), wpe.data(), N, T, C, V);
  s.synchronize();
  for (long long n = 0; n < N; ++n) {
    for (long long c = 0; c < C; ++c) REQUIRE(out[n * C + c] == wte[tok[n] * C + c] + wpe[(n % T) * C + c]);
  }
  // Backward: dL/dwte and dL/dwpe of L = sum(out * dout), by finite differences of the float64 forward.
  std::vector<double> dte = to_d(wte), dpe = to_d(wpe);
  const auto loss = [&] {
    double l = 0;
    for (long long n = 0; n < N; ++n)
      for (long long c = 0; c < C; ++c) l += (dte[tok[n] * C + c] + dpe[(n % T) * C + c]) * dout[n * C + c];
    return l;
  };
  std::vector<float> gte(V * C, 0.5f), gpe(T * C, -0.25f);  // accumulated into
  nn().embedding_backward(s, gte.data(), gpe.data(), dout.data(), tok.data(), N, T, C, V);
  s.synchronize();
  for (const std::size_t i : {std::size_t{2 * C + 5}, std::size_t{0}, std::size_t{V * C - 1}, std::size_t{3 * C}}) {
    CHECK(rel_err(gte[i] - 0.5, fd(dte, i, loss)) < 1e-6);
  }
  for (const std::size_t i : {std::size_t{0}, std::size_t{C + 3}, std::size_t{T * C - 1}}) {
    CHECK(rel_err(gpe[i] + 0.25, fd(dpe, i, loss)) < 1e-6);
  }
  // Thread count does not change a bit.
  std::vector<float> g1(V * C, 0), g2(V * C, 0), p1(T * C, 0), p2(T * C, 0);
  auto k1 = nn();
  k1.set_num_threads(1);
  k1.embedding_backward(s, g1.data(), p1.data(), dout.data(), tok.data(), N, T, C, V);
  auto k2 = nn();
  k2.set_num_threads(2);
  k2.embedding_backward(s, g2.data(), p2.data(), dout.data(), tok.data(), N, T, C, V);
  s.synchronize();
  CHECK(g1 == g2);
  CHECK(p1 == p2);
  // A token out of range is refused by the kernel (a task failure), and nothing is written.
  tok[3] = static_cast<std::int32_t>(V);
  std::fill(out.begin(), out.end(), 0.0f);
  nn().embedding_forward(s, out.data(), tok.data(), wte.data(), wpe.data(), N, T, C, V);
  CHECK_THROWS_AS(s.synchronize(), accel::TaskError);
  CHECK(out[0] == 0.0f);
}

namespace {

// N = 70: more than one 64-row chunk; C = 48 or 37 (the row sums' 16-column groups, and a tail).
void check_layernorm(const long long C) {
  CAPTURE(C);
  constexpr long long N = 70;
  const auto x = randv(N * C, 4, -2, 3), r = randv(N * C, 5), w = randv(C, 6, 0.5f, 1.5f), b = randv(C, 7);
  accel::cpu::Stream s;
  std::vector<float> out(N * C), mean(N), rstd(N), xsum(N * C);
  nn().layernorm_forward(s, out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 1e-5f, r.data(),
                         xsum.data());
  s.synchronize();
  std::vector<double> xs(N * C);
  for (long long i = 0; i < N * C; ++i) {
    REQUIRE(xsum[i] == x[i] + r[i]);
    xs[i] = static_cast<double>(x[i] + r[i]);
  }
  std::vector<double> ref;
  ln_ref(xs, to_d(w), to_d(b), N, C, 1e-5, ref);
  CHECK(max_rel(out, ref) < 2e-6);
  for (long long n = 0; n < N; ++n) {
    double m = 0;
    for (long long c = 0; c < C; ++c) m += xs[n * C + c];
    CHECK(rel_err(mean[n], m / C) < 1e-5);
  }

  // Backward of L = sum(out * dout) with respect to x, weight and bias.
  const auto dout = randv(N * C, 8);
  std::vector<float> dx(N * C, 0.125f), dw(C, 1.0f), db(C, -1.0f);
  std::vector<float> scratch(static_cast<std::size_t>(NnKernels<Cpu>::layernorm_scratch_floats(N, C)));
  nn().layernorm_backward(s, dx.data(), dw.data(), db.data(), scratch.data(), dout.data(), xsum.data(), w.data(),
                          mean.data(), rstd.data(), N, C);
  s.synchronize();
  std::vector<double> wd = to_d(w), bd = to_d(b);
  const auto loss = [&] {
    std::vector<double> o;
    ln_ref(xs, wd, bd, N, C, 1e-5, o);
    double l = 0;
    for (long long i = 0; i < N * C; ++i) l += o[i] * dout[i];
    return l;
  };
  for (const long long i : {0LL, C + 7, 65 * C + 3, N * C - 1}) {
    CHECK(std::fabs((dx[i] - 0.125) - fd(xs, i, loss, 1e-4)) < 2e-5);
  }
  for (const long long c : {0LL, 13LL, C - 1}) {
    CHECK(rel_err(dw[c] - 1.0, fd(wd, c, loss)) < 1e-5);
    CHECK(rel_err(db[c] + 1.0, fd(bd, c, loss)) < 1e-5);
  }
  // The same bits for 1 and 2 threads (the weight/bias sums go by fixed chunks).
  std::vector<float> a1(N * C, 0), a2(N * C, 0), w1(C, 0), w2(C, 0), b1(C, 0), b2(C, 0);
  for (const int t : {1, 2}) {
    auto k = nn();
    k.set_num_threads(t);
    k.layernorm_backward(s, (t == 1 ? a1 : a2).data(), (t == 1 ? w1 : w2).data(), (t == 1 ? b1 : b2).data(),
                         scratch.data(), dout.data(), xsum.data(), w.data(), mean.data(), rstd.data(), N, C);
    s.synchronize();
  }
  CHECK(a1 == a2);
  CHECK(w1 == w2);
  CHECK(b1 == b2);
  // A residual without residual_out is refused before anything is enqueued.
  CHECK_THROWS_WITH_AS(nn().layernorm_forward(s, out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N,
                                              C, 1e-5f, r.data(), nullptr),
                       doctest::Contains("nn_ops layernorm_forward: a residual is given but residual_out is null"),
                       accel::InvalidArgumentError);
  // dinp overlapping dout or inp (by one element, either side) is refused before anything is enqueued.
  std::vector<float> shared_buf(static_cast<std::size_t>(2 * N * C), 0.5f);
  const std::vector<float> shared_before = shared_buf, w_before = w1;
  for (const auto& [dinp, other, name] :
       {std::tuple{shared_buf.data() + N * C - 1, shared_buf.data(), "dout"},
        std::tuple{shared_buf.data(), shared_buf.data() + N * C - 1, "inp"}}) {
    CAPTURE(name);
    const bool is_dout = std::string(name) == "dout";
    const std::string expected = std::string("dinp overlaps ") + name;
    CHECK_THROWS_WITH_AS(nn().layernorm_backward(s, dinp, w1.data(), b1.data(), scratch.data(),
                                                 is_dout ? other : dout.data(), is_dout ? xsum.data() : other,
                                                 w.data(), mean.data(), rstd.data(), N, C),
                         doctest::Contains(expected.c_str()), accel::InvalidArgumentError);
  }
  s.synchronize();
  CHECK(shared_buf == shared_before);
  CHECK(w1 == w_before);
  // Adjacent (not overlapping) buffers are accepted.
  nn().layernorm_backward(s, shared_buf.data() + N * C, w1.data(), b1.data(), scratch.data(), shared_buf.data(),
                          xsum.data(), w.data(), mean.data(), rstd.data(), N, C);
  s.synchronize();
  CHECK(shared_buf[static_cast<std::size_t>(N * C)] != 0.5f);
}

}  // namespace

TEST_CASE("nn_ops layernorm: forward against float64, residual fused, backward against finite differences") {
  check_layernorm(48);
  check_layernorm(37);
}

TEST_CASE("nn_ops gelu: forward against float64 tanh GELU, backward against its derivative and FD") {
  std::vector<float> x = randv(1000, 9, -6, 6);
  x[0] = 0;
  x[1] = -20;
  x[2] = 20;
  x[3] = 1e-4f;
  accel::cpu::Stream s;
  std::vector<float> y(x.size()), dx(x.size());
  const auto dy = randv(x.size(), 10);
  nn().gelu_forward(s, y.data(), x.data(), static_cast<long long>(x.size()));
  nn().gelu_backward(s, dx.data(), x.data(), dy.data(), static_cast<long long>(x.size()));
  s.synchronize();
  std::vector<double> xd = to_d(x);
  double worst_y = 0, worst_dx = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    worst_y = std::max(worst_y, std::fabs(y[i] - gelu_ref(xd[i])) / std::max(1.0, std::fabs(gelu_ref(xd[i]))));
    const double g = fd(xd, i, [&] { return gelu_ref(xd[i]); }, 1e-6);
    worst_dx = std::max(worst_dx, std::fabs(dx[i] - g * dy[i]));
  }
  CHECK(worst_y < 3e-7);
  CHECK(worst_dx < 1e-6);
  CHECK(std::fabs(y[1]) < 1e-30f);  // GELU(-20) is -0 in float64 rounding; the kernel gives at most ~1e-37
  CHECK(y[2] == 20.0f);  // GELU(20) = 20 in float
  // In place: dinp == dout.
  std::vector<float> g = dy;
  nn().gelu_backward(s, g.data(), x.data(), g.data(), static_cast<long long>(x.size()));
  s.synchronize();
  CHECK(g == dx);
}

namespace {

// The CPU as nn_ops_device_match.hpp's device side: host vectors on one stream.
class CpuDevice {
 public:
  using Backend = Cpu;
  [[nodiscard]] NnKernels<Backend> kernels(accel::Dtype dt) const { return NnKernels<Backend>(Backend{}, dt); }
  [[nodiscard]] accel::cpu::StreamRef stream() { return s_; }
  template <class T>
  T* up(const std::vector<T>& h, long long offset) {
    auto& bytes = keep_.emplace_back((h.size() + static_cast<std::size_t>(offset)) * sizeof(T));
    T* p = reinterpret_cast<T*>(bytes.data()) + offset;
    std::memcpy(p, h.data(), h.size() * sizeof(T));
    return p;
  }
  template <class T>
  std::vector<T> down(const T* p, std::size_t n) {
    s_.synchronize();
    return std::vector<T>(p, p + n);
  }

 private:
  accel::cpu::Stream s_;
  std::list<std::vector<std::byte>> keep_;
};

}  // namespace

TEST_CASE("nn_ops gelu at float's range ends: GELU x or 0, GELU' 1 or 0, NaN kept; float32, bfloat16, float16") {
  CpuDevice dev;
  nn_match::gelu_range_ends<float>(dev);
  nn_match::gelu_range_ends<accel::bfloat16>(dev);
  nn_match::gelu_range_ends<accel::half>(dev);
}

TEST_CASE("nn_ops cross_entropy: losses against float64 logsumexp, the gradient against FD, padding zeroed") {
  constexpr long long N = 9, V = 84, Vp = 96;
  auto z = randv(N * Vp, 11, -8, 8);
  std::vector<std::int32_t> t(N);
  for (long long n = 0; n < N; ++n) t[n] = static_cast<std::int32_t>((n * 31 + 5) % V);
  accel::cpu::Stream s;
  std::vector<float> losses(N), z_eval = z;
  nn().cross_entropy(s, z_eval.data(), losses.data(), t.data(), N, V, Vp, 1.0f, false);
  s.synchronize();
  CHECK(z_eval == z);  // without write_grad the logits stay
  std::vector<double> zd = to_d(z);
  const auto row_loss = [&](long long n) {
    double m = -1e300, sum = 0;
    for (long long v = 0; v < V; ++v) m = std::max(m, zd[n * Vp + v]);
    for (long long v = 0; v < V; ++v) sum += std::exp(zd[n * Vp + v] - m);
    return std::log(sum) + m - zd[n * Vp + t[n]];
  };
  for (long long n = 0; n < N; ++n) CHECK(rel_err(losses[n], row_loss(n)) < 1e-6);
  const float dloss = 1.0f / N;
  std::vector<float> g = z;
  nn().cross_entropy(s, g.data(), losses.data(), t.data(), N, V, Vp, dloss, true);
  s.synchronize();
  const auto total = [&] {
    double l = 0;
    for (long long n = 0; n < N; ++n) l += row_loss(n);
    return l * dloss;
  };
  for (const long long n : {0LL, 4LL, N - 1}) {
    for (const long long v : {0LL, static_cast<long long>(t[n]), V - 1}) {
      CHECK(std::fabs(g[n * Vp + v] - fd(zd, static_cast<std::size_t>(n * Vp + v), total)) < 1e-7);
    }
    for (long long v = V; v < Vp; ++v) CHECK(g[n * Vp + v] == 0.0f);
    double row = 0;
    for (long long v = 0; v < V; ++v) row += g[n * Vp + v];
    CHECK(std::fabs(row) < 1e-7);  // softmax sums to one, the target takes one
  }
}

TEST_CASE("nn_ops add: the residual add, exact, in place too") {
  const auto a = randv(1000, 30), b = randv(1000, 31);
  std::vector<float> out(1000), c = a;
  accel::cpu::Stream s;
  nn().add(s, out.data(), a.data(), b.data(), 1000);
  nn().add(s, c.data(), c.data(), b.data(), 1000);
  s.synchronize();
  for (int i = 0; i < 1000; ++i) REQUIRE(out[i] == a[i] + b[i]);
  CHECK(c == out);
}

TEST_CASE("nn_ops dropout and clip: the exact mask and scale, and clipping by a norm in memory") {
  constexpr long long n = 4096;
  const auto x = randv(n, 12);
  std::vector<std::uint32_t> bits(n);
  accel::rng::fill_bits(std::span<std::uint32_t>(bits), 1234, 0);
  accel::cpu::Stream s;
  std::vector<float> y(n);
  const float p = 0.25f;
  nn().dropout(s, y.data(), x.data(), bits.data(), n, p);
  s.synchronize();
  long long kept = 0;
  const float scale = static_cast<float>(1.0 / 0.75);
  for (long long i = 0; i < n; ++i) {
    const bool keep = bits[i] >= 1073741824u;  // 0.25 * 2^32
    kept += keep;
    REQUIRE(y[i] == (keep ? x[i] * scale : 0.0f));
  }
  CHECK(kept > n * 0.72);
  CHECK(kept < n * 0.78);
  CHECK_THROWS_WITH_AS(nn().dropout(s, y.data(), x.data(), bits.data(), n, 1.0f),
                       doctest::Contains("nn_ops dropout: p = 1 is outside [0, 1)"), accel::InvalidArgumentError);

  std::vector<float> g = x;
  float norm = 10.0f;
  nn().clip(s, g.data(), n, &norm, 1.0f);
  s.synchronize();
  const float coef = 1.0f / (10.0f + 1e-6f);
  for (long long i = 0; i < n; ++i) REQUIRE(g[i] == x[i] * coef);
  norm = 0.5f;  // below max_norm: unchanged
  g = x;
  nn().clip(s, g.data(), n, &norm, 1.0f);
  s.synchronize();
  CHECK(g == x);
}

#if defined(ACCEL_HAS_CUDA)
TEST_CASE("nn_ops: a bad argument is refused before anything is enqueued, naming the argument") {
  accel::cpu::Stream s;
  std::vector<float> x(64, 1.0f), y(64, 2.0f), w(8, 1.0f), mean(8), rstd(8);
  std::vector<std::int32_t> tok(8, 0);
  float norm = 1.0f;
  const auto message = [](auto&& call) -> std::string {
    try {
      call();
    } catch (const accel::InvalidArgumentError& e) {
      return e.what();
    }
    return "no error";
  };
  CHECK(message([&] { nn().add(s, y.data(), x.data(), nullptr, 64); }) == "nn_ops add: b is a null pointer");
  CHECK(message([&] { nn().add(s, y.data(), x.data(), x.data(), -1); }) == "nn_ops add: n = -1 must be >= 0");
  CHECK(message([&] { nn().gelu_backward(s, y.data(), nullptr, x.data(), 64); }) ==
        "nn_ops gelu_backward: inp is a null pointer");
  CHECK(message([&] { nn().embedding_forward(s, y.data(), tok.data(), x.data(), x.data(), 8, 0, 8, 8); }) ==
        "nn_ops embedding_forward: T = 0 must be >= 1");
  CHECK(message([&] { nn().embedding_forward(s, y.data(), nullptr, x.data(), x.data(), 8, 8, 8, 8); }) ==
        "nn_ops embedding_forward: tokens is a null pointer");
  CHECK(message([&] { nn().cross_entropy(s, x.data(), y.data(), tok.data(), 8, 84, 80, 1.0f, false); }) ==
        "nn_ops cross_entropy: Vp = 80 must be >= 84");
  CHECK(message([&] {
          nn().layernorm_forward(s, y.data(), mean.data(), rstd.data(), x.data(), w.data(), nullptr, 8, 8);
        }) == "nn_ops layernorm_forward: bias is a null pointer");
  CHECK(message([&] {
          nn().layernorm_forward(s, y.data(), mean.data(), rstd.data(), x.data(), w.data(), w.data(), 8, 8, -1.0f);
        }) == "nn_ops layernorm_forward: eps = -1 must be >= 0");
  CHECK(message([&] { nn().clip(s, x.data(), 64, nullptr, 1.0f); }) == "nn_ops clip: norm is a null pointer");
  CHECK(message([&] { nn().clip(s, x.data(), 64, &norm, 0.0f); }) == "nn_ops clip: max_norm = 0 must be > 0");
  const int threads = nn().num_threads();
  CHECK(message([&] { nn().set_num_threads(-2); }) == "NnKernels::set_num_threads: n = -2 (it must be >= 0; 0: every core)");
  CHECK(nn().num_threads() == threads);  // unchanged (a negative count was taken as 0 before)
  // nothing to do: null pointers with a count of 0 are accepted, and nothing is written
  nn().add(s, nullptr, nullptr, nullptr, 0);
  nn().gelu_forward(s, nullptr, nullptr, 0);
  s.synchronize();
  CHECK(y == std::vector<float>(64, 2.0f));  // no refused call reached the kernel
}

TEST_CASE("nn_ops on CUDA: float32 and bfloat16 kernels against the CPU kernels") {
  const accel::CudaBackend cuda;
  if (cuda.device_count() == 0) {
    MESSAGE("skipped: no CUDA device (the CUDA kernels are compiled by NVRTC and nvcc in test_nvrtc/test_ops_nvcc)");
    return;
  }
  (void)ops_test::cache_dir();
  NnKernels<accel::CudaBackend> g32(cuda, accel::Dtype::float32);
  accel::cuda::Stream s;
  constexpr long long N = 130, C = 96, V = 84, Vp = 128, T = 13;
  const auto upload = [&](const std::vector<float>& h) {
    accel::Buffer<float, accel::CudaBackend> d(h.size(), s);
    cuda.copy_async(s, d.data(), h.data(), h.size() * 4);
    return d;
  };
  const auto download = [&](const accel::Buffer<float, accel::CudaBackend>& d) {
    std::vector<float> h(d.size());
    cuda.copy_async(s, h.data(), d.data(), d.size() * 4);
    s.synchronize();
    return h;
  };
  const auto close = [](const std::vector<float>& a, const std::vector<float>& b, double tol) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      num = std::max(num, std::fabs(static_cast<double>(a[i]) - b[i]));
      den = std::max(den, std::fabs(static_cast<double>(b[i])));
    }
    return num / std::max(den, 1e-30) < tol;
  };
  accel::cpu::Stream hs;
  // LayerNorm forward and backward.
  const auto x = randv(N * C, 20, -2, 2), r = randv(N * C, 21), w = randv(C, 22, 0.5f, 1.5f), b = randv(C, 23),
             dy = randv(N * C, 24);
  std::vector<float> out(N * C), mean(N), rstd(N), xs(N * C), dx(N * C, 0), dw(C, 0), db(C, 0);
  std::vector<float> scratch(static_cast<std::size_t>(NnKernels<Cpu>::layernorm_scratch_floats(N, C)));
  nn().layernorm_forward(hs, out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 1e-5f, r.data(),
                         xs.data());
  nn().layernorm_backward(hs, dx.data(), dw.data(), db.data(), scratch.data(), dy.data(), xs.data(), w.data(),
                          mean.data(), rstd.data(), N, C);
  hs.synchronize();
  auto dX = upload(x), dR = upload(r), dW = upload(w), dB = upload(b), dDY = upload(dy);
  accel::Buffer<float, accel::CudaBackend> dOut(N * C, s), dMean(N, s), dRstd(N, s), dXs(N * C, s),
      dScratch(scratch.size(), s);
  auto dDX = upload(std::vector<float>(N * C, 0)), dDW = upload(std::vector<float>(C, 0)),
       dDB = upload(std::vector<float>(C, 0));
  g32.layernorm_forward(s, dOut.data(), dMean.data(), dRstd.data(), dX.data(), dW.data(), dB.data(), N, C, 1e-5f,
                        dR.data(), dXs.data());
  g32.layernorm_backward(s, dDX.data(), dDW.data(), dDB.data(), dScratch.data(), dDY.data(), dXs.data(), dW.data(),
                         dMean.data(), dRstd.data(), N, C);
  CHECK(close(download(dOut), out, 1e-6));
  CHECK(download(dXs) == xs);
  CHECK(close(download(dDX), dx, 1e-5));
  CHECK(close(download(dDW), dw, 1e-5));
  CHECK(close(download(dDB), db, 1e-5));
  // GELU.
  std::vector<float> gy(N * C), gdx(N * C);
  nn().gelu_forward(hs, gy.data(), x.data(), N * C);
  nn().gelu_backward(hs, gdx.data(), x.data(), dy.data(), N * C);
  hs.synchronize();
  accel::Buffer<float, accel::CudaBackend> dGy(N * C, s), dGdx(N * C, s);
  g32.gelu_forward(s, dGy.data(), dX.data(), N * C);
  g32.gelu_backward(s, dGdx.data(), dX.data(), dDY.data(), N * C);
  CHECK(close(download(dGy), gy, 1e-6));
  CHECK(close(download(dGdx), gdx, 1e-6));
  // Cross-entropy with its gradient.
  auto z = randv(N * Vp, 25, -5, 5);
  std::vector<std::int32_t> t(N);
  for (long long n = 0; n < N; ++n) t[n] = static_cast<std::int32_t>((n * 13) % V);
  std::vector<float> loss(N), zg = z;
  nn().cross_entropy(hs, zg.data(), loss.data(), t.data(), N, V, Vp, 0.01f, true);
  hs.synchronize();
  auto dZ = upload(z);
  accel::Buffer<float, accel::CudaBackend> dLoss(N, s);
  accel::Buffer<std::int32_t, accel::CudaBackend> dT(N, s);
  cuda.copy_async(s, dT.data(), t.data(), N * 4);
  g32.cross_entropy(s, dZ.data(), dLoss.data(), dT.data(), N, V, Vp, 0.01f, true);
  CHECK(close(download(dLoss), loss, 1e-6));
  CHECK(close(download(dZ), zg, 1e-6));
  // Embedding forward and backward.
  const auto wte = randv(V * C, 26), wpe = randv(T * C, 27);
  std::vector<float> emb(N * C), gte(V * C, 0), gpe(T * C, 0);
  nn().embedding_forward(hs, emb.data(), t.data(), wte.data(), wpe.data(), N, T, C, V);
  nn().embedding_backward(hs, gte.data(), gpe.data(), dy.data(), t.data(), N, T, C, V);
  hs.synchronize();
  auto dWte = upload(wte), dWpe = upload(wpe), dGte = upload(std::vector<float>(V * C, 0)),
       dGpe = upload(std::vector<float>(T * C, 0));
  accel::Buffer<float, accel::CudaBackend> dEmb(N * C, s);
  g32.embedding_forward(s, dEmb.data(), dT.data(), dWte.data(), dWpe.data(), N, T, C, V);
  g32.embedding_backward(s, dGte.data(), dGpe.data(), dDY.data(), dT.data(), N, T, C, V);
  CHECK(download(dEmb) == emb);
  CHECK(close(download(dGte), gte, 1e-6));
  CHECK(close(download(dGpe), gpe, 1e-6));
  // bfloat16: LayerNorm forward within bf16 rounding of the float32 result.
  NnKernels<accel::CudaBackend> g16(cuda, accel::Dtype::bfloat16);
  std::vector<accel::bfloat16> xb(N * C), wb(C), bb(C);
  for (long long i = 0; i < N * C; ++i) xb[i] = accel::bfloat16(x[i]);
  for (long long c = 0; c < C; ++c) {
    wb[c] = accel::bfloat16(w[c]);
    bb[c] = accel::bfloat16(b[c]);
  }
  accel::Buffer<accel::bfloat16, accel::CudaBackend> dXb(N * C, s), dWb(C, s), dBb(C, s), dOb(N * C, s);
  cuda.copy_async(s, dXb.data(), xb.data(), N * C * 2);
  cuda.copy_async(s, dWb.data(), wb.data(), C * 2);
  cuda.copy_async(s, dBb.data(), bb.data(), C * 2);
  g16.layernorm_forward(s, dOb.data(), dMean.data(), dRstd.data(), dXb.data(), dWb.data(), dBb.data(), N, C);
  std::vector<accel::bfloat16> ob(N * C);
  cuda.copy_async(s, ob.data(), dOb.data(), N * C * 2);
  s.synchronize();
  std::vector<double> xr(N * C), ref;
  for (long long i = 0; i < N * C; ++i) xr[i] = static_cast<float>(xb[i]);
  std::vector<double> wr(C), br(C);
  for (long long c = 0; c < C; ++c) {
    wr[c] = static_cast<float>(wb[c]);
    br[c] = static_cast<float>(bb[c]);
  }
  ln_ref(xr, wr, br, N, C, 1e-5, ref);
  std::vector<float> of(N * C);
  for (long long i = 0; i < N * C; ++i) of[i] = static_cast<float>(ob[i]);
  CHECK(max_rel(of, ref) < 1e-2);
}

namespace {

// The GPU as nn_ops_device_match.hpp's device side: CUDA buffers on one stream.
class CudaDevice {
 public:
  using Backend = accel::CudaBackend;
  explicit CudaDevice(const Backend& cuda) : cuda_(cuda) {}
  [[nodiscard]] NnKernels<Backend> kernels(accel::Dtype dt) const { return NnKernels<Backend>(cuda_, dt); }
  [[nodiscard]] Backend::StreamRef stream() { return s_; }
  template <class T>
  T* up(const std::vector<T>& h, long long offset) {
    auto& buf = keep_.emplace_back((h.size() + static_cast<std::size_t>(offset)) * sizeof(T), s_);
    T* p = reinterpret_cast<T*>(buf.data()) + offset;
    cuda_.copy_async(s_, p, h.data(), h.size() * sizeof(T));
    return p;
  }
  template <class T>
  std::vector<T> down(const T* p, std::size_t n) {
    std::vector<T> h(n);
    cuda_.copy_async(s_, h.data(), p, n * sizeof(T));
    s_.synchronize();
    return h;
  }

 private:
  Backend cuda_;
  accel::cuda::Stream s_;
  std::list<accel::Buffer<std::byte, Backend>> keep_;
};

}  // namespace

TEST_CASE("nn_ops on CUDA: the 16-byte and the one-element paths, float32, bfloat16 and float16, against the CPU kernels") {
  const accel::CudaBackend cuda;
  if (cuda.device_count() == 0) {
    MESSAGE("skipped: no CUDA device (the CUDA kernels are compiled by NVRTC and nvcc in test_nvrtc/test_ops_nvcc)");
    return;
  }
  (void)ops_test::cache_dir();
  CudaDevice dev(cuda);
  nn_match::matches_cpu_every_path(dev, true);
  nn_match::gelu_range_ends<float>(dev);
  nn_match::gelu_range_ends<accel::bfloat16>(dev);
  nn_match::gelu_range_ends<accel::half>(dev);
}
#endif
