// Uniform float fill throughput on a GPU, in one run: accel's CUDA backend (CudaBackend::fill_uniform,
// the random_fill kernel) against cuRAND's device generator (curandGenerateUniform, PHILOX4_32_10: the
// same numbers) and against the device's write bandwidth (cudaMemsetAsync, and a plain store kernel:
// tensor_ops' fill). Normal floats against curandGenerateNormal too. Each figure is GB/s of output
// written (1e9 B/s), timed with CUDA events around one call, median of interleaved rounds; the summary prints
// accel's rate over each baseline next to the targets (>= 1.0x cuRAND, >= 85 % of write
// bandwidth, the better of memset and the store kernel). Then accel and cuRAND again, alternating call
// by call (medians), the figure to compare them by. It also checks that accel and cuRAND wrote the
// same uniforms. Without a CUDA device it says why and exits 0.
//
//   bench_rng_fill_gpu [--rounds=N] [--json=FILE] [--smoke] [google benchmark flags]
// --smoke: a 4 MiB buffer and short runs; checks that everything runs, says nothing about speed.
#include "../bench_support.hpp"

#include <accel/cuda/backend.hpp>
#include <accel/op_builders.hpp>  // get_op_builder (opt-in)

#include <benchmark/benchmark.h>

#include <curand.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace {

using accel::CudaBackend;
constexpr CudaBackend cuda{};

std::size_t g_count = std::size_t{1} << 28;  // 1 GiB of floats: far beyond any GPU's L2
std::optional<accel::cuda::Stream> g_stream;
float* g_out = nullptr;

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "%s failed: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}
void check(curandStatus_t status, const char* what) {
  if (status != CURAND_STATUS_SUCCESS) {
    std::fprintf(stderr, "%s failed: curandStatus %d\n", what, static_cast<int>(status));
    std::exit(1);
  }
}

// GPU time of one call enqueued on g_stream, between two events.
class CallTimer {
 public:
  CallTimer() {
    check(cudaEventCreate(&start_), "cudaEventCreate");
    check(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  CallTimer(const CallTimer&) = delete;
  CallTimer& operator=(const CallTimer&) = delete;
  ~CallTimer() {
    check(cudaEventDestroy(start_), "cudaEventDestroy");
    check(cudaEventDestroy(stop_), "cudaEventDestroy");
  }

  template <class F>
  double seconds(F&& enqueue) {
    const cudaStream_t s = g_stream->get();
    check(cudaEventRecord(start_, s), "cudaEventRecord");
    enqueue();
    check(cudaEventRecord(stop_, s), "cudaEventRecord");
    check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return static_cast<double>(ms) / 1e3;
  }

 private:
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

// Times `enqueue` (one call on the stream) with events, one iteration per call.
template <class F>
void timed(benchmark::State& state, F&& enqueue) {
  CallTimer timer;
  enqueue();  // warm-up: first-use costs (module load, cuRAND's state setup) stay out of the timing
  check(cudaStreamSynchronize(g_stream->get()), "cudaStreamSynchronize");
  for (auto _ : state) state.SetIterationTime(timer.seconds(enqueue));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(g_count * sizeof(float)));
}

void accel_uniform(benchmark::State& state) {
  accel::Generator g(42);
  timed(state, [&] { cuda.fill_uniform(*g_stream, g_out, g_count, g); });
}

void accel_normal(benchmark::State& state) {
  accel::Generator g(42);
  timed(state, [&] { cuda.fill_normal(*g_stream, g_out, g_count, 0.0f, 1.0f, g); });
}

template <bool Normal>
void curand_device(benchmark::State& state) {
  curandGenerator_t gen{};
  check(curandCreateGenerator(&gen, CURAND_RNG_PSEUDO_PHILOX4_32_10), "curandCreateGenerator");
  check(curandSetStream(gen, g_stream->get()), "curandSetStream");
  check(curandSetPseudoRandomGeneratorSeed(gen, 42), "curandSetPseudoRandomGeneratorSeed");
  timed(state, [&] {
    if constexpr (Normal) {
      check(curandGenerateNormal(gen, g_out, g_count, 0.0f, 1.0f), "curandGenerateNormal");
    } else {
      check(curandGenerateUniform(gen, g_out, g_count), "curandGenerateUniform");
    }
  });
  check(curandDestroyGenerator(gen), "curandDestroyGenerator");
}

void write_memset(benchmark::State& state) {
  int byte = 0;
  timed(state, [&] {
    byte = (byte + 1) & 0x7f;
    check(cudaMemsetAsync(g_out, byte, g_count * sizeof(float), g_stream->get()), "cudaMemsetAsync");
  });
}

void write_store_kernel(benchmark::State& state) {
  static const auto ops = CudaBackend::get_op_builder<accel::ops::TensorOps>().load();
  float value = 0.0f;
  timed(state, [&] {
    value += 1.0f;
    ops.fill(*g_stream, g_out, accel::Dtype::float32, static_cast<std::int64_t>(g_count), value);
  });
}

// accel's uniforms equal cuRAND's device generator's at the same seed and offset.
bool same_as_curand(std::size_t n) {
  const accel::cuda::StreamRef s = *g_stream;
  float* ours = nullptr;
  float* theirs = nullptr;
  check(cudaMalloc(reinterpret_cast<void**>(&ours), n * sizeof(float)), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&theirs), n * sizeof(float)), "cudaMalloc");
  accel::cuda::detail::launch_random_fill(s, accel::cuda::detail::RandomFillKind::uniform_float, ours, n, 1234, 4096,
                                          nullptr, 0);
  curandGenerator_t gen{};
  check(curandCreateGenerator(&gen, CURAND_RNG_PSEUDO_PHILOX4_32_10), "curandCreateGenerator");
  check(curandSetStream(gen, s.get()), "curandSetStream");
  check(curandSetPseudoRandomGeneratorSeed(gen, 1234), "curandSetPseudoRandomGeneratorSeed");
  check(curandSetGeneratorOffset(gen, 4096), "curandSetGeneratorOffset");
  check(curandGenerateUniform(gen, theirs, n), "curandGenerateUniform");
  check(cudaStreamSynchronize(s.get()), "cudaStreamSynchronize");
  std::vector<float> a(n), b(n);
  check(cudaMemcpy(a.data(), ours, n * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
  check(cudaMemcpy(b.data(), theirs, n * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
  check(curandDestroyGenerator(gen), "curandDestroyGenerator");
  check(cudaFree(ours), "cudaFree");
  check(cudaFree(theirs), "cudaFree");
  return std::memcmp(a.data(), b.data(), n * sizeof(float)) == 0;
}

// accel's fill and cuRAND's, alternating call by call (each timed with events around one call, the
// order swapped every pair) for `pairs` pairs: medians. Measured one after the other, the two drift
// apart by a few per cent with the GPU's state between runs; alternating cancels that.
struct Paired {
  double accel_us = 0.0;
  double curand_us = 0.0;
};

Paired paired(bool normal, int pairs) {
  curandGenerator_t gen{};
  check(curandCreateGenerator(&gen, CURAND_RNG_PSEUDO_PHILOX4_32_10), "curandCreateGenerator");
  check(curandSetStream(gen, g_stream->get()), "curandSetStream");
  check(curandSetPseudoRandomGeneratorSeed(gen, 42), "curandSetPseudoRandomGeneratorSeed");
  accel::Generator g(42);
  CallTimer timer;
  const auto ours = [&] {
    if (normal) {
      cuda.fill_normal(*g_stream, g_out, g_count, 0.0f, 1.0f, g);
    } else {
      cuda.fill_uniform(*g_stream, g_out, g_count, g);
    }
  };
  const auto theirs = [&] {
    check(normal ? curandGenerateNormal(gen, g_out, g_count, 0.0f, 1.0f) : curandGenerateUniform(gen, g_out, g_count),
          "curandGenerate");
  };
  const auto once = [&](const auto& enqueue) { return timer.seconds(enqueue) * 1e6; };  // microseconds
  (void)once(ours);  // warm-up
  (void)once(theirs);
  std::vector<double> a, c;
  for (int i = 0; i < pairs; ++i) {
    if (i % 2 == 0) {
      a.push_back(once(ours));
      c.push_back(once(theirs));
    } else {
      c.push_back(once(theirs));
      a.push_back(once(ours));
    }
  }
  std::sort(a.begin(), a.end());
  std::sort(c.begin(), c.end());
  check(curandDestroyGenerator(gen), "curandDestroyGenerator");
  return {a[a.size() / 2], c[c.size() / 2]};
}

void print_paired(int pairs) {
  const Paired u = paired(false, pairs);
  const Paired n = paired(true, pairs);
  const double bytes = static_cast<double>(g_count * sizeof(float));
  std::printf("\nalternating call by call, median of %d each (us per call; GB/s):\n", pairs);
  std::printf("%-9s %10s %10s %12s %12s %10s\n", "fill", "accel us", "cuRAND us", "accel GB/s", "cuRAND GB/s",
              "/cuRAND");
  std::printf("%-9s %10.1f %10.1f %12.1f %12.1f %10.3f\n", "uniform", u.accel_us, u.curand_us, bytes / u.accel_us / 1e3,
              bytes / u.curand_us / 1e3, u.curand_us / u.accel_us);
  std::printf("%-9s %10.1f %10.1f %12.1f %12.1f %10.3f\n", "normal", n.accel_us, n.curand_us, bytes / n.accel_us / 1e3,
              bytes / n.curand_us / 1e3, n.curand_us / n.accel_us);
  std::printf("target (uniform, alternating medians): >= 1.0x cuRAND: %s\n",
              u.curand_us / u.accel_us >= 1.0 ? "met" : "MISSED");
}

void print_summary(const accel_bench::Recorder& r, accel_bench::Report& report, int rounds) {
  const auto rate = [&](const char* name) { return r.counter(name, "bytes_per_second").median; };
  for (const char* name : {"accel_uniform", "curand_device_uniform", "write_memset", "write_store_kernel", "accel_normal",
                           "curand_device_normal"}) {
    if (r.has(name)) report.point(name, "", 1, "GB/s", accel_bench::scaled(r.counter(name, "bytes_per_second"), 1e-9));
  }
  const auto ratio = [](double a, double b) { return b == 0.0 ? 0.0 : a / b; };
  const double uniform = rate("accel_uniform"), normal = rate("accel_normal");
  const double cu_uniform = rate("curand_device_uniform"), cu_normal = rate("curand_device_normal");
  const double memset = rate("write_memset"), store = rate("write_store_kernel");
  const double write = std::max(memset, store);
  std::printf("\nfloat fills of %zu values (%.0f MiB) on %s, median of %d interleaved rounds, GB/s = 1e9 B/s written\n",
              g_count, static_cast<double>(g_count * sizeof(float)) / (1 << 20), cuda.product_name(0).c_str(), rounds);
  std::printf("%-9s %10s %12s %10s %12s %12s\n", "fill", "accel GB/s", "cuRAND GB/s", "/cuRAND", "/memset",
              "/store kernel");
  std::printf("%-9s %10.1f %12.1f %10.3f %12.3f %12.3f\n", "uniform", uniform / 1e9, cu_uniform / 1e9,
              ratio(uniform, cu_uniform), ratio(uniform, memset), ratio(uniform, store));
  std::printf("%-9s %10.1f %12.1f %10.3f %12.3f %12.3f\n", "normal", normal / 1e9, cu_normal / 1e9,
              ratio(normal, cu_normal), ratio(normal, memset), ratio(normal, store));
  std::printf("write bandwidth: memset %.1f GB/s, store kernel %.1f GB/s\n", memset / 1e9, store / 1e9);
  std::printf("targets (uniform): >= 1.0x cuRAND: %s; >= 85%% of write bandwidth: %s (%.1f%%)\n",
              ratio(uniform, cu_uniform) >= 1.0 ? "met" : "MISSED", ratio(uniform, write) >= 0.85 ? "met" : "MISSED",
              100.0 * ratio(uniform, write));
  std::printf("(0.0: not run)\n");
}

void configure(benchmark::internal::Benchmark* b) { b->UseManualTime()->Unit(benchmark::kMicrosecond); }

}  // namespace

int main(int argc, char** argv) {
  const accel::Availability availability = cuda.availability();
  if (!availability.available) {
    std::printf("no CUDA device: %s\n", availability.reason.c_str());
    return 0;
  }
  accel_bench::Report report("rng_fill_gpu", argc, argv);
  const int rounds = accel_bench::take_rounds(argc, argv, 5);
  const bool smoke = accel_bench::initialize(argc, argv);
  if (smoke) g_count = std::size_t{1} << 20;
  report.set_device(cuda.product_name(0));
  report.print_header(cuda.product_name(0));

  cuda.set_device(0);
  g_stream.emplace(0);
  check(cudaMalloc(reinterpret_cast<void**>(&g_out), g_count * sizeof(float)), "cudaMalloc");
  check(cudaMemset(g_out, 0, g_count * sizeof(float)), "cudaMemset");  // first touch outside the timing

  const bool same = same_as_curand(std::min<std::size_t>(g_count, std::size_t{1} << 22) + 3);
  benchmark::AddCustomContext("accel.same_as_curand", same ? "yes" : "NO");
  benchmark::RegisterBenchmark("accel_uniform", accel_uniform)->Apply(configure);
  benchmark::RegisterBenchmark("curand_device_uniform", curand_device<false>)->Apply(configure);
  benchmark::RegisterBenchmark("write_memset", write_memset)->Apply(configure);
  benchmark::RegisterBenchmark("write_store_kernel", write_store_kernel)->Apply(configure);
  benchmark::RegisterBenchmark("accel_normal", accel_normal)->Apply(configure);
  benchmark::RegisterBenchmark("curand_device_normal", curand_device<true>)->Apply(configure);
  accel_bench::Recorder recorder;
  report.set_rounds(accel_bench::run_rounds(recorder, smoke ? 1 : rounds));
  print_summary(recorder, report, smoke ? 1 : rounds);
  print_paired(smoke ? 5 : 41);
  std::printf("accel's uniforms equal curandGenerateUniform's (device generator, same seed and offset): %s\n",
              same ? "yes" : "NO");
  report.write();
  benchmark::Shutdown();
  check(cudaFree(g_out), "cudaFree");
  g_stream.reset();
  return same ? 0 : 1;
}
