// CUDA graphs, eager launches vs one graph replay, through the raw CUDA graph API and through accel's
// capture_to_graph / replay_graph, in one run; each iteration ends with a stream synchronize:
//   - N tiny kernels, N = 100, 1000: a kernel that adds 1 to 4 floats (one block of 32 threads),
//     compiled with NVRTC when the program starts (accel::ops::nvrtc_compile; a cubin for the device,
//     or PTX for the newest architecture NVRTC knows) and launched with cuLaunchKernel through the
//     driver entry points accel already loads (cuda/detail/module_api.hpp) — no nvcc-compiled code. The same
//     launches are captured by both graph paths, so the rows differ only in how the graph is made
//     and launched. Before the runs, a check launches the kernel eagerly and from both kinds of graph
//     and reads the floats back (the program exits 1 if they are wrong).
//   - N 4-byte cudaMemsetAsync nodes, N = 10, 100, 1000 (work without host callbacks).
// Also the CPU time of the launch call alone (no synchronize, memset graph, N = 100), raw vs accel.
// Prints Google Benchmark's table, then per replay / per eager batch times and ratios.
// Without a GPU the program says why and exits 0; without NVRTC (or if the kernel cannot be built or
// loaded) it says why and runs the memset rows only.
#include "../bench_support.hpp"

#include <accel/cuda/backend.hpp>
#include <accel/cuda/detail/module_api.hpp>
#include <accel/ops/nvrtc.hpp>

#include <benchmark/benchmark.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
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

// ---- tiny kernels ------------------------------------------------------------------------------

constexpr const char* tiny_kernel_source = R"(extern "C" __global__ void accel_bench_add_one(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}
)";
constexpr int tiny_floats = 4;
constexpr unsigned tiny_block = 32;

struct TinyKernel {
  CUfunction function = nullptr;
  std::string what;  ///< how it was built, or why it could not be
};
TinyKernel tiny;

const accel::cuda::detail::ModuleApi& driver() { return accel::cuda::detail::module_api(); }

void check_cu(CUresult status, const char* what) {
  if (status != CUDA_SUCCESS) {
    std::fprintf(stderr, "%s: %s\n", what, driver().describe(status).c_str());
    std::exit(1);
  }
}

/// Compiles the kernel with NVRTC and loads it into the primary context of `device` (the module stays
/// loaded until the process exits). On failure, function is null and what says why.
TinyKernel load_tiny_kernel(int device) {
  TinyKernel k;
  const accel::ops::NvrtcApi& nvrtc = accel::ops::nvrtc();
  if (!nvrtc.loaded) {
    k.what = nvrtc.error;
    return k;
  }
  if (!driver().loaded) {
    k.what = driver().error;
    return k;
  }
  const int sm = cuda.compute_capability(device).sm();
  int target = sm;
  bool cubin = true;
  const std::vector<int>& archs = nvrtc.supported_archs;
  if (!archs.empty() && std::find(archs.begin(), archs.end(), sm) == archs.end()) {
    target = 0;  // a device newer than NVRTC: PTX for the newest older architecture, JIT-compiled by the driver
    for (const int a : archs) {
      if (a <= sm && a > target) target = a;
    }
    cubin = false;
    if (target == 0) {
      k.what = nvrtc.identity() + " cannot compile for sm_" + std::to_string(sm) + " or an older architecture";
      return k;
    }
  }
  const std::string arch = (cubin ? "sm_" : "compute_") + std::to_string(target);
  try {
    const accel::ops::NvrtcOutput out =
        accel::ops::nvrtc_compile(tiny_kernel_source, "accel_bench_add_one.cu", {"--gpu-architecture=" + arch, "-std=c++17"});
    const std::string& image = cubin ? out.cubin : out.ptx;
    if (image.empty()) {
      k.what = nvrtc.identity() + " produced no " + (cubin ? "cubin" : "PTX") + " for " + arch;
      return k;
    }
    check(cudaSetDevice(device), "cudaSetDevice");
    check(cudaFree(nullptr), "cudaFree(nullptr)");  // the device's primary context, current on this thread
    CUmodule module = nullptr;
    if (const CUresult r = driver().module_load_data(&module, image.c_str()); r != CUDA_SUCCESS) {
      k.what = "cuModuleLoadData: " + driver().describe(r);
      return k;
    }
    CUfunction function = nullptr;
    if (const CUresult r = driver().module_get_function(&function, module, "accel_bench_add_one"); r != CUDA_SUCCESS) {
      k.what = "cuModuleGetFunction(accel_bench_add_one): " + driver().describe(r);
      return k;
    }
    k.function = function;
    k.what = nvrtc.identity() + ", " + arch + (cubin ? " cubin" : " PTX (JIT-compiled by the driver)");
  } catch (const accel::Error& e) {
    k.what = e.what();
  }
  return k;
}

struct KernelFixture {
  accel::cuda::Stream stream;
  float* x = nullptr;
  KernelFixture() {
    void* p = nullptr;
    check(cudaMalloc(&p, sizeof(float) * tiny_floats), "cudaMalloc");
    x = static_cast<float*>(p);
    check(cudaMemset(x, 0, sizeof(float) * tiny_floats), "cudaMemset");
  }
  KernelFixture(const KernelFixture&) = delete;
  KernelFixture& operator=(const KernelFixture&) = delete;
  ~KernelFixture() { (void)cudaFree(x); }
  /// n launches of the tiny kernel on the stream (cuLaunchKernel copies the arguments at each call).
  void launch(int n) const {
    float* data = x;
    int count = tiny_floats;
    void* params[] = {&data, &count};
    for (int i = 0; i < n; ++i) {
      check_cu(driver().launch_kernel(tiny.function, 1, 1, 1, tiny_block, 1, 1, 0, stream.get(), params, nullptr),
               "cuLaunchKernel");
    }
  }
};

/// A graph of n launches captured with the raw API; instantiated, ready to launch.
struct RawKernelGraph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  RawKernelGraph(const KernelFixture& f, int n) {
    check(cudaStreamBeginCapture(f.stream.get(), cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
    f.launch(n);
    check(cudaStreamEndCapture(f.stream.get(), &graph), "cudaStreamEndCapture");
    check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  }
  RawKernelGraph(const RawKernelGraph&) = delete;
  RawKernelGraph& operator=(const RawKernelGraph&) = delete;
  ~RawKernelGraph() {
    (void)cudaGraphExecDestroy(exec);
    (void)cudaGraphDestroy(graph);
  }
};

void kernel_eager(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  KernelFixture f;
  for (auto _ : state) {
    f.launch(n);
    check(cudaStreamSynchronize(f.stream.get()), "cudaStreamSynchronize");
  }
}

void kernel_raw_graph(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  KernelFixture f;
  RawKernelGraph g(f, n);
  for (auto _ : state) {
    check(cudaGraphLaunch(g.exec, f.stream.get()), "cudaGraphLaunch");
    check(cudaStreamSynchronize(f.stream.get()), "cudaStreamSynchronize");
  }
}

void kernel_accel_graph(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  KernelFixture f;
  auto g = cuda.create_graph();
  {
    auto capture = cuda.capture_to_graph(g, f.stream);
    f.launch(n);
    capture.end();
  }
  for (auto _ : state) {
    cuda.replay_graph(g, f.stream);
    f.stream.synchronize();
  }
}

/// The kernel runs where it is launched: 3 eager launches, an accel graph of 2 replayed twice and a
/// raw graph of 1 replayed once leave every float at 8. Returns the values read back.
std::array<float, tiny_floats> check_tiny_kernel() {
  KernelFixture f;
  f.launch(3);
  auto g = cuda.create_graph();
  {
    auto capture = cuda.capture_to_graph(g, f.stream);
    f.launch(2);
    capture.end();
  }
  cuda.replay_graph(g, f.stream);
  cuda.replay_graph(g, f.stream);
  {
    RawKernelGraph raw(f, 1);
    check(cudaGraphLaunch(raw.exec, f.stream.get()), "cudaGraphLaunch");
    f.stream.synchronize();
  }
  std::array<float, tiny_floats> host{};
  check(cudaMemcpy(host.data(), f.x, sizeof(float) * tiny_floats, cudaMemcpyDeviceToHost), "cudaMemcpy");
  return host;
}

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
  accel_bench::Report report("cuda_graph", argc, argv);
  const int rounds = accel_bench::take_rounds(argc, argv, 3);
  const bool smoke = accel_bench::initialize(argc, argv);
  report.set_device(cuda.product_name(cuda.current_device()));
  report.print_header(cuda.product_name(cuda.current_device()));

  tiny = load_tiny_kernel(cuda.current_device());
  if (tiny.function != nullptr) {
    const std::array<float, tiny_floats> x = check_tiny_kernel();
    std::printf("tiny kernel: %s; check after 8 launches: x = {%g, %g, %g, %g}\n", tiny.what.c_str(), x[0], x[1],
                x[2], x[3]);
    if (std::any_of(x.begin(), x.end(), [](float v) { return v != 8.0F; })) {
      std::fprintf(stderr, "the tiny kernel did not run as launched (expected every float to be 8)\n");
      return 1;
    }
    benchmark::RegisterBenchmark("kernel_eager", kernel_eager)->Arg(100)->Arg(1000);
    benchmark::RegisterBenchmark("kernel_raw_graph", kernel_raw_graph)->Arg(100)->Arg(1000);
    benchmark::RegisterBenchmark("kernel_accel_graph", kernel_accel_graph)->Arg(100)->Arg(1000);
  } else {
    std::printf("tiny-kernel rows skipped: %s\n", tiny.what.c_str());
  }

  accel_bench::Recorder recorder;
  report.set_rounds(accel_bench::run_rounds(recorder, smoke ? 1 : rounds));
  benchmark::Shutdown();
  // Real time per iteration, the median of the rounds; 0 when it did not run.
  struct {
    const accel_bench::Recorder& r;
    [[nodiscard]] double ns(const std::string& key) const { return r.real_ns(key).median; }
  } reporter{recorder};
  const auto record = [&](const std::string& series, const std::string& group, int n) {
    const std::string key = series + "/" + std::to_string(n);
    if (recorder.has(key)) report.point(series, group, n, "ns per replay", recorder.real_ns(key));
  };
  for (const int n : {10, 100, 1000}) {
    for (const char* s : {"kernel_eager", "kernel_raw_graph", "kernel_accel_graph"}) record(s, "tiny kernels", n);
    for (const char* s : {"eager", "raw_graph", "accel_graph"}) record(s, "memset nodes", n);
  }

  std::printf("\nper replay / per eager batch (lower is better)\n");
  if (tiny.function != nullptr) {
    std::printf("tiny kernels (1 block of %u threads adding 1 to %d floats; %s)\n", tiny_block, tiny_floats,
                tiny.what.c_str());
    for (const int n : {100, 1000}) {
      const std::string arg = "/" + std::to_string(n);
      const double e = reporter.ns("kernel_eager" + arg);
      const double r = reporter.ns("kernel_raw_graph" + arg);
      const double a = reporter.ns("kernel_accel_graph" + arg);
      if (e <= 0.0 || r <= 0.0 || a <= 0.0) continue;
      std::printf("  N = %4d   eager %9.1f ns   raw graph %9.1f ns   accel graph %9.1f ns   accel/raw %5.3f   "
                  "eager/raw %5.2fx   eager/accel %5.2fx\n",
                  n, e, r, a, a / r, e / r, e / a);
    }
    std::printf("  targets: accel/raw <= 1.03; eager/accel >= 2x at N = 100\n");
  } else {
    std::printf("tiny kernels: skipped (%s)\n", tiny.what.c_str());
  }
  std::printf("4-byte memset nodes\n");
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
  report.write();
  return 0;
}
