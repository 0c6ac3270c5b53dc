// JIT cost of the fused Adam op: cold compile (empty cache) and warm load (cache hit: footer check,
// checksum, dlopen or cuModuleLoadData's input read) on the CPU backend, and NVRTC's compile of the
// CUDA kernel for sm_90 (no GPU needed). Baseline in the same run: `true` spawned the way the compiler
// is (the floor of any cold compile). DeepSpeed's JIT build of its CPU Adam against accel's, in one
// process: compare_jit.py in this folder.
//   --smoke: one iteration of each timed compile, the other cases one short run each.
#include <accel/cpu/ops.hpp>
#include <accel/ops/nvrtc.hpp>
#include <accel/ops/registry.hpp>

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include <unistd.h>

namespace {

std::filesystem::path fresh_dir(const char* tag) {
  std::string t = (std::filesystem::temp_directory_path() / (std::string("accel-bench-") + tag + "-XXXXXX")).string();
  if (::mkdtemp(t.data()) == nullptr) std::abort();
  return t;
}

int iterations = 3;
std::string smoke_min_time;  // argv's storage for --smoke's replacement

void BM_spawn_true(benchmark::State& state) {
  const auto dir = fresh_dir("spawn");
  for (auto _ : state) {
    const auto r = accel::detail::run_program({"true"});
    benchmark::DoNotOptimize(r.exit_code);
  }
  std::filesystem::remove_all(dir);
}

void BM_cpu_fused_adam_cold_compile(benchmark::State& state) {
  for (auto _ : state) {
    state.PauseTiming();
    const auto dir = fresh_dir("cold");
    auto b = accel::cpu::Ops::create_op_builder("fused_adam");
    b.set_cache_dir(dir);
    state.ResumeTiming();
    const auto op = b.load();
    benchmark::DoNotOptimize(op.native_handle());
    state.PauseTiming();
    std::filesystem::remove_all(dir);
    state.ResumeTiming();
  }
}

// A warm load in a fresh process (a library stays mapped once loaded, so a second load() in one process
// is only a reference count): this program re-runs itself with --warm-load-child <cache dir>, which
// times one load() from the cache and prints the seconds; process start-up is not counted.
int warm_load_child(const char* dir) {
  auto b = accel::cpu::Ops::create_op_builder("fused_adam");
  b.set_cache_dir(dir);
  const auto t0 = std::chrono::steady_clock::now();
  const auto op = b.load();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%.9f\n", s);
  return op.source() == accel::ops::LoadSource::cache_hit ? 0 : 1;
}

void BM_cpu_fused_adam_warm_load(benchmark::State& state) {
  const auto dir = fresh_dir("warm");
  auto b = accel::cpu::Ops::create_op_builder("fused_adam");
  b.set_cache_dir(dir);
  (void)b.load();  // fill the cache
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  for (auto _ : state) {
    const auto r = accel::detail::run_program({self, "--warm-load-child", dir.string()});
    if (!r.ok()) {
      state.SkipWithError(("child " + r.describe() + ": " + r.output).c_str());
      break;
    }
    state.SetIterationTime(std::stod(r.output));
  }
  std::filesystem::remove_all(dir);
}

void BM_cpu_fused_adam_reload_same_process(benchmark::State& state) {
  const auto dir = fresh_dir("reload");
  auto b = accel::cpu::Ops::create_op_builder("fused_adam");
  b.set_cache_dir(dir);
  (void)b.load();
  for (auto _ : state) {
    const auto op = b.load();
    benchmark::DoNotOptimize(op.native_handle());
  }
  std::filesystem::remove_all(dir);
}

void BM_typed_get_op_builder_load(benchmark::State& state) {
  const auto dir = fresh_dir("typed");
  ::setenv("ACCEL_CACHE_DIR", dir.c_str(), 1);
  (void)accel::cpu::Ops::get_op_builder<accel::ops::FusedAdam>().load();
  for (auto _ : state) {
    auto op = accel::cpu::Ops::get_op_builder<accel::ops::FusedAdam>().load();
    benchmark::DoNotOptimize(&op);
  }
  std::filesystem::remove_all(dir);
}

void BM_nvrtc_fused_adam_sm90_cold(benchmark::State& state) {
  if (!accel::ops::nvrtc().loaded) {
    state.SkipWithError(accel::ops::nvrtc().error.c_str());
    return;
  }
  for (auto _ : state) {
    state.PauseTiming();
    const auto dir = fresh_dir("nvrtc");
    accel::ops::OpBuilder b(accel::ops::specs::cuda_fused_adam(), &accel::ops::nvrtc_toolchain, "cuda");
    b.set_cache_dir(dir).set_arch(90);
    state.ResumeTiming();
    const auto e = accel::ops::nvrtc_build(b, 90);
    benchmark::DoNotOptimize(e.payload.data());
    state.PauseTiming();
    state.counters["cubin_bytes"] = double(e.payload.size());
    std::filesystem::remove_all(dir);
    state.ResumeTiming();
  }
}

void BM_nvrtc_fused_adam_sm90_warm(benchmark::State& state) {
  if (!accel::ops::nvrtc().loaded) {
    state.SkipWithError(accel::ops::nvrtc().error.c_str());
    return;
  }
  const auto dir = fresh_dir("nvrtc-warm");
  accel::ops::OpBuilder b(accel::ops::specs::cuda_fused_adam(), &accel::ops::nvrtc_toolchain, "cuda");
  b.set_cache_dir(dir).set_arch(90);
  (void)accel::ops::nvrtc_build(b, 90);
  for (auto _ : state) {
    const auto e = accel::ops::nvrtc_build(b, 90);  // key + read + checksum: what precedes cuModuleLoadData
    benchmark::DoNotOptimize(e.payload.data());
  }
  std::filesystem::remove_all(dir);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--warm-load-child") == 0) return warm_load_child(argv[2]);
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--smoke") == 0) {
      iterations = 1;
      smoke_min_time = "--benchmark_min_time=0.001";  // and the untimed cases one short run each
      argv[i] = smoke_min_time.data();
      break;
    }
  }
  benchmark::RegisterBenchmark("spawn_true (baseline)", BM_spawn_true)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("cpu_fused_adam/cold_compile", BM_cpu_fused_adam_cold_compile)
      ->Iterations(iterations)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("cpu_fused_adam/warm_load_new_process", BM_cpu_fused_adam_warm_load)
      ->UseManualTime()->Iterations(iterations * 5)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("cpu_fused_adam/reload_same_process", BM_cpu_fused_adam_reload_same_process)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("cpu_fused_adam/get_op_builder_load", BM_typed_get_op_builder_load)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("nvrtc_fused_adam_sm90/cold_compile", BM_nvrtc_fused_adam_sm90_cold)
      ->Iterations(iterations)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("nvrtc_fused_adam_sm90/warm_cache", BM_nvrtc_fused_adam_sm90_warm)
      ->Unit(benchmark::kMillisecond);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
