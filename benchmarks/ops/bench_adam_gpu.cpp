// GPU fused Adam throughput against the device's own copy bandwidth, measured in the same run, and a
// dump of accel's results on fixed inputs for benchmarks/ops/compare_gpu_adam.py (torch, float64).
//
//   bench_adam_gpu [--smoke] [--layers N] [google benchmark flags]
//   bench_adam_gpu --dump FILE [--steps N] [--backend cuda|cpu]
//
// Benchmark (CudaBackend, the JIT-compiled fused_adam op, AdamW lr=1e-3 wd=0.01, betas 0.9/0.999):
//   shapes   single   one tensor of 2^28 elements
//            llama7b  a Llama-7B-shaped tensor list: per decoder layer q,k,v,o 4096x4096, gate/up/down
//                     4096x11008, two 4096 norms; plus embedding and lm_head 32000x4096 and the final
//                     norm (each tensor its own allocation). Layers: 16 (--layers N), fewer where 16 B
//                     per parameter (fp32 p+g+m+v) would exceed 70 % of the device's memory; torch_adam_gpu.py
//                     picks the same number with the same rule.
//   variants fp32     fp32 params, grads, exp_avg, exp_avg_sq                         28 B/param
//            bf16     bf16 params, grads and states (what torch does for bf16 params)  14 B/param
//            master   fp32 master params and states, bf16 grads, a bf16 model copy    28 B/param
//                     written in the same pass (what mixed-precision training runs)
//   B/param is what the kernel reads and writes: p, g, m, v read; p, m, v (and the copy) written.
//   ceiling  cudaMemcpyAsync device to device of a 2 GiB buffer (2 x 2 GiB moved per copy), first.
// Each step is timed alone with CUDA events (accel::cuda::Event) after a warm-up step; each figure is
// the median of the repetitions (3 unless told). The summary prints ms/step, Gparam/s, GB/s (1e9 B/s
// at the B/param above) and the fraction of the measured copy bandwidth, plus RESULT lines that
// compare_gpu_adam.py --table and torch_adam_gpu.py --accel read to compute accel / torch.
// --smoke: 2^20 elements and a 2-layer list with every dimension divided by 16; runs everything,
// says nothing about speed. Without a CUDA device the benchmark prints a skip line and exits 0.
//
// --dump FILE: 3 cases (Adam with L2 decay, AdamW, AdamW + AMSGrad) over 5 tensors of
// {1, 3, 4097, 3*16384+5, 2^20} fp32 elements, N steps (default 20) from params 0.5*x(k, 1000, seed),
// zero states and grads x(k, s, seed) (the integer hash of torch_adam.py, k counting over all
// tensors); FILE gets the params and states after steps N-1 and N (format in write_dump below).
// --backend cpu runs the same on CpuBackend (to check the comparison without a GPU).
#include <accel/cpu/backend.hpp>
#include <accel/cuda/backend.hpp>
#include <accel/memory/buffer.hpp>
#include <accel/op_builders.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <type_traits>
#include <string>
#include <vector>

namespace {

using accel::CudaBackend;
using accel::Dtype;
constexpr CudaBackend cuda{};

// ---- shapes and variants ------------------------------------------------------------------------------

struct Shape {
  std::string name;
  std::vector<std::int64_t> numels;
  [[nodiscard]] double params() const {
    double n = 0;
    for (const auto k : numels) n += double(k);
    return n;
  }
};

Shape single(int log2) { return {"single_2^" + std::to_string(log2), {std::int64_t{1} << log2}}; }

struct LlamaDims {
  std::int64_t hidden = 4096, ffn = 11008, vocab = 32000;
};

std::int64_t llama_layer_params(const LlamaDims& d) { return 4 * d.hidden * d.hidden + 3 * d.hidden * d.ffn + 2 * d.hidden; }
std::int64_t llama_fixed_params(const LlamaDims& d) { return 2 * d.vocab * d.hidden + d.hidden; }

Shape llama(int layers, const LlamaDims& d, const std::string& tag) {
  Shape s{tag + "_L" + std::to_string(layers), {}};
  s.numels.push_back(d.vocab * d.hidden);  // embed_tokens
  for (int l = 0; l < layers; ++l) {
    for (int i = 0; i < 4; ++i) s.numels.push_back(d.hidden * d.hidden);  // q, k, v, o
    for (int i = 0; i < 3; ++i) s.numels.push_back(d.hidden * d.ffn);     // gate, up, down
    s.numels.push_back(d.hidden);                                         // input_layernorm
    s.numels.push_back(d.hidden);                                         // post_attention_layernorm
  }
  s.numels.push_back(d.hidden);              // final norm
  s.numels.push_back(d.vocab * d.hidden);    // lm_head
  return s;
}

/// Layers of the Llama list: `wanted`, fewer where fp32 p+g+m+v (16 B/param) would exceed 70 % of
/// the device's memory. torch_adam_gpu.py applies the same rule to the same total.
int llama_layers(int wanted, std::size_t total_bytes, const LlamaDims& d) {
  const double budget = 0.70 * double(total_bytes) / 16.0;  // params
  const double fit = std::floor((budget - double(llama_fixed_params(d))) / double(llama_layer_params(d)));
  return std::max(0, std::min(wanted, int(fit)));
}

enum class Variant { fp32, bf16, master };
const char* variant_name(Variant v) {
  switch (v) {
    case Variant::fp32: return "fp32";
    case Variant::bf16: return "bf16";
    case Variant::master: return "fp32_master_bf16_grad_copy";
  }
  return "?";
}
accel::ops::AdamDtypes variant_dtypes(Variant v) {
  switch (v) {
    case Variant::fp32: return {Dtype::float32, Dtype::float32, std::nullopt};
    case Variant::bf16: return {Dtype::bfloat16, Dtype::bfloat16, std::nullopt};
    case Variant::master: return {Dtype::float32, Dtype::bfloat16, Dtype::bfloat16};
  }
  return {};
}
std::size_t elem_bytes(Dtype d) { return d == Dtype::float32 ? 4 : 2; }
/// Bytes the kernel moves per parameter: p, g, m, v read; p, m, v and the model copy written.
double bytes_per_param(Variant v) {
  const auto d = variant_dtypes(v);
  const double p = double(elem_bytes(d.param)), g = double(elem_bytes(d.grad));
  return (p + g + 2 * p) + (3 * p) + (d.model_copy ? double(elem_bytes(*d.model_copy)) : 0.0);
}
/// Bytes the tensors occupy per parameter (p, g, m, v and the model copy).
double resident_per_param(Variant v) {
  const auto d = variant_dtypes(v);
  return 3.0 * double(elem_bytes(d.param)) + double(elem_bytes(d.grad)) + (d.model_copy ? double(elem_bytes(*d.model_copy)) : 0.0);
}

// ---- the benchmark ------------------------------------------------------------------------------------

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "%s failed: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

std::optional<accel::cuda::Stream> g_stream;
std::vector<Shape> g_shapes;

const accel::cuda::FusedAdamOp& adam_op() {
  static const accel::cuda::FusedAdamOp op = CudaBackend::get_op_builder<accel::ops::FusedAdam>().load();
  return op;
}
const accel::cuda::TensorOpsOp& tensor_ops() {
  static const accel::cuda::TensorOpsOp op = CudaBackend::get_op_builder<accel::ops::TensorOps>().load();
  return op;
}

/// The tensors of one (shape, variant), allocated and filled on the device; one alive at a time.
struct Workload {
  std::vector<accel::Buffer<std::byte, CudaBackend>> buffers;
  std::vector<accel::ops::AdamTensor> tensors;
  accel::ops::AdamDtypes dtypes;
  std::int64_t step = 0;
};
std::unique_ptr<Workload> g_work;
std::string g_work_key;

void release_workload() {
  g_work.reset();
  g_work_key.clear();
  CudaBackend::empty_cache();
}

Workload& workload(std::size_t shape, Variant v) {
  const std::string key = g_shapes[shape].name + "/" + variant_name(v);
  if (g_work && g_work_key == key) return *g_work;
  release_workload();
  auto w = std::make_unique<Workload>();
  w->dtypes = variant_dtypes(v);
  const auto& d = w->dtypes;
  const auto& ops = tensor_ops();
  const auto alloc = [&](std::int64_t n, Dtype dt, float value) {
    w->buffers.emplace_back(std::size_t(n) * elem_bytes(dt), *g_stream);
    void* p = w->buffers.back().data();
    ops.fill(*g_stream, p, dt, n, value);
    return p;
  };
  for (const std::int64_t n : g_shapes[shape].numels) {
    accel::ops::AdamTensor t{};
    t.numel = n;
    t.param = alloc(n, d.param, 0.5f);
    t.grad = alloc(n, d.grad, 0.01f);
    t.exp_avg = alloc(n, d.param, 0.0f);
    t.exp_avg_sq = alloc(n, d.param, 0.0f);
    if (d.model_copy) t.model_copy = alloc(n, *d.model_copy, 0.0f);
    w->tensors.push_back(t);
  }
  g_stream->synchronize();
  g_work = std::move(w);
  g_work_key = key;
  return *g_work;
}

accel::ops::AdamOptions bench_options() {
  accel::ops::AdamOptions o;
  o.lr = 1e-3;
  o.weight_decay = 0.01;
  o.adamw = true;
  return o;
}

/// Times `enqueue` (one call on the stream) with events, one iteration each, after one warm-up call.
template <class F>
void timed(benchmark::State& state, double items, double bytes, F&& enqueue) {
  accel::cuda::Event start(true), stop(true);
  enqueue();
  g_stream->synchronize();
  for (auto _ : state) {
    start.record(*g_stream);
    enqueue();
    stop.record(*g_stream);
    stop.synchronize();
    state.SetIterationTime(double(start.elapsed_time(stop)) / 1e3);
  }
  state.SetItemsProcessed(std::int64_t(items * double(state.iterations())));
  state.SetBytesProcessed(std::int64_t(bytes * double(state.iterations())));
}

std::size_t g_copy_bytes = std::size_t{2} << 30;

void BM_copy(benchmark::State& state) {
  release_workload();
  accel::Buffer<std::byte, CudaBackend> src(g_copy_bytes, *g_stream), dst(g_copy_bytes, *g_stream);
  check(cudaMemsetAsync(src.data(), 1, g_copy_bytes, g_stream->get()), "cudaMemsetAsync");
  check(cudaMemsetAsync(dst.data(), 0, g_copy_bytes, g_stream->get()), "cudaMemsetAsync");
  timed(state, double(g_copy_bytes) / 4.0, 2.0 * double(g_copy_bytes), [&] {
    check(cudaMemcpyAsync(dst.data(), src.data(), g_copy_bytes, cudaMemcpyDeviceToDevice, g_stream->get()),
          "cudaMemcpyAsync");
  });
  src.reset();
  dst.reset();
  CudaBackend::empty_cache();
}

void BM_adam(benchmark::State& state, std::size_t shape, Variant v) {
  Workload& w = workload(shape, v);
  const auto o = bench_options();
  const double params = g_shapes[shape].params();
  timed(state, params, params * bytes_per_param(v), [&] { adam_op().step(*g_stream, w.tensors, o, ++w.step, w.dtypes); });
}

/// Console output as usual, plus each benchmark's seconds per iteration (the median aggregate when
/// there are repetitions, else the single run).
class Recorder : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> seconds;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs) {
      if (run.error_occurred) continue;
      const std::string key = run.run_name.function_name;
      const double s = run.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(run.time_unit);
      if (run.run_type == Run::RT_Aggregate) {
        if (run.aggregate_name == "median") {
          median_.insert(key);
          seconds[key] = s;
        }
      } else if (run.iterations > 0 && median_.count(key) == 0) {
        seconds[key] = s;
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  [[nodiscard]] double get(const std::string& key) const {
    const auto it = seconds.find(key);
    return it == seconds.end() ? 0.0 : it->second;
  }

 private:
  std::set<std::string> median_;
};

std::string bench_name(std::size_t shape, Variant v) { return "accel/" + g_shapes[shape].name + "/" + variant_name(v); }

int run_benchmark(int argc, char** argv) {
  const accel::Availability availability = cuda.availability();
  if (!availability.available) {
    std::printf("bench_adam_gpu: skipped, no CUDA device (%s)\n", availability.reason.c_str());
    return 0;
  }
  bool smoke = false;
  int layers = 16;
  static char repetitions[] = "--benchmark_repetitions=3";
  static char aggregates[] = "--benchmark_display_aggregates_only=true";
  static char min_time[] = "--benchmark_min_time=0.3";
  static char smoke_time[] = "--benchmark_min_time=0.01";
  static char smoke_reps[] = "--benchmark_repetitions=1";
  std::vector<char*> args{argv[0], repetitions, aggregates, min_time};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--smoke") == 0) {
      smoke = true;
      args.push_back(smoke_time);
      args.push_back(smoke_reps);
    } else if (std::strcmp(argv[i], "--layers") == 0 && i + 1 < argc) {
      layers = std::atoi(argv[++i]);
    } else {
      args.push_back(argv[i]);
    }
  }
  int count = int(args.size());
  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 1;

  cuda.set_device(0);
  g_stream.emplace(0);
  const std::size_t total = CudaBackend::total_memory(0);
  LlamaDims dims;
  if (smoke) {
    dims = {4096 / 16, 11008 / 16, 32000 / 16};
    layers = 2;
    g_copy_bytes = std::size_t{64} << 20;
    g_shapes = {single(20), llama(layers, dims, "llama7b_div16")};
  } else {
    layers = llama_layers(layers, total, dims);
    g_shapes = {single(28), llama(layers, dims, "llama7b")};
  }
  (void)adam_op();  // JIT compile or cache load outside the timings
  (void)tensor_ops();

  std::printf("fused Adam on %s (%.1f GiB), AdamW lr=1e-3 wd=0.01; %s: %zu tensors, %.3f Gparam; %s: %.3f Gparam\n",
              cuda.product_name(0).c_str(), double(total) / double(1 << 30), g_shapes[1].name.c_str(),
              g_shapes[1].numels.size(), g_shapes[1].params() / 1e9, g_shapes[0].name.c_str(), g_shapes[0].params() / 1e9);
  std::printf("fused_adam loaded from %s (%s)\n", adam_op().op().path().c_str(),
              std::string(accel::ops::to_string(adam_op().op().source())).c_str());
  std::fflush(stdout);

  const auto configure = [](benchmark::internal::Benchmark* b) { b->UseManualTime()->Unit(benchmark::kMillisecond); };
  benchmark::RegisterBenchmark("ceiling/memcpy_d2d", BM_copy)->Apply(configure);
  const Variant variants[] = {Variant::fp32, Variant::bf16, Variant::master};
  for (std::size_t s = 0; s < g_shapes.size(); ++s) {
    for (const Variant v : variants) {
      const double resident = g_shapes[s].params() * resident_per_param(v);
      if (resident > 0.9 * double(CudaBackend::available_memory(0))) {
        std::printf("skipping %s: %.1f GiB of tensors do not fit\n", bench_name(s, v).c_str(), resident / double(1 << 30));
        continue;
      }
      benchmark::RegisterBenchmark(bench_name(s, v).c_str(), BM_adam, s, v)->Apply(configure);
    }
  }
  Recorder recorder;
  benchmark::RunSpecifiedBenchmarks(&recorder);
  release_workload();

  const double copy_s = recorder.get("ceiling/memcpy_d2d");
  const double copy_gbps = copy_s > 0 ? 2.0 * double(g_copy_bytes) / copy_s / 1e9 : 0.0;
  std::printf("\nfused Adam on %s, median of the repetitions; GB/s = 1e9 B/s at the kernel's B/param;\n"
              "copy ceiling: cudaMemcpyAsync D2D of %.0f MiB = %.1f GB/s (read + write)\n\n",
              cuda.product_name(0).c_str(), double(g_copy_bytes) / double(1 << 20), copy_gbps);
  std::printf("| impl | shape | dtype | ms/step | Gparam/s | B/param | GB/s | of copy |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  std::vector<std::string> result_lines;
  for (std::size_t s = 0; s < g_shapes.size(); ++s) {
    for (const Variant v : variants) {
      const double t = recorder.get(bench_name(s, v));
      if (t <= 0) continue;
      const double params = g_shapes[s].params(), bpp = bytes_per_param(v);
      const double gbps = params * bpp / t / 1e9;
      const double frac = copy_gbps > 0 ? gbps / copy_gbps : 0.0;
      std::printf("| accel fused_adam | %s | %s | %.3f | %.2f | %.0f | %.1f | %.1f %% |\n", g_shapes[s].name.c_str(),
                  variant_name(v), t * 1e3, params / t / 1e9, bpp, gbps, 100.0 * frac);
      char line[256];
      std::snprintf(line, sizeof line, "RESULT impl=accel shape=%s dtype=%s ms=%.6f gparams=%.6f bpp=%.0f gbps=%.3f frac=%.6f",
                    g_shapes[s].name.c_str(), variant_name(v), t * 1e3, params / t / 1e9, bpp, gbps, frac);
      result_lines.emplace_back(line);
    }
  }
  std::printf("\nRESULT impl=accel shape=ceiling dtype=memcpy_d2d ms=%.6f gbps=%.3f\n", copy_s * 1e3, copy_gbps);
  for (const auto& l : result_lines) std::printf("%s\n", l.c_str());
  std::printf("(target: >= 85 %% of copy bandwidth; B/param: fp32 28, bf16 14, fp32 master + bf16 grad/copy 28)\n");
  g_stream.reset();
  benchmark::Shutdown();
  return 0;
}

// ---- the dump for compare_gpu_adam.py -------------------------------------------------------------------

float hash_x(std::uint32_t k, std::uint32_t s, std::uint32_t seed) {
  const std::uint32_t h = k * 2654435761u + s * 40503u + seed * 97u;
  return static_cast<float>((static_cast<double>(h % 20001u) - 10000.0) / 10000.0);
}

struct DumpCase {
  const char* name;
  double lr, beta1, beta2, eps, wd;
  bool adamw, amsgrad, maximize;
  std::uint32_t seed;
};
constexpr DumpCase dump_cases[] = {
    {"adam_l2", 1e-3, 0.9, 0.999, 1e-8, 0.01, false, false, false, 11},
    {"adamw", 3e-3, 0.9, 0.95, 1e-8, 0.1, true, false, false, 12},
    {"adamw_amsgrad", 1e-3, 0.9, 0.999, 1e-8, 0.05, true, true, false, 13},
};
const std::vector<std::int64_t> dump_sizes{1, 3, 4097, 3 * 16384 + 5, std::int64_t{1} << 20};

template <class T>
void put(std::ofstream& out, const T& v) {
  out.write(reinterpret_cast<const char*>(&v), sizeof v);
}

// File: "ACCELGA1", char[64] backend/device, u32 tensors, u64 numel[tensors], u32 steps, u32 cases;
// per case: char[64] name, f64 lr, beta1, beta2, eps, weight_decay, u32 flags (adamw | amsgrad << 1 |
// maximize << 2), u32 seed, then two snapshots (after step steps-1 and step steps), each the fp32
// param, exp_avg, exp_avg_sq and max_exp_avg_sq (zeros without AMSGrad) of all tensors, concatenated.
template <class B>
int write_dump(const std::string& path, std::uint32_t steps) {
  constexpr B b{};
  if (!b.availability().available) {
    std::printf("bench_adam_gpu --dump: skipped, no %s device (%s)\n", std::string(B::name()).c_str(),
                b.availability().reason.c_str());
    return 0;
  }
  if (steps < 1) steps = 1;
  b.set_device(0);
  typename B::Stream stream(0);
  const auto op = B::template get_op_builder<accel::ops::FusedAdam>().load();
  std::int64_t total = 0;
  for (const auto n : dump_sizes) total += n;
  std::ofstream out(path, std::ios::binary);
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    return 1;
  }
  out.write("ACCELGA1", 8);
  char who[64] = {};
  std::string device = b.device_name(0);
  if constexpr (std::is_same_v<B, CudaBackend>) device += " " + b.product_name(0);
  std::snprintf(who, sizeof who, "accel %s", device.c_str());
  out.write(who, sizeof who);
  put(out, std::uint32_t(dump_sizes.size()));
  for (const auto n : dump_sizes) put(out, std::uint64_t(n));
  put(out, steps);
  put(out, std::uint32_t(std::size(dump_cases)));
  for (const DumpCase& c : dump_cases) {
    accel::ops::AdamOptions o;
    o.lr = c.lr;
    o.beta1 = c.beta1;
    o.beta2 = c.beta2;
    o.eps = c.eps;
    o.weight_decay = c.wd;
    o.adamw = c.adamw;
    o.amsgrad = c.amsgrad;
    o.maximize = c.maximize;
    // Host copies (concatenated) and one device buffer per tensor and role.
    const auto count = static_cast<std::size_t>(total);
    std::vector<float> p(count), g(count), zeros(count, 0.0f);
    for (std::int64_t k = 0; k < total; ++k) p[std::size_t(k)] = 0.5f * hash_x(std::uint32_t(k), 1000, c.seed);
    std::vector<accel::Buffer<float, B>> dp, dg, dm, dv, dx;
    std::vector<accel::ops::AdamTensor> tensors;
    std::int64_t at = 0;
    for (const auto n : dump_sizes) {
      const std::size_t bytes = std::size_t(n) * sizeof(float);
      for (auto* v : {&dp, &dg, &dm, &dv, &dx}) v->emplace_back(std::size_t(n), stream);
      b.copy_async(stream, dp.back().data(), p.data() + at, bytes);
      for (auto* v : {&dm, &dv, &dx}) b.copy_async(stream, v->back().data(), zeros.data() + at, bytes);
      tensors.push_back({dp.back().data(), dg.back().data(), dm.back().data(), dv.back().data(), dx.back().data(),
                         nullptr, n});
      at += n;
    }
    stream.synchronize();
    char name[64] = {};
    std::snprintf(name, sizeof name, "%s", c.name);
    out.write(name, sizeof name);
    for (const double v : {c.lr, c.beta1, c.beta2, c.eps, c.wd}) put(out, v);
    put(out, std::uint32_t((c.adamw ? 1u : 0u) | (c.amsgrad ? 2u : 0u) | (c.maximize ? 4u : 0u)));
    put(out, c.seed);
    const auto snapshot = [&] {
      std::vector<float> host(count);
      for (auto* v : {&dp, &dm, &dv, &dx}) {
        std::int64_t off = 0;
        for (std::size_t i = 0; i < dump_sizes.size(); ++i) {
          b.copy_async(stream, host.data() + off, (*v)[i].data(), std::size_t(dump_sizes[i]) * sizeof(float));
          off += dump_sizes[i];
        }
        stream.synchronize();
        out.write(reinterpret_cast<const char*>(host.data()), std::streamsize(host.size() * sizeof(float)));
      }
    };
    if (steps == 1) snapshot();  // the state "after step 0": the initial one
    for (std::uint32_t s = 1; s <= steps; ++s) {
      for (std::int64_t k = 0; k < total; ++k) g[std::size_t(k)] = hash_x(std::uint32_t(k), s, c.seed);
      at = 0;
      for (std::size_t i = 0; i < dump_sizes.size(); ++i) {
        b.copy_async(stream, dg[i].data(), g.data() + at, std::size_t(dump_sizes[i]) * sizeof(float));
        at += dump_sizes[i];
      }
      op.step(stream, tensors, o, s);
      stream.synchronize();  // the host grads are rewritten next step
      if (s + 1 >= steps) snapshot();  // after steps-1 and after steps
    }
    std::printf("%s: %u steps over %zu tensors (%lld params) on %s\n", c.name, steps, dump_sizes.size(),
                static_cast<long long>(total), who);
  }
  out.close();
  if (!out) {
    std::fprintf(stderr, "writing %s failed\n", path.c_str());
    return 1;
  }
  std::printf("wrote %s\n", path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dump, backend = "cuda";
  std::uint32_t steps = 20;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--dump") == 0 && i + 1 < argc) dump = argv[++i];
    else if (std::strcmp(argv[i], "--steps") == 0 && i + 1 < argc) steps = std::uint32_t(std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--backend") == 0 && i + 1 < argc) backend = argv[++i];
  }
  if (dump.empty()) return run_benchmark(argc, argv);
  try {
    if (backend == "cpu") return write_dump<accel::CpuBackend>(dump, steps);
    if (backend == "cuda") return write_dump<CudaBackend>(dump, steps);
    std::fprintf(stderr, "--backend must be cuda or cpu, got %s\n", backend.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_adam_gpu --dump: %s\n", e.what());
    return 1;
  }
}
