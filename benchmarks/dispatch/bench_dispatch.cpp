// Dispatch cost of one accel call, four ways, in one run:
//   raw      the operation written directly (a thread-local read, an atomic load)
//   static   through accel::CpuBackend — must cost exactly what raw costs
//   any      through accel::AnyBackend, dispatching per call (std::variant, index chosen at run time)
//   virtual  through an abstract interface, the design torch's c10 DeviceGuardImplInterface uses
// Printed at the end as ns/call and as the difference to raw.
#include <accel/accel.hpp>

#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>

namespace {

// ---- the virtual-interface equivalent, written here as c10 would ----
struct VirtualAccelerator {
  virtual ~VirtualAccelerator() = default;
  virtual int current_device() const = 0;
  virtual std::size_t memory_allocated() const = 0;
  virtual bool query(const accel::cpu::Event& e) const = 0;
};
struct VirtualCpu final : VirtualAccelerator {
  int current_device() const override { return accel::CpuBackend::current_device(); }
  std::size_t memory_allocated() const override { return accel::CpuBackend::memory_allocated(); }
  bool query(const accel::cpu::Event& e) const override { return e.query(); }
};

// Hidden from the optimiser so the indirect call and the variant index stay run-time facts.
__attribute__((noinline)) std::unique_ptr<VirtualAccelerator> make_virtual() { return std::make_unique<VirtualCpu>(); }
__attribute__((noinline)) accel::AnyBackend make_any() { return accel::AnyBackend{accel::CpuBackend{}}; }

thread_local int raw_current_device = 0;

void current_device_raw(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(raw_current_device);
}
void current_device_static(benchmark::State& state) {
  const accel::CpuBackend b;
  for (auto _ : state) benchmark::DoNotOptimize(b.current_device());
}
void current_device_any(benchmark::State& state) {
  const accel::AnyBackend any = make_any();
  for (auto _ : state) benchmark::DoNotOptimize(any.current_device());
}
void current_device_virtual(benchmark::State& state) {
  const auto v = make_virtual();
  for (auto _ : state) benchmark::DoNotOptimize(v->current_device());
}

void memory_allocated_static(benchmark::State& state) {
  const accel::CpuBackend b;
  for (auto _ : state) benchmark::DoNotOptimize(b.memory_allocated());
}
void memory_allocated_any(benchmark::State& state) {
  const accel::AnyBackend any = make_any();
  for (auto _ : state) benchmark::DoNotOptimize(any.memory_allocated());
}
void memory_allocated_virtual(benchmark::State& state) {
  const auto v = make_virtual();
  for (auto _ : state) benchmark::DoNotOptimize(v->memory_allocated());
}

void event_query_raw(benchmark::State& state) {
  std::atomic<bool> done{true};
  for (auto _ : state) benchmark::DoNotOptimize(done.load(std::memory_order_acquire));
}
void event_query_static(benchmark::State& state) {
  accel::cpu::Event e;
  e.record(accel::CpuBackend::default_stream());
  for (auto _ : state) benchmark::DoNotOptimize(e.query());
}
void event_query_any(benchmark::State& state) {
  const accel::AnyBackend any = make_any();
  accel::AnyBackend::Event e{false};
  e.record(any.default_stream());
  for (auto _ : state) benchmark::DoNotOptimize(e.query());
}
void event_query_virtual(benchmark::State& state) {
  const auto v = make_virtual();
  accel::cpu::Event e;
  e.record(accel::CpuBackend::default_stream());
  for (auto _ : state) benchmark::DoNotOptimize(v->query(e));
}

BENCHMARK(current_device_raw);
BENCHMARK(current_device_static);
BENCHMARK(current_device_any);
BENCHMARK(current_device_virtual);
BENCHMARK(memory_allocated_static);
BENCHMARK(memory_allocated_any);
BENCHMARK(memory_allocated_virtual);
BENCHMARK(event_query_raw);
BENCHMARK(event_query_static);
BENCHMARK(event_query_any);
BENCHMARK(event_query_virtual);

// Collects each benchmark's ns/iteration so the summary can print differences to the baseline.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> ns;
  void ReportRuns(const std::vector<Run>& runs) override {
    // With --benchmark_repetitions the median stands for the benchmark; CPU time, as the machine may be shared.
    for (const auto& run : runs) {
      const bool median = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      if (median || (run.run_type == Run::RT_Iteration && !ns.count(run.run_name.function_name))) {
        ns[run.run_name.function_name] = run.GetAdjustedCPUTime();
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  const auto& ns = reporter.ns;
  const auto row = [&](const char* op, const std::string& baseline) {
    const auto get = [&](const std::string& k) { return ns.count(k) ? ns.at(k) : -1.0; };
    const double base = get(baseline);
    std::printf("%-18s static %+.2f ns   any %+.2f ns   virtual %+.2f ns   (vs %s = %.2f ns)\n", op,
                get(std::string(op) + "_static") - base, get(std::string(op) + "_any") - base,
                get(std::string(op) + "_virtual") - base, baseline.c_str(), base);
  };
  std::printf("\nper-call cost over the baseline (same run):\n");
  row("current_device", "current_device_raw");
  row("memory_allocated", "memory_allocated_static");
  row("event_query", "event_query_raw");
  benchmark::Shutdown();
  return 0;
}
