// The engine's flash attention kernels (examples/engine/kernels/flash_attention.cuh) on the CPU, through
// flash_host.hpp's emulation of a block's warps, against a float64 reference: the forward, the
// two-kernel backward and the one-kernel backward (--flash-backward fused), bfloat16 and float16,
// head sizes 64 and 32, T a multiple of the 64-row tile and not, with and without attention dropout.
// Then the whole CUDA op (kernels/attention.cu: the flash kernels, the row kernels, the GEMM path's
// permutation and softmax) as the engine launches it on a GPU — GptKernels<EmulatedCuda>, its grids, block
// sizes, dynamic shared memory and scratch sizes (tests/support/emulated_cuda.hpp) — against float64.
// CI has no GPU: this is where the kernels' indexing, fragment layouts, masks, tile walks and launches are
// checked on every commit; the CUDA suite (test_engine's flash cases) checks them on the device.
#include "gpt_kernels.hpp"  // the engine's launcher of these kernels (before the emulation's macros)

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "flash_host.hpp"
#define GPT_FLASH_HOST 1
#define GPT_FLASH_HOST_ENTRIES 1
#include "kernels/attention.cu"

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
template <class Tag, class V>
double rel(const std::vector<V>& a, const std::vector<double>& ref, long long from, long long width, long long stride) {
  double num = 0, den = 0;
  for (long long row = 0; row * stride < static_cast<long long>(ref.size()); ++row) {
    for (long long col = from; col < from + width; ++col) {
      const auto i = static_cast<std::size_t>(row * stride + col);
      double x = 0;
      if constexpr (std::is_same_v<V, float>) {
        x = a[i];
      } else {
        x = from16<Tag>(a[i]);
      }
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

// ---- The whole op through the engine's launcher (gpt_kernels.hpp) ----
// attention.cu's every entry point run on the CPU, launched by GptKernels<EmulatedCuda> with the grids,
// block sizes, dynamic shared memory, argument structs and scratch sizes the engine gives them on a GPU.

namespace {

using cuda_host::run_entry;
using Emulated = cuda_host::EmulatedCuda;

#define GPT_EMULATED(kernel, args)                                        \
  {#kernel "_f32", &run_entry<&kernel##_f32, args>},                      \
      {#kernel "_bf16", &run_entry<&kernel##_bf16, args>}, {              \
    #kernel "_f16", &run_entry<&kernel##_f16, args>                       \
  }
#define GPT_EMULATED_FLASH(kernel)                                                                          \
  {#kernel "_bf16_32", &run_entry<&kernel##_bf16_32, gpt_attention_args>},                                  \
      {#kernel "_bf16_64", &run_entry<&kernel##_bf16_64, gpt_attention_args>},                              \
      {#kernel "_f16_32", &run_entry<&kernel##_f16_32, gpt_attention_args>}, {                              \
    #kernel "_f16_64", &run_entry<&kernel##_f16_64, gpt_attention_args>                                     \
  }

const cuda_host::EntryTable& gpt_kernels_entries() {
  static const cuda_host::EntryTable table = {
      GPT_EMULATED(gpt_attention_forward, gpt_attention_args),  GPT_EMULATED(gpt_attention_backward, gpt_attention_args),
      GPT_EMULATED(gpt_attention_backward_kv, gpt_attention_args), GPT_EMULATED(gpt_head_permute, gpt_permute_args),
      GPT_EMULATED(gpt_softmax_forward, gpt_softmax_args),       GPT_EMULATED(gpt_softmax_backward, gpt_softmax_args),
      GPT_EMULATED_FLASH(gpt_flash_forward),                     GPT_EMULATED_FLASH(gpt_flash_backward_dq),
      GPT_EMULATED_FLASH(gpt_flash_backward_dkv),                GPT_EMULATED_FLASH(gpt_flash_backward_prep),
      GPT_EMULATED_FLASH(gpt_flash_backward_fused),
  };
  return table;
}

// The engine's op on the emulated device (its load checks every entry point the engine's spec names).
engine::GptKernels<Emulated> gpt_kernels(accel::Dtype dt, long long head_size, engine::FlashBackward how) {
  cuda_host::register_op("gpt_kernels", gpt_kernels_entries());
  return engine::GptKernels<Emulated>(Emulated{}, dt, head_size, how);
}

template <class V>
std::vector<V> nan_filled(long long n) {  // what no kernel wrote reads as NaN (16 and 32 bits)
  std::vector<V> v(static_cast<std::size_t>(n));
  std::memset(v.data(), 0xFF, v.size() * sizeof(V));
  return v;
}

// The flash kernels as the engine launches them, both backwards: against float64, dv the same bits.
template <class Tag, int HS>
void check_flash_launcher(const Case& c, double tolerance) {
  CAPTURE(c.B);
  CAPTURE(c.T);
  CAPTURE(c.p);
  CAPTURE(Tag::bf16);
  const Inputs in = make_inputs<Tag>(c);
  const Reference ref = reference(c, in);
  const accel::Dtype dt = Tag::bf16 ? accel::Dtype::bfloat16 : accel::Dtype::float16;
  const long long C = c.C;
  const std::uint32_t* bits = c.p > 0 ? in.bits.data() : nullptr;
  std::vector<std::vector<unsigned short>> grads;
  for (const engine::FlashBackward how : {engine::FlashBackward::split, engine::FlashBackward::fused}) {
    CAPTURE(static_cast<int>(how));
    const auto k = gpt_kernels(dt, HS, how);
    REQUIRE(k.has_flash());
    CHECK(k.flash_backward_kind() == how);
    auto y = nan_filled<unsigned short>(c.B * c.T * C);
    auto lse = nan_filled<float>(c.B * c.NH * c.T);
    auto scratch = nan_filled<float>(engine::flash_backward_scratch_floats(how, c.B, c.T, c.NH, HS));
    auto dqkv = nan_filled<unsigned short>(c.B * c.T * 3 * C);
    k.flash_forward({}, y.data(), lse.data(), in.qkv.data(), bits, c.p, c.B, c.T, C, c.NH);
    k.flash_backward({}, dqkv.data(), scratch.data(), in.dy.data(), y.data(), lse.data(), in.qkv.data(), bits, c.p, c.B,
                     c.T, C, c.NH);
    CHECK(rel<Tag>(y, ref.y, 0, C, C) < tolerance);
    CHECK(rel<Tag>(dqkv, ref.dqkv, 0, C, 3 * C) < tolerance);
    CHECK(rel<Tag>(dqkv, ref.dqkv, C, C, 3 * C) < tolerance);
    CHECK(rel<Tag>(dqkv, ref.dqkv, 2 * C, C, 3 * C) < tolerance);
    grads.push_back(std::move(dqkv));
  }
  std::size_t dv_differ = 0;
  for (std::size_t i = 0; i < grads[0].size(); ++i) {
    if (static_cast<long long>(i) % (3 * C) >= 2 * C && grads[0][i] != grads[1][i]) ++dv_differ;
  }
  CHECK(dv_differ == 0);
}

// The row kernels (gpt_attention_forward/backward/backward_kv: float32 and 16-bit storage, any head size),
// as the engine launches them: against float64, and att's rows zero past the diagonal and in the padding.
template <class Tag, class V>
void check_rows_launcher(const Case& c, double tolerance) {
  constexpr bool f32 = std::is_same_v<V, float>;
  CAPTURE(c.T);
  CAPTURE(c.p);
  CAPTURE(f32);
  CAPTURE(Tag::bf16);
  const Inputs in = make_inputs<Tag>(c);
  const Reference ref = reference(c, in);
  const accel::Dtype dt = f32 ? accel::Dtype::float32 : Tag::bf16 ? accel::Dtype::bfloat16 : accel::Dtype::float16;
  std::vector<V> qkv, dy;
  if constexpr (f32) {
    qkv = in.qkv_f;  // the same values, as float32
    dy = in.dy_f;
  } else {
    qkv = in.qkv;
    dy = in.dy;
  }
  const long long C = c.C, T = c.T, Tp = GPT_ATT_TP(T);
  const auto k = gpt_kernels(dt, C / c.NH, engine::FlashBackward::split);
  CHECK(k.has_flash() == (!f32 && (C / c.NH == 32 || C / c.NH == 64)));
  auto y = nan_filled<V>(c.B * T * C);
  auto dqkv = nan_filled<V>(c.B * T * 3 * C);
  auto att = nan_filled<float>(c.B * c.NH * Tp * Tp);
  auto scratch = nan_filled<float>(c.B * c.NH * Tp * Tp);
  const std::uint32_t* bits = c.p > 0 ? in.bits.data() : nullptr;
  k.forward({}, y.data(), att.data(), qkv.data(), bits, c.p, c.B, T, C, c.NH);
  k.backward({}, dqkv.data(), scratch.data(), dy.data(), att.data(), qkv.data(), bits, c.p, c.B, T, C, c.NH);
  CHECK(rel<Tag>(y, ref.y, 0, C, C) < tolerance);
  CHECK(rel<Tag>(dqkv, ref.dqkv, 0, C, 3 * C) < tolerance);
  CHECK(rel<Tag>(dqkv, ref.dqkv, C, C, 3 * C) < tolerance);
  CHECK(rel<Tag>(dqkv, ref.dqkv, 2 * C, C, 3 * C) < tolerance);
  std::size_t not_zero = 0;
  for (long long bh = 0; bh < c.B * c.NH; ++bh) {
    for (long long i = 0; i < Tp; ++i) {
      for (long long j = i < T ? i + 1 : 0; j < Tp; ++j) not_zero += att[static_cast<std::size_t>((bh * Tp + i) * Tp + j)] != 0.0f;
    }
  }
  CHECK(not_zero == 0);
}

// The GEMM path's kernels (attention.h): the head permutation both ways, exact; the causal softmax and its
// backward against float64, with dropout's factors.
template <class V>
void check_gemm_path_kernels(long long B, long long T, long long C, long long NH, float p, double tolerance) {
  constexpr bool f32 = std::is_same_v<V, float>;
  CAPTURE(f32);
  CAPTURE(p);
  const accel::Dtype dt = f32 ? accel::Dtype::float32 : accel::Dtype::bfloat16;
  const auto to_v = [](float x) {
    if constexpr (f32) {
      return x;
    } else {
      return flash_host::to_bf16(x);
    }
  };
  const auto from_v = [](V v) {
    if constexpr (f32) {
      return static_cast<double>(v);
    } else {
      return static_cast<double>(flash_host::from_bf16(v));
    }
  };
  const auto k = gpt_kernels(dt, 0, engine::FlashBackward::split);
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const long long hs = C / NH, n = B * T * C;
  // Permutation: tokens [B x T x 3C] -> q, k, v heads [B x NH x T x hs] and back.
  std::vector<V> tokens(static_cast<std::size_t>(3 * n));
  for (auto& x : tokens) x = to_v(normal(gen));
  std::vector<std::vector<V>> heads(3, nan_filled<V>(n));
  void* hp[3] = {heads[0].data(), heads[1].data(), heads[2].data()};
  k.permute({}, hp, 3, tokens.data(), false, B, T, C, NH);
  std::size_t misplaced = 0;
  for (long long b = 0; b < B; ++b) {
    for (long long t = 0; t < T; ++t) {
      for (long long part = 0; part < 3; ++part) {
        for (long long c = 0; c < C; ++c) {
          const long long h = c / hs, d = c % hs;
          const V got = heads[static_cast<std::size_t>(part)][static_cast<std::size_t>(((b * NH + h) * T + t) * hs + d)];
          misplaced += std::memcmp(&got, &tokens[static_cast<std::size_t>((b * T + t) * 3 * C + part * C + c)], sizeof(V)) != 0;
        }
      }
    }
  }
  CHECK(misplaced == 0);
  auto back = nan_filled<V>(3 * n);
  k.permute({}, hp, 3, back.data(), true, B, T, C, NH);
  CHECK(std::memcmp(back.data(), tokens.data(), back.size() * sizeof(V)) == 0);
  // Softmax over [B*NH x T x T] scores, causal, with dropout's factors into pd; then its backward.
  const long long heads_n = B * NH, rows = heads_n * T;
  std::vector<V> att(static_cast<std::size_t>(rows * T)), datt(att.size());
  for (auto& x : att) x = to_v(2.0f * normal(gen));
  for (auto& x : datt) x = to_v(normal(gen));
  std::vector<std::uint32_t> bits(att.size());
  for (auto& w : bits) w = static_cast<std::uint32_t>(gen());
  const std::uint32_t threshold = static_cast<std::uint32_t>(static_cast<double>(p) * 4294967296.0);
  const double factor = 1.0 / (1.0 - static_cast<double>(p));
  const auto mask = [&](std::size_t i) { return p > 0 ? (bits[i] >= threshold ? factor : 0.0) : 1.0; };
  const std::vector<V> scores = att, dpd = datt;
  auto pd = nan_filled<V>(rows * T);
  k.softmax_forward({}, att.data(), p > 0 ? pd.data() : nullptr, p > 0 ? bits.data() : nullptr, p, heads_n, T);
  const float scale_qk = 1.0f / std::sqrt(static_cast<float>(hs));
  k.softmax_backward({}, datt.data(), att.data(), p > 0 ? bits.data() : nullptr, p, heads_n, T, scale_qk);
  double err_p = 0, err_pd = 0, err_ds = 0, max_ds = 0;
  for (long long r = 0; r < rows; ++r) {
    const long long i = r % T;
    const auto at = [&](long long j) { return static_cast<std::size_t>(r * T + j); };
    double mx = -std::numeric_limits<double>::infinity(), sum = 0, dsum = 0;
    for (long long j = 0; j <= i; ++j) mx = std::max(mx, from_v(scores[at(j)]));
    for (long long j = 0; j <= i; ++j) sum += std::exp(from_v(scores[at(j)]) - mx);
    std::vector<double> P(static_cast<std::size_t>(T), 0.0);
    for (long long j = 0; j <= i; ++j) {
      P[static_cast<std::size_t>(j)] = std::exp(from_v(scores[at(j)]) - mx) / sum;
      dsum += P[static_cast<std::size_t>(j)] * from_v(dpd[at(j)]) * mask(at(j));
    }
    for (long long j = 0; j < T; ++j) {
      const double want = P[static_cast<std::size_t>(j)];
      err_p = std::max(err_p, std::fabs(from_v(att[at(j)]) - want));
      if (p > 0) err_pd = std::max(err_pd, std::fabs(from_v(pd[at(j)]) - want * mask(at(j))));
      const double ds = j <= i ? want * (from_v(dpd[at(j)]) * mask(at(j)) - dsum) * scale_qk : 0.0;
      err_ds = std::max(err_ds, std::fabs(from_v(datt[at(j)]) - ds));
      max_ds = std::max(max_ds, std::fabs(ds));
    }
  }
  CHECK(err_p < tolerance);  // P is at most 1: the absolute error is the relative one to max |P|
  CHECK(err_pd < tolerance * factor);
  CHECK(err_ds / max_ds < tolerance);
}

}  // namespace

TEST_CASE("the engine's attention op on the CPU as the engine launches it on CUDA (GptKernels over attention.cu)") {
  const unsigned long long before = cuda_host::launches();
  // The flash kernels, both backwards: two sequences (grid z), head size 32 with dropout; head size 64.
  check_flash_launcher<flash::bf16_tag, 32>(Case{2, 130, 64, 2, 0.25f}, 3e-2);
  check_flash_launcher<flash::f16_tag, 64>(Case{1, 100, 128, 2, 0.0f}, 5e-3);
  // The row kernels: float32 (head size 24, which no flash kernel has), bfloat16 with dropout, float16.
  check_rows_launcher<flash::bf16_tag, float>(Case{2, 37, 48, 2, 0.0f}, 1e-5);
  check_rows_launcher<flash::bf16_tag, unsigned short>(Case{1, 45, 64, 2, 0.25f}, 3e-2);
  check_rows_launcher<flash::f16_tag, unsigned short>(Case{1, 33, 64, 4, 0.0f}, 5e-3);
  // The GEMM path's permutation and softmax, float32 and bfloat16, with and without dropout.
  check_gemm_path_kernels<float>(2, 40, 48, 3, 0.0f, 1e-6);
  check_gemm_path_kernels<float>(1, 70, 32, 2, 0.1f, 1e-6);
  check_gemm_path_kernels<unsigned short>(1, 40, 64, 2, 0.1f, 1e-2);
  // Every call launched (flash: 1 forward + 2 backward each way; rows: 3; GEMM path: 4).
  CHECK(cuda_host::launches() - before == 2 * 6 + 3 * 3 + 3 * 4);
}
