// The engine's attention op (examples/engine/kernels/attention.*), a user's own op built and launched
// through the public path: forward against a float64 reference, backward against central finite
// differences of that reference, with and without attention dropout, for each head size the CPU
// kernel covers; the same bits for 1 and 2 threads; bf16 and fp16 storage against the float32 kernel.
// The CUDA kernels are compiled by NVRTC here and
// checked against the CPU kernel on a GPU (skipped, saying so, without one).
#include "gpt_kernels.hpp"
#include "support/scoped_env.hpp"
#include "support/storage16.hpp"

#include <accel/accel.hpp>
#include <accel/blas/gemm.hpp>
#include <accel/blas/threads.hpp>
#include <accel/ops.hpp>
#include <accel/random/fill.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string_view>
#include <type_traits>
#include <vector>

namespace {

using Cpu = accel::CpuBackend;

struct Shape {
  long long B, T, C, NH;
};

std::vector<float> randv(std::size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

float mask_scale(const std::vector<std::uint32_t>& bits, std::size_t idx, std::uint32_t threshold, double scale) {
  return bits.empty() ? 1.0f : (bits[idx] >= threshold ? static_cast<float>(scale) : 0.0f);
}

// y (float64) of the attention over qkv (float64).
std::vector<double> ref_forward(const Shape& s, const std::vector<double>& qkv, const std::vector<std::uint32_t>& bits,
                                std::uint32_t threshold, double scale) {
  const long long hs = s.C / s.NH;
  std::vector<double> y(static_cast<std::size_t>(s.B * s.T * s.C), 0.0);
  for (long long b = 0; b < s.B; ++b) {
    for (long long h = 0; h < s.NH; ++h) {
      for (long long i = 0; i < s.T; ++i) {
        std::vector<double> p(static_cast<std::size_t>(i + 1));
        double mx = -1e300;
        for (long long j = 0; j <= i; ++j) {
          double dot = 0;
          for (long long d = 0; d < hs; ++d) {
            dot += qkv[(b * s.T + i) * 3 * s.C + h * hs + d] * qkv[(b * s.T + j) * 3 * s.C + s.C + h * hs + d];
          }
          p[j] = dot / std::sqrt(static_cast<double>(hs));
          mx = std::max(mx, p[j]);
        }
        double sum = 0;
        for (auto& v : p) sum += (v = std::exp(v - mx));
        for (long long j = 0; j <= i; ++j) {
          const double pd = p[j] / sum * mask_scale(bits, ((b * s.NH + h) * s.T + i) * s.T + j, threshold, scale);
          for (long long d = 0; d < hs; ++d) {
            y[(b * s.T + i) * s.C + h * hs + d] += pd * qkv[(b * s.T + j) * 3 * s.C + 2 * s.C + h * hs + d];
          }
        }
      }
    }
  }
  return y;
}

template <class B>
engine::GptKernels<B>& kernels() {
  static engine::GptKernels<B> k(B{}, accel::Dtype::float32);
  return k;
}

void check_shape(const Shape& s, float p) {
  CAPTURE(s.T);
  CAPTURE(s.C / s.NH);
  CAPTURE(p);
  auto& k = kernels<Cpu>();
  const long long N = s.B * s.T;
  const auto qkv = randv(static_cast<std::size_t>(N * 3 * s.C), 11, 1.5f);
  const auto dy = randv(static_cast<std::size_t>(N * s.C), 12);
  std::vector<std::uint32_t> bits;
  const std::uint32_t threshold = static_cast<std::uint32_t>(static_cast<double>(p) * 4294967296.0);
  const double scale = 1.0 / (1.0 - static_cast<double>(p));
  if (p > 0) {
    bits.resize(static_cast<std::size_t>(s.B * s.NH * s.T * s.T));
    accel::rng::fill_bits(std::span<std::uint32_t>(bits), 99, 0);
  }
  std::vector<float> y(static_cast<std::size_t>(N * s.C)), att(static_cast<std::size_t>(s.B * s.NH * GPT_ATT_TP(s.T) * GPT_ATT_TP(s.T))),
      dqkv(static_cast<std::size_t>(N * 3 * s.C));
  accel::cpu::Stream stream;
  k.forward(stream, y.data(), att.data(), qkv.data(), bits.empty() ? nullptr : bits.data(), p, s.B, s.T, s.C, s.NH);
  k.backward(stream, dqkv.data(), nullptr, dy.data(), att.data(), qkv.data(), bits.empty() ? nullptr : bits.data(), p,
             s.B, s.T, s.C, s.NH);
  stream.synchronize();
  std::vector<double> q64(qkv.begin(), qkv.end());
  const auto y64 = ref_forward(s, q64, bits, threshold, scale);
  double num = 0, den = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    num = std::max(num, std::fabs(y[i] - y64[i]));
    den = std::max(den, std::fabs(y64[i]));
  }
  CHECK(num / den < 2e-6);
  // Backward: dL/dqkv of L = sum(y * dy) by central differences, at queries, keys and values.
  const auto loss = [&] {
    const auto yy = ref_forward(s, q64, bits, threshold, scale);
    double l = 0;
    for (std::size_t i = 0; i < yy.size(); ++i) l += yy[i] * dy[i];
    return l;
  };
  for (const long long tok : {0LL, s.T - 1, N - 2}) {
    for (const long long col : {0LL, s.C / 2 + 1, s.C + 3, 2 * s.C - 1, 2 * s.C + 5, 3 * s.C - 1}) {
      const std::size_t i = static_cast<std::size_t>(tok * 3 * s.C + col);
      const double keep = q64[i], h = 1e-4;
      q64[i] = keep + h;
      const double up = loss();
      q64[i] = keep - h;
      const double down = loss();
      q64[i] = keep;
      const double fd = (up - down) / (2 * h);
      CHECK(std::fabs(dqkv[i] - fd) < 2e-5 * std::max(1.0, std::fabs(fd)));
    }
  }
  // 1 and 2 threads: the same bits.
  std::vector<float> y1(y.size()), y2(y.size()), d1(dqkv.size()), d2(dqkv.size());
  for (const int t : {1, 2}) {
    k.set_num_threads(t);
    k.forward(stream, (t == 1 ? y1 : y2).data(), att.data(), qkv.data(), bits.empty() ? nullptr : bits.data(), p, s.B,
              s.T, s.C, s.NH);
    k.backward(stream, (t == 1 ? d1 : d2).data(), nullptr, dy.data(), att.data(), qkv.data(),
               bits.empty() ? nullptr : bits.data(), p, s.B, s.T, s.C, s.NH);
    stream.synchronize();
  }
  k.set_num_threads(0);
  CHECK(y1 == y2);
  CHECK(d1 == d2);
  CHECK(y1 == y);
}

using test16::bits16;
using test16::rounded_bits;
using test16::to16;
using test16::unit_roundoff;
using test16::widen;

template <class H>
engine::GptKernels<Cpu>& kernels16() {
  static engine::GptKernels<Cpu> k(Cpu{}, test16::dtype_of<H>);
  return k;
}

// The 16-bit fused kernels: the float32 kernel's values on the widened inputs (P bit for bit, y and
// dqkv rounded once), and y within one rounding of float64.
// The largest |a - b| over max |b|.
template <class A, class B>
double max_rel_diff(const A& a, const B& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::fabs(static_cast<double>(static_cast<float>(a[i])) - static_cast<double>(b[i])));
    den = std::max(den, std::fabs(static_cast<double>(b[i])));
  }
  return num / den;
}

// The 16-bit kernels against the float32 kernel on the widened inputs. The vector code: its values
// rounded once, bit for bit. The AMX path (bf16, head size 32 or 64, on a CPU with AMX: P, Pd and dS
// rounded to bf16 before their products, P kept in bf16): within bf16's precision of them. Both: y
// against float64, and the same bits on 2 threads.
template <class H>
void check_shape_16bit(const Shape& s, float p, bool allow_amx) {
  CAPTURE(s.T);
  CAPTURE(s.C / s.NH);
  CAPTURE(p);
  CAPTURE(allow_amx);
  const long long N = s.B * s.T, Tp = GPT_ATT_TP(s.T);
  const auto qkv = to16<H>(randv(static_cast<std::size_t>(N * 3 * s.C), 31, 1.5f));
  const auto dy = to16<H>(randv(static_cast<std::size_t>(N * s.C), 32));
  const auto qkvw = widen(qkv), dyw = widen(dy);
  std::vector<std::uint32_t> bits;
  if (p > 0) {
    bits.resize(static_cast<std::size_t>(s.B * s.NH * s.T * s.T));
    accel::rng::fill_bits(std::span<std::uint32_t>(bits), 77, 0);
  }
  const std::uint32_t* mask = bits.empty() ? nullptr : bits.data();
  std::vector<H> y(static_cast<std::size_t>(N * s.C)), dqkv(static_cast<std::size_t>(N * 3 * s.C));
  std::vector<float> att(static_cast<std::size_t>(s.B * s.NH * Tp * Tp)), att32(att.size()), y32(y.size()),
      dqkv32(dqkv.size());
  accel::cpu::Stream stream;
  auto& k = kernels16<H>();
  ScopedEnv env;
  if (!allow_amx) env.set("ENGINE_ATTENTION_AMX", "0");
  // (The query answers for bf16 launches; fp16 always runs the vector code.)
  const bool amx = std::is_same_v<H, accel::bfloat16> && k.cpu_attention_amx(stream, s.C, s.NH);
  if (!allow_amx) CHECK_FALSE(k.cpu_attention_amx(stream, s.C, s.NH));  // ENGINE_ATTENTION_AMX=0 is honoured
  k.forward(stream, y.data(), att.data(), qkv.data(), mask, p, s.B, s.T, s.C, s.NH);
  k.backward(stream, dqkv.data(), nullptr, dy.data(), att.data(), qkv.data(), mask, p, s.B, s.T, s.C, s.NH);
  kernels<Cpu>().forward(stream, y32.data(), att32.data(), qkvw.data(), mask, p, s.B, s.T, s.C, s.NH);
  kernels<Cpu>().backward(stream, dqkv32.data(), nullptr, dyw.data(), att32.data(), qkvw.data(), mask, p, s.B, s.T, s.C,
                          s.NH);
  stream.synchronize();
  const std::uint32_t threshold = static_cast<std::uint32_t>(static_cast<double>(p) * 4294967296.0);
  const auto y64 = ref_forward(s, std::vector<double>(qkvw.begin(), qkvw.end()), bits, threshold, 1.0 / (1.0 - p));
  if (amx) {
    MESSAGE("the AMX path (T " << s.T << ", hs " << s.C / s.NH << ")");
    // Measured 2.3e-3 - 5.7e-3 at these shapes (y's own rounding: up to 3.9e-3).
    CHECK(max_rel_diff(y, y32) <= 1.2e-2);
    CHECK(max_rel_diff(dqkv, dqkv32) <= 1.2e-2);
    CHECK(max_rel_diff(y, y64) <= 1.2e-2);
  } else {
    CHECK(att == att32);
    CHECK(bits16(y) == rounded_bits<H>(y32));
    CHECK(bits16(dqkv) == rounded_bits<H>(dqkv32));
    CHECK(max_rel_diff(y, y64) <= unit_roundoff<H> + 2e-6);
  }
  // 2 threads: the same bits.
  std::vector<H> y2(y.size()), d2(dqkv.size());
  k.set_num_threads(2);
  k.forward(stream, y2.data(), att.data(), qkv.data(), mask, p, s.B, s.T, s.C, s.NH);
  k.backward(stream, d2.data(), nullptr, dy.data(), att.data(), qkv.data(), mask, p, s.B, s.T, s.C, s.NH);
  stream.synchronize();
  k.set_num_threads(0);
  CHECK(bits16(y2) == bits16(y));
  CHECK(bits16(d2) == bits16(dqkv));
}

template <class H>
void check_gemm_path_16bit() {
  const long long B = 2, T = 13, C = 64, NH = 2, hs = C / NH, heads = B * NH;
  auto& k = kernels16<H>();
  auto& k32 = kernels<Cpu>();
  accel::cpu::Stream stream;
  const auto tokens = to16<H>(randv(static_cast<std::size_t>(B * T * 3 * C), 41));
  std::vector<H> q(static_cast<std::size_t>(B * T * C)), kk(q.size()), v(q.size()), back(tokens.size());
  void* heads3[3] = {q.data(), kk.data(), v.data()};
  k.permute(stream, heads3, 3, const_cast<H*>(tokens.data()), false, B, T, C, NH);
  k.permute(stream, heads3, 3, back.data(), true, B, T, C, NH);
  stream.synchronize();
  CHECK(bits16(back) == bits16(tokens));
  for (long long b = 0; b < B; ++b) {
    for (long long h = 0; h < NH; ++h) {
      for (long long t = 0; t < T; ++t) {
        for (long long d = 0; d < hs; ++d) {
          const long long at = ((b * NH + h) * T + t) * hs + d, tk = (b * T + t) * 3 * C + h * hs + d;
          REQUIRE(q[at].bits() == tokens[tk].bits());
          REQUIRE(kk[at].bits() == tokens[tk + C].bits());
          REQUIRE(v[at].bits() == tokens[tk + 2 * C].bits());
        }
      }
    }
  }
  for (const float p : {0.0f, 0.2f}) {
    CAPTURE(p);
    std::vector<std::uint32_t> bits;
    if (p > 0) {
      bits.resize(static_cast<std::size_t>(heads * T * T));
      accel::rng::fill_bits(std::span<std::uint32_t>(bits), 5, 0);
    }
    const std::uint32_t* mask = bits.empty() ? nullptr : bits.data();
    auto att = to16<H>(randv(static_cast<std::size_t>(heads * T * T), 42, 3.0f));
    auto att32 = widen(att);
    std::vector<H> pd(att.size());
    std::vector<float> pd32(att.size());
    k.softmax_forward(stream, att.data(), pd.data(), mask, p, heads, T);
    k32.softmax_forward(stream, att32.data(), pd32.data(), mask, p, heads, T);
    stream.synchronize();
    CHECK(bits16(att) == rounded_bits<H>(att32));
    if (p > 0) CHECK(bits16(pd) == rounded_bits<H>(pd32));
    // The backward from the stored (rounded) P, on both.
    const auto patt = widen(att);
    auto datt = to16<H>(randv(att.size(), 43));
    auto datt32 = widen(datt);
    k.softmax_backward(stream, datt.data(), att.data(), mask, p, heads, T, 0.125f);
    k32.softmax_backward(stream, datt32.data(), patt.data(), mask, p, heads, T, 0.125f);
    stream.synchronize();
    CHECK(bits16(datt) == rounded_bits<H>(datt32));
  }
}

}  // namespace

TEST_CASE_TEMPLATE("attention (CPU), bf16 and fp16 storage: the float32 kernel's values on the widened inputs (rounded once; bf16 on AMX within its precision)",
                   H, accel::bfloat16, accel::half) {
  for (const bool amx : {false, true}) {  // the vector code, then AMX where this CPU has it
    check_shape_16bit<H>({2, 19, 64, 2}, 0.0f, amx);   // hs 32 (tiny's)
    check_shape_16bit<H>({1, 33, 128, 2}, 0.0f, amx);  // hs 64 (shakespeare's)
    check_shape_16bit<H>({2, 9, 64, 2}, 0.25f, amx);   // attention dropout
    check_shape_16bit<H>({1, 70, 128, 2}, 0.1f, amx);  // hs 64, T past a 32-key chunk, dropout
    check_shape_16bit<H>({2, 24, 96, 3}, 0.0f, amx);   // hs 32 with 3 heads
  }
  check_gemm_path_16bit<H>();
}

TEST_CASE("attention (CPU): forward against float64, backward against finite differences, any head size") {
  check_shape({2, 7, 32, 2}, 0.0f);   // hs 16, T not a multiple of the 4-row blocks
  check_shape({2, 19, 64, 2}, 0.0f);  // hs 32 (tiny's)
  check_shape({1, 33, 128, 2}, 0.0f); // hs 64 (shakespeare's, gpt2's), T past 32 columns
  check_shape({2, 12, 48, 1}, 0.0f);  // hs 48
}

TEST_CASE("attention (CPU) with attention dropout: the mask and 1/(1-p) scale in forward and backward") {
  check_shape({2, 9, 64, 2}, 0.25f);
}

TEST_CASE("attention (CPU): a head size the kernel does not cover is refused as a task failure") {
  auto& k = kernels<Cpu>();
  std::vector<float> buf(4096, 0.0f);
  accel::cpu::Stream stream;
  k.forward(stream, buf.data(), buf.data(), buf.data(), nullptr, 0.0f, 1, 4, 20, 2);  // hs 10
  CHECK_THROWS_AS(stream.synchronize(), accel::TaskError);
}

// The op's second entry point, gpt_fma_peak (kernels/peak.cpp): the peak the engine's MFU divides by.
// No core does more than 16 lanes x 2 FMA pipes x 2 FLOPs at 6 GHz, and no GEMM beats the FMA peak of
// its core, so a one-thread GEMM bounds it from below. (An AVX-512 loop built for an AVX2-only Zen 3
// spilled its accumulators and read 12.8 GFLOP/s for two cores, a fifth of what oneDNN's sgemm ran at:
// MFU 540 %.) Named "attention (CPU)" so that test_engine_attention_avx2 checks the AVX2 build too.
TEST_CASE("attention (CPU) op's FMA peak: above a one-thread GEMM's FLOP/s, below any core's") {
  auto& k = kernels<Cpu>();
  accel::cpu::Stream stream;
  const double peak = k.measure_peak(stream, 0.1, 1);
  constexpr std::int64_t n = 256;
  const std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f);
  std::vector<float> c(n * n, -1.0f);
  const int requested = accel::blas::detail::requested_threads().load();  // restored below (0: unset)
  accel::blas::set_num_threads(1);
  double best = 1e30;
  for (int round = 0; round < 40; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    accel::blas::gemm(Cpu{}, stream, accel::blas::Trans::no, accel::blas::Trans::no, n, n, n, 1.0f, a.data(), n,
                      b.data(), n, 0.0f, c.data(), n);
    stream.synchronize();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  accel::blas::detail::requested_threads().store(requested);
  const double gemm = 2.0 * n * n * n / best;
  // The AVX2 build of the kernels on a CPU with AVX-512 measures the 256-bit peak, which oneDNN's
  // 512-bit GEMM may double (two 512-bit FMA pipes on a Xeon).
  const char* cxx = std::getenv("CXX");
  const bool narrower = cxx != nullptr && std::string_view(cxx).ends_with("cxx_without_avx512.sh") &&
                        __builtin_cpu_supports("avx512f");
  CAPTURE(peak / 1e9);
  CAPTURE(gemm / 1e9);
  CAPTURE(narrower);
  CHECK(std::ranges::all_of(c, [](float x) { return x == 0.125f * n; }));
  CHECK(peak >= (narrower ? 0.45 : 0.9) * gemm);
  CHECK(peak <= 16.0 * 2 * 2 * 6e9);
}

#if defined(ACCEL_HAS_CUDA)
TEST_CASE("attention on CUDA: NVRTC compiles the kernels; on a GPU they compute the CPU kernel's values") {
  if (!accel::ops::nvrtc().loaded) {
    MESSAGE("skipped: " << accel::ops::nvrtc().error);
    return;
  }
  auto builder = accel::CudaBackend{}.create_op_builder(engine::gpt_kernels_spec(accel::DeviceType::cuda));
  builder.set_kernel_dir(engine::engine_kernel_dir());
  const auto built = accel::ops::nvrtc_build(builder.set_arch(90), 90);
  for (const auto& e : builder.spec().entry_points) CHECK(built.payload.find(e) != std::string::npos);
  if (accel::CudaBackend{}.device_count() == 0) {
    MESSAGE("skipped the CUDA launches: no CUDA device");
    return;
  }
  const accel::CudaBackend cuda;
  engine::GptKernels<accel::CudaBackend> g(cuda, accel::Dtype::float32);
  const Shape s{2, 40, 128, 2};
  const long long N = s.B * s.T;
  const auto qkv = randv(static_cast<std::size_t>(N * 3 * s.C), 21);
  const auto dy = randv(static_cast<std::size_t>(N * s.C), 22);
  std::vector<float> y(static_cast<std::size_t>(N * s.C)), att(static_cast<std::size_t>(s.B * s.NH * GPT_ATT_TP(s.T) * GPT_ATT_TP(s.T))),
      dq(static_cast<std::size_t>(N * 3 * s.C));
  accel::cpu::Stream hs;
  kernels<Cpu>().forward(hs, y.data(), att.data(), qkv.data(), nullptr, 0.0f, s.B, s.T, s.C, s.NH);
  kernels<Cpu>().backward(hs, dq.data(), nullptr, dy.data(), att.data(), qkv.data(), nullptr, 0.0f, s.B, s.T, s.C, s.NH);
  hs.synchronize();
  accel::cuda::Stream st;
  accel::Buffer<float, accel::CudaBackend> dQkv(qkv.size(), st), dDy(dy.size(), st), dY(y.size(), st),
      dAtt(att.size(), st), dS(att.size(), st), dDq(dq.size(), st);
  cuda.copy_async(st, dQkv.data(), qkv.data(), qkv.size() * 4);
  cuda.copy_async(st, dDy.data(), dy.data(), dy.size() * 4);
  g.forward(st, dY.data(), dAtt.data(), dQkv.data(), nullptr, 0.0f, s.B, s.T, s.C, s.NH);
  g.backward(st, dDq.data(), dS.data(), dDy.data(), dAtt.data(), dQkv.data(), nullptr, 0.0f, s.B, s.T, s.C, s.NH);
  std::vector<float> gy(y.size()), gq(dq.size());
  cuda.copy_async(st, gy.data(), dY.data(), gy.size() * 4);
  cuda.copy_async(st, gq.data(), dDq.data(), gq.size() * 4);
  st.synchronize();
  const auto rel = [](const std::vector<float>& a, const std::vector<float>& b) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      num = std::max(num, std::fabs(static_cast<double>(a[i]) - b[i]));
      den = std::max(den, std::fabs(static_cast<double>(b[i])));
    }
    return num / den;
  };
  CHECK(rel(gy, y) < 1e-5);
  CHECK(rel(gq, dq) < 1e-5);
}
#endif

#if defined(ACCEL_HAS_CUDA)
// The flash kernels (kernels/flash_attention.cuh) against the CPU's float32 kernel on the same
// 16-bit inputs: y and dqkv within a few of the storage's roundings (P enters the tensor-core
// products rounded to 16 bits, as the GEMM path stores it), with and without attention dropout, at
// both head sizes, T a multiple of the 64-row tile and not; the same bits run to run (no atomics).
template <class H>
void check_flash(const Shape& s, float p, double tolerance) {
  CAPTURE(s.T);
  CAPTURE(s.C / s.NH);
  CAPTURE(p);
  const long long N = s.B * s.T, Tp = GPT_ATT_TP(s.T);
  const auto qkv = test16::to16<H>(randv(static_cast<std::size_t>(N * 3 * s.C), 41, 1.5f));
  const auto dy = test16::to16<H>(randv(static_cast<std::size_t>(N * s.C), 42));
  const auto qkvw = test16::widen(qkv), dyw = test16::widen(dy);
  std::vector<std::uint32_t> bits;
  if (p > 0) {
    bits.resize(static_cast<std::size_t>(s.B * s.NH * s.T * s.T));
    accel::rng::fill_bits(std::span<std::uint32_t>(bits), 55, 0);
  }
  const std::uint32_t* mask = bits.empty() ? nullptr : bits.data();
  std::vector<float> y32(static_cast<std::size_t>(N * s.C)), att32(static_cast<std::size_t>(s.B * s.NH * Tp * Tp)),
      dqkv32(static_cast<std::size_t>(N * 3 * s.C));
  accel::cpu::Stream hs;
  kernels<Cpu>().forward(hs, y32.data(), att32.data(), qkvw.data(), mask, p, s.B, s.T, s.C, s.NH);
  kernels<Cpu>().backward(hs, dqkv32.data(), nullptr, dyw.data(), att32.data(), qkvw.data(), mask, p, s.B, s.T, s.C, s.NH);
  hs.synchronize();

  const accel::CudaBackend cuda;
  engine::GptKernels<accel::CudaBackend> g(cuda, test16::dtype_of<H>, s.C / s.NH);
  REQUIRE(g.has_flash());
  accel::cuda::Stream st;
  accel::Buffer<H, accel::CudaBackend> dQkv(qkv.size(), st), dDy(dy.size(), st), dY(y32.size(), st), dDq(dqkv32.size(), st);
  accel::Buffer<float, accel::CudaBackend> dLse(static_cast<std::size_t>(s.B * s.NH * s.T), st),
      dSum(static_cast<std::size_t>(s.B * s.NH * s.T), st);
  accel::Buffer<std::uint32_t, accel::CudaBackend> dBits(bits.empty() ? 1 : bits.size(), st);
  cuda.copy_async(st, dQkv.data(), qkv.data(), qkv.size() * sizeof(H));
  cuda.copy_async(st, dDy.data(), dy.data(), dy.size() * sizeof(H));
  if (!bits.empty()) cuda.copy_async(st, dBits.data(), bits.data(), bits.size() * 4);
  const std::uint32_t* gmask = bits.empty() ? nullptr : dBits.data();
  const auto run = [&](std::vector<H>& y, std::vector<H>& dq) {
    g.flash_forward(st, dY.data(), dLse.data(), dQkv.data(), gmask, p, s.B, s.T, s.C, s.NH);
    g.flash_backward(st, dDq.data(), dSum.data(), dDy.data(), dY.data(), dLse.data(), dQkv.data(), gmask, p, s.B, s.T,
                     s.C, s.NH);
    y.resize(y32.size());
    dq.resize(dqkv32.size());
    cuda.copy_async(st, y.data(), dY.data(), y.size() * sizeof(H));
    cuda.copy_async(st, dq.data(), dDq.data(), dq.size() * sizeof(H));
    st.synchronize();
  };
  std::vector<H> y, dq, y2, dq2;
  run(y, dq);
  const auto rel = [](const std::vector<H>& a, const std::vector<float>& b, std::size_t from, std::size_t width,
                      std::size_t stride) {
    double num = 0, den = 0;
    for (std::size_t r = 0; r * stride < b.size(); ++r) {
      for (std::size_t c = from; c < from + width; ++c) {
        const std::size_t i = r * stride + c;
        num = std::max(num, std::fabs(static_cast<double>(static_cast<float>(a[i])) - b[i]));
        den = std::max(den, std::fabs(static_cast<double>(b[i])));
      }
    }
    return num / den;
  };
  const auto C = static_cast<std::size_t>(s.C);
  const double ry = rel(y, y32, 0, C, C), rq = rel(dq, dqkv32, 0, C, 3 * C), rk = rel(dq, dqkv32, C, C, 3 * C),
               rv = rel(dq, dqkv32, 2 * C, C, 3 * C);
  MESSAGE("flash vs the float32 kernel, max|diff| / max|ref|: y " << ry << ", dq " << rq << ", dk " << rk << ", dv " << rv);
  CHECK(ry < tolerance);
  CHECK(rq < tolerance);
  CHECK(rk < tolerance);
  CHECK(rv < tolerance);
  run(y2, dq2);
  CHECK(test16::bits16(y2) == test16::bits16(y));
  CHECK(test16::bits16(dq2) == test16::bits16(dq));

  // The one-kernel backward (--flash-backward fused): the same values within the tolerance, dv's bits
  // (the same products in the same order), and its own bits run to run (its dq sums wait for each other
  // in a fixed order: no atomics on them). Its scratch starts as garbage: the counters are its prep's.
  engine::GptKernels<accel::CudaBackend> gf(cuda, test16::dtype_of<H>, s.C / s.NH, engine::FlashBackward::fused);
  REQUIRE(gf.flash_backward_kind() == engine::FlashBackward::fused);
  accel::Buffer<float, accel::CudaBackend> dScratch(
      static_cast<std::size_t>(engine::flash_backward_scratch_floats(engine::FlashBackward::fused, s.B, s.T, s.NH, s.C / s.NH)), st);
  const std::vector<std::uint32_t> garbage(dScratch.size(), 0xFFFFFFFFu);
  cuda.copy_async(st, dScratch.data(), garbage.data(), garbage.size() * sizeof(float));
  const auto run_fused = [&](std::vector<H>& out) {
    gf.flash_backward(st, dDq.data(), dScratch.data(), dDy.data(), dY.data(), dLse.data(), dQkv.data(), gmask, p, s.B,
                      s.T, s.C, s.NH);
    out.resize(dqkv32.size());
    cuda.copy_async(st, out.data(), dDq.data(), out.size() * sizeof(H));
    st.synchronize();
  };
  std::vector<H> fq, fq2;
  run_fused(fq);
  const double fq_rel = rel(fq, dqkv32, 0, C, 3 * C), fk_rel = rel(fq, dqkv32, C, C, 3 * C), fv_rel = rel(fq, dqkv32, 2 * C, C, 3 * C);
  MESSAGE("one-kernel backward vs the float32 kernel: dq " << fq_rel << ", dk " << fk_rel << ", dv " << fv_rel);
  CHECK(fq_rel < tolerance);
  CHECK(fk_rel < tolerance);
  CHECK(fv_rel < tolerance);
  std::size_t dv_differ = 0;
  for (std::size_t i = 0; i < fq.size(); ++i) {
    if (i % (3 * C) >= 2 * C && fq[i].bits() != dq[i].bits()) ++dv_differ;
  }
  CHECK(dv_differ == 0);
  run_fused(fq2);
  CHECK(test16::bits16(fq2) == test16::bits16(fq));
}

TEST_CASE("flash attention on CUDA (bf16, fp16): the float32 kernel's values, tiles past T, dropout, same bits twice") {
  // Where they serve (the engine's --attention auto), checked everywhere.
  CHECK_FALSE(engine::flash_attention_fits(accel::DeviceType::cuda, accel::Dtype::float32, 128, 2));
  CHECK_FALSE(engine::flash_attention_fits(accel::DeviceType::cuda, accel::Dtype::bfloat16, 96, 2));  // head size 48
  CHECK_FALSE(engine::flash_attention_fits(accel::DeviceType::cpu, accel::Dtype::bfloat16, 128, 2));
  CHECK_FALSE(engine::flash_attention_fits(accel::DeviceType::cuda, accel::Dtype::bfloat16, 128, 0));
  CHECK(engine::flash_attention_fits(accel::DeviceType::cuda, accel::Dtype::float16, 768, 12));
  CHECK(engine::flash_attention_fits(accel::DeviceType::cuda, accel::Dtype::bfloat16, 128, 4));
  if (!accel::ops::nvrtc().loaded || accel::CudaBackend{}.device_count() == 0) {
    MESSAGE("skipped the launches: no CUDA device (the kernels are compiled by NVRTC in 'attention on CUDA')");
    return;
  }
  {  // bad input: a typed error naming it, before any launch
    const accel::CudaBackend cuda;
    engine::GptKernels<accel::CudaBackend> g(cuda, accel::Dtype::bfloat16, 64);
    accel::cuda::Stream st;
    accel::Buffer<accel::bfloat16, accel::CudaBackend> qkv(2 * 64 * 3 * 128 + 8, st), y(2 * 64 * 128 + 8, st);
    accel::Buffer<float, accel::CudaBackend> lse(2 * 2 * 64, st);
    CHECK_THROWS_WITH_AS(g.flash_forward(st, y.data(), lse.data(), qkv.data(), nullptr, 0.0f, 2, 64, 128, 4),
                         doctest::Contains("head size C / NH = 128 / 4, the kernels are for 64"),
                         accel::InvalidArgumentError);
    CHECK_THROWS_WITH_AS(g.flash_forward(st, y.data() + 1, lse.data(), qkv.data(), nullptr, 0.0f, 2, 64, 128, 2),
                         doctest::Contains("not 16-byte aligned"), accel::InvalidArgumentError);
    engine::GptKernels<accel::CudaBackend> f32(cuda, accel::Dtype::float32, 64);
    CHECK_FALSE(f32.has_flash());
    CHECK_THROWS_AS(f32.flash_forward(st, y.data(), lse.data(), qkv.data(), nullptr, 0.0f, 2, 64, 128, 2),
                    accel::InvalidArgumentError);
  }
  for (const float p : {0.0f, 0.25f}) {
    check_flash<accel::bfloat16>(Shape{2, 200, 128, 2}, p, 3e-2);  // head size 64, a partial last tile
    check_flash<accel::bfloat16>(Shape{3, 64, 128, 4}, p, 3e-2);   // head size 32, one tile
    check_flash<accel::bfloat16>(Shape{2, 200, 64, 2}, p, 3e-2);   // head size 32, four tiles, the last partial
    check_flash<accel::half>(Shape{2, 130, 256, 4}, p, 5e-3);      // head size 64, fp16
    check_flash<accel::bfloat16>(Shape{1, 320, 128, 2}, p, 3e-2);  // five tiles, the last partial
  }
}
#endif
