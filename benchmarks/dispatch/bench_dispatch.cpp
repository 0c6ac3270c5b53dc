// Dispatch cost of accel's calls, four ways, timed on work the compiler cannot hoist:
//   raw      the engines under the facade, called directly (the thread's device slot, the device's
//            CachingAllocator, the stream, the event) — what a hand-written program does
//   static   generic code over accel::CpuBackend (Engine<CpuBackend>): must cost what raw costs
//   variant  the same generic code over accel::AnyBackend (std::variant of the enabled backends,
//            dispatching per call; CUDA and CPU in this build, the CPU one selected at run time)
//   virtual  the same calls through an abstract interface, the design of torch's c10
//            DeviceGuardImplInterface
// One chain step is a dependent sequence of mixed calls: current_device(); raw_alloc of a size that
// depends on the previous step; enqueue of a task that writes the block on the default stream (the
// CPU default stream runs it inline); an event record on that stream; event query; raw_delete. The
// next step's size and the returned value depend on the pointer and the query, so no call can be
// hoisted or merged. The four chains run in interleaved rounds (benchmarks/README.md), timed with the
// thread's CPU clock; printed: ns per step, median (min-max), and the difference to raw, round by round.
// Instruction counts of single calls (deterministic): count_instructions.sh (callgrind).
//
//   bench_dispatch [--rounds=N] [--json=FILE] [--smoke]
#include "../bench_support.hpp"
#include "dispatch_ways.hpp"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

using namespace dispatch_bench;

int main(int argc, char** argv) {
  accel_bench::Report report("dispatch", argc, argv);
  int rounds = accel_bench::take_rounds(argc, argv, 9);
  bool smoke = false;
  for (int i = 1; i < argc; ++i) smoke = smoke || std::strcmp(argv[i], "--smoke") == 0;
  if (smoke) rounds = 1;
  report.set_rounds(rounds);
  report.print_header();

  RawApi raw;
  GenericApi<accel::CpuBackend> stat{accel::CpuBackend{}};
  GenericApi<accel::AnyBackend> var{make_any()};
  VirtualApi virt{make_virtual()};
  const long steps = 1000;
  std::uintptr_t sink = 0;
  accel_bench::Rounds r(accel_bench::Clock::thread_cpu);
  r.add("raw", [&] { sink += chain(raw, steps, sink); });
  r.add("static", [&] { sink += chain(stat, steps, sink); });
  r.add("variant", [&] { sink += chain(var, steps, sink); });
  r.add("virtual", [&] { sink += chain(virt, steps, sink); });
  r.run(rounds, smoke ? 0.001 : 0.05);

  const double per_step = 1e9 / double(steps);
  std::printf("\none chain step = current_device + raw_alloc (512 B-2 KiB) + enqueue on the default stream + "
              "event record + query + raw_delete; thread CPU time, %d interleaved rounds (sink %zu)\n", rounds,
              static_cast<std::size_t>(sink & 1));
  std::printf("%-8s %26s %26s %22s\n", "way", "ns per step", "minus raw, ns", "raw / way");
  for (const char* way : {"raw", "static", "variant", "virtual"}) {
    const auto ns = r.summary(way, per_step);
    std::vector<double> diff;
    for (std::size_t i = 0; i < r.seconds(way).size(); ++i) diff.push_back((r.seconds(way)[i] - r.seconds("raw")[i]) * per_step);
    const auto d = accel_bench::summarize(diff);
    const auto ratio = r.speedup(way, "raw");
    std::printf("%-8s %26s %26s %22s\n", way, accel_bench::fmt(ns, 2).c_str(), accel_bench::fmt(d, 2).c_str(),
                accel_bench::fmt(ratio, 3).c_str());
    report.point(way, "", 0, "ns per chain step", ns);
    report.point(way, "", 0, "ns over raw", d);
    if (std::strcmp(way, "raw") != 0) report.ratio(way, "raw", "", 0, ratio);
  }
  report.write();
  return 0;
}
