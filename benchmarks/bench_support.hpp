// benchmarks/bench_support.hpp — accel's benchmark method (benchmarks/README.md) in code, shared by
// every C++ benchmark:
//   Machine     the CPU as lscpu names it (model name, family, model), CPU count, load average, date,
//               the command line
//   Summary     median and min–max of a set of samples (or of per-round ratios)
//   Rounds      candidates run interleaved: each round takes one sample of every candidate, in an
//               order rotated from round to round, so a slow spell of a shared machine hits all alike
//   Report      the figures as points (series, group, x, metric, median, min, max) and ratios, written
//               as the JSON file scripts/plots.sh reads (--json=FILE, or $ACCEL_BENCH_JSON_DIR)
//   Recorder    for Google Benchmark programs: a console reporter that keeps every round's figures;
//               run_rounds() calls RunSpecifiedBenchmarks once per round (order shuffled each time)
//   initialize  Google Benchmark's command line with the project's defaults and --smoke
// The Python twin (benchmarks/bench_support.py) writes the same JSON.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

namespace accel_bench {

// ---- the machine --------------------------------------------------------------------------------

/// What a figure was measured on. `cpu` reads like lscpu: "AMD EPYC (family 25, model 17: Zen 4)".
struct Machine {
  std::string model_name;  // lscpu "Model name" (/proc/cpuinfo "model name")
  int family = -1;         // lscpu "CPU family"
  int model = -1;          // lscpu "Model"
  int cpus = 0;            // online CPUs
  std::string cpu;         // the one-line name used in every table

  static const Machine& get() {
    static const Machine m = read();
    return m;
  }

 private:
  // The AMD core generation for a family/model pair (AMD's published model ranges), "" when unknown.
  static std::string amd_core(int family, int model) {
    if (family == 23) return model >= 0x30 ? "Zen 2" : "Zen/Zen+";
    if (family == 25) {
      if ((model >= 0x10 && model <= 0x1f) || (model >= 0x60 && model <= 0xaf)) return "Zen 4";
      return "Zen 3";
    }
    if (family == 26) return "Zen 5";
    return "";
  }
  static Machine read() {
    Machine m;
    std::ifstream in("/proc/cpuinfo");
    std::string line, vendor;
    while (std::getline(in, line)) {
      const auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string key = line.substr(0, colon);
      while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
      std::string value = line.substr(colon + 1);
      if (!value.empty() && value.front() == ' ') value.erase(0, 1);
      if (key == "model name" && m.model_name.empty()) m.model_name = value;
      if (key == "vendor_id" && vendor.empty()) vendor = value;
      if (key == "cpu family" && m.family < 0) m.family = std::atoi(value.c_str());
      if (key == "model" && m.model < 0) m.model = std::atoi(value.c_str());
    }
    m.cpus = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
    std::ostringstream os;
    os << (m.model_name.empty() ? "unknown CPU" : m.model_name) << " (family " << m.family << ", model " << m.model;
    const std::string core = vendor == "AuthenticAMD" ? amd_core(m.family, m.model) : "";
    if (!core.empty()) os << ": " << core;
    os << "; " << m.cpus << " CPUs)";
    m.cpu = os.str();
    return m;
  }
};

/// The 1-minute load average (/proc/loadavg), -1 when unreadable.
inline double load_average() {
  double l = -1;
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &l) != 1) l = -1;
    std::fclose(f);
  }
  return l;
}

/// Today's date, UTC, as YYYY-MM-DD.
inline std::string today() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

// ---- statistics -----------------------------------------------------------------------------------

/// Median and range of n samples (all 0 when n == 0).
struct Summary {
  double median = 0, min = 0, max = 0;
  int n = 0;
};

inline Summary summarize(std::vector<double> v) {
  Summary s;
  s.n = static_cast<int>(v.size());
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  s.median = v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
  s.min = v.front();
  s.max = v.back();
  return s;
}

/// s with every figure multiplied by `factor` (a unit change, or time -> rate with a negative power).
inline Summary scaled(Summary s, double factor) {
  s.median *= factor, s.min *= factor, s.max *= factor;
  return s;
}

/// `work` / t for each time t (seconds -> a rate), summarized.
inline Summary rate(std::vector<double> seconds, double work) {
  for (double& t : seconds) t = t > 0 ? work / t : 0;
  return summarize(std::move(seconds));
}

/// a[i] / b[i] for each round i (the rounds both have), summarized: a ratio measured round by round.
inline Summary ratio_per_round(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> r;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (b[i] != 0) r.push_back(a[i] / b[i]);
  }
  return summarize(r);
}

/// "1.23 (1.10–1.31)": a median with its range, `digits` after the point.
inline std::string fmt(const Summary& s, int digits = 2) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.*f (%.*f–%.*f)", digits, s.median, digits, s.min, digits, s.max);
  return buf;
}

// ---- interleaved rounds -----------------------------------------------------------------------------

enum class Clock {
  wall,        // steady_clock: what a user waits; counts every thread of the process
  thread_cpu,  // CPU time of the calling thread (user + system, page faults included), not the time it
               // waited for a core: for single-threaded figures on a shared machine
  process_cpu,  // CPU time of every thread of the process: work handed to other threads (a stream's
                // worker) counts, waiting for a core does not
};

inline double now(Clock c) {
  timespec ts{};
  ::clock_gettime(c == Clock::wall       ? CLOCK_MONOTONIC
                  : c == Clock::thread_cpu ? CLOCK_THREAD_CPUTIME_ID
                                           : CLOCK_PROCESS_CPUTIME_ID,
                  &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

/// Candidates measured in interleaved rounds. A candidate is a callable doing one unit of work (a
/// call, an alloc+free pair, an optimizer step); a sample is a batch of units timed together,
/// calibrated once so a batch lasts at least `min_sample_s`; the sample's figure is seconds per unit.
/// Round r runs every candidate once, starting at candidate r mod k.
class Rounds {
 public:
  explicit Rounds(Clock clock = Clock::wall) : clock_(clock) {}

  /// Adds a candidate; `batch` units per sample, or 0 to calibrate.
  void add(std::string name, std::function<void()> unit, long batch = 0) {
    candidates_.push_back({std::move(name), std::move(unit), batch, {}});
  }

  /// Warms each candidate up (one unit), calibrates, then runs `rounds` rounds.
  void run(int rounds, double min_sample_s) {
    for (auto& c : candidates_) {
      c.unit();
      if (c.batch > 0) continue;
      long b = 1;
      for (;;) {
        const double t0 = now(clock_);
        for (long i = 0; i < b; ++i) c.unit();
        const double dt = now(clock_) - t0;
        if (dt >= min_sample_s || b >= (1L << 30)) {
          c.batch = b;
          break;
        }
        b = dt <= 0 ? b * 16 : std::max(b * 2, static_cast<long>(std::ceil(double(b) * 1.2 * min_sample_s / dt)));
      }
    }
    const std::size_t k = candidates_.size();
    for (int r = 0; r < rounds; ++r) {
      for (std::size_t j = 0; j < k; ++j) {
        Candidate& c = candidates_[(static_cast<std::size_t>(r) + j) % k];
        const double t0 = now(clock_);
        for (long i = 0; i < c.batch; ++i) c.unit();
        c.seconds.push_back((now(clock_) - t0) / static_cast<double>(c.batch));
      }
    }
  }

  /// Seconds per unit of `name`, one per round.
  [[nodiscard]] const std::vector<double>& seconds(const std::string& name) const { return find(name).seconds; }
  [[nodiscard]] Summary summary(const std::string& name, double scale = 1.0) const {
    std::vector<double> v = seconds(name);
    for (double& x : v) x *= scale;
    return summarize(v);
  }
  /// time(baseline) / time(candidate), round by round: > 1 when `candidate` is faster.
  [[nodiscard]] Summary speedup(const std::string& candidate, const std::string& baseline) const {
    return ratio_per_round(seconds(baseline), seconds(candidate));
  }
  [[nodiscard]] bool has(const std::string& name) const {
    return std::any_of(candidates_.begin(), candidates_.end(), [&](const Candidate& c) { return c.name == name; });
  }

 private:
  struct Candidate {
    std::string name;
    std::function<void()> unit;
    long batch;
    std::vector<double> seconds;
  };
  const Candidate& find(const std::string& name) const {
    for (const auto& c : candidates_) {
      if (c.name == name) return c;
    }
    throw std::out_of_range("accel_bench::Rounds: no candidate " + name);
  }
  Clock clock_;
  std::vector<Candidate> candidates_;
};

// ---- the JSON report ---------------------------------------------------------------------------------

/// One benchmark family's figures, printed and written as JSON (format "accel-bench/1", README.md).
class Report {
 public:
  /// `family` names the output (alloc, cpu_adam, ...). Consumes --json=FILE from argv.
  Report(std::string family, int& argc, char** argv) : family_(std::move(family)), load_start_(load_average()) {
    for (int i = 0; i < argc; ++i) command_ += (i ? " " : "") + std::string(argv[i]);
    int out = 1;
    for (int i = 1; i < argc; ++i) {
      if (std::strncmp(argv[i], "--json=", 7) == 0) {
        path_ = argv[i] + 7;
      } else {
        argv[out++] = argv[i];
      }
    }
    argc = out;
    if (path_.empty()) {
      if (const char* dir = std::getenv("ACCEL_BENCH_JSON_DIR"); dir != nullptr && *dir != '\0') {
        path_ = std::string(dir) + "/" + family_ + ".json";
      }
    }
  }

  /// The header line every benchmark prints first: CPU, load, date, command.
  void print_header(const std::string& device = "") const {
    std::printf("%s on %s%s%s; load average %.2f; %s\ncommand: %s\n", family_.c_str(), Machine::get().cpu.c_str(),
                device.empty() ? "" : ", ", device.c_str(), load_start_, today().c_str(), command_.c_str());
  }

  void set_device(std::string d) { device_ = std::move(d); }
  /// What ran the program, before its own command line (a launcher: "mpirun -np 2 --bind-to none").
  void prefix_command(const std::string& launcher) { command_ = launcher + " " + command_; }
  void set_rounds(int r) { rounds_ = r; }
  void note(const std::string& key, const std::string& value) { notes_.emplace_back(key, value); }

  /// A figure: `series` (accel, glibc, ...) at `x` within `group` (touched, threads=2, "" for none).
  void point(const std::string& series, const std::string& group, double x, const std::string& metric,
             const Summary& s) {
    points_.push_back({series, group, x, metric, s});
  }
  /// A ratio: how many times faster `name` is than `baseline` (> 1: faster), at `x` within `group`.
  void ratio(const std::string& name, const std::string& baseline, const std::string& group, double x,
             const Summary& s) {
    ratios_.push_back({name, baseline, group, x, s});
  }

  /// Writes the JSON file when one was asked for; says where.
  void write() const {
    if (path_.empty()) return;
    std::ofstream f(path_);
    if (!f) {
      std::fprintf(stderr, "accel_bench: cannot write %s\n", path_.c_str());
      return;
    }
    const Machine& m = Machine::get();
    f << "{\n  \"format\": \"accel-bench/1\",\n  \"family\": " << q(family_) << ",\n  \"command\": " << q(command_)
      << ",\n  \"cpu\": " << q(m.cpu) << ",\n  \"device\": " << q(device_.empty() ? m.cpu : device_)
      << ",\n  \"date\": " << q(today()) << ",\n  \"load_start\": " << num(load_start_)
      << ",\n  \"load_end\": " << num(load_average()) << ",\n  \"rounds\": " << rounds_ << ",\n  \"notes\": {";
    for (std::size_t i = 0; i < notes_.size(); ++i) f << (i ? ", " : "") << q(notes_[i].first) << ": " << q(notes_[i].second);
    f << "},\n  \"points\": [";
    for (std::size_t i = 0; i < points_.size(); ++i) {
      const Point& p = points_[i];
      f << (i ? ",\n" : "\n") << "    {\"series\": " << q(p.series) << ", \"group\": " << q(p.group) << ", \"x\": " << num(p.x)
        << ", \"metric\": " << q(p.metric) << stats(p.s) << "}";
    }
    f << "\n  ],\n  \"ratios\": [";
    for (std::size_t i = 0; i < ratios_.size(); ++i) {
      const Ratio& r = ratios_[i];
      f << (i ? ",\n" : "\n") << "    {\"name\": " << q(r.name) << ", \"baseline\": " << q(r.baseline)
        << ", \"group\": " << q(r.group) << ", \"x\": " << num(r.x) << stats(r.s) << "}";
    }
    f << "\n  ]\n}\n";
    std::printf("wrote %s\n", path_.c_str());
  }

 private:
  struct Point {
    std::string series, group;
    double x;
    std::string metric;
    Summary s;
  };
  struct Ratio {
    std::string name, baseline, group;
    double x;
    Summary s;
  };
  static std::string q(const std::string& s) {
    std::string o = "\"";
    for (const char c : s) {
      if (c == '"' || c == '\\') {
        o += '\\';
        o += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        o += buf;
      } else {
        o += c;
      }
    }
    return o + "\"";
  }
  static std::string num(double x) {
    if (!std::isfinite(x)) return "null";
    char buf[40];
    if (x == std::floor(x) && std::fabs(x) < 1e15) {
      std::snprintf(buf, sizeof buf, "%.0f", x);  // sizes and counts exactly
    } else {
      std::snprintf(buf, sizeof buf, "%.6g", x);
    }
    return buf;
  }
  static std::string stats(const Summary& s) {
    return ", \"median\": " + num(s.median) + ", \"min\": " + num(s.min) + ", \"max\": " + num(s.max) +
           ", \"n\": " + std::to_string(s.n);
  }
  std::string family_, command_, path_, device_;
  double load_start_;
  int rounds_ = 0;
  std::vector<std::pair<std::string, std::string>> notes_;
  std::vector<Point> points_;
  std::vector<Ratio> ratios_;
};

// ---- Google Benchmark programs ------------------------------------------------------------------------

/// Google Benchmark's command line with the project's defaults (the command line overrides them):
/// `--smoke` becomes one short run of each case (CI checks that everything runs; no figure). A
/// `--benchmark_min_time=0.5s` (Google Benchmark >= 1.8 spelling) is passed as `0.5` to the installed
/// 1.7.1, which would otherwise reject it and silently keep its default. An argument Google Benchmark
/// does not know ends the program (status 1). Call it after Report and take_rounds took their flags.
/// Returns true for --smoke.
inline bool initialize(int argc, char** argv, std::vector<std::string> defaults = {}) {
  static std::vector<std::string> storage;
  static std::vector<char*> args;
  // Each run_rounds() round shuffles the order of the benchmarks (the command line can say false).
  storage.assign(1, argv[0]);
  storage.emplace_back("--benchmark_enable_random_interleaving=true");
  for (auto& d : defaults) storage.push_back(std::move(d));
  bool smoke = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--smoke") {
      smoke = true;
      storage.emplace_back("--benchmark_min_time=0.001");
      continue;
    }
    if (a.rfind("--benchmark_min_time=", 0) == 0 && a.size() > 21 && a.back() == 's') a.pop_back();
    storage.push_back(a);
  }
  args.clear();
  for (auto& s : storage) args.push_back(s.data());
  args.push_back(nullptr);
  int n = static_cast<int>(storage.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) std::exit(1);
  return smoke;
}

/// A console reporter that keeps, for every benchmark run ("name/args"), one figure per round: real
/// and CPU time per iteration (ns) and every counter. The console shows the first round only.
class Recorder : public benchmark::ConsoleReporter {
 public:
  struct Figures {
    std::vector<double> real_ns, cpu_ns;
    std::map<std::string, std::vector<double>> counters;
  };

  bool ReportContext(const Context& context) override {
    return round_ == 0 ? ConsoleReporter::ReportContext(context) : true;
  }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.error_occurred || run.run_type == Run::RT_Aggregate) continue;
      std::string key = run.run_name.function_name;
      if (!run.run_name.args.empty()) key += "/" + run.run_name.args;
      Figures& f = figures[key];
      const double unit = benchmark::GetTimeUnitMultiplier(run.time_unit);
      f.real_ns.push_back(run.GetAdjustedRealTime() / unit * 1e9);
      f.cpu_ns.push_back(run.GetAdjustedCPUTime() / unit * 1e9);
      for (const auto& [name, counter] : run.counters) f.counters[name].push_back(counter.value);
      if (round_ == 0 && std::find(order.begin(), order.end(), key) == order.end()) order.push_back(key);
    }
    if (round_ == 0) ConsoleReporter::ReportRuns(runs);
  }
  void next_round() { ++round_; }

  [[nodiscard]] bool has(const std::string& key) const { return figures.count(key) != 0; }
  [[nodiscard]] const Figures& at(const std::string& key) const {
    static const Figures none;
    const auto it = figures.find(key);
    return it == figures.end() ? none : it->second;
  }
  [[nodiscard]] Summary real_ns(const std::string& key) const { return summarize(at(key).real_ns); }
  [[nodiscard]] Summary cpu_ns(const std::string& key) const { return summarize(at(key).cpu_ns); }
  [[nodiscard]] Summary counter(const std::string& key, const std::string& name) const {
    const auto& c = at(key).counters;
    const auto it = c.find(name);
    return it == c.end() ? Summary{} : summarize(it->second);
  }
  /// The per-round values of a field ("real_ns", "cpu_ns" or a counter's name).
  [[nodiscard]] std::vector<double> values(const std::string& key, const std::string& field) const {
    const Figures& f = at(key);
    if (field == "real_ns") return f.real_ns;
    if (field == "cpu_ns") return f.cpu_ns;
    const auto it = f.counters.find(field);
    return it == f.counters.end() ? std::vector<double>{} : it->second;
  }

  std::map<std::string, Figures> figures;
  std::vector<std::string> order;  // keys in the order of the first round

 private:
  int round_ = 0;
};

/// Runs the registered benchmarks `rounds` times, each time in a new random order (initialize() turns
/// on Google Benchmark's random interleaving), so that each round holds one figure of every benchmark.
inline int run_rounds(Recorder& recorder, int rounds) {
  for (int r = 0; r < rounds; ++r) {
    benchmark::RunSpecifiedBenchmarks(&recorder);
    recorder.next_round();
    if (r == 0 && rounds > 1) std::printf("(%d more rounds, interleaved, not shown)\n", rounds - 1);
  }
  return rounds;
}

/// Consumes `--rounds=N` from argv; `fallback` when absent (1 under --smoke is the caller's choice).
inline int take_rounds(int& argc, char** argv, int fallback) {
  int rounds = fallback, out = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--rounds=", 9) == 0) {
      rounds = std::max(1, std::atoi(argv[i] + 9));
    } else {
      argv[out++] = argv[i];
    }
  }
  argc = out;
  return rounds;
}

/// Consumes `FLAG=VALUE` from argv and returns VALUE (the last one given); `fallback` when absent.
inline std::string take_option(int& argc, char** argv, const std::string& flag, std::string fallback) {
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind(flag + "=", 0) == 0) {
      fallback = a.substr(flag.size() + 1);
    } else {
      argv[out++] = argv[i];
    }
  }
  argc = out;
  return fallback;
}

/// Consumes the bare `FLAG` from argv; true when it was given.
inline bool take_flag(int& argc, char** argv, const std::string& flag) {
  bool found = false;
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    if (argv[i] == flag) {
      found = true;
    } else {
      argv[out++] = argv[i];
    }
  }
  argc = out;
  return found;
}

}  // namespace accel_bench
