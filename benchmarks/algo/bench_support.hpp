// benchmarks/algo/bench_support.hpp — what bench_algo_cpu and bench_algo_cuda share: the default
// command line (median of 3 repetitions; --smoke: one short run of each case) and a console reporter
// that keeps each case's wall time (the median when there are repetitions) for the ratio summary.
#pragma once

#include <benchmark/benchmark.h>

#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace accel_bench {

/// Initializes Google Benchmark with the defaults above; the command line overrides them.
inline void initialize(int argc, char** argv) {
  static char repetitions[] = "--benchmark_repetitions=3";
  static char aggregates_only[] = "--benchmark_display_aggregates_only=true";
  static char smoke_time[] = "--benchmark_min_time=0.001";
  static char one_repetition[] = "--benchmark_repetitions=1";
  static std::vector<char*> args;
  args = {argv[0], repetitions, aggregates_only};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--smoke") == 0) {
      args.push_back(smoke_time);
      args.push_back(one_repetition);
    } else {
      args.push_back(argv[i]);
    }
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
}

/// Console output as usual, plus seconds["<name>/<arg>"]: the wall time per iteration.
class WallTimeReporter : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> seconds;

  /// The wall time of "<name>/<arg>" in seconds, or -1 when it did not run.
  [[nodiscard]] double get(const std::string& name, long long arg) const {
    const auto it = seconds.find(name + "/" + std::to_string(arg));
    return it == seconds.end() ? -1.0 : it->second;
  }

  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs) {
      if (run.error_occurred) continue;
      const std::string key = run.run_name.function_name + "/" + run.run_name.args;
      const double s = run.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(run.time_unit);
      if (run.run_type == Run::RT_Aggregate) {
        if (run.aggregate_name == "median") {
          has_median_.insert(key);
          seconds[key] = s;
        }
      } else if (run.iterations > 0 && has_median_.count(key) == 0) {
        seconds[key] = s;
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }

 private:
  std::set<std::string> has_median_;
};

}  // namespace accel_bench
