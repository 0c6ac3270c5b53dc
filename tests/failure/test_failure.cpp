// Failure paths of the CPU backend, injected on purpose: each must give a typed error that says
// what happened, lose nothing (no task, no byte, no statistic), and leave the backend usable.
//
//   out of memory under a small memory fraction: the allocator frees its cache and retries
//   (num_alloc_retries), then throws OutOfMemoryError with its figures (num_ooms), and stays usable
//   a task that throws on a stream: surfaced at the next synchronization, the stream still usable
//   fork after initialisation: the child uses the CPU backend (new streams, memory, default stream)
//   a bad ACCEL_CPU_DEVICE_COUNT / ACCEL_CPU_VISIBLE_DEVICES, a bad ACCEL_ALLOC_CONF: these cases are
//     skipped in a plain run and run by their own ctest entries with the variable set (--no-skip)
#include "support/scoped_env.hpp"
#include "support/sanitizer_build.hpp"
#include "support/sizes.hpp"
#include "stress/stress_stats.hpp"
#include "stress/stress_support.hpp"

#include <accel/cpu/backend.hpp>
#include <accel/dispatch/select.hpp>
#include <accel/memory/buffer.hpp>

#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

// Every operator new and delete of this binary is counted (the array, nothrow and sized forms call
// these two), so a case can check that a refused call frees what it allocated. Over-aligned
// allocations are not counted; nothing checked here is over-aligned. A sanitizer's runtime defines
// these operators itself, so there the count is not kept (and the checks using it are skipped). Not
// inlined: g++ would see free() at a delete-expression and warn of a mismatched deallocation.
namespace {
#ifdef ACCEL_TEST_SANITIZED
constexpr bool counts_news = false;
#else
constexpr bool counts_news = true;
#endif
std::atomic<long> live_news{0};
}  // namespace

#ifndef ACCEL_TEST_SANITIZED
[[gnu::noinline]] void* operator new(std::size_t bytes) {
  if (bytes == 0) bytes = 1;
  for (;;) {
    if (void* p = std::malloc(bytes)) {
      live_news.fetch_add(1, std::memory_order_relaxed);
      return p;
    }
    const std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}
[[gnu::noinline]] void operator delete(void* p) noexcept {
  if (p == nullptr) return;
  live_news.fetch_sub(1, std::memory_order_relaxed);
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept { ::operator delete(p); }
#endif

namespace {

using accel::CpuBackend;
using accel::cpu::Event;
using accel::cpu::Memory;
using accel::cpu::Stream;
using accel::cpu::StreamRef;
using accel::cpu::Streams;
using accel_test::check_invariants;


bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::int64_t counter(const char* key) { return Memory::memory_stats(0).flat().at(key); }

// Caps cpu:0's allocator at `bytes` for the scope, and lifts the cap (fraction 1) afterwards.
struct MemoryLimit {
  explicit MemoryLimit(std::size_t bytes) {
    Memory::empty_cache();
    const double fraction = static_cast<double>(bytes) / static_cast<double>(Memory::total_memory(0));
    Memory::set_per_process_memory_fraction(fraction, 0);
  }
  MemoryLimit(const MemoryLimit&) = delete;
  MemoryLimit& operator=(const MemoryLimit&) = delete;
  ~MemoryLimit() {
    Memory::set_per_process_memory_fraction(1.0, 0);
    Memory::empty_cache();
  }
};

}  // namespace

// ---- out of memory ---------------------------------------------------------------------------------

TEST_CASE("failure: out of memory under a memory fraction frees the cache, retries, then throws with figures") {
  MemoryLimit limit(64 * MiB);
  const std::size_t allowed = Memory::allocator(0).allowed_memory();
  REQUIRE(allowed <= 64 * MiB);
  REQUIRE(allowed > 60 * MiB);
  Stream s(0);
  const std::int64_t retries0 = counter("num_alloc_retries");
  const std::int64_t ooms0 = counter("num_ooms");
  const std::int64_t device_frees0 = counter("num_device_free");

  // Two 20 MiB segments, cached after the frees: 40 MiB reserved, nothing allocated.
  void* a = Memory::raw_alloc(20 * MiB, s);
  void* b = Memory::raw_alloc(20 * MiB, s);
  Memory::raw_delete(a);
  Memory::raw_delete(b);
  CHECK(Memory::memory_allocated(0) == 0);
  CHECK(Memory::memory_reserved(0) == 40 * MiB);

  SUBCASE("a request that fits only once the cache is freed succeeds after one retry") {
    // 40 MiB fits in no cached block, and 40 + 40 MiB is over the limit: the allocator releases
    // its cached segments and retries.
    void* c = Memory::raw_alloc(40 * MiB, s);
    REQUIRE(c != nullptr);
    std::memset(c, 0x5A, 40 * MiB);
    CHECK(counter("num_alloc_retries") == retries0 + 1);
    CHECK(counter("num_ooms") == ooms0);
    CHECK(counter("num_device_free") == device_frees0 + 2);
    CHECK(Memory::memory_reserved(0) == 40 * MiB);
    CHECK(Memory::memory_allocated(0) == 40 * MiB);

    // Beyond the limit whatever is freed: flush, retry, then OutOfMemoryError with the figures.
    const accel::MemoryStats before = Memory::memory_stats(0);
    bool thrown = false;
    try {
      (void)Memory::raw_alloc(100 * MiB, s);
    } catch (const accel::OutOfMemoryError& e) {
      thrown = true;
      const std::string what = e.what();
      INFO(what);
      CHECK(e.code() == accel::Errc::out_of_memory);
      CHECK(e.requested_bytes() == 100 * MiB);
      CHECK(contains(what, "cpu:0 out of memory"));
      CHECK(contains(what, "tried to allocate 100.00 MiB"));
      CHECK(contains(what, "memory fraction"));
      CHECK(contains(what, "40.00 MiB is allocated"));
      CHECK(contains(what, "total capacity"));
    }
    CHECK(thrown);
    const accel::MemoryStats after = Memory::memory_stats(0);
    CHECK(after.num_alloc_retries == before.num_alloc_retries + 1);
    CHECK(after.num_ooms == before.num_ooms + 1);
    // Nothing changed but the counters: the live block is intact and counted.
    CHECK(after.allocated_bytes.all() == before.allocated_bytes.all());
    CHECK(after.reserved_bytes.all().current == before.reserved_bytes.all().current);
    CHECK(check_invariants(after).empty());
    CHECK(static_cast<unsigned char*>(c)[40 * MiB - 1] == 0x5A);

    // Still usable: small and large blocks come and go, the live one is freed.
    void* small = Memory::raw_alloc(1000, s);
    void* large = Memory::raw_alloc(12 * MiB, s);
    std::memset(small, 1, 1000);
    std::memset(large, 2, 12 * MiB);
    Memory::raw_delete(small);
    Memory::raw_delete(large);
    Memory::raw_delete(c);
    CHECK(Memory::memory_allocated(0) == 0);
    CHECK(check_invariants(Memory::memory_stats(0)).empty());
  }

  SUBCASE("out of memory inside a stream task surfaces at synchronize as the task's error") {
    s.enqueue([&s] { (void)Memory::raw_alloc(200 * MiB, s); });
    bool thrown = false;
    try {
      s.synchronize();
    } catch (const accel::TaskError& e) {
      thrown = true;
      CHECK(contains(e.what(), "out of memory"));
      CHECK_THROWS_AS(std::rethrow_exception(e.original()), accel::OutOfMemoryError);
    }
    CHECK(thrown);
    CHECK(counter("num_ooms") == ooms0 + 1);
    void* p = Memory::raw_alloc(MiB, s);  // usable afterwards
    Memory::raw_delete(p);
    CHECK(Memory::memory_allocated(0) == 0);
  }

  SUBCASE("many threads hitting the limit at once: each gets a typed error or memory, nothing leaks") {
    constexpr int threads = 4;
    std::atomic<int> ooms{0};
    std::atomic<int> served{0};
    std::atomic<int> other{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        Stream own(0);
        std::vector<void*> held;
        for (int i = 0; i < 40; ++i) {
          try {
            held.push_back(Memory::raw_alloc((4 + (i + t) % 9) * MiB, own));
            served.fetch_add(1);
          } catch (const accel::OutOfMemoryError&) {
            ooms.fetch_add(1);
            if (!held.empty()) {
              Memory::raw_delete(held.back());
              held.pop_back();
            }
          } catch (...) {
            other.fetch_add(1);
          }
        }
        for (void* p : held) Memory::raw_delete(p);
      });
    }
    for (auto& th : pool) th.join();
    CHECK(other.load() == 0);
    CHECK(ooms.load() > 0);  // 4 x 40 requests of 4..12 MiB cannot all fit in 64 MiB
    CHECK(served.load() > 0);
    CHECK(Memory::memory_allocated(0) == 0);
    CHECK(Memory::memory_reserved(0) <= allowed);
    CHECK(check_invariants(Memory::memory_stats(0)).empty());
  }
}

// ---- the allocator's own bookkeeping cannot grow (ulimit -v) ---------------------------------------------

// The address and thread sanitizers reserve terabytes of shadow memory and map more as the program
// runs, so an address-space limit breaks them rather than the allocator: this case runs in the plain
// build (scripts/test.sh) and says so under them.
TEST_CASE("failure: out of address space for the allocator's bookkeeping (ulimit -v) is an OutOfMemoryError") {
#if defined(ACCEL_TEST_SANITIZED)
  MESSAGE("SKIPPED under a sanitizer: its runtime needs address space that RLIMIT_AS would refuse; the plain build "
          "runs this case");
#else
  // In a child, with its own allocator on cpu:0: 12,288 live blocks of 1 KiB with a free 1 KiB hole
  // after each, so that requests of 512 B are served from the holes (no new segment; and no segment
  // is entirely free, so flushing the cache gives nothing back) while each split needs one more block
  // record. Then RLIMIT_AS leaves 256 KiB of address space, less than a chunk of records (512 KiB and
  // up), and 512 B requests follow until the records must grow: that one fails.
  constexpr std::size_t pairs = 12288;
  const accel_test::ChildResult r = accel_test::run_in_child([&]() -> int {
    accel::cpu::HostCachingAllocator a(0, accel::AllocatorConfig{});
    const StreamRef s = Streams::default_stream(0);
    const auto stat = [&](const char* key) { return a.stats().flat().at(key); };
    std::vector<void*> live(2 * pairs, nullptr);
    for (void*& p : live) p = a.allocate(KiB, s);
    for (std::size_t i = 1; i < live.size(); i += 2) a.free(std::exchange(live[i], nullptr));
    std::vector<void*> probes(2 * pairs, nullptr);
    const auto segments = stat("segment.all.current");
    const auto reserved = stat("reserved_bytes.all.current");

    rlimit old{};
    if (::getrlimit(RLIMIT_AS, &old) != 0) return 10;
    std::FILE* statm = std::fopen("/proc/self/statm", "r");
    unsigned long long pages = 0;
    if (statm == nullptr || std::fscanf(statm, "%llu", &pages) != 1) return 11;
    std::fclose(statm);
    rlimit tight = old;
    tight.rlim_cur = static_cast<rlim_t>(pages * static_cast<unsigned long long>(::sysconf(_SC_PAGESIZE)) + 256 * KiB);
    if (old.rlim_max != RLIM_INFINITY && tight.rlim_cur > old.rlim_max) tight.rlim_cur = old.rlim_max;
    if (::setrlimit(RLIMIT_AS, &tight) != 0) return 12;

    std::size_t made = 0;
    try {
      for (; made < probes.size(); ++made) probes[made] = a.allocate(512, s);
      std::fprintf(stderr, "child: %zu allocations succeeded under the limit\n", made);
      return 20;
    } catch (const accel::OutOfMemoryError& e) {
      const std::string what = e.what();
      if (!contains(what, "cpu:0 out of memory") || !contains(what, "its own bookkeeping") ||
          !contains(what, "ulimit -v")) {
        std::fprintf(stderr, "child: message: %s\n", what.c_str());
        return 21;
      }
      if (e.requested_bytes() != 512) return 22;
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr, "child: std::bad_alloc escaped from allocate after %zu allocations\n", made);
      return 23;
    }
    // Counted as any out-of-memory: the cache was flushed and the reservation retried, then num_ooms;
    // nothing else changed.
    if (stat("num_ooms") != 1) return 30;
    if (stat("num_alloc_retries") != 1) return 31;
    if (stat("allocation.all.current") != static_cast<std::int64_t>(pairs + made)) return 32;
    if (stat("allocated_bytes.all.current") != static_cast<std::int64_t>(pairs * KiB + made * 512)) return 33;
    if (stat("segment.all.current") != segments || stat("reserved_bytes.all.current") != reserved) return 34;

    // Usable under the limit: the 1 KiB block at the highest address merges with the holes around it
    // when freed (the requests above took the holes at the lowest addresses first: best fit by size,
    // then address), which gives back two records, and the next request is served.
    std::size_t highest = 0;
    for (std::size_t i = 0; i < live.size(); i += 2) {
      if (std::less<>()(live[highest], live[i])) highest = i;
    }
    a.free(std::exchange(live[highest], nullptr));
    probes[made] = a.allocate(512, s);
    if (probes[made] == nullptr || stat("allocation.all.current") != static_cast<std::int64_t>(pairs + made)) return 40;
    // And once the limit is lifted, it grows again.
    if (::setrlimit(RLIMIT_AS, &old) != 0) return 41;
    void* more = a.allocate(512, s);
    void* large = a.allocate(3 * MiB, s);
    if (stat("allocation.all.current") != static_cast<std::int64_t>(pairs + made + 2)) return 42;
    for (void* p : live) a.free(p);
    for (void* p : probes) a.free(p);
    a.free(more);
    a.free(large);
    a.empty_cache();
    if (stat("reserved_bytes.all.current") != 0 || stat("allocated_bytes.all.current") != 0) return 43;
    if (stat("num_ooms") != 1) return 44;
    if (a.bookkeeping_bytes() >= MiB) return 45;
    return 0;
  });
  CHECK(r.exited);
  CHECK(r.code == 0);
#endif
}

// ---- a task that throws ------------------------------------------------------------------------------

TEST_CASE("failure: a task that throws surfaces at synchronize; nothing is lost and the stream stays usable") {
  Stream s(0);
  std::atomic<int> ran{0};
  s.enqueue([&] { ran.fetch_add(1); });
  s.enqueue([] { throw std::runtime_error("boom 1"); });
  s.enqueue([&] { ran.fetch_add(1); });
  s.enqueue([] { throw 42; });  // not a std::exception
  s.enqueue([&] { ran.fetch_add(1); });
  Event after_failures;
  after_failures.record(s);
  after_failures.synchronize();  // events complete; they do not report failures
  CHECK(after_failures.query());

  bool thrown = false;
  try {
    s.synchronize();
  } catch (const accel::TaskError& e) {
    thrown = true;
    const std::string what = e.what();
    INFO(what);
    CHECK(e.code() == accel::Errc::task_failed);
    CHECK(contains(what, "boom 1"));                       // the first failure ...
    CHECK(contains(what, "1 later task failure"));         // ... and a count of the others
    CHECK(contains(what, "cpu:0 stream " + std::to_string(s.id())));
    CHECK_THROWS_WITH_AS(std::rethrow_exception(e.original()), "boom 1", std::runtime_error);
  }
  CHECK(thrown);
  CHECK(ran.load() == 3);               // the tasks after the failing ones ran
  CHECK_NOTHROW(s.synchronize());       // reported once, then cleared
  s.enqueue([&] { ran.fetch_add(1); });
  s.synchronize();
  CHECK(ran.load() == 4);
  CHECK(s.query());

  SUBCASE("a device synchronize reports the failure of any of its streams, once") {
    Stream other(0);
    other.enqueue([] { throw std::logic_error("from the other stream"); });
    CHECK_THROWS_WITH_AS(CpuBackend::synchronize(0), doctest::Contains("from the other stream"), accel::TaskError);
    CHECK_NOTHROW(CpuBackend::synchronize(0));
    CHECK_NOTHROW(other.synchronize());
  }

  SUBCASE("on the default stream (tasks run inline) the failure also waits for synchronize") {
    StreamRef d = Streams::default_stream(0);
    CHECK_NOTHROW(d.enqueue([] { throw std::runtime_error("inline boom"); }));
    CHECK_THROWS_WITH_AS(d.synchronize(), doctest::Contains("inline boom"), accel::TaskError);
    CHECK_NOTHROW(d.synchronize());
  }

  SUBCASE("memory a failing task held is returned by its destructors") {
    const std::size_t base = Memory::memory_allocated(0);
    s.enqueue([&s] {
      accel::Buffer<float, CpuBackend> held(1 << 20, s);  // 4 MiB
      throw std::runtime_error("after allocating");
    });
    CHECK_THROWS_AS(s.synchronize(), accel::TaskError);
    CHECK(Memory::memory_allocated(0) == base);
  }
}

TEST_CASE("failure: a stream destroyed with an unreported task failure says so on stderr") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const accel_test::ChildResult r = accel_test::run_in_child([&] {
    ::close(fds[0]);
    ::dup2(fds[1], 2);
    {
      Stream s(0);
      s.enqueue([] { throw std::runtime_error("nobody synchronized"); });
    }  // destroyed without a synchronize
    return 0;
  });
  ::close(fds[1]);
  std::string err;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) err.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  REQUIRE(r.exited);
  CHECK(r.code == 0);
  INFO(err);
  CHECK(contains(err, "unreported task failure"));
  CHECK(contains(err, "nobody synchronized"));
}

// ---- fork after initialisation -------------------------------------------------------------------------

TEST_CASE("failure: fork after initialisation: the child uses the CPU backend") {
  // Initialise: streams with worker threads, live and cached memory on both pools, events, a task.
  Stream a(0);
  Stream b(0);
  void* live_small = Memory::raw_alloc(3000, a);
  void* live_large = Memory::raw_alloc(8 * MiB, b);
  std::memset(live_small, 0x11, 3000);
  std::memset(live_large, 0x22, 8 * MiB);
  void* cached = Memory::raw_alloc(2 * MiB, a);
  Memory::record_stream(cached, b);
  Memory::raw_delete(cached);
  std::atomic<int> parent_ran{0};
  a.enqueue([&] { parent_ran.fetch_add(1); });
  Event e;
  e.record(a);
  b.wait(e);
  a.synchronize();
  b.synchronize();
  const std::size_t parent_allocated = Memory::memory_allocated(0);

  const accel_test::ChildResult r = accel_test::run_in_child([&]() -> int {
    // New streams get new worker threads; the parent's streams' workers do not exist here, so the
    // child leaves `a` and `b` alone (as a CUDA child leaves the parent's context alone).
    Stream c(0);
    std::atomic<int> ran{0};
    for (int i = 0; i < 100; ++i) c.enqueue([&] { ran.fetch_add(1); });
    c.synchronize();
    if (ran.load() != 100) return 10;
    // Memory: new allocations on the new stream and the default stream; the parent's blocks are
    // still counted and can be freed here.
    if (Memory::memory_allocated(0) != parent_allocated) return 11;
    void* p = Memory::raw_alloc(5 * MiB, c);
    std::memset(p, 3, 5 * MiB);
    void* q = Memory::raw_alloc(100, Streams::default_stream(0));
    Memory::record_stream(q, c);
    if (static_cast<unsigned char*>(live_small)[2999] != 0x11) return 12;
    if (static_cast<unsigned char*>(live_large)[8 * MiB - 1] != 0x22) return 13;
    Memory::raw_delete(live_small);
    Memory::raw_delete(live_large);
    Memory::raw_delete(p);
    Memory::raw_delete(q);
    // The default stream runs inline; a new event on the new stream times work.
    int inline_value = 0;
    Streams::default_stream(0).enqueue([&] { inline_value = 7; });
    if (inline_value != 7) return 14;
    Event t0(true);
    Event t1(true);
    t0.record(c);
    c.enqueue([] { std::this_thread::sleep_for(std::chrono::milliseconds(1)); });
    t1.record(c);
    t1.synchronize();
    if (!(t0.elapsed_time(t1) > 0.0f)) return 15;
    // The device: the parent's streams had finished their work before the fork, so a device
    // synchronize returns. Then every byte is accounted for.
    CpuBackend::synchronize(0);
    Memory::empty_cache();
    if (Memory::memory_allocated(0) != 0) return 16;
    if (!check_invariants(Memory::memory_stats(0)).empty()) return 17;
    // Threads of the child: more streams come and go.
    for (int i = 0; i < 20; ++i) {
      Stream d(0);
      d.enqueue([&] { ran.fetch_add(1); });
    }
    if (ran.load() != 120) return 18;
    return 0;
  }, std::chrono::seconds(60));
  INFO("exited=" << r.exited << " code=" << r.code << " signal=" << r.signal << " hung=" << r.hung);
  CHECK(r.exited);
  CHECK(r.code == 0);

  // The parent is untouched by the child's work.
  CHECK(Memory::memory_allocated(0) == parent_allocated);
  a.enqueue([&] { parent_ran.fetch_add(1); });
  a.synchronize();
  CHECK(parent_ran.load() == 2);
  Memory::raw_delete(live_small);
  Memory::raw_delete(live_large);
  CHECK(Memory::memory_allocated(0) == 0);
}

// ---- bad environment (run by their own ctest entries; see tests/failure/CMakeLists.txt) ------------------

TEST_CASE("failure: a bad ACCEL_CPU_DEVICE_COUNT or ACCEL_CPU_VISIBLE_DEVICES: unavailable, naming the variable" *
          doctest::skip()) {
  // ACCEL_TEST_BAD_VARIABLE names the variable the ctest entry set to a bad value.
  const char* variable = std::getenv("ACCEL_TEST_BAD_VARIABLE");
  REQUIRE_MESSAGE(variable != nullptr, "run through ctest (test_failure_bad_env_*), which sets the variable");
  const char* value = std::getenv(variable);
  REQUIRE(value != nullptr);

  CHECK_FALSE(CpuBackend::is_available());
  CHECK(CpuBackend::device_count() == 0);
  const accel::Availability availability = CpuBackend::availability();
  INFO(availability.reason);
  CHECK_FALSE(availability.available);
  CHECK(contains(availability.reason, variable));
  CHECK(contains(availability.reason, std::string("'") + value + "'"));
  // Nothing pretends to work: creating a stream or allocating is a typed error.
  CHECK_THROWS_AS(Stream(0), accel::InvalidArgumentError);
  CHECK_THROWS_AS(Memory::allocator(0), accel::InvalidArgumentError);
  // get_accelerator(): never a silent fallback to a CPU device that is not there.
  try {
    const accel::AnyBackend backend = accel::get_accelerator();
    CHECK(backend.name() != "cpu");  // another backend (a GPU) was available
  } catch (const accel::BackendUnavailableError& e) {
    CHECK(contains(e.what(), variable));
  }
  // Read once: mending the variable later changes neither answer (device_count() and availability() agree).
  const ScopedEnv mended{{variable, nullptr}};
  CHECK(CpuBackend::device_count() == 0);
  CHECK_FALSE(CpuBackend::availability().available);
}

TEST_CASE("failure: the CPU device variables are read once; availability() keeps agreeing with device_count()") {
  const int count = CpuBackend::device_count();
  const accel::Availability before = CpuBackend::availability();
  CHECK(before.available == (count > 0));
  const ScopedEnv broken{{"ACCEL_CPU_DEVICE_COUNT", "not-a-number"}, {"ACCEL_CPU_VISIBLE_DEVICES", ""}};
  CHECK(CpuBackend::device_count() == count);
  const accel::Availability after = CpuBackend::availability();
  CHECK(after.available == before.available);
  CHECK(after.reason == before.reason);
  CHECK(CpuBackend::is_available() == after.available);
}

TEST_CASE("failure: a bad ACCEL_ALLOC_CONF is a clear error at the first allocation" * doctest::skip()) {
  const char* value = std::getenv("ACCEL_ALLOC_CONF");
  REQUIRE_MESSAGE(value != nullptr, "run through ctest (test_failure_bad_alloc_conf_*), which sets ACCEL_ALLOC_CONF");
  CHECK(CpuBackend::is_available());  // devices and streams do not depend on the allocator
  Stream s(0);
  int ran = 0;
  s.enqueue([&] { ++ran; });
  s.synchronize();
  CHECK(ran == 1);

  for (int attempt = 0; attempt < 2; ++attempt) {  // the same error every time, nothing half-made
    bool thrown = false;
    try {
      (void)Memory::raw_alloc(KiB, s);
    } catch (const accel::InvalidArgumentError& e) {
      thrown = true;
      const std::string what = e.what();
      INFO(what);
      CHECK(contains(what, "ACCEL_ALLOC_CONF"));
      CHECK(contains(what, std::string("'") + value + "'"));
      CHECK(contains(what, "valid options"));
    }
    CHECK(thrown);
  }
}

TEST_CASE("failure: empty_cache() does not unmap a block whose stream-ordered work has not run") {
  // A block freed in stream order (raw_delete right after enqueueing work that uses it) is cached
  // for its stream; empty_cache() — or the OOM path of any thread — must not release its memory
  // before that work ran (cudaFree synchronizes the device; the CPU policy defers the unmap).
  // Run in a child, so a regression (a write into unmapped memory) is a reported SIGSEGV.
  const accel_test::ChildResult r = accel_test::run_in_child([] {
    Stream s(0);
    std::atomic<bool> go{false};
    constexpr std::size_t n = 256 * KiB;
    auto* p = static_cast<unsigned char*>(Memory::raw_alloc(n, s));
    s.enqueue([&go] {
      while (!go.load()) std::this_thread::yield();
    });
    s.enqueue([p] { std::memset(p, 1, n); });
    Memory::raw_delete(p);
    Memory::empty_cache();
    go.store(true);
    s.synchronize();
    return 0;
  }, std::chrono::seconds(30));
  INFO("exited=" << r.exited << " code=" << r.code << " signal=" << r.signal << " hung=" << r.hung);
  CHECK(r.exited);
  CHECK(r.code == 0);
}

TEST_CASE("failure: a child forked while a stream runs a task can still synchronize its device") {
  // The parent's created streams are inherited without their worker threads: the child marks them
  // orphaned at fork (their queued work belongs to the parent), so a device synchronize returns and
  // using such a stream is an InvalidStateError rather than a hang.
  Stream busy(0);
  std::atomic<bool> started{false};
  std::atomic<bool> release{false};
  busy.enqueue([&] {
    started.store(true);
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (!started.load()) std::this_thread::yield();
  const accel_test::ChildResult r = accel_test::run_in_child([&busy] {
    Stream mine(0);
    int ran = 0;
    mine.enqueue([&] { ran = 1; });
    mine.synchronize();
    if (ran != 1) return 20;
    CpuBackend::synchronize(0);  // must not wait for `busy`, whose worker is not in this process
    try {
      busy.enqueue([] {});
      return 21;  // an inherited stream must refuse work it could never run
    } catch (const accel::InvalidStateError&) {
    }
    return 0;
  }, std::chrono::seconds(5));
  release.store(true);
  busy.synchronize();
  INFO("exited=" << r.exited << " code=" << r.code << " signal=" << r.signal << " hung=" << r.hung);
  CHECK_FALSE(r.hung);
  CHECK(r.exited);
  CHECK(r.code == 0);
}

TEST_CASE("failure: in a forked child, inherited streams and events refuse to report work that never ran there") {
  // Issue 19, item 11. A child inherits the parent's streams without their worker threads: work that
  // had not run at the fork never runs in the child, so synchronize(), query(), an event's query,
  // synchronize and elapsed_time, and waits on it throw InvalidStateError — never a silent "done"
  // (the child would read data the task never wrote). Work that had run before the fork is done.
  // The child starts no thread, so this case also runs under ThreadSanitizer
  // (test_failure_fork_streams).
  Stream busy(0);
  Stream idle(0);
  int written_before_fork = 0;
  int written_by_busy = 0;
  Event idle_done;
  Event idle_t0(true);
  Event idle_t1(true);
  idle_t0.record(idle);
  idle.enqueue([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    written_before_fork = 1;
  });
  idle_t1.record(idle);
  idle_done.record(idle);
  idle.synchronize();

  std::atomic<bool> started{false};
  std::atomic<bool> release{false};
  busy.enqueue([&] {
    started.store(true);
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    written_by_busy = 42;
  });
  Event pending;
  pending.record(busy);
  Event pending_timed(true);
  pending_timed.record(busy);
  // A block freed while `busy` may still use it (record_stream): the allocator waits for busy's work.
  void* block = Memory::raw_alloc(64 * KiB, idle);
  Memory::record_stream(block, busy);
  Memory::raw_delete(block);
  while (!started.load()) std::this_thread::yield();

  const accel_test::ChildResult r = accel_test::run_in_child([&]() -> int {
    // Each call must throw InvalidStateError naming the stream and the fork; a return is a lie.
    const std::string busy_name = "stream " + std::to_string(busy.id());
    int code = 30;
    const auto refused = [&](auto&& call) {
      ++code;
      try {
        call();
      } catch (const accel::InvalidStateError& e) {
        const std::string what = e.what();
        return contains(what, busy_name) && contains(what, "fork()");
      } catch (...) {
      }
      return false;
    };
    if (!refused([&] { (void)busy.query(); })) return code;                         // 31
    if (!refused([&] { busy.synchronize(); })) return code;                         // 32
    if (!refused([&] { (void)pending.query(); })) return code;                      // 33
    if (!refused([&] { pending.synchronize(); })) return code;                      // 34
    if (!refused([&] { (void)idle_t0.elapsed_time(pending_timed); })) return code;  // 35
    if (!refused([&] { Streams::default_stream(0).wait(pending); })) return code;   // 36
    if (!refused([&] { Streams::default_stream(0).wait_stream(busy); })) return code;  // 37
    if (!refused([&] { busy.enqueue([] {}); })) return code;                        // 38
    // A record refused there leaves the event's previous record standing (checked at 44).
    if (!refused([&] { idle_t1.record(busy); })) return code;                       // 39
    if (written_by_busy != 0) return 40;  // indeed: the task never ran here
    // What had run before the fork is done, truthfully.
    if (!idle.query()) return 41;
    idle.synchronize();
    if (!idle_done.query()) return 42;
    idle_done.synchronize();
    Streams::default_stream(0).wait(idle_done);
    if (written_before_fork != 1) return 43;
    if (!(idle_t0.elapsed_time(idle_t1) > 0.0f)) return 44;
    // The device synchronize covers the child's own streams (none here): it returns.
    CpuBackend::synchronize(0);
    // The allocator's own bookkeeping is not refused: busy's work never touches the child's copy of
    // the block, so it is reusable here (the same block, for its stream).
    void* again = nullptr;
    try {
      again = Memory::raw_alloc(64 * KiB, idle);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: raw_alloc: %s\n", e.what());
      return 46;
    }
    if (again != block) return 47;
    Memory::raw_delete(again);
    // Still refused the second time: nothing was marked done by the first refusals.
    if (!refused([&] { busy.synchronize(); })) return 45;
    // pending_timed's marker is still queued on busy, so re-recording it needs a fresh capture: the
    // refusal frees it again (no allocation outlives the call) and the previous record stands.
    const long live_before = live_news.load();
    if (!refused([&] { pending_timed.record(busy); })) return 48;
    if (counts_news && live_news.load() != live_before) return 49;
    if (!refused([&] { (void)idle_t0.elapsed_time(pending_timed); })) return 50;
    return 0;
  }, std::chrono::seconds(30));
  release.store(true);
  busy.synchronize();
  CHECK(written_by_busy == 42);  // the parent's stream is untouched by the child
  CHECK(pending.query());
  INFO("exited=" << r.exited << " code=" << r.code << " signal=" << r.signal << " hung=" << r.hung);
  CHECK_FALSE(r.hung);
  CHECK(r.exited);
  CHECK(r.code == 0);
}
