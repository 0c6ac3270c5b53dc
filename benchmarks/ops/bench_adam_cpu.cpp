// CPU fused Adam against the memory ceiling of its own access pattern, in one process, in
// interleaved rounds (benchmarks/README.md).
//
//   bench_adam_cpu [--rounds=N] [--json=FILE] [--smoke] [--clock=thread]
//
// For each shape (2^24 and 2^26 params) and thread count (1, 2), one round runs once each:
//   ceiling        adam_ceiling.h: read p, g, m, v; write p, m, v (28 B/param), one FMA per array:
//                  a STREAM-like kernel with exactly Adam's traffic
//   fp32           accel's fused AdamW (FusedAdamOp::step_sync, the JIT-compiled op), fp32 p, g, m, v
//   fp32_master    fp32 p, m, v; bf16 grad; a bf16 model copy written in the same pass (28 B/param)
//   bf16           bf16 p, g, m, v (14 B/param)
//   scalar_loop    baseline, 1 thread: a plain per-element loop (what a straight C++ port does)
//   torch_like     baseline, 1 thread: torch's for-loop op sequence as separate passes
// The ceiling and fp32 step the same four arrays (as compare_cpu_adam.py does with torch's tensors,
// through libaccel_capi.so: the same kernel and the same ceiling, so the two harnesses agree).
// AdamW lr 1e-3, weight decay 0.01, params 0.5, grads 0.01. Printed: ms/step, Gparam/s, GB/s at the
// variant's bytes per param, fraction of the ceiling (round by round), median (min-max).
// --smoke: 2^20 params, 1 round. --clock=thread: the 1-thread shapes are timed with the thread's CPU
// clock (waiting for a core on a busy machine is not counted), as compare_cpu_adam.py --clock thread;
// 2-thread shapes always with the wall clock.
#include "../bench_support.hpp"
#include "adam_ceiling.h"

#include <accel/cpu/ops.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

using accel::Dtype;

accel::cpu::FusedAdamOp adam_op(int threads) {
  auto op = accel::cpu::Ops::get_op_builder<accel::ops::FusedAdam>().load();
  op.set_num_threads(threads);
  return op;
}

// 64-byte aligned, first touched here (torch's CPU allocator aligns to 64 too).
template <class T>
struct Array {
  explicit Array(std::size_t n, T value) : p(static_cast<T*>(std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64))) {
    if (p == nullptr) std::abort();
    for (std::size_t i = 0; i < n; ++i) p[i] = value;
  }
  ~Array() { std::free(p); }
  Array(const Array&) = delete;
  Array& operator=(const Array&) = delete;
  T* p;
};

std::uint16_t bf16(float f) { return accel::bfloat16(f).bits(); }

// Baseline: one scalar loop (no intrinsics), one thread.
void scalar_loop(float* p, const float* g, float* m, float* v, std::size_t n, std::int64_t step) {
  const float bc1 = 1.0f - std::pow(0.9f, float(step)), bc2 = 1.0f - std::pow(0.999f, float(step));
  for (std::size_t i = 0; i < n; ++i) {
    p[i] *= 1.0f - 1e-3f * 0.01f;
    m[i] = 0.9f * m[i] + 0.1f * g[i];
    v[i] = 0.999f * v[i] + 0.001f * g[i] * g[i];
    p[i] -= 1e-3f / bc1 * m[i] / (std::sqrt(v[i] / bc2) + 1e-8f);
  }
}

// Baseline: torch's for-loop AdamW as separate passes over memory, one thread.
void torch_like(float* p, const float* g, float* m, float* v, float* denom, std::size_t n, std::int64_t step) {
  const float bc1 = 1.0f - std::pow(0.9f, float(step)), bc2s = std::sqrt(1.0f - std::pow(0.999f, float(step)));
  for (std::size_t i = 0; i < n; ++i) p[i] *= 1.0f - 1e-5f;                   // mul_
  for (std::size_t i = 0; i < n; ++i) m[i] += 0.1f * (g[i] - m[i]);            // lerp_
  for (std::size_t i = 0; i < n; ++i) v[i] *= 0.999f;                          // mul_
  for (std::size_t i = 0; i < n; ++i) v[i] += 0.001f * g[i] * g[i];            // addcmul_
  for (std::size_t i = 0; i < n; ++i) denom[i] = std::sqrt(v[i]);              // sqrt
  for (std::size_t i = 0; i < n; ++i) denom[i] /= bc2s;                        // div_
  for (std::size_t i = 0; i < n; ++i) denom[i] += 1e-8f;                       // add_
  for (std::size_t i = 0; i < n; ++i) p[i] -= 1e-3f / bc1 * m[i] / denom[i];  // addcdiv_
}

}  // namespace

int main(int argc, char** argv) {
  accel_bench::Report report("cpu_adam_kernels", argc, argv);
  int rounds = accel_bench::take_rounds(argc, argv, 7);
  bool smoke = false, thread_clock = false;
  for (int i = 1; i < argc; ++i) {
    smoke = smoke || std::strcmp(argv[i], "--smoke") == 0;
    thread_clock = thread_clock || std::strcmp(argv[i], "--clock=thread") == 0;
  }
  if (smoke) rounds = 1;
  report.set_rounds(rounds);
  report.print_header();
  accel::ops::AdamOptions o;
  o.adamw = true;
  o.weight_decay = 0.01;
  const std::vector<int> sizes = smoke ? std::vector<int>{20} : std::vector<int>{24, 26};
  std::printf("AdamW; %d interleaved rounds; median (min-max); fraction = ceiling time / variant time x "
              "(variant B/param / 28), round by round\n", rounds);
  for (const int lg : sizes) {
    const std::size_t n = std::size_t{1} << lg;
    for (const int threads : {1, 2}) {
      // fp32 arrays shared by the ceiling and the fp32 step.
      Array<float> p(n, 0.5f), g(n, 0.01f), m(n, 0.0f), v(n, 0.0f);
      // fp32 master + bf16 grad + bf16 model copy.
      Array<float> mp(n, 0.5f), mm(n, 0.0f), mv(n, 0.0f);
      Array<std::uint16_t> mg(n, bf16(0.01f)), mc(n, 0);
      // all bf16.
      Array<std::uint16_t> bp(n, bf16(0.5f)), bg(n, bf16(0.01f)), bm(n, 0), bv(n, 0);
      const auto op = adam_op(threads);
      const accel::ops::AdamTensor t32{p.p, g.p, m.p, v.p, nullptr, nullptr, std::int64_t(n)};
      const accel::ops::AdamTensor tmaster{mp.p, mg.p, mm.p, mv.p, nullptr, mc.p, std::int64_t(n)};
      const accel::ops::AdamTensor tbf16{bp.p, bg.p, bm.p, bv.p, nullptr, nullptr, std::int64_t(n)};
      const accel::ops::AdamDtypes dmaster{Dtype::float32, Dtype::bfloat16, Dtype::bfloat16};
      const accel::ops::AdamDtypes dbf16{Dtype::bfloat16, Dtype::bfloat16, std::nullopt};
      std::int64_t s32 = 0, smaster = 0, sbf16 = 0, sscalar = 0, storch = 0;
      const bool cpu_clock = thread_clock && threads == 1;
      accel_bench::Rounds r(cpu_clock ? accel_bench::Clock::thread_cpu : accel_bench::Clock::wall);
      r.add("ceiling", [&] { accel_bench_adam_ceiling(p.p, g.p, m.p, v.p, static_cast<long long>(n), threads, 1e-9f); }, 1);
      r.add("fp32", [&] { op.step_sync(std::span(&t32, 1), o, ++s32); }, 1);
      r.add("fp32_master", [&] { op.step_sync(std::span(&tmaster, 1), o, ++smaster, dmaster); }, 1);
      r.add("bf16", [&] { op.step_sync(std::span(&tbf16, 1), o, ++sbf16, dbf16); }, 1);
      std::unique_ptr<Array<float>> denom;
      if (threads == 1) {
        denom = std::make_unique<Array<float>>(n, 0.0f);
        r.add("scalar_loop", [&] { scalar_loop(mp.p, g.p, mm.p, mv.p, n, ++sscalar); }, 1);
        r.add("torch_like", [&] { torch_like(mp.p, g.p, mm.p, mv.p, denom->p, n, ++storch); }, 1);
      }
      const double load = accel_bench::load_average();
      r.run(rounds, 0.0);
      const std::string group = "threads=" + std::to_string(threads);
      std::printf("\n2^%d params, %d thread(s), load %.2f, %s clock\n%-13s %22s %22s %20s %20s\n", lg, threads, load,
                  cpu_clock ? "thread CPU" : "wall", "", "ms/step", "Gparam/s", "GB/s", "of ceiling");
      for (const char* name : {"ceiling", "fp32", "fp32_master", "bf16", "scalar_loop", "torch_like"}) {
        if (!r.has(name)) continue;
        const double bpp = std::strcmp(name, "bf16") == 0 ? 14.0 : 28.0;
        const auto& secs = r.seconds(name);
        const auto gparam = accel_bench::rate(secs, double(n) / 1e9);
        const auto gbps = accel_bench::rate(secs, double(n) * bpp / 1e9);
        const auto frac = accel_bench::scaled(r.speedup(name, "ceiling"), bpp / 28.0);
        std::printf("%-13s %22s %22s %20s %20s\n", name, accel_bench::fmt(r.summary(name, 1e3), 2).c_str(),
                    accel_bench::fmt(gparam, 3).c_str(), accel_bench::fmt(gbps, 1).c_str(),
                    accel_bench::fmt(frac, 3).c_str());
        report.point(name, group, double(n), "Gparam/s", gparam);
        report.point(name, group, double(n), "GB/s", gbps);
        if (std::strcmp(name, "ceiling") != 0) report.point(name, group, double(n), "fraction of ceiling", frac);
      }
      for (const char* base : {"scalar_loop", "torch_like"}) {
        if (r.has(base)) report.ratio("fp32", base, group, double(n), r.speedup("fp32", base));
      }
    }
  }
  report.write();
  return 0;
}
