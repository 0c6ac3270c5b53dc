// Shared by the RNG fill benchmarks: the --smoke flag and a reporter that keeps each benchmark's best
// rate over its repetitions.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace bench_rng {

/// Replaces "--smoke" in args by a short --benchmark_min_time; true when it was there.
inline bool take_smoke_flag(std::vector<char*>& args) {
  static char smoke_time[] = "--benchmark_min_time=0.01";
  const auto smoke =
      std::find_if(args.begin(), args.end(), [](const char* a) { return std::strcmp(a, "--smoke") == 0; });
  if (smoke == args.end()) return false;
  *smoke = smoke_time;
  return true;
}

/// Console output as usual, plus the best bytes per second of each (benchmark, arguments) over the
/// repetitions (--benchmark_repetitions): on a shared machine the best run is the least disturbed.
class RateRecorder : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.error_occurred) continue;
      // Repetitions shown as aggregates only: their "max" statistic is the best run.
      if (run.run_type == Run::RT_Aggregate && run.aggregate_name != "max") continue;
      const auto it = run.counters.find("bytes_per_second");
      if (it == run.counters.end()) continue;
      double& best = rates[run.run_name.function_name][run.run_name.args];
      best = std::max(best, it->second.value);
    }
    ConsoleReporter::ReportRuns(runs);
  }
  /// The best rate of `name` with `args` ("threads:1", or "" for none); 0 when it did not run.
  [[nodiscard]] double rate(const std::string& name, const std::string& args = "") const {
    const auto f = rates.find(name);
    if (f == rates.end()) return 0.0;
    const auto a = f->second.find(args);
    return a == f->second.end() ? 0.0 : a->second;
  }
  std::map<std::string, std::map<std::string, double>> rates;
};

/// A "max" statistic, so that repetitions report their best rate.
inline void add_max_statistic(benchmark::internal::Benchmark* b) {
  b->ComputeStatistics("max", [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); });
}

}  // namespace bench_rng
