// Allocate + touch + free of one block, per size from 512 B to 256 MiB (powers of 2), four ways in one
// process, in interleaved rounds (benchmarks/README.md):
//   accel     cpu::Memory::raw_alloc / raw_delete on the default stream: the caching allocator with
//             torch's statistics (what CpuBackend users call)
//   glibc     malloc / free
//   jemalloc  malloc / free of libjemalloc.so.2, loaded with dlopen (RTLD_LOCAL: it does not replace the
//             process's malloc), Debian's libjemalloc2. Its initial-exec TLS needs more static TLS than
//             glibc reserves for dlopen, so the program re-runs itself once with
//             GLIBC_TUNABLES=glibc.rtld.optional_static_tls=65536 (a loader reservation; malloc unchanged)
//   mimalloc  mi_malloc / mi_free of libmimalloc.so.2 (dlopen, RTLD_LOCAL), Debian's libmimalloc2.0
// "Touch" writes one byte in every 4 KiB page of the block (and its last byte), so a block whose pages
// are not mapped pays its page faults, as a program that uses its memory does. Timed with the thread's
// CPU clock (user + system: page faults count, waiting for a core does not). Each (allocator, size) is a
// candidate; a round samples every candidate once, the order rotated each round. Printed: ns per
// alloc+touch+free, median (min-max), and each baseline's time over accel's, round by round (> 1: accel
// faster). A missing jemalloc/mimalloc is skipped with a note.
// The program runs on one thread, and glibc's malloc and accel's lock skip their atomic instructions
// while a process has only one (memory/detail/allocator_mutex.hpp). --threaded first starts and joins
// a thread, as any program with a worker thread has: every allocator then runs its thread-safe path
// (family alloc_threaded in the JSON).
//
//   bench_alloc [--rounds=N] [--json=FILE] [--smoke] [--threaded]
//   bench_alloc --explain [--rounds=N] [--threaded]
//                                   what the 32-256 KiB figures are made of (RESULTS.md): the pairs
//                                   without the touch, the touch alone, glibc with two locked
//                                   instructions per pair, and a 512 B pair of accel or glibc before a
//                                   touch of one fixed block (the allocators' work, the same memory)
//   bench_alloc --pairs N [bytes]   N cache-hit pairs (default 256 B) in alloc_free_pairs() and nothing
//                                   else, for count_alloc_instructions.sh (callgrind)
#include "../bench_support.hpp"

#include <accel/cpu/memory.hpp>
#include <accel/cpu/stream.hpp>

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr std::size_t page = 4096;

struct Allocator {
  std::string name;
  void* (*alloc)(std::size_t);
  void (*free)(void*);
  std::string error;  // why it could not be loaded
};

// malloc/free of a shared library loaded privately; nullptr functions when it is not installed.
Allocator load(const char* name, const char* so, const char* malloc_sym, const char* free_sym) {
  void* h = ::dlopen(so, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return {name, nullptr, nullptr, ::dlerror()};
  return {name, reinterpret_cast<void* (*)(std::size_t)>(::dlsym(h, malloc_sym)),
          reinterpret_cast<void (*)(void*)>(::dlsym(h, free_sym)), std::string(so) + " lacks " + malloc_sym};
}

void* accel_alloc(std::size_t bytes) {
  return accel::cpu::Memory::raw_alloc(bytes, accel::cpu::Streams::default_stream(0));
}
void accel_free(void* p) { accel::cpu::Memory::raw_delete(p); }

inline void touch(void* p, std::size_t bytes) {
  auto* c = static_cast<volatile unsigned char*>(p);
  for (std::size_t i = 0; i < bytes; i += page) c[i] = 1;
  c[bytes - 1] = 1;
}

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

// --explain: the parts of an alloc+touch+free at 32-256 KiB, interleaved, thread CPU ns. Every call goes
// through the function pointers the main table uses (the same code, so the same timing).
void explain(int rounds, const Allocator& accel, const Allocator& glibc) {
  static std::atomic<int> word{0};
  const auto locked = [] { word.exchange(0, std::memory_order_acq_rel); };  // a lock's cost: one locked op
  accel_bench::Rounds r(accel_bench::Clock::thread_cpu);
  const std::vector<std::size_t> sizes{32 << 10, 64 << 10, 128 << 10, 256 << 10};
  const std::vector<std::string> names{"accel",      "glibc",      "glibc + 2 locked", "accel pair", "glibc pair",
                                       "touch only", "accel 512 B pair + touch",       "glibc 512 B pair + touch"};
  std::vector<void*> fixed;
  for (const std::size_t bytes : sizes) {
    void* block = glibc.alloc(bytes);  // the one block the last three touch
    if (block == nullptr) std::abort();
    fixed.push_back(block);
    const std::string k = "/" + std::to_string(bytes);
    for (const Allocator* a : {&accel, &glibc}) {
      r.add(a->name + k, [a = *a, bytes] {
        void* p = a.alloc(bytes);
        touch(p, bytes);
        a.free(p);
      });
      r.add(a->name + " pair" + k, [a = *a, bytes] {
        void* p = a.alloc(bytes);
        benchmark::DoNotOptimize(p);
        a.free(p);
      });
      r.add(a->name + " 512 B pair + touch" + k, [a = *a, bytes, block] {
        void* p = a.alloc(512);
        benchmark::DoNotOptimize(p);
        a.free(p);
        touch(block, bytes);
      });
    }
    r.add("glibc + 2 locked" + k, [a = glibc, bytes, locked] {
      locked();
      void* p = a.alloc(bytes);
      touch(p, bytes);
      locked();
      a.free(p);
    });
    r.add("touch only" + k, [bytes, block] { touch(block, bytes); });
  }
  r.run(rounds, 0.01);
  std::printf("\nthe parts of alloc + touch + free: thread CPU ns, median (min-max) of %d interleaved rounds\n", rounds);
  std::printf("%26s", "");
  for (const std::size_t bytes : sizes) std::printf(" %22s", size_text(bytes).c_str());
  std::printf("\n");
  for (const std::string& name : names) {
    std::printf("%26s", name.c_str());
    for (const std::size_t bytes : sizes) {
      std::printf(" %22s", accel_bench::fmt(r.summary(name + "/" + std::to_string(bytes), 1e9), 1).c_str());
    }
    std::printf("\n");
  }
  for (void* p : fixed) glibc.free(p);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "--pairs") == 0) {
    const std::size_t bytes = argc >= 4 ? std::strtoull(argv[3], nullptr, 10) : 256;
    alloc_free_pairs(1, bytes);  // warm: the segment, the bookkeeping storage, the thread's state
    alloc_free_pairs(std::strtoull(argv[2], nullptr, 10), bytes);
    return 0;
  }
  // Room in the static TLS block for jemalloc's initial-exec TLS (see the top): re-run once with it.
  if (std::getenv("ACCEL_BENCH_ALLOC_REEXEC") == nullptr) {
    const char* old = std::getenv("GLIBC_TUNABLES");
    const std::string tunables =
        (old != nullptr && *old != '\0' ? std::string(old) + ":" : std::string()) + "glibc.rtld.optional_static_tls=65536";
    ::setenv("GLIBC_TUNABLES", tunables.c_str(), 1);
    ::setenv("ACCEL_BENCH_ALLOC_REEXEC", "1", 1);
    ::execv("/proc/self/exe", argv);  // returns only on failure: go on without jemalloc
  }
  bool smoke = false;
  bool threaded = false;
  bool explaining = false;
  for (int i = 1; i < argc; ++i) {
    smoke = smoke || std::strcmp(argv[i], "--smoke") == 0;
    threaded = threaded || std::strcmp(argv[i], "--threaded") == 0;
    explaining = explaining || std::strcmp(argv[i], "--explain") == 0;
  }
  if (threaded) std::thread([] {}).join();  // from here on the process counts as multi-threaded
  accel_bench::Report report(threaded ? "alloc_threaded" : "alloc", argc, argv);
  int rounds = accel_bench::take_rounds(argc, argv, 7);
  if (smoke) rounds = 1;
  report.set_rounds(rounds);
  report.print_header();
  std::printf("%s\n", threaded ? "a second thread has run: every allocator takes its thread-safe (locking) path"
                                : "single-threaded process: glibc's malloc and accel's lock skip their atomics");
  report.note("threads", threaded ? "a second thread ran first (--threaded)" : "one thread");

  std::vector<Allocator> allocators{{"accel", accel_alloc, accel_free, ""}, {"glibc", std::malloc, std::free, ""}};
  if (explaining) {
    explain(rounds, allocators[0], allocators[1]);
    return 0;
  }
  for (const Allocator& a : {load("jemalloc", "libjemalloc.so.2", "malloc", "free"),
                             load("mimalloc", "libmimalloc.so.2", "mi_malloc", "mi_free")}) {
    if (a.alloc != nullptr && a.free != nullptr) {
      allocators.push_back(a);
    } else {
      std::printf("%s: not loaded (%s; Debian: apt-get install lib%s-dev), skipped\n", a.name.c_str(), a.error.c_str(),
                  a.name.c_str());
      report.note(a.name, "not installed");
    }
  }
  std::vector<std::size_t> sizes;
  for (std::size_t s = 512; s <= (std::size_t{256} << 20); s *= 2) sizes.push_back(s);
  if (smoke) sizes = {512, std::size_t{1} << 20};

  accel_bench::Rounds r(accel_bench::Clock::thread_cpu);
  const auto key = [](const Allocator& a, std::size_t b) { return a.name + "/" + std::to_string(b); };
  for (const std::size_t bytes : sizes) {
    for (const Allocator& a : allocators) {
      r.add(key(a, bytes), [a, bytes] {
        void* p = a.alloc(bytes);
        if (p == nullptr) std::abort();
        touch(p, bytes);
        a.free(p);
      });
    }
  }
  r.run(rounds, smoke ? 0.001 : 0.01);

  std::printf("\nalloc + touch (1 byte per 4 KiB page) + free: thread CPU ns per block, median (min-max) of %d "
              "interleaved rounds;\nspeedup = the allocator's time / accel's, round by round (> 1: accel faster)\n",
              rounds);
  std::printf("%8s", "size");
  for (const Allocator& a : allocators) std::printf(" %30s", (a.name + " ns").c_str());
  for (std::size_t i = 1; i < allocators.size(); ++i) std::printf(" %24s", (allocators[i].name + "/accel").c_str());
  std::printf("\n");
  for (const std::size_t bytes : sizes) {
    std::printf("%8s", size_text(bytes).c_str());
    for (const Allocator& a : allocators) {
      const auto ns = r.summary(key(a, bytes), 1e9);
      report.point(a.name, "", double(bytes), "ns per alloc+touch+free", ns);
      std::printf(" %30s", accel_bench::fmt(ns, 1).c_str());
    }
    for (std::size_t i = 1; i < allocators.size(); ++i) {
      const auto x = r.speedup(key(allocators[0], bytes), key(allocators[i], bytes));
      report.ratio("accel", allocators[i].name, "", double(bytes), x);
      std::printf(" %24s", accel_bench::fmt(x, 2).c_str());
    }
    std::printf("\n");
  }
  const auto stats = accel::cpu::Memory::memory_stats(0);
  std::printf("\naccel allocator after the run: %lld allocations, %lld segment allocations, %lld retries, %lld OOMs\n",
              static_cast<long long>(stats.allocation.all().allocated), static_cast<long long>(stats.num_device_alloc),
              static_cast<long long>(stats.num_alloc_retries), static_cast<long long>(stats.num_ooms));
  report.write();
  return 0;
}
