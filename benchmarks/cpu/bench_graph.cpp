// CPU graphs: N small tasks enqueued eagerly on a worker stream vs the same N tasks captured once and
// replayed as a graph (one stream task), each followed by a stream synchronize, N = 10, 100, 1000.
// Also the replay of a graph with one random fill (the per-replay offset reservation) against the
// same fill enqueued eagerly. Prints Google Benchmark's table (first round), then per-task costs and
// ratios: medians of interleaved rounds (--rounds=N, default 5) with their min-max. Every benchmark
// runs on one stream: a stream of its own per benchmark would put each one's worker thread on a core
// of the scheduler's choosing, the caller's core or the other, and a round trip costs ~3x more in the
// first case (2-vCPU VM) — the comparison would measure thread placement.
//   bench_graph [--rounds=N] [--json=FILE] [--smoke] [google benchmark flags]
#include "../bench_support.hpp"

#include <accel/cpu/backend.hpp>

#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

std::atomic<std::uint64_t> sink{0};

accel::cpu::StreamRef shared_stream() {
  static accel::cpu::Stream stream;
  return stream;
}

// The work of one task: touch a counter, as a tiny kernel would touch memory.
void enqueue_tasks(accel::cpu::StreamRef s, int n) {
  for (int i = 0; i < n; ++i) s.enqueue([] { sink.fetch_add(1, std::memory_order_relaxed); });
}

void eager(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const accel::cpu::StreamRef s = shared_stream();
  for (auto _ : state) {
    enqueue_tasks(s, n);
    s.synchronize();
  }
  state.SetItemsProcessed(state.iterations() * n);
}

void graph_replay(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const accel::CpuBackend b;
  const accel::cpu::StreamRef s = shared_stream();
  auto g = b.create_graph();
  {
    auto capture = b.capture_to_graph(g, s);
    enqueue_tasks(s, n);
  }
  for (auto _ : state) {
    b.replay_graph(g, s);
    s.synchronize();
  }
  state.SetItemsProcessed(state.iterations() * n);
}

void eager_fill(benchmark::State& state) {
  const accel::CpuBackend b;
  const accel::cpu::StreamRef s = shared_stream();
  std::vector<float> out(256);
  for (auto _ : state) {
    b.fill_uniform(s, out.data(), out.size());
    s.synchronize();
  }
}

void graph_fill(benchmark::State& state) {
  const accel::CpuBackend b;
  const accel::cpu::StreamRef s = shared_stream();
  std::vector<float> out(256);
  auto g = b.create_graph();
  {
    auto capture = b.capture_to_graph(g, s);
    b.fill_uniform(s, out.data(), out.size());
  }
  for (auto _ : state) {
    b.replay_graph(g, s);
    s.synchronize();
  }
}

}  // namespace

BENCHMARK(eager)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(graph_replay)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(eager_fill);
BENCHMARK(graph_fill);

int main(int argc, char** argv) {
  accel_bench::Report report("graph", argc, argv);
  const int rounds = accel_bench::take_rounds(argc, argv, 5);
  const bool smoke = accel_bench::initialize(argc, argv, {"--benchmark_min_time=0.2"});
  report.print_header();
  accel_bench::Recorder recorder;
  report.set_rounds(accel_bench::run_rounds(recorder, smoke ? 1 : rounds));
  benchmark::Shutdown();

  std::printf("\nper task, median (min-max) of %d interleaved rounds; speedup = eager / graph replay, round by round\n",
              smoke ? 1 : rounds);
  for (const int n : {10, 100, 1000}) {
    const std::string e = "eager/" + std::to_string(n), g = "graph_replay/" + std::to_string(n);
    if (!recorder.has(e) || !recorder.has(g)) continue;
    const auto es = accel_bench::scaled(recorder.real_ns(e), 1.0 / n);
    const auto gs = accel_bench::scaled(recorder.real_ns(g), 1.0 / n);
    const auto speedup = accel_bench::ratio_per_round(recorder.values(e, "real_ns"), recorder.values(g, "real_ns"));
    std::printf("  N = %4d   eager %s ns/task   graph %s ns/task   speedup %sx\n", n, accel_bench::fmt(es, 1).c_str(),
                accel_bench::fmt(gs, 1).c_str(), accel_bench::fmt(speedup).c_str());
    report.point("eager enqueue", "", n, "ns per task", es);
    report.point("graph replay", "", n, "ns per task", gs);
    report.ratio("graph replay", "eager enqueue", "", n, speedup);
  }
  if (recorder.has("eager_fill") && recorder.has("graph_fill")) {
    const auto speedup = accel_bench::ratio_per_round(recorder.values("eager_fill", "real_ns"),
                                                      recorder.values("graph_fill", "real_ns"));
    std::printf("  256-float fill + synchronize: eager %s ns, graph replay %s ns, speedup %sx\n",
                accel_bench::fmt(recorder.real_ns("eager_fill"), 1).c_str(),
                accel_bench::fmt(recorder.real_ns("graph_fill"), 1).c_str(), accel_bench::fmt(speedup).c_str());
    report.ratio("graph replay (256-float fill)", "eager fill", "", 256, speedup);
  }
  report.write();
  return 0;
}
