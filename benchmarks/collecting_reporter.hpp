// benchmarks/collecting_reporter.hpp — a console reporter that also keeps each run's time, so a
// benchmark can print ratios between rows measured in the same run. Shared by the graph benchmarks
// (benchmarks/cpu/bench_graph.cpp, benchmarks/cuda/bench_cuda_graph.cpp).
#pragma once

#include <benchmark/benchmark.h>

#include <map>
#include <string>
#include <vector>

namespace accel_bench {

/// Google Benchmark's console output, plus ns(name): the real time per iteration of the run named
/// `name` ("eager/100"), or of its median when repetitions were asked for.
class CollectingReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.run_type == Run::RT_Aggregate && run.aggregate_name != "median") continue;
      ns_[run.benchmark_name()] = run.GetAdjustedRealTime();  // the default time unit: ns
    }
  }

  /// The run named `name`, or its median when repetitions were asked for; 0 when it did not run.
  [[nodiscard]] double ns(const std::string& name) const {
    for (const std::string& key : {name + "_median", name}) {
      if (const auto it = ns_.find(key); it != ns_.end()) return it->second;
    }
    return 0.0;
  }

 private:
  std::map<std::string, double> ns_;
};

}  // namespace accel_bench
