// Allocation + free pairs of one size, three ways, in one run:
//   accel    cpu::Memory::raw_alloc / raw_delete on the default stream: the caching allocator,
//            statistics included (what CpuBackend users call)
//   malloc   glibc malloc / free
//   aligned  glibc aligned_alloc(64) / free
// for sizes 256 B to 64 MiB (powers of 4), each untouched and touched (one byte written in every
// 4 KiB page of the block, so fresh pages fault). Printed at the end: CPU ns per pair and the ratio
// baseline time / accel time per size (> 1: accel is faster).
// Each case runs 3 times and the median is reported (the development machine is shared); `--smoke`
// runs every case once, briefly (correctness only, for CI). Google Benchmark's flags apply.
// `--pairs N [bytes]` runs N cache-hit pairs (default 256 B) in alloc_free_pairs() and nothing else,
// for an instruction count under callgrind (benchmarks/memory/count_alloc_instructions.sh).
#include <accel/cpu/memory.hpp>
#include <accel/cpu/stream.hpp>

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace {

constexpr std::size_t page = 4096;

enum class Kind { accel, malloc_, aligned };
constexpr const char* kind_name[] = {"accel", "malloc", "aligned"};

inline void touch(void* p, std::size_t bytes) {
  auto* c = static_cast<unsigned char*>(p);
  for (std::size_t i = 0; i < bytes; i += page) c[i] = 1;
  c[bytes - 1] = 1;
}

template <Kind K, bool Touch>
void pair(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const auto stream = accel::cpu::Streams::default_stream(0);
  for (auto _ : state) {
    void* p = nullptr;
    if constexpr (K == Kind::accel) {
      p = accel::cpu::Memory::raw_alloc(bytes, stream);
    } else if constexpr (K == Kind::malloc_) {
      p = std::malloc(bytes);
    } else {
      p = std::aligned_alloc(64, bytes);
    }
    benchmark::DoNotOptimize(p);
    if constexpr (Touch) {
      touch(p, bytes);
      benchmark::ClobberMemory();
    }
    if constexpr (K == Kind::accel) {
      accel::cpu::Memory::raw_delete(p);
    } else {
      std::free(p);
    }
  }
  state.SetBytesProcessed(0);
}

std::string name(Kind k, bool touched, std::size_t bytes) {
  return std::string(kind_name[static_cast<int>(k)]) + (touched ? "/touched/" : "/untouched/") + std::to_string(bytes);
}

template <Kind K>
void register_kind(const std::vector<std::size_t>& sizes) {
  for (const bool touched : {false, true}) {
    for (const std::size_t bytes : sizes) {
      auto* b = touched ? benchmark::RegisterBenchmark(name(K, true, bytes).c_str(), pair<K, true>)
                        : benchmark::RegisterBenchmark(name(K, false, bytes).c_str(), pair<K, false>);
      b->Arg(static_cast<std::int64_t>(bytes))->Unit(benchmark::kNanosecond);
    }
  }
}

// Keeps each benchmark's CPU ns per pair for the summary (CPU time, not wall time: on a shared machine
// a descheduled thread inflates wall time), the median of the repetitions when there are several.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> ns;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs) {
      if (run.error_occurred) continue;
      const std::string& key = run.run_name.function_name;
      if (run.run_type == Run::RT_Aggregate) {
        if (run.aggregate_name == "median") {
          has_median_.insert(key);
          ns[key] = run.GetAdjustedCPUTime();  // in the unit set below: ns
        }
      } else if (run.iterations > 0 && has_median_.count(key) == 0) {
        ns[key] = run.cpu_accumulated_time / static_cast<double>(run.iterations) * 1e9;
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }

 private:
  std::set<std::string> has_median_;
};

std::string size_text(std::size_t bytes) {
  if (bytes >= (std::size_t{1} << 20)) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= 1024) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

// N alloc+free pairs of one size on the default stream (the first one fills the cache). Not inlined:
// callgrind's --toggle-collect counts exactly this function.
[[gnu::noinline]] void alloc_free_pairs(std::size_t n, std::size_t bytes) {
  const auto stream = accel::cpu::Streams::default_stream(0);
  for (std::size_t i = 0; i < n; ++i) {
    void* p = accel::cpu::Memory::raw_alloc(bytes, stream);
    benchmark::DoNotOptimize(p);
    accel::cpu::Memory::raw_delete(p);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "--pairs") == 0) {
    const std::size_t bytes = argc >= 4 ? std::strtoull(argv[3], nullptr, 10) : 256;
    alloc_free_pairs(1, bytes);  // warm: the segment, the bookkeeping storage, the thread's state
    alloc_free_pairs(std::strtoull(argv[2], nullptr, 10), bytes);
    return 0;
  }
  // Defaults first, so that the command line overrides them: the median of 3 repetitions (the
  // machine may be shared), or one short run of each case with --smoke.
  static char repetitions[] = "--benchmark_repetitions=3";
  static char aggregates_only[] = "--benchmark_display_aggregates_only=true";
  static char smoke_time[] = "--benchmark_min_time=0.001";
  static char one_repetition[] = "--benchmark_repetitions=1";
  std::vector<char*> args{argv[0], repetitions, aggregates_only};
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

  std::vector<std::size_t> sizes;
  for (std::size_t s = 256; s <= (std::size_t{64} << 20); s *= 4) sizes.push_back(s);
  register_kind<Kind::accel>(sizes);
  register_kind<Kind::malloc_>(sizes);
  register_kind<Kind::aligned>(sizes);

  SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);

  const auto& ns = reporter.ns;
  const auto get = [&](Kind k, bool t, std::size_t b) {
    const auto it = ns.find(name(k, t, b));
    return it == ns.end() ? -1.0 : it->second;
  };
  for (const bool touched : {false, true}) {
    std::printf("\n%s: CPU ns per alloc+free pair (median of the repetitions), ratio = baseline / accel (> 1: accel faster)\n",
                touched ? "touched (one write per 4 KiB page)" : "untouched");
    std::printf("%8s %12s %12s %12s %14s %14s\n", "size", "accel ns", "malloc ns", "aligned ns", "malloc/accel",
                "aligned/accel");
    for (const std::size_t b : sizes) {
      const double a = get(Kind::accel, touched, b);
      const double m = get(Kind::malloc_, touched, b);
      const double al = get(Kind::aligned, touched, b);
      if (a <= 0) continue;
      std::printf("%8s %12.1f %12.1f %12.1f %13.2fx %13.2fx\n", size_text(b).c_str(), a, m, al, m / a, al / a);
    }
  }
  const auto stats = accel::cpu::Memory::memory_stats(0);
  std::printf("\naccel allocator after the run: %lld allocations, %lld segment allocations, %lld retries, %lld OOMs\n",
              static_cast<long long>(stats.allocation.all().allocated), static_cast<long long>(stats.num_device_alloc),
              static_cast<long long>(stats.num_alloc_retries), static_cast<long long>(stats.num_ooms));
  benchmark::Shutdown();
  return 0;
}
