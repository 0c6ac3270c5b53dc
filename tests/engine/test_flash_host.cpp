// The engine's flash attention kernels (examples/engine/kernels/flash_attention.cuh) on the CPU, through
// flash_host.hpp's emulation of a block's warps, against a float64 reference: the forward, the
// two-kernel backward and the one-kernel backward (--flash-backward fused), bfloat16 and float16,
// head sizes 64 and 32, T a multiple of the 64-row tile and not, with and without attention dropout.
// CI has no GPU: this is where the kernels' indexing, fragment layouts, masks and tile walks are checked
// on every commit; the CUDA suite (test_engine's flash cases) checks them on the device.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "flash_host.hpp"
#define GPT_FLASH_HOST 1
#include "kernels/flash_attention.cuh"

namespace {

struct Case {
  long long B, T, C, NH;
  float p;  // attention dropout
};

template <class Tag>
unsigned short to16(float x) {
  return Tag::bf16 ? flash_host::to_bf16(x) : flash_host::to_f16(x);
}
template <class Tag>
float from16(unsigned short v) {
  return Tag::bf16 ? flash_host::from_bf16(v) : flash_host::from_f16(v);
}

struct Inputs {
  std::vector<unsigned short> qkv, dy;  // 16-bit, as the kernels read them
  std::vector<float> qkv_f, dy_f;       // the same values widened
  std::vector<std::uint32_t> bits;
  std::uint32_t threshold = 0;
  float scale = 1.0f;
};

template <class Tag>
Inputs make_inputs(const Case& c) {
  Inputs in;
  std::mt19937 gen(17);
  std::normal_distribution<float> n(0.0f, 1.0f);
  const auto fill = [&](std::vector<unsigned short>& v, std::vector<float>& f, long long count, float sd) {
    v.resize(static_cast<std::size_t>(count));
    f.resize(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      v[i] = to16<Tag>(n(gen) * sd);
      f[i] = from16<Tag>(v[i]);
    }
  };
  fill(in.qkv, in.qkv_f, c.B * c.T * 3 * c.C, 1.5f);
  fill(in.dy, in.dy_f, c.B * c.T * c.C, 1.0f);
  if (c.p > 0) {
    in.bits.resize(static_cast<std::size_t>(c.B * c.NH * c.T * c.T));
    for (auto& w : in.bits) w = static_cast<std::uint32_t>(gen());
    in.threshold = static_cast<std::uint32_t>(static_cast<double>(c.p) * 4294967296.0);
    in.scale = static_cast<float>(1.0 / (1.0 - static_cast<double>(c.p)));
  }
  return in;
}

struct Reference {
  std::vector<double> y, dqkv;
};

// Causal attention and its gradients in float64, with the kernels' dropout rule (attention.h).
Reference reference(const Case& c, const Inputs& in) {
  const long long T = c.T, C = c.C, NH = c.NH, hs = C / NH, ld3 = 3 * C;
  const double sc = 1.0 / std::sqrt(static_cast<double>(hs));
  Reference r;
  r.y.assign(static_cast<std::size_t>(c.B * T * C), 0.0);
  r.dqkv.assign(static_cast<std::size_t>(c.B * T * ld3), 0.0);
  std::vector<double> P(static_cast<std::size_t>(T)), F(static_cast<std::size_t>(T)), dP(static_cast<std::size_t>(T));
  for (long long b = 0; b < c.B; ++b) {
    for (long long h = 0; h < NH; ++h) {
      const auto q = [&](long long t, long long d) { return static_cast<double>(in.qkv_f[static_cast<std::size_t>((b * T + t) * ld3 + h * hs + d)]); };
      const auto k = [&](long long t, long long d) { return static_cast<double>(in.qkv_f[static_cast<std::size_t>((b * T + t) * ld3 + C + h * hs + d)]); };
      const auto v = [&](long long t, long long d) { return static_cast<double>(in.qkv_f[static_cast<std::size_t>((b * T + t) * ld3 + 2 * C + h * hs + d)]); };
      const auto dy = [&](long long t, long long d) { return static_cast<double>(in.dy_f[static_cast<std::size_t>((b * T + t) * C + h * hs + d)]); };
      for (long long i = 0; i < T; ++i) {
        double mx = -std::numeric_limits<double>::infinity();
        for (long long j = 0; j <= i; ++j) {
          double s = 0;
          for (long long d = 0; d < hs; ++d) s += q(i, d) * k(j, d);
          P[static_cast<std::size_t>(j)] = s * sc;
          mx = std::max(mx, s * sc);
        }
        double sum = 0;
        for (long long j = 0; j <= i; ++j) sum += (P[static_cast<std::size_t>(j)] = std::exp(P[static_cast<std::size_t>(j)] - mx));
        double dsum = 0;
        for (long long j = 0; j <= i; ++j) {
          const auto J = static_cast<std::size_t>(j);
          P[J] /= sum;
          F[J] = in.bits.empty() ? 1.0
                                 : (in.bits[static_cast<std::size_t>(((b * NH + h) * T + i) * T + j)] >= in.threshold ? in.scale : 0.0);
          double dpd = 0;
          for (long long d = 0; d < hs; ++d) {
            r.y[static_cast<std::size_t>((b * T + i) * C + h * hs + d)] += P[J] * F[J] * v(j, d);
            dpd += dy(i, d) * v(j, d);
          }
          dP[J] = dpd * F[J];
          dsum += P[J] * dP[J];
        }
        for (long long j = 0; j <= i; ++j) {
          const auto J = static_cast<std::size_t>(j);
          const double ds = P[J] * (dP[J] - dsum);
          for (long long d = 0; d < hs; ++d) {
            r.dqkv[static_cast<std::size_t>((b * T + i) * ld3 + h * hs + d)] += ds * k(j, d) * sc;
            r.dqkv[static_cast<std::size_t>((b * T + j) * ld3 + C + h * hs + d)] += ds * q(i, d) * sc;
            r.dqkv[static_cast<std::size_t>((b * T + j) * ld3 + 2 * C + h * hs + d)] += P[J] * F[J] * dy(i, d);
          }
        }
      }
    }
  }
  return r;
}

// max |a - ref| / max |ref| over columns [from, from + width) of rows of `stride`; infinity where a
// holds a NaN (a value no kernel wrote: the outputs start as NaN).
template <class Tag>
double rel(const std::vector<unsigned short>& a, const std::vector<double>& ref, long long from, long long width,
           long long stride) {
  double num = 0, den = 0;
  for (long long row = 0; row * stride < static_cast<long long>(ref.size()); ++row) {
    for (long long col = from; col < from + width; ++col) {
      const auto i = static_cast<std::size_t>(row * stride + col);
      const double x = from16<Tag>(a[i]);
      if (std::isnan(x)) return std::numeric_limits<double>::infinity();
      num = std::max(num, std::fabs(x - ref[i]));
      den = std::max(den, std::fabs(ref[i]));
    }
  }
  return num / den;
}

struct Empty {};

struct Outputs {
  std::vector<unsigned short> y, split, fused;  // y; dqkv by the two-kernel and the one-kernel backward
};

template <class Tag, int HS, bool Dropout>
Outputs run_kernels(const Case& c, Inputs& in, bool concurrent) {
  const long long tiles = (c.T + 63) / 64;
  const flash_host::Dim grid{static_cast<unsigned>(tiles), static_cast<unsigned>(c.NH), static_cast<unsigned>(c.B)};
  Outputs out;
  out.y.assign(static_cast<std::size_t>(c.B * c.T * c.C), 0xFFFFu);
  out.split.assign(static_cast<std::size_t>(c.B * c.T * 3 * c.C), 0xFFFFu);
  out.fused = out.split;
  std::vector<float> lse(static_cast<std::size_t>(c.B * c.NH * c.T), std::numeric_limits<float>::quiet_NaN());
  std::vector<float> dsum(lse.size(), std::numeric_limits<float>::quiet_NaN());
  std::vector<float> scratch(static_cast<std::size_t>(GPT_FLASH_FUSED_SCRATCH_FLOATS(c.B, c.NH, c.T, HS)));
  std::memset(scratch.data(), 0xFF, scratch.size() * sizeof(float));  // counters too: prep must zero them

  gpt_attention_args a{};
  a.qkv = in.qkv.data();
  a.dy = in.dy.data();
  a.bits = Dropout ? in.bits.data() : nullptr;
  a.B = c.B;
  a.T = c.T;
  a.C = c.C;
  a.NH = c.NH;
  a.threshold = in.threshold;
  a.scale = in.scale;
  a.att = lse.data();
  a.y = out.y.data();
  flash_host::launch<flash::Smem<HS>>(grid, [&](flash::Smem<HS>& sm) { flash::forward<Tag, HS, Dropout>(a, sm); });

  a.dqkv = out.split.data();
  a.scratch = dsum.data();
  flash_host::launch<flash::Smem<HS>>(grid, [&](flash::Smem<HS>& sm) { flash::backward_dq<Tag, HS, Dropout>(a, sm); });
  flash_host::launch<flash::Smem<HS>>(grid, [&](flash::Smem<HS>& sm) { flash::backward_dkv<Tag, HS, Dropout>(a, sm); });

  // The one-kernel backward with its blocks one after another; with `concurrent`, then 3 at a time and all
  // at once at uneven speeds (a block overtaken by one that started after it must wait for its sum): the
  // same bits each way (the sums' order is fixed).
  const unsigned blocks = grid.x * grid.y * grid.z;
  const std::vector<unsigned> residencies = concurrent ? std::vector<unsigned>{1u, 3u, blocks} : std::vector<unsigned>{1u};
  for (const unsigned resident : residencies) {
    CAPTURE(resident);
    const unsigned jitter = resident == 1 ? 0u : 7u + resident;
    std::vector<unsigned short> dqkv(out.split.size(), 0xFFFFu);
    std::memset(scratch.data(), 0xFF, scratch.size() * sizeof(float));  // counters too: prep must zero them
    a.dqkv = dqkv.data();
    a.scratch = scratch.data();
    flash_host::launch<Empty>(grid, [&](Empty&) { flash::backward_prep<Tag, HS>(a); }, resident, jitter);
    flash_host::launch<flash::SmemFused<HS>>(
        grid, [&](flash::SmemFused<HS>& sm) { flash::backward_fused<Tag, HS, Dropout>(a, sm); }, resident, jitter);
    // The counters end where the sums' order left them: query tile qt's last signal is key tile 1's, qt
    // (key tile 0 adds last and signals nothing); the ticket at the grid's size.
    const auto* counters = reinterpret_cast<const unsigned*>(scratch.data() + GPT_FLASH_DSUM_FLOATS(c.B, c.NH, c.T) +
                                                             c.B * c.NH * tiles * 64 * HS);
    std::size_t wrong = 0;
    for (long long i = 0; i < c.B * c.NH * tiles; ++i) wrong += counters[i] != static_cast<unsigned>(i % tiles);
    CHECK(wrong == 0);
    CHECK(counters[c.B * c.NH * tiles] == blocks);  // every block took a ticket
    if (resident == 1) {
      out.fused = dqkv;
    } else {
      CHECK(dqkv == out.fused);
    }
  }
  return out;
}

template <class Tag, int HS>
void check(const Case& c, double tolerance, bool concurrent = false) {
  CAPTURE(c.B);
  CAPTURE(c.T);
  CAPTURE(c.C);
  CAPTURE(c.NH);
  CAPTURE(c.p);
  CAPTURE(Tag::bf16);
  REQUIRE(c.C / c.NH == HS);
  Inputs in = make_inputs<Tag>(c);
  const Reference ref = reference(c, in);
  const Outputs out = c.p > 0 ? run_kernels<Tag, HS, true>(c, in, concurrent) : run_kernels<Tag, HS, false>(c, in, concurrent);
  const long long C = c.C;
  const double ry = rel<Tag>(out.y, ref.y, 0, C, C);
  const double sq = rel<Tag>(out.split, ref.dqkv, 0, C, 3 * C), sk = rel<Tag>(out.split, ref.dqkv, C, C, 3 * C),
               sv = rel<Tag>(out.split, ref.dqkv, 2 * C, C, 3 * C);
  const double fq = rel<Tag>(out.fused, ref.dqkv, 0, C, 3 * C), fk = rel<Tag>(out.fused, ref.dqkv, C, C, 3 * C),
               fv = rel<Tag>(out.fused, ref.dqkv, 2 * C, C, 3 * C);
  MESSAGE("emulated flash vs float64, max|diff| / max|ref|: y " << ry << "; two kernels dq " << sq << ", dk " << sk
                                                                << ", dv " << sv << "; one kernel dq " << fq << ", dk "
                                                                << fk << ", dv " << fv);
  CHECK(ry < tolerance);
  CHECK(sq < tolerance);
  CHECK(sk < tolerance);
  CHECK(sv < tolerance);
  CHECK(fq < tolerance);
  CHECK(fk < tolerance);
  CHECK(fv < tolerance);
  // dv: the same products in the same order in both backwards, so the same bits (dk differs in the last
  // bits: its dS uses D = dy . y, which the one-kernel backward sums in another order).
  std::size_t dv_differ = 0;
  for (std::size_t i = 0; i < out.split.size(); ++i) {
    if (static_cast<long long>(i) % (3 * C) >= 2 * C && out.split[i] != out.fused[i]) ++dv_differ;
  }
  CHECK(dv_differ == 0);
}

}  // namespace

TEST_CASE("flash attention kernels, emulated on the CPU: forward and both backwards against float64") {
  // bf16 at both head sizes, partial last tiles, with and without dropout; the one-kernel backward's
  // blocks also resident at once (with dropout). fp16 at both head sizes.
  for (const float p : {0.0f, 0.25f}) {
    check<flash::bf16_tag, 64>(Case{1, 200, 128, 2, p}, 3e-2, p > 0);  // head size 64, four tiles, the last partial
    check<flash::bf16_tag, 32>(Case{1, 130, 64, 2, p}, 3e-2, p > 0);   // head size 32, three tiles, the last partial
  }
  check<flash::f16_tag, 64>(Case{1, 128, 128, 2, 0.0f}, 5e-3);  // float16, two whole tiles
  check<flash::f16_tag, 32>(Case{1, 193, 64, 2, 0.25f}, 5e-3);  // float16, head size 32, four tiles, dropout
}
