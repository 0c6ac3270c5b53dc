// CUDA graphs: N tiny operations (4-byte cudaMemsetAsync nodes: work without host callbacks, compiled
// by the host compiler) launched eagerly vs replayed as one graph, through the raw CUDA graph API and
// through accel's capture_to_graph / replay_graph, in one run; N = 10, 100, 1000. Each iteration ends
// with a stream synchronize. Also the CPU time for the launch call alone (no synchronize), raw vs accel.
// Without a GPU the program says why and exits 0.
#include <accel/cuda/backend.hpp>

#include <benchmark/benchmark.h>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace {

const accel::CudaBackend cuda;

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

struct Fixture {
  accel::cuda::Stream stream;
  int* device = nullptr;
  explicit Fixture(int n) {
    void* p = nullptr;
    check(cudaMalloc(&p, sizeof(int) * static_cast<std::size_t>(n)), "cudaMalloc");
    device = static_cast<int*>(p);
  }
  ~Fixture() { (void)cudaFree(device); }
  void enqueue(int n) const {
    for (int i = 0; i < n; ++i) check(cudaMemsetAsync(device + i, 0, sizeof(int), stream.get()), "cudaMemsetAsync");
  }
};

void eager(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Fixture f(n);
  for (auto _ : state) {
    f.enqueue(n);
    check(cudaStreamSynchronize(f.stream.get()), "cudaStreamSynchronize");
  }
}

void raw_graph(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Fixture f(n);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  check(cudaStreamBeginCapture(f.stream.get(), cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
  f.enqueue(n);
  check(cudaStreamEndCapture(f.stream.get(), &graph), "cudaStreamEndCapture");
  check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  for (auto _ : state) {
    check(cudaGraphLaunch(exec, f.stream.get()), "cudaGraphLaunch");
    check(cudaStreamSynchronize(f.stream.get()), "cudaStreamSynchronize");
  }
  (void)cudaGraphExecDestroy(exec);
  (void)cudaGraphDestroy(graph);
}

void accel_graph(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Fixture f(n);
  auto g = cuda.create_graph();
  {
    auto capture = cuda.capture_to_graph(g, f.stream);
    f.enqueue(n);
    capture.end();
  }
  for (auto _ : state) {
    cuda.replay_graph(g, f.stream);
    f.stream.synchronize();
  }
}

// The launch call alone: what the host pays per replay (the device runs behind).
void raw_launch_only(benchmark::State& state) {
  Fixture f(100);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  check(cudaStreamBeginCapture(f.stream.get(), cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
  f.enqueue(100);
  check(cudaStreamEndCapture(f.stream.get(), &graph), "cudaStreamEndCapture");
  check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  std::size_t i = 0;
  for (auto _ : state) {
    check(cudaGraphLaunch(exec, f.stream.get()), "cudaGraphLaunch");
    if (++i % 256 == 0) {
      state.PauseTiming();
      check(cudaStreamSynchronize(f.stream.get()), "cudaStreamSynchronize");
      state.ResumeTiming();
    }
  }
  check(cudaStreamSynchronize(f.stream.get()), "cudaStreamSynchronize");
  (void)cudaGraphExecDestroy(exec);
  (void)cudaGraphDestroy(graph);
}

void accel_launch_only(benchmark::State& state) {
  Fixture f(100);
  auto g = cuda.create_graph();
  {
    auto capture = cuda.capture_to_graph(g, f.stream);
    f.enqueue(100);
  }
  std::size_t i = 0;
  for (auto _ : state) {
    cuda.replay_graph(g, f.stream);
    if (++i % 256 == 0) {
      state.PauseTiming();
      f.stream.synchronize();
      state.ResumeTiming();
    }
  }
  f.stream.synchronize();
}

class CollectingReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.run_type == Run::RT_Aggregate && run.aggregate_name != "median") continue;
      ns_[run.benchmark_name()] = run.GetAdjustedRealTime();
    }
  }
  /// The run named `name` ("eager/100"), or its median when repetitions were asked for.
  [[nodiscard]] double ns(const std::string& name) const {
    for (const std::string& key : {name + "_median", name}) {
      if (const auto it = ns_.find(key); it != ns_.end()) return it->second;
    }
    return 0.0;
  }

 private:
  std::map<std::string, double> ns_;
};

}  // namespace

BENCHMARK(eager)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(raw_graph)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(accel_graph)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(raw_launch_only);
BENCHMARK(accel_launch_only);

int main(int argc, char** argv) {
  const accel::Availability availability = cuda.availability();
  if (!availability.available) {
    std::printf("no CUDA device: %s\n", availability.reason.c_str());
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  CollectingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  std::printf("\nper replay / per eager batch (lower is better)\n");
  for (const int n : {10, 100, 1000}) {
    const std::string arg = "/" + std::to_string(n);
    const double e = reporter.ns("eager" + arg);
    const double r = reporter.ns("raw_graph" + arg);
    const double a = reporter.ns("accel_graph" + arg);
    if (e <= 0.0 || r <= 0.0 || a <= 0.0) continue;
    std::printf("  N = %4d   eager %9.1f ns   raw graph %9.1f ns   accel graph %9.1f ns   accel/raw %5.3f   "
                "eager/accel %5.2fx\n",
                n, e, r, a, a / r, e / a);
  }
  const double rl = reporter.ns("raw_launch_only");
  const double al = reporter.ns("accel_launch_only");
  if (rl > 0.0 && al > 0.0) {
    std::printf("  launch call only (N = 100): raw %.1f ns, accel %.1f ns, accel/raw %.3f\n", rl, al, al / rl);
  }
  return 0;
}
