// The caching allocator of this tree (accel) against its version at another commit (accel_old,
// extracted by allocator_patterns.sh) in one process, interleaved rounds (benchmarks/README.md): the
// allocator alone, over a raw policy of aligned_alloc, on four patterns of cache hits —
//   temporary 512 B / 64 KiB   allocate, free, again (the block freed last asked for again)
//   two, freed in order        512 B and 1 KiB allocated, freed oldest first
//   8 blocks, freed LIFO       4, 8, 12, 4, ... KiB allocated, freed newest first
// Thread CPU ns per pattern iteration, median (min-max), and old / new round by round (> 1: this tree
// faster). Exploratory: RESULTS.md, "Caching allocator: the block freed last".
//   bash benchmarks/memory/explore/allocator_patterns.sh [commit=HEAD] [rounds=21]
#include "../../bench_support.hpp"

#include <accel/memory/caching_allocator.hpp>
#include <accel_old/memory/caching_allocator.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

struct Stream {
  std::uint64_t sid = 1;
  std::uint64_t id() const noexcept { return sid; }
};
struct Event {};

template <class Info>
struct AlignedAlloc {
  using stream_type = Stream;
  using event_type = Event;
  static void* allocate(int, std::size_t bytes) noexcept { return std::aligned_alloc(4096, bytes); }
  static void deallocate(int, void* p, std::size_t) noexcept { std::free(p); }
  static Event record_event(Stream) { return {}; }
  static bool event_done(const Event&) { return true; }
  static void event_synchronize(const Event&) {}
  static Info memory_info(int) { return {std::size_t{1} << 34, std::size_t{1} << 34}; }
  static std::string device_name(int) { return "aligned_alloc:0"; }
};

template <class A>
void temporary(A& a, std::size_t bytes) {
  void* p = a.allocate(bytes, Stream{});
  benchmark::DoNotOptimize(p);
  a.free(p);
}

template <class A>
void two_in_order(A& a) {
  void* p = a.allocate(512, Stream{});
  void* q = a.allocate(1024, Stream{});
  benchmark::DoNotOptimize(p);
  benchmark::DoNotOptimize(q);
  a.free(p);
  a.free(q);
}

template <class A>
void eight_lifo(A& a) {
  void* v[8];
  for (int k = 0; k < 8; ++k) v[k] = a.allocate(std::size_t{4096} * (1 + k % 3), Stream{});
  benchmark::DoNotOptimize(v);
  for (int k = 7; k >= 0; --k) a.free(v[k]);
}

}  // namespace

int main(int argc, char** argv) {
  accel_bench::Report report("allocator_patterns", argc, argv);
  int rounds = 21;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--rounds=", 9) == 0) rounds = std::atoi(argv[i] + 9);
  }
  report.print_header();
  accel::CachingAllocator<AlignedAlloc<accel::MemoryInfo>> now(0, accel::AllocatorConfig{});
  accel_old::CachingAllocator<AlignedAlloc<accel_old::MemoryInfo>> old(0, accel_old::AllocatorConfig{});
  accel_bench::Rounds r(accel_bench::Clock::thread_cpu);
  const char* patterns[] = {"temporary 512 B", "temporary 64 KiB", "two, freed in order", "8 blocks, freed LIFO"};
  const auto add = [&](const std::string& who, auto& a) {
    r.add(who + "|" + patterns[0], [&a] { temporary(a, 512); });
    r.add(who + "|" + patterns[1], [&a] { temporary(a, 65536); });
    r.add(who + "|" + patterns[2], [&a] { two_in_order(a); });
    r.add(who + "|" + patterns[3], [&a] { eight_lifo(a); });
  };
  add("new", now);
  add("old", old);
  r.run(rounds, 0.01);
  report.set_rounds(rounds);
  std::printf("thread CPU ns per iteration, median (min-max) of %d interleaved rounds; old/new round by round\n",
              rounds);
  std::printf("%-24s %26s %26s %22s\n", "pattern", "this tree", "old", "old/new");
  for (int i = 0; i < 4; ++i) {
    const std::string p = patterns[i];
    const auto n = r.summary("new|" + p, 1e9);
    const auto o = r.summary("old|" + p, 1e9);
    const auto s = r.speedup("new|" + p, "old|" + p);
    std::printf("%-24s %26s %26s %22s\n", p.c_str(), accel_bench::fmt(n, 1).c_str(), accel_bench::fmt(o, 1).c_str(),
                accel_bench::fmt(s, 3).c_str());
    report.point("new", p, i, "ns", n);
    report.point("old", p, i, "ns", o);
    report.ratio("new", "old", p, i, s);
  }
  report.write();
}
