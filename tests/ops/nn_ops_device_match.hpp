// nn_ops_device_match.hpp — every nn_ops kernel of a device against the CPU kernels, the same calls on
// both through NnKernels (so the device runs the launch shapes accel gives it). The device is a GPU
// (test_nn_ops.cpp, CudaBackend) or the CUDA kernels' own source run on the CPU
// (test_nn_ops_cuda_host.cpp, tests/support/cuda_host.hpp): CI checks the CUDA kernels on every commit
// without a GPU, and the GPU runs check them on the device with the same cases.
//
// A device side Dev provides:
//   using Backend;                                       NnKernels<Backend> kernels(Dtype) const;
//   typename Backend::StreamRef stream();
//   template <class T> T* up(const std::vector<T>& host, long long offset);   a device copy, `offset`
//       elements past its allocation's start, kept while dev lives
//   template <class T> std::vector<T> down(const T* p, std::size_t n);        after the stream's work
#pragma once

#include "ops_test_support.hpp"

#include "../support/storage16.hpp"

#include <accel/cpu/backend.hpp>
#include <accel/ops/nn_ops.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

namespace nn_match {

/// max |a - b| / max |b|, the measure of the engine's checks against torch.
inline double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::fabs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::fabs(static_cast<double>(b[i])));
  }
  return num / std::max(den, 1e-30);
}

/// GELU and its gradient at float's range ends on dev's kernels at storage S: GELU x (x >= 11) or 0
/// (x <= -11) and GELU' 1 or 0, as float precision gives them, and a NaN stays NaN. Formulas fed a clamped
/// exponent once gave GELU(-FLT_MAX) = -1.4 and GELU'(1e20) = inf on the CPU, GELU'(1e20) = NaN on CUDA.
template <class S, class Dev>
void gelu_range_ends(Dev& dev) {
  constexpr bool f32 = std::is_same_v<S, float>;
  const accel::Dtype dt = f32 ? accel::Dtype::float32 : test16::dtype_of<S>;
  CAPTURE(accel::name(dt));
  (void)ops_test::cache_dir();
  std::vector<S> x;
  for (const float v : {11.0f, 12.0f, 20.0f, 1e3f, 6e4f, 1e11f, 1e19f, 1e20f, 1e30f, std::numeric_limits<float>::max()}) {
    if (!std::isfinite(static_cast<float>(S(v)))) continue;  // past float16's range
    x.push_back(S(v));
    x.push_back(S(-v));
  }
  x.push_back(S(std::numeric_limits<float>::quiet_NaN()));
  const std::size_t n = x.size();
  auto gk = dev.kernels(dt);
  auto s = dev.stream();
  S* gx = dev.up(x, 0);
  S* gdy = dev.up(std::vector<S>(n, S(1.0f)), 0);
  S* gy = dev.up(std::vector<S>(n, S(0.0f)), 0);
  S* gdx = dev.up(std::vector<S>(n, S(0.0f)), 0);
  gk.gelu_forward(s, gy, gx, static_cast<std::int64_t>(n));
  gk.gelu_backward(s, gdx, gx, gdy, static_cast<std::int64_t>(n));
  const std::vector<S> y = dev.down(gy, n), dx = dev.down(gdx, n);
  for (std::size_t i = 0; i + 1 < n; ++i) {
    const float xi = static_cast<float>(x[i]), yi = static_cast<float>(y[i]), dxi = static_cast<float>(dx[i]);
    const float want_y = xi > 0 ? xi : 0.0f, want_dx = xi > 0 ? 1.0f : 0.0f;
    INFO("GELU(" << xi << ") = " << yi << " (want " << want_y << "), GELU' = " << dxi << " (want " << want_dx << ")");
    CHECK(std::fabs(yi - want_y) <= 1e-6f * std::max(1.0f, std::fabs(want_y)));
    CHECK(std::fabs(dxi - want_dx) <= 1e-6f);
  }
  INFO("GELU(NaN) = " << static_cast<float>(y.back()) << ", GELU'(NaN) = " << static_cast<float>(dx.back()));
  CHECK(std::isnan(static_cast<float>(y.back())));
  CHECK(std::isnan(static_cast<float>(dx.back())));
}

/// Every nn_ops kernel, the device against the CPU, at storage S (float, accel::bfloat16 or accel::half),
/// for N rows of C with the device pointers `offset` elements past their allocation (offset 0: 16-byte
/// aligned, so the 16-byte paths run where C % 8 == 0; 1: the one-element fallbacks). Elementwise
/// kernels run on N * C - 3 elements (a tail after the groups of 8). Exact where both backends round the
/// same float32 value once (add, dropout, clipping, the embedding forward, the residual sum); else within
/// tol of the largest magnitude (summation orders differ; in 16 bits a flipped rounding is one unit).
template <class S, class Dev>
void matches_cpu(Dev& dev, long long N, long long C, long long offset, double tol) {
  using Cpu = accel::CpuBackend;
  CAPTURE(N);
  CAPTURE(C);
  CAPTURE(offset);
  constexpr bool f32 = std::is_same_v<S, float>;
  const accel::Dtype dt = f32 ? accel::Dtype::float32 : test16::dtype_of<S>;
  CAPTURE(accel::name(dt));
  (void)ops_test::cache_dir();
  accel::ops::NnKernels<Cpu> hk(Cpu{}, dt);
  auto gk = dev.kernels(dt);
  auto s = dev.stream();
  accel::cpu::Stream hs;
  const auto conv = [](const std::vector<float>& v) {
    std::vector<S> o(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) o[i] = S(v[i]);
    return o;
  };
  const auto wide = [](const std::vector<S>& v) {
    std::vector<float> o(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) o[i] = static_cast<float>(v[i]);
    return o;
  };
  const auto up = [&](const auto& h) { return dev.up(h, offset); };
  const auto down = [&](const auto* p, std::size_t n) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(*p)>, S>) {
      return wide(dev.down(p, n));
    } else {
      return dev.down(p, n);
    }
  };
  const auto randv = [](std::size_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
    return ops_test::random_floats(n, seed, lo, hi);
  };
  const auto nc = static_cast<std::size_t>(N * C), c = static_cast<std::size_t>(C), rows = static_cast<std::size_t>(N);
  // LayerNorm with the residual add, and its backward into a non-zero dinp, dweight and dbias.
  auto x = conv(randv(nc, 40, -2, 2)), r = conv(randv(nc, 41)), w = conv(randv(c, 42, 0.5f, 1.5f)),
       b = conv(randv(c, 43)), dy = conv(randv(nc, 44)), dx = conv(randv(nc, 45)), dw = conv(randv(c, 46)),
       db = conv(randv(c, 47));
  std::vector<S> out(nc), xs(nc);
  std::vector<float> mean(rows), rstd(rows);
  std::vector<float> scratch(static_cast<std::size_t>(accel::ops::NnKernels<Cpu>::layernorm_scratch_floats(N, C)));
  S *gX = up(x), *gR = up(r), *gW = up(w), *gB = up(b), *gDy = up(dy), *gDx = up(dx), *gDw = up(dw), *gDb = up(db),
    *gOut = up(out), *gXs = up(xs);
  float *gMean = up(mean), *gRstd = up(rstd), *gScratch = up(scratch);
  hk.layernorm_forward(hs, out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 1e-5f, r.data(),
                       xs.data());
  hk.layernorm_backward(hs, dx.data(), dw.data(), db.data(), scratch.data(), dy.data(), xs.data(), w.data(),
                        mean.data(), rstd.data(), N, C);
  hs.synchronize();
  gk.layernorm_forward(s, gOut, gMean, gRstd, gX, gW, gB, N, C, 1e-5f, gR, gXs);
  gk.layernorm_backward(s, gDx, gDw, gDb, gScratch, gDy, gXs, gW, gMean, gRstd, N, C);
  CHECK(down(gXs, nc) == wide(xs));
  CHECK(max_rel(down(gOut, nc), wide(out)) < tol);
  CHECK(max_rel(down(gMean, rows), mean) < 1e-5);
  CHECK(max_rel(down(gRstd, rows), rstd) < 1e-5);
  CHECK(max_rel(down(gDx, nc), wide(dx)) < tol);
  CHECK(max_rel(down(gDw, c), wide(dw)) < tol);
  CHECK(max_rel(down(gDb, c), wide(db)) < tol);
  // Elementwise: GELU forward and backward, the add, dropout (p = 0.25) and clipping.
  const auto n = static_cast<std::int64_t>(nc) - 3;
  std::vector<S> gy(nc), gdx(nc), sum(nc), drop(nc), clipped = x;
  std::vector<std::uint32_t> bits(nc);
  for (std::size_t i = 0; i < nc; ++i) bits[i] = static_cast<std::uint32_t>(i * 2654435761u);
  S *gGy = up(gy), *gGdx = up(gdx), *gSum = up(sum), *gDrop = up(drop), *gClip = up(clipped);
  std::uint32_t* gBits = up(bits);
  const float norm = 4.0f;
  float* gNorm = up(std::vector<float>{norm});
  hk.gelu_forward(hs, gy.data(), x.data(), n);
  hk.gelu_backward(hs, gdx.data(), x.data(), dy.data(), n);
  hk.add(hs, sum.data(), x.data(), r.data(), n);
  hk.dropout(hs, drop.data(), x.data(), bits.data(), n, 0.25f);
  hk.clip(hs, clipped.data(), n, &norm, 1.0f);
  hs.synchronize();
  gk.gelu_forward(s, gGy, gX, n);
  gk.gelu_backward(s, gGdx, gX, gDy, n);
  gk.add(s, gSum, gX, gR, n);
  gk.dropout(s, gDrop, gX, gBits, n, 0.25f);
  gk.clip(s, gClip, n, gNorm, 1.0f);
  CHECK(max_rel(down(gGy, nc), wide(gy)) < (f32 ? 1e-6 : tol));
  CHECK(max_rel(down(gGdx, nc), wide(gdx)) < (f32 ? 1e-6 : tol));
  CHECK(down(gSum, nc) == wide(sum));
  CHECK(down(gDrop, nc) == wide(drop));
  CHECK(down(gClip, nc) == wide(clipped));
  // Cross-entropy over V = 84 of Vp = 128 columns, with its gradient written over the logits.
  constexpr long long V = 84, Vp = 128;
  auto z = conv(randv(rows * Vp, 25, -5, 5)), zg = z;
  std::vector<std::int32_t> tok(rows);
  for (long long i = 0; i < N; ++i) tok[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 13 + i / 7) % V);
  std::vector<float> loss(rows);
  S* gZ = up(z);
  float* gLoss = up(loss);
  std::int32_t* gTok = up(tok);
  hk.cross_entropy(hs, zg.data(), loss.data(), tok.data(), N, V, Vp, 0.01f, true);
  hs.synchronize();
  gk.cross_entropy(s, gZ, gLoss, gTok, N, V, Vp, 0.01f, true);
  CHECK(max_rel(down(gLoss, rows), loss) < 1e-6);
  CHECK(max_rel(down(gZ, rows * Vp), wide(zg)) < (f32 ? 1e-6 : tol));
  // Embedding forward and backward (T = 100; N not a multiple of 4: the token scan's tail).
  constexpr long long T = 100;
  auto wte = conv(randv(static_cast<std::size_t>(V * C), 48)), wpe = conv(randv(static_cast<std::size_t>(T * C), 49)),
       gte = conv(randv(static_cast<std::size_t>(V * C), 50)), gpe = conv(randv(static_cast<std::size_t>(T * C), 51));
  std::vector<S> emb(nc);
  S *gWte = up(wte), *gWpe = up(wpe), *gGte = up(gte), *gGpe = up(gpe), *gEmb = up(emb);
  hk.embedding_forward(hs, emb.data(), tok.data(), wte.data(), wpe.data(), N, T, C, V);
  hk.embedding_backward(hs, gte.data(), gpe.data(), dy.data(), tok.data(), N, T, C, V);
  hs.synchronize();
  gk.embedding_forward(s, gEmb, gTok, gWte, gWpe, N, T, C, V);
  gk.embedding_backward(s, gGte, gGpe, gDy, gTok, N, T, C, V);
  CHECK(down(gEmb, nc) == wide(emb));
  CHECK(max_rel(down(gGte, static_cast<std::size_t>(V * C)), wide(gte)) < tol);
  CHECK(max_rel(down(gGpe, static_cast<std::size_t>(T * C)), wide(gpe)) < tol);
}

/// Every path of the kernels: the 16-byte paths at GPT-2's width (3 groups of 8 per lane), a partial
/// last group per lane (1000), the widest row held in registers (1024), past it (1088: the one-element
/// LayerNorm), an odd width, unaligned pointers, 57 chunks of 64 rows (every warp of LayerNorm's reduce
/// adds some); float32, bfloat16 and float16 (16 bits: the results differ from the CPU's where a sum
/// order flips a rounding, one unit: 2^-8 in bfloat16, 2^-11 in float16). `full`: the row counts a GPU
/// runs in milliseconds; else fewer rows of the same widths (a CPU emulation runs them in seconds).
template <class Dev>
void matches_cpu_every_path(Dev& dev, bool full) {
  const auto rows = [full](long long gpu, long long emulated) { return full ? gpu : emulated; };
  matches_cpu<float>(dev, rows(1503, 37), 768, 0, 1e-5);
  matches_cpu<float>(dev, rows(200, 21), 1000, 0, 1e-5);
  matches_cpu<float>(dev, rows(130, 13), 1024, 0, 1e-5);
  matches_cpu<float>(dev, rows(70, 9), 1088, 0, 1e-5);
  matches_cpu<float>(dev, rows(300, 45), 77, 0, 1e-5);
  matches_cpu<float>(dev, rows(300, 30), 96, 1, 1e-5);
  matches_cpu<float>(dev, 3600, 8, 0, 1e-5);
  matches_cpu<accel::bfloat16>(dev, rows(1503, 37), 768, 0, 1e-2);
  matches_cpu<accel::bfloat16>(dev, rows(300, 45), 77, 1, 1e-2);
  matches_cpu<accel::half>(dev, rows(1503, 37), 768, 0, 2e-3);
  matches_cpu<accel::half>(dev, rows(300, 45), 77, 1, 2e-3);
}
/// The kernel launches matches_cpu_every_path makes (LayerNorm's backward is two on CUDA): 11 shapes of 11.
inline constexpr int every_path_launches = 11 * 11;

}  // namespace nn_match
