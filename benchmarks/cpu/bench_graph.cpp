// CPU graphs: N small tasks enqueued eagerly on a worker stream vs the same N tasks captured once and
// replayed as a graph (one stream task), each followed by a stream synchronize, N = 10, 100, 1000.
// Also the replay of a graph with one random fill (the per-replay offset reservation) against the
// same fill enqueued eagerly. Prints Google Benchmark's table, then per-task costs and ratios.
#include "../collecting_reporter.hpp"

#include <accel/cpu/backend.hpp>

#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

std::atomic<std::uint64_t> sink{0};

// The work of one task: touch a counter, as a tiny kernel would touch memory.
void enqueue_tasks(accel::cpu::StreamRef s, int n) {
  for (int i = 0; i < n; ++i) s.enqueue([] { sink.fetch_add(1, std::memory_order_relaxed); });
}

void eager(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  accel::cpu::Stream s;
  for (auto _ : state) {
    enqueue_tasks(s, n);
    s.synchronize();
  }
  state.SetItemsProcessed(state.iterations() * n);
}

void graph_replay(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const accel::CpuBackend b;
  accel::cpu::Stream s;
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
  accel::cpu::Stream s;
  std::vector<float> out(256);
  for (auto _ : state) {
    b.fill_uniform(s, out.data(), out.size());
    s.synchronize();
  }
}

void graph_fill(benchmark::State& state) {
  const accel::CpuBackend b;
  accel::cpu::Stream s;
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
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  accel_bench::CollectingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  std::printf("\nper task (lower is better); ratio = graph replay / eager enqueue\n");
  for (const int n : {10, 100, 1000}) {
    const double e = reporter.ns("eager/" + std::to_string(n));
    const double g = reporter.ns("graph_replay/" + std::to_string(n));
    if (e <= 0.0 || g <= 0.0) continue;
    std::printf("  N = %4d   eager %8.1f ns/task   graph %8.1f ns/task   ratio %5.2f  (%.1fx faster)\n", n, e / n,
                g / n, g / e, e / g);
  }
  const double ef = reporter.ns("eager_fill");
  const double gf = reporter.ns("graph_fill");
  if (ef > 0.0 && gf > 0.0) {
    std::printf("  256-float fill + synchronize: eager %.1f ns, graph replay %.1f ns, ratio %.2f\n", ef, gf, gf / ef);
  }
  return 0;
}
