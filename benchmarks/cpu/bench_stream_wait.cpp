// bench_stream_wait — what waiting costs a caller who waits for a CPU stream's work: the stream's
// threads polling for up to ACCEL_CPU_SPIN_US before they sleep (accel's default, 50 us) against
// sleeping at once (the setting 0: a few pauses, then the condition variable — accel before the poll),
// both ways interleaved in one process (benchmarks/README.md), per pattern:
//   round trip   enqueue a no-op, synchronize
//   10 tasks     enqueue 10 no-ops, synchronize
//   gap 20 us    enqueue a no-op, synchronize, then 20 us of the caller's own work
//   fill 256     fill_uniform of 256 floats, synchronize (bench_graph's eager fill)
//   gap 200 us   as gap 20 us, with 200 us: longer than the budget, so a poll is pure cost — the
//                worker's poll adapts (cpu/detail/adaptive_spin.hpp) and stops after a few such gaps
// Wall time per unit (what the caller waits) and, in a second set of rounds, the process's CPU time
// per unit (what polling costs the machine: the worker's and the caller's polls count).
//   build/default/benchmarks/cpu/bench_stream_wait --rounds=9 --json=benchmarks/results/stream_wait.json
//   options: --sample-s=S (0.2 s of units per sample), --smoke
#include "../bench_support.hpp"

#include <accel/cpu/backend.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

void busy_for_ns(double ns) {
  const double until = accel_bench::now(accel_bench::Clock::wall) + ns * 1e-9;
  while (accel_bench::now(accel_bench::Clock::wall) < until) {
  }
}

struct Pattern {
  const char* name;
  void (*unit)(const accel::CpuBackend&, accel::cpu::StreamRef, float*);
};

void round_trip(const accel::CpuBackend&, accel::cpu::StreamRef s, float*) {
  s.enqueue([] {});
  s.synchronize();
}
void ten_tasks(const accel::CpuBackend&, accel::cpu::StreamRef s, float*) {
  for (int i = 0; i < 10; ++i) s.enqueue([] {});
  s.synchronize();
}
void gap_20us(const accel::CpuBackend&, accel::cpu::StreamRef s, float*) {
  s.enqueue([] {});
  s.synchronize();
  busy_for_ns(20e3);
}
void fill_256(const accel::CpuBackend& b, accel::cpu::StreamRef s, float* out) {
  b.fill_uniform(s, out, 256);
  s.synchronize();
}
void gap_200us(const accel::CpuBackend&, accel::cpu::StreamRef s, float*) {
  s.enqueue([] {});
  s.synchronize();
  busy_for_ns(200e3);
}

}  // namespace

int main(int argc, char** argv) try {
  accel_bench::Report report("stream_wait", argc, argv);
  int rounds = accel_bench::take_rounds(argc, argv, 9);
  double sample_s = std::atof(accel_bench::take_option(argc, argv, "--sample-s", "0.2").c_str());
  if (accel_bench::take_flag(argc, argv, "--smoke")) {
    rounds = 1;
    sample_s = 0.002;
  }
  if (argc > 1) {
    std::fprintf(stderr, "bench_stream_wait: unknown argument %s\n", argv[1]);
    return 2;
  }
  report.set_rounds(rounds);
  report.print_header();

  const std::int64_t polling = accel::cpu::detail::spin_budget_ns();
  std::printf("poll: %.0f us (this process's ACCEL_CPU_SPIN_US or the default); sleep: 0\n\n", polling * 1e-3);
  const accel::CpuBackend b;
  accel::cpu::Stream s;
  std::vector<float> out(256);
  const Pattern patterns[] = {{"round trip", round_trip},
                              {"10 tasks", ten_tasks},
                              {"gap 20 us", gap_20us},
                              {"fill 256", fill_256},
                              {"gap 200 us", gap_200us}};

  std::printf("%-11s %-24s %-24s %-26s %-22s %-22s\n", "pattern", "poll: us per unit", "sleep: us per unit",
              "sleep / poll (wall)", "poll: CPU us per unit", "sleep: CPU us per unit");
  for (const Pattern& p : patterns) {
    const auto way = [&](std::int64_t budget) {
      return [&, budget] {
        accel::cpu::detail::spin_budget_setting().store(budget);
        p.unit(b, s, out.data());
      };
    };
    accel_bench::Rounds wall(accel_bench::Clock::wall);
    wall.add("poll", way(polling));
    wall.add("sleep", way(0));
    wall.run(rounds, sample_s);
    accel_bench::Rounds cpu(accel_bench::Clock::process_cpu);
    cpu.add("poll", way(polling));
    cpu.add("sleep", way(0));
    cpu.run(rounds, sample_s);

    const accel_bench::Summary pw = wall.summary("poll", 1e6), sw = wall.summary("sleep", 1e6);
    const accel_bench::Summary q = wall.speedup("poll", "sleep");
    const accel_bench::Summary pc = cpu.summary("poll", 1e6), sc = cpu.summary("sleep", 1e6);
    std::printf("%-11s %-24s %-24s %-26s %-22s %-22s\n", p.name, accel_bench::fmt(pw).c_str(),
                accel_bench::fmt(sw).c_str(), accel_bench::fmt(q).c_str(), accel_bench::fmt(pc).c_str(),
                accel_bench::fmt(sc).c_str());
    const double x = static_cast<double>(&p - patterns);  // the pattern's index: scripts/plots.py names it
    report.point("poll", "wall", x, "us per unit", pw);
    report.point("sleep", "wall", x, "us per unit", sw);
    report.point("poll", "process CPU time", x, "us per unit", pc);
    report.point("sleep", "process CPU time", x, "us per unit", sc);
    report.ratio("poll", "sleep", p.name, x, q);
  }
  accel::cpu::detail::spin_budget_setting().store(polling);
  report.note("ways", "poll: the stream's threads poll for up to ACCEL_CPU_SPIN_US before sleeping; sleep: 0 (32 pauses, then the condition variable)");
  report.note("clock", "wall (CLOCK_MONOTONIC) for the ratios; process CPU time (CLOCK_PROCESS_CPUTIME_ID) in a second set of rounds");
  report.write();
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_stream_wait: %s\n", e.what());
  return 1;
}
