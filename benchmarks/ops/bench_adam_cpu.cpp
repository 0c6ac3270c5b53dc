// CPU fused Adam throughput against the machine's own memory ceiling, measured in the same run.
//
// Ceilings (bytes read + written, OpenMP, static partition — the JIT-compiled tensor_ops kernels):
//   copy     dst = src          (memcpy per thread range)
//   rmw      x = x * s in place (read and write one array: the access pattern of Adam's p, m, v)
// Adam: fp32 p, g, m, v (28 B/param); fp32 master + bf16 grad + bf16 model copy (28 B/param);
// all-bf16 (14 B/param). Baselines: a scalar per-element loop (compiled here, one thread, no
// intrinsics) and a multi-pass loop with torch's for-loop op sequence (lerp, mul, addcmul, sqrt, div,
// add, addcdiv: ~72 B/param).
// Counters: Gparam/s, GB/s (at the variant's B/param), frac_of_copy (of the copy ceiling at the same
// thread count, same size; the copy ceiling runs first). Arguments: {log2 params, threads}. --smoke: 2^20 params, one repetition.
#include <accel/cpu/ops.hpp>

#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

namespace {

using accel::Dtype;

accel::cpu::TensorOpsOp& tensor_ops() {
  static accel::cpu::TensorOpsOp op = accel::cpu::Ops::get_op_builder<accel::ops::TensorOps>().load();
  return op;
}
accel::cpu::FusedAdamOp& adam() {
  static accel::cpu::FusedAdamOp op = accel::cpu::Ops::get_op_builder<accel::ops::FusedAdam>().load();
  return op;
}

template <class T>
std::vector<T> filled(std::size_t n, float value) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, float>) {
      v[i] = value + 1e-7f * float(i % 1000);
    } else {
      v[i] = accel::bfloat16(value + 1e-3f * float(i % 100)).bits();
    }
  }
  return v;
}

// Wall time of the timed loop, measured here so the ratios can be printed in the same run.
struct Wall {
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  [[nodiscard]] double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
};

std::map<std::pair<int, int>, double> copy_gbps;  // (log2 size, threads) -> GB/s of the copy ceiling

void report(benchmark::State& state, double params, double bytes_per_param, int threads, double wall,
            bool is_copy = false) {
  const double per_s = params * double(state.iterations()) / wall;
  state.counters["Gparam/s"] = per_s / 1e9;
  state.counters["GB/s"] = per_s * bytes_per_param / 1e9;
  const auto key = std::make_pair(int(state.range(0)), threads);
  if (is_copy) copy_gbps[key] = per_s * bytes_per_param / 1e9;
  if (!is_copy && copy_gbps.count(key) != 0) state.counters["frac_of_copy"] = per_s * bytes_per_param / 1e9 / copy_gbps[key];
}

void BM_copy(benchmark::State& state) {
  const std::size_t n = std::size_t{1} << state.range(0);
  const int threads = int(state.range(1));
  auto ops = tensor_ops();
  ops.set_num_threads(threads);
  std::vector<float> a = filled<float>(n, 1.0f), b(n);
  Wall w;
  for (auto _ : state) ops.host().cast(b.data(), Dtype::float32, a.data(), Dtype::float32, std::int64_t(n));
  report(state, double(n), 8.0, threads, w.seconds(), true);
}

void BM_rmw(benchmark::State& state) {
  const std::size_t n = std::size_t{1} << state.range(0);
  const int threads = int(state.range(1));
  auto ops = tensor_ops();
  ops.set_num_threads(threads);
  std::vector<float> a = filled<float>(n, 1.0f);
  Wall w;
  for (auto _ : state) ops.host().scale(a.data(), Dtype::float32, a.data(), Dtype::float32, std::int64_t(n), 1.0f + 1e-7f);
  report(state, double(n), 8.0, threads, w.seconds());
}

enum Variant { fp32 = 0, master_bf16 = 1, all_bf16 = 2 };

void BM_fused_adam(benchmark::State& state) {
  const std::size_t n = std::size_t{1} << state.range(0);
  const int threads = int(state.range(1));
  const auto variant = Variant(state.range(2));
  auto op = adam();
  op.set_num_threads(threads);
  accel::ops::AdamOptions o;
  o.adamw = true;
  o.weight_decay = 0.01;
  std::vector<float> p, g, m, v;
  std::vector<std::uint16_t> p16, g16, m16, v16, copy16;
  accel::ops::AdamTensor t{};
  accel::ops::AdamDtypes d{};
  double bpp = 28;
  if (variant == fp32) {
    p = filled<float>(n, 0.5f), g = filled<float>(n, 0.01f), m = filled<float>(n, 0.0f), v = filled<float>(n, 0.0f);
    t = {p.data(), g.data(), m.data(), v.data(), nullptr, nullptr, std::int64_t(n)};
  } else if (variant == master_bf16) {
    p = filled<float>(n, 0.5f), m = filled<float>(n, 0.0f), v = filled<float>(n, 0.0f);
    g16 = filled<std::uint16_t>(n, 0.01f), copy16.resize(n);
    t = {p.data(), g16.data(), m.data(), v.data(), nullptr, copy16.data(), std::int64_t(n)};
    d = {Dtype::float32, Dtype::bfloat16, Dtype::bfloat16};
  } else {
    p16 = filled<std::uint16_t>(n, 0.5f), g16 = filled<std::uint16_t>(n, 0.01f);
    m16 = filled<std::uint16_t>(n, 0.0f), v16 = filled<std::uint16_t>(n, 0.0f);
    t = {p16.data(), g16.data(), m16.data(), v16.data(), nullptr, nullptr, std::int64_t(n)};
    d = {Dtype::bfloat16, Dtype::bfloat16, std::nullopt};
    bpp = 14;
  }
  std::int64_t step = 0;
  Wall w;
  for (auto _ : state) op.step_sync(std::span(&t, 1), o, ++step, d);
  report(state, double(n), bpp, threads, w.seconds());
}

// Baseline: one scalar loop, one thread (what a plain C++ port does).
void BM_scalar_loop(benchmark::State& state) {
  const std::size_t n = std::size_t{1} << state.range(0);
  std::vector<float> p = filled<float>(n, 0.5f), g = filled<float>(n, 0.01f), m(n), v(n);
  std::int64_t step = 0;
  Wall w;
  for (auto _ : state) {
    ++step;
    const float bc1 = 1.0f - std::pow(0.9f, float(step)), bc2 = 1.0f - std::pow(0.999f, float(step));
    for (std::size_t i = 0; i < n; ++i) {
      p[i] *= 1.0f - 1e-3f * 0.01f;
      m[i] = 0.9f * m[i] + 0.1f * g[i];
      v[i] = 0.999f * v[i] + 0.001f * g[i] * g[i];
      p[i] -= 1e-3f / bc1 * m[i] / (std::sqrt(v[i] / bc2) + 1e-8f);
    }
    benchmark::DoNotOptimize(p.data());
  }
  report(state, double(n), 28, 1, w.seconds());
}

// Baseline: torch's for-loop Adam as separate passes over memory (one thread).
void BM_multipass_loop(benchmark::State& state) {
  const std::size_t n = std::size_t{1} << state.range(0);
  std::vector<float> p = filled<float>(n, 0.5f), g = filled<float>(n, 0.01f), m(n), v(n), denom(n);
  std::int64_t step = 0;
  Wall w;
  for (auto _ : state) {
    ++step;
    const float bc1 = 1.0f - std::pow(0.9f, float(step)), bc2s = std::sqrt(1.0f - std::pow(0.999f, float(step)));
    for (std::size_t i = 0; i < n; ++i) p[i] *= 1.0f - 1e-5f;                   // mul_
    for (std::size_t i = 0; i < n; ++i) m[i] += 0.1f * (g[i] - m[i]);            // lerp_
    for (std::size_t i = 0; i < n; ++i) v[i] *= 0.999f;                          // mul_
    for (std::size_t i = 0; i < n; ++i) v[i] += 0.001f * g[i] * g[i];            // addcmul_
    for (std::size_t i = 0; i < n; ++i) denom[i] = std::sqrt(v[i]);              // sqrt
    for (std::size_t i = 0; i < n; ++i) denom[i] /= bc2s;                        // div_
    for (std::size_t i = 0; i < n; ++i) denom[i] += 1e-8f;                       // add_
    for (std::size_t i = 0; i < n; ++i) p[i] -= 1e-3f / bc1 * m[i] / denom[i];  // addcdiv_
    benchmark::DoNotOptimize(p.data());
  }
  report(state, double(n), 28, 1, w.seconds());
}

}  // namespace

int main(int argc, char** argv) {
  bool smoke = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--smoke") == 0) {
      smoke = true;
      for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
      --argc;
      break;
    }
  }
  const std::vector<int> sizes = smoke ? std::vector<int>{20} : std::vector<int>{24, 26};
  // Ceilings first; their GB/s are printed and read off for the fractions (see the reply/RESULTS).
  for (int s : sizes) {
    for (int t : {1, 2}) {
      benchmark::RegisterBenchmark("ceiling/copy", BM_copy)->Args({s, t})->UseRealTime()->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark("ceiling/rmw", BM_rmw)->Args({s, t})->UseRealTime()->Unit(benchmark::kMillisecond);
    }
  }
  for (int s : sizes) {
    for (int t : {1, 2}) {
      for (int var : {fp32, master_bf16, all_bf16}) {
        benchmark::RegisterBenchmark(var == fp32 ? "fused_adam/fp32" : var == master_bf16 ? "fused_adam/fp32_master_bf16_grad_copy" : "fused_adam/bf16",
                                     BM_fused_adam)
            ->Args({s, t, var})->UseRealTime()->Unit(benchmark::kMillisecond);
      }
    }
    benchmark::RegisterBenchmark("baseline/scalar_loop", BM_scalar_loop)->Args({s})->UseRealTime()->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("baseline/torch_like_multipass", BM_multipass_loop)->Args({s})->UseRealTime()->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
