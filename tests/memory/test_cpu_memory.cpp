// The CPU backend's memory: the host policies, cpu::Memory (allocation routing, statistics, totals,
// pinning, the pinned host cache) and Buffer. Multi-device cases run when ACCEL_CPU_DEVICE_COUNT > 1.
#include "support/child_report.hpp"
#include "support/sanitizer_build.hpp"
#include "support/sizes.hpp"

#include <accel/cpu/device.hpp>
#include <accel/cpu/event.hpp>
#include <accel/cpu/memory.hpp>
#include <accel/cpu/stream.hpp>
#include <accel/memory/buffer.hpp>

#include <doctest/doctest.h>

#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace {

using accel::cpu::Memory;
using accel::cpu::Streams;


// The pieces of CpuBackend that Buffer uses, composed the same way.
struct HostBackend : accel::cpu::Devices, accel::cpu::Streams, accel::cpu::Memory {
  static constexpr accel::DeviceType device_type() noexcept { return accel::DeviceType::cpu; }
  using StreamRef = accel::cpu::StreamRef;
};

// A field of /proc/self/status or /proc/meminfo, in KiB.
std::size_t proc_kib(const char* file, const std::string& field) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1));
  }
  return 0;
}
// Page-locked KiB of this process. The address and thread sanitizers turn mlock into a no-op, so
// under them the checks of VmLck are skipped.
constexpr bool mlock_observable = !accel_test::sanitized_build;
std::size_t locked_kib() { return proc_kib("/proc/self/status", "VmLck"); }
// The thread sanitizer maps and clears its shadow of memory as it is written, so the page faults of a
// thread are its, not the block's: the no-fault check is skipped under it.
constexpr bool page_faults_observable = !accel_test::thread_sanitized_build;

std::int64_t stat(const std::string& key, int dev = 0) { return Memory::memory_stats(dev).flat().at(key); }

}  // namespace

TEST_CASE("HostMemory: aligned host memory, huge-page aligned from 2 MiB") {
  using accel::cpu::HostMemory;
  void* small = HostMemory::allocate(0, 100);
  REQUIRE(small != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(small) % 64 == 0);
  std::memset(small, 1, 100);
  HostMemory::deallocate(0, small, 100);
  // Every size below the heap threshold is 64-byte aligned (malloc's 16 would pass one by chance).
  std::vector<void*> heap_blocks;
  for (std::size_t bytes = 24; bytes < accel::cpu::detail::heap_threshold; bytes = bytes * 3 + 8) {
    void* p = HostMemory::allocate(0, bytes);
    REQUIRE(p != nullptr);
    CHECK(reinterpret_cast<std::uintptr_t>(p) % 64 == 0);
    std::memset(p, 2, bytes);
    heap_blocks.push_back(p);
  }
  CHECK(heap_blocks.size() == 8);  // 24 B to 61,232 B
  for (std::size_t i = 0, bytes = 24; i < heap_blocks.size(); ++i, bytes = bytes * 3 + 8) {
    HostMemory::deallocate(0, heap_blocks[i], bytes);
  }
  // From the threshold up, whole pages of a mapping of its own, which deallocate unmaps (deferred
  // releases wait only for queued stream work, and there is none).
  const std::size_t page = accel::cpu::detail::host_page_size();
  void* at_threshold = HostMemory::allocate(0, accel::cpu::detail::heap_threshold);
  REQUIRE(at_threshold != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(at_threshold) % page == 0);
  std::memset(at_threshold, 3, accel::cpu::detail::heap_threshold);
  HostMemory::deallocate(0, at_threshold, accel::cpu::detail::heap_threshold);
  CHECK(::msync(at_threshold, page, MS_ASYNC) == -1);  // unmapped (ENOMEM), not back in malloc's heap

  void* seg = HostMemory::allocate(0, 2 * MiB);
  REQUIRE(seg != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(seg) % (2 * MiB) == 0);
  std::memset(seg, 7, 2 * MiB);
  CHECK(static_cast<unsigned char*>(seg)[2 * MiB - 1] == 7);
  HostMemory::deallocate(0, seg, 2 * MiB);

  CHECK(HostMemory::allocate(0, 0) == nullptr);
  CHECK(HostMemory::allocate(0, accel::cpu::detail::physical_memory() + 1) == nullptr);
  CHECK(HostMemory::device_name(0) == "cpu:0");
}

TEST_CASE("host pages: /proc/meminfo fields, whole-page mappings, the RLIMIT_MEMLOCK hint") {
  namespace detail = accel::cpu::detail;
  const std::size_t page = detail::host_page_size();
  CHECK(detail::meminfo_bytes("MemTotal") == proc_kib("/proc/meminfo", "MemTotal") * KiB);
  CHECK(detail::meminfo_bytes("Mem") == 0);  // a prefix of MemTotal is not a field
  CHECK(detail::meminfo_bytes("NoSuchField") == 0);

  // Under 2 MiB: whole pages, given back whole even when asked for less than a page.
  void* p = detail::map_pages(100);
  REQUIRE(p != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(p) % page == 0);
  static_cast<char*>(p)[page - 1] = 1;
  detail::unmap_pages(p, 100);
  errno = 0;
  CHECK(::msync(p, page, MS_ASYNC) == -1);
  CHECK(errno == ENOMEM);

  // From 2 MiB: 2 MiB aligned, and what was mapped past the aligned range to find it is given back.
  void* big = detail::map_pages(2 * MiB + 1);
  REQUIRE(big != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(big) % (2 * MiB) == 0);
  char* end = static_cast<char*>(big) + 2 * MiB + page;
  end[-1] = 1;
  errno = 0;
  CHECK(::msync(end, page, MS_ASYNC) == -1);
  CHECK(errno == ENOMEM);
  detail::unmap_pages(big, 2 * MiB + 1);
  CHECK(::msync(big, page, MS_ASYNC) == -1);
  CHECK(::msync(end - page, page, MS_ASYNC) == -1);

  // The hint names the soft limit as `ulimit -l` shows it.
  rlimit saved{};
  REQUIRE(::getrlimit(RLIMIT_MEMLOCK, &saved) == 0);
  rlimit lowered = saved;
  lowered.rlim_cur = saved.rlim_max == RLIM_INFINITY ? rlim_t{8} << 20 : std::min<rlim_t>(saved.rlim_max, rlim_t{8} << 20);
  REQUIRE(::setrlimit(RLIMIT_MEMLOCK, &lowered) == 0);
  const std::string hint = detail::memlock_hint();
  const std::string expected =
      "The locked-memory limit RLIMIT_MEMLOCK is " + accel::caching::format_size(lowered.rlim_cur) + " (see `ulimit -l`)";
  CHECK(hint.rfind(expected, 0) == 0);
  CHECK(hint.find("CAP_IPC_LOCK") != std::string::npos);
  const rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};  // allowed where the hard limit is, or as root
  if (::setrlimit(RLIMIT_MEMLOCK, &unlimited) == 0) {
    CHECK(detail::memlock_hint().rfind("The locked-memory limit RLIMIT_MEMLOCK is unlimited (see", 0) == 0);
  } else {
    MESSAGE("RLIMIT_MEMLOCK cannot be raised to unlimited here: that hint is not checked");
  }
  REQUIRE(::setrlimit(RLIMIT_MEMLOCK, &saved) == 0);
}

TEST_CASE("cpu::Memory: host_alloc past the locked-memory limit is an OutOfMemoryError naming mlock's error and the limit") {
  // Root ignores RLIMIT_MEMLOCK through CAP_IPC_LOCK (CI runs as root), so a child process drops that
  // capability from its effective set, lowers the limit to 1 MiB and asks for 4 MiB of pinned memory.
  if (!mlock_observable) {
    MESSAGE("a sanitizer's mlock locks nothing and cannot fail: not checked in this build");
    return;
  }
  const test_support::ChildReport child = test_support::report_from_child([]() -> std::string {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct caps[2]{};
    if (::syscall(SYS_capget, &header, caps) != 0) return "capget failed";
    caps[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
    rlimit low{};
    ::getrlimit(RLIMIT_MEMLOCK, &low);
    low.rlim_cur = std::min<rlim_t>(low.rlim_max, rlim_t{1} << 20);
    if (::syscall(SYS_capset, &header, caps) != 0 || ::setrlimit(RLIMIT_MEMLOCK, &low) != 0) {
      return "could not drop CAP_IPC_LOCK or lower RLIMIT_MEMLOCK";
    }
    try {
      void* p = Memory::host_alloc(4 * MiB);
      Memory::host_free(p);
      return "host_alloc locked 4 MiB under a 1 MiB limit";
    } catch (const accel::OutOfMemoryError& e) {
      return e.what();
    }
  });
  CHECK(child.completed());
  const std::string& report = child.text;
  INFO(report);
  CHECK(report.find("cpu-pinned") != std::string::npos);  // the pinned allocator's name
  CHECK(report.find("The last segment could not be page-locked: mlock: ") != std::string::npos);
  CHECK((report.find("(errno 12)") != std::string::npos || report.find("(errno 11)") != std::string::npos));  // ENOMEM, EAGAIN
  const std::string limit = "The locked-memory limit RLIMIT_MEMLOCK is " + accel::caching::format_size(std::size_t{1} << 20) +
                            " (see `ulimit -l`)";
  CHECK(report.find(limit) != std::string::npos);
}

TEST_CASE("cpu::Memory: host_alloc's error has no mlock line when locking did not fail") {
  accel::cpu::detail::last_mlock_errno().store(0);
  CHECK(accel::cpu::PinnedHostMemory::oom_hint(0).empty());
  accel::cpu::detail::last_mlock_errno().store(EAGAIN);
  const std::string hint = accel::cpu::PinnedHostMemory::oom_hint(0);
  CHECK(hint.rfind("The last segment could not be page-locked: mlock: ", 0) == 0);
  CHECK(hint.find("(errno 11). The locked-memory limit RLIMIT_MEMLOCK is ") != std::string::npos);
  accel::cpu::detail::last_mlock_errno().store(0);
}

TEST_CASE("HostMemory: a segment given back while a stream has queued work stays until that work ran") {
  // The stream-ordered contract lets a block be freed once its last use is enqueued; the raw policy
  // defers the release (munmap, munlock, free) until every stream ran what was queued before it.
  using accel::cpu::HostMemory;
  using accel::cpu::PinnedHostMemory;
  namespace detail = accel::cpu::detail;
  const std::size_t page = detail::host_page_size();
  detail::reap_deferred_releases();
  const std::size_t pending0 = detail::deferred().count.load();

  accel::cpu::Stream s;
  std::atomic<bool> go{false};
  void* mapped = HostMemory::allocate(0, 2 * MiB);
  void* small = HostMemory::allocate(0, 1000);
  void* locked = PinnedHostMemory::allocate(0, 4 * page);
  REQUIRE(mapped != nullptr);
  REQUIRE(small != nullptr);
  REQUIRE(locked != nullptr);
  const std::size_t locked_with = locked_kib();
  std::atomic<int> sum{0};
  s.enqueue([&] {
    while (!go.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
    std::memset(mapped, 3, 2 * MiB);  // the memory given back below: still there
    std::memset(small, 4, 1000);
    std::memset(locked, 5, 4 * page);
    sum = static_cast<unsigned char*>(mapped)[2 * MiB - 1] + static_cast<unsigned char*>(small)[999] +
          static_cast<unsigned char*>(locked)[4 * page - 1];
  });
  HostMemory::deallocate(0, mapped, 2 * MiB);
  HostMemory::deallocate(0, small, 1000);
  PinnedHostMemory::deallocate(0, locked, 4 * page);
  CHECK(detail::deferred().count.load() == pending0 + 3);
  detail::reap_deferred_releases();  // the task has not run: nothing is released
  CHECK(detail::deferred().count.load() == pending0 + 3);
  CHECK(::msync(mapped, page, MS_ASYNC) == 0);  // still mapped
  if (mlock_observable) CHECK(locked_kib() == locked_with);  // still locked

  void* idle = HostMemory::allocate(0, 128 * KiB);
  REQUIRE(idle != nullptr);
  CHECK(detail::deferred().count.load() == pending0 + 3);  // the allocation reaped nothing either

  go = true;
  s.synchronize();
  CHECK(sum.load() == 12);
  // With no stream behind on its work, a segment goes at once, and the next release (or allocation)
  // releases what was deferred.
  HostMemory::deallocate(0, idle, 128 * KiB);
  CHECK(detail::deferred().count.load() == pending0);
  for (void* gone : {idle, mapped}) {
    errno = 0;
    CHECK(::msync(gone, page, MS_ASYNC) == -1);  // unmapped now
    CHECK(errno == ENOMEM);
  }
  if (mlock_observable) CHECK(locked_kib() + 4 * page / KiB == locked_with);
}

TEST_CASE("cpu::Memory: raw_alloc counts blocks of the stream's device; raw_delete finds them") {
  Memory::empty_cache();
  const auto s = Streams::default_stream(0);
  const std::size_t base = Memory::memory_allocated(0);
  void* p = Memory::raw_alloc(3000, s);
  REQUIRE(p != nullptr);
  CHECK(Memory::memory_allocated() == base + 3072);
  CHECK(Memory::max_memory_allocated(0) >= base + 3072);
  CHECK(Memory::memory_reserved(0) >= 2 * MiB);
  CHECK(Memory::memory_cached(0) == Memory::memory_reserved(0));
  CHECK(Memory::on_accelerator(p));
  CHECK(Memory::on_accelerator(static_cast<char*>(p) + 3000));
  CHECK_FALSE(Memory::is_pinned(p));
  std::memset(p, 0xab, 3000);  // real memory
  Memory::raw_delete(p);
  CHECK(Memory::memory_allocated(0) == base);
  CHECK(Memory::on_accelerator(p));  // still a cached segment

  int local = 0;
  CHECK_FALSE(Memory::on_accelerator(&local));
  try {
    Memory::raw_delete(&local);
    FAIL("freed a stack address");
  } catch (const accel::InvalidArgumentError& e) {
    CHECK(std::string(e.what()).find("was not allocated by") != std::string::npos);
    CHECK(std::string(e.what()).find("(or was already freed)") != std::string::npos);
  }
  CHECK_THROWS_AS(Memory::raw_delete(p), accel::InvalidArgumentError);
  CHECK_THROWS_AS(Memory::record_stream(&local, s), accel::InvalidArgumentError);
  // Inside a live block but not its start: the message says where it lies, and nothing is freed.
  void* live = Memory::raw_alloc(4 * KiB, s);
  const std::size_t with_live = Memory::memory_allocated(0);
  const std::string only_device =
      accel::cpu::Devices::device_count() == 1 ? "the pointer was not allocated by cpu:0's caching allocator (or was already freed)"
                                               : "the pointer was not allocated by the caching allocator of any of the ";
  const std::string inside = "; it lies inside cpu:0's memory but is not the start of a live allocation";
  try {
    Memory::raw_delete(static_cast<char*>(live) + 8);
    FAIL("freed the middle of a block");
  } catch (const accel::InvalidArgumentError& e) {
    const std::string what = e.what();
    CHECK(what.find(only_device) != std::string::npos);
    CHECK(what.find(inside) != std::string::npos);
  }
  CHECK(Memory::memory_allocated(0) == with_live);
  CHECK_FALSE(Memory::try_raw_delete(static_cast<char*>(live) + 8));
  CHECK(Memory::try_raw_delete(live));  // the current device's block, through the one lookup
  CHECK(Memory::memory_allocated(0) == with_live - 4 * KiB);
  CHECK_THROWS_AS((void)Memory::memory_allocated(accel::cpu::Devices::device_count()), accel::InvalidArgumentError);
  CHECK_THROWS_AS((void)Memory::total_memory(-1), accel::InvalidArgumentError);
  Memory::empty_cache();
}

// What bench_alloc's 64-128 KiB rows rest on (benchmarks/RESULTS.md, issue 24): a freed small-pool
// block is the one the next allocation of its size on the same stream gets — the same address, split
// from the same 2 MiB segment and merged back into it on free — and its pages stay mapped, so
// writing it again costs no page fault.
TEST_CASE("cpu::Memory: a freed 64 or 128 KiB block is the next same-size allocation's, pages still mapped") {
  Memory::empty_cache();
  const auto s = Streams::default_stream(0);
  for (const std::size_t bytes : {64 * KiB, 128 * KiB}) {
    CAPTURE(bytes);
    const accel::MemoryStats before = Memory::memory_stats(0);
    void* first = Memory::raw_alloc(bytes, s);
    REQUIRE(first != nullptr);
    auto* c = static_cast<volatile unsigned char*>(first);
    for (std::size_t i = 0; i < bytes; i += 4096) c[i] = 1;  // map every page once
    Memory::raw_delete(first);
    const accel::MemoryStats after_first = Memory::memory_stats(0);
    CHECK(after_first.num_device_alloc == before.num_device_alloc + 1);  // one 2 MiB small segment
    CHECK(after_first.reserved_bytes.all().current == before.reserved_bytes.all().current + std::int64_t{2 * MiB});
    CHECK(after_first.inactive_split.all().current == before.inactive_split.all().current);  // merged back whole

    // Faults are counted from the second pass: the first runs the loop's code once (the first run of
    // a page of code faults it in, which a sanitizer build at -O0 showed sporadically).
    rusage usage{};
    long faults_before = 0;
    bool same = true;
    for (int i = -1; i < 1000; ++i) {
      if (i == 0) {
        ::getrusage(RUSAGE_THREAD, &usage);
        faults_before = usage.ru_minflt + usage.ru_majflt;
      }
      void* p = Memory::raw_alloc(bytes, s);
      same = same && p == first;
      auto* q = static_cast<volatile unsigned char*>(p);
      for (std::size_t k = 0; k < bytes; k += 4096) q[k] = static_cast<unsigned char>(i);
      Memory::raw_delete(p);
    }
    ::getrusage(RUSAGE_THREAD, &usage);
    CHECK(same);
    if (page_faults_observable) CHECK(usage.ru_minflt + usage.ru_majflt - faults_before == 0);
    const accel::MemoryStats after = Memory::memory_stats(0);
    CHECK(after.num_device_alloc == after_first.num_device_alloc);  // no new segment
    CHECK(after.num_device_free == after_first.num_device_free);    // none given back
    CHECK(after.allocation.all().allocated == after_first.allocation.all().allocated + 1001);
    CHECK(after.allocated_bytes.all().current == before.allocated_bytes.all().current);
    CHECK(after.inactive_split.all().current == after_first.inactive_split.all().current);
    Memory::empty_cache();
  }
}

TEST_CASE("cpu::Memory: total and available memory agree with /proc/meminfo") {
  const std::size_t total = Memory::total_memory();
  const std::size_t meminfo_total = proc_kib("/proc/meminfo", "MemTotal") * KiB;
  CHECK(total > 256 * MiB);
  CHECK(total >= meminfo_total);  // MemTotal excludes what the kernel reserved at boot
  CHECK(total - meminfo_total < total / 10);
  const std::size_t available = Memory::available_memory();
  const std::size_t meminfo_available = proc_kib("/proc/meminfo", "MemAvailable") * KiB;
  CHECK(available <= total);
  CHECK(available > meminfo_available / 2);
  CHECK(available < meminfo_available + meminfo_available / 2);
  const accel::MemoryInfo info = Memory::get_memory_info(0);
  CHECK(info.total == total);
  CHECK(info.free <= info.total);

  // A memory fraction caps what is available to the device.
  auto& a = Memory::allocator(0);
  Memory::set_per_process_memory_fraction(double(64 * MiB) / double(total), 0);
  CHECK(Memory::available_memory(0) <= 64 * MiB);
  CHECK(Memory::available_memory(0) + Memory::memory_reserved(0) <= 64 * MiB + 1);
  CHECK(a.allowed_memory() <= 64 * MiB);
  // A fraction set below what is already reserved leaves nothing available (not a wrapped count).
  Memory::set_per_process_memory_fraction(1.0, 0);
  Memory::empty_cache();
  const auto s0 = Streams::default_stream(0);
  void* held = Memory::raw_alloc(40 * MiB, s0);
  REQUIRE(Memory::memory_reserved(0) >= 40 * MiB);
  Memory::set_per_process_memory_fraction(double(8 * MiB) / double(total), 0);
  CHECK(Memory::available_memory(0) == 0);
  CHECK(Memory::get_memory_info(0).free > 0);  // the host's figure, as torch's mem_get_info is the device's
  Memory::raw_delete(held);
  Memory::empty_cache();
  CHECK(Memory::available_memory(0) > 0);
  CHECK(Memory::available_memory(0) <= 8 * MiB);
  Memory::set_per_process_memory_fraction(1.0, 0);
  CHECK_THROWS_AS(Memory::set_per_process_memory_fraction(0.0, 0), accel::InvalidArgumentError);
}

TEST_CASE("cpu::Memory: pin_memory page-locks a range and tracks it") {
  std::vector<char> host(MiB + 3);
  int on_stack = 0;
  const std::size_t locked0 = locked_kib();
  CHECK_FALSE(Memory::is_pinned(host.data()));
  Memory::pin_memory(host.data(), host.size());
  if (mlock_observable) CHECK(locked_kib() >= locked0 + MiB / KiB);  // really locked
  CHECK(Memory::is_pinned(host.data()));
  CHECK(Memory::is_pinned(host.data() + 1000));
  CHECK(Memory::is_pinned(host.data() + host.size() - 1));
  CHECK_FALSE(Memory::is_pinned(host.data() + host.size()));
  CHECK_FALSE(Memory::is_pinned(host.data() - 1));
  CHECK_FALSE(Memory::is_pinned(&on_stack));
  CHECK_FALSE(Memory::on_accelerator(host.data()));

  // Overlapping ranges are refused (as cudaHostRegister refuses them).
  CHECK_THROWS_WITH_AS(Memory::pin_memory(host.data() + 10, 10), doctest::Contains("the range overlaps the range pinned at"),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(Memory::pin_memory(host.data() - 10, 20), doctest::Contains("the range overlaps the range pinned at"),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(Memory::pin_memory(nullptr, 10), doctest::Contains("the range is empty"), accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(Memory::pin_memory(host.data(), 0), doctest::Contains("the range is empty"),
                       accel::InvalidArgumentError);

  CHECK_FALSE(Memory::unpin_memory(host.data() + 1));  // not the start of a pinned range
  CHECK(Memory::unpin_memory(host.data()));
  CHECK_FALSE(Memory::is_pinned(host.data()));
  CHECK_FALSE(Memory::unpin_memory(host.data()));
  if (mlock_observable) CHECK(locked_kib() <= locked0 + 8);
}

TEST_CASE("cpu::Memory: neighbouring pinned ranges that share a page stay locked") {
  const std::size_t page = accel::cpu::detail::host_page_size();
  void* raw = accel::cpu::HostMemory::allocate(0, 4 * page);
  REQUIRE(raw != nullptr);
  char* base = static_cast<char*>(raw);
  Memory::pin_memory(base, page + 100);               // pages 0 and 1
  Memory::pin_memory(base + page + 100, page);        // pages 1 and 2
  CHECK(Memory::unpin_memory(base));
  CHECK(Memory::is_pinned(base + page + 100));
  CHECK_FALSE(Memory::is_pinned(base));
  if (mlock_observable) CHECK(locked_kib() * KiB >= 2 * page);  // pages 1 and 2 stay locked for the second range
  CHECK(Memory::unpin_memory(base + page + 100));
  accel::cpu::HostMemory::deallocate(0, raw, 4 * page);
}

TEST_CASE("cpu::Memory: pinned ranges may touch, not overlap by a byte; the later of two sharing a page leaves it locked") {
  const std::size_t page = accel::cpu::detail::host_page_size();
  void* raw = ::mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(raw != MAP_FAILED);
  char* base = static_cast<char*>(raw);  // page-aligned: each count below is whole pages
  const std::size_t before = locked_kib();
  const auto locked_pages = [&] { return static_cast<std::int64_t>(locked_kib() - before) * std::int64_t{KiB} / std::int64_t(page); };

  Memory::pin_memory(base, page + 100);             // A: pages 0 and 1
  Memory::pin_memory(base + page + 100, page);      // B: pages 1 and 2, starting where A ends
  Memory::pin_memory(base + 3 * page, 100);         // C: page 3
  if (mlock_observable) CHECK(locked_pages() == 4);
  // One byte into A (its last), or one byte into C (its first), is refused and pins nothing.
  CHECK_THROWS_WITH_AS(Memory::pin_memory(base + page + 99, 1), doctest::Contains("the range overlaps the range pinned at"),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(Memory::pin_memory(base + 3 * page - 10, 11), doctest::Contains("the range overlaps the range pinned at"),
                       accel::InvalidArgumentError);
  CHECK_FALSE(Memory::unpin_memory(base + page + 99));
  CHECK_FALSE(Memory::unpin_memory(base + 3 * page - 10));
  // The ten bytes between B and C are free: pinned and unpinned, they leave B's and C's pages locked.
  Memory::pin_memory(base + 3 * page - 10, 10);
  CHECK(Memory::unpin_memory(base + 3 * page - 10));
  if (mlock_observable) CHECK(locked_pages() == 4);
  CHECK(Memory::is_pinned(base + 2 * page + 99));
  CHECK(Memory::is_pinned(base + 3 * page));

  CHECK(Memory::unpin_memory(base + 3 * page));  // C: page 3
  if (mlock_observable) CHECK(locked_pages() == 3);
  CHECK(Memory::unpin_memory(base + page + 100));  // B: page 2; page 1 stays locked for A, before it
  if (mlock_observable) CHECK(locked_pages() == 2);
  CHECK(Memory::is_pinned(base + page + 99));
  CHECK_FALSE(Memory::is_pinned(base + page + 100));
  CHECK(Memory::unpin_memory(base));
  if (mlock_observable) CHECK(locked_pages() == 0);
  ::munmap(raw, 4 * page);
}

TEST_CASE("cpu::Memory: pinning a range that is not all mapped says so, with mlock's error, and records nothing") {
  const std::size_t page = accel::cpu::detail::host_page_size();
  void* raw = ::mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(raw != MAP_FAILED);
  REQUIRE(::munmap(static_cast<char*>(raw) + page, page) == 0);  // the second page is a hole
  const std::size_t before = locked_kib();
  if (!mlock_observable) {
    MESSAGE("a sanitizer's mlock locks nothing and cannot fail: the hole is not checked in this build");
    ::munmap(raw, page);
    return;
  }
  try {
    Memory::pin_memory(raw, 2 * page);
    FAIL("pin_memory locked a range with a hole");
  } catch (const accel::InvalidArgumentError&) {
    FAIL("a hole in the range is not the caller's argument error: mlock reports it");
  } catch (const accel::Error& e) {
    const std::string what = e.what();
    CHECK(what.find("pin_memory(") != std::string::npos);
    CHECK(what.find(": mlock: ") != std::string::npos);
    CHECK(what.find("(errno 12). Either part of the range is not mapped, or the limit was reached.") != std::string::npos);
    CHECK(what.find("RLIMIT_MEMLOCK") != std::string::npos);  // the hint: ulimit -l or CAP_IPC_LOCK
  }
  // Linux locked the page before the hole and then failed: that lock is undone, as nothing was pinned.
  if (mlock_observable) CHECK(locked_kib() == before);
  CHECK_FALSE(Memory::is_pinned(raw));
  CHECK_FALSE(Memory::unpin_memory(raw));
  Memory::pin_memory(raw, page);  // the mapped page alone: a range is recorded only once locked
  if (mlock_observable) CHECK(locked_kib() == before + page / KiB);
  CHECK(Memory::unpin_memory(raw));
  ::munmap(raw, page);
}

TEST_CASE("cpu::Memory: host_alloc serves cached page-locked memory") {
  const std::size_t locked0 = locked_kib();
  void* p = Memory::host_alloc(100 * KiB);
  REQUIRE(p != nullptr);
  CHECK(Memory::is_pinned(p));
  CHECK(Memory::is_pinned(static_cast<char*>(p) + 100 * KiB - 1));
  CHECK_FALSE(Memory::on_accelerator(p));
  if (mlock_observable) CHECK(locked_kib() >= locked0 + 2 * MiB / KiB);  // a whole 2 MiB segment is locked
  std::memset(p, 1, 100 * KiB);
  CHECK(Memory::host_memory_stats().allocated_bytes.all().current == static_cast<std::int64_t>(100 * KiB));
  CHECK_THROWS_WITH_AS(Memory::pin_memory(p, 10), doctest::Contains("the range is host_alloc memory, which is pinned already"),
                       accel::InvalidArgumentError);
  try {
    Memory::raw_delete(p);
    FAIL("raw_delete accepted host_alloc memory");
  } catch (const accel::InvalidArgumentError& e) {
    CHECK(std::string(e.what()).find("host_free") != std::string::npos);
  }
  Memory::host_free(p);
  void* again = Memory::host_alloc(100 * KiB);
  CHECK(again == p);  // cached
  Memory::host_free(again);
  int local = 0;
  CHECK_THROWS_AS(Memory::host_free(&local), accel::InvalidArgumentError);
  Memory::host_empty_cache();
  CHECK(Memory::host_memory_stats().reserved_bytes.all().current == 0);
  CHECK_FALSE(Memory::is_pinned(p));
}

TEST_CASE("cpu::Memory: record_stream keeps a block until the other stream has run") {
  accel::cpu::Stream user;
  const auto owner = Streams::default_stream(0);
  void* p = Memory::raw_alloc(64 * KiB, owner);
  std::atomic<bool> release{false};
  user.enqueue([&] {
    while (!release.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
  });
  Memory::record_stream(p, user);
  Memory::raw_delete(p);
  CHECK(stat("active.all.current") >= 1);
  void* q = Memory::raw_alloc(64 * KiB, owner);
  CHECK(q != p);
  release = true;
  user.synchronize();
  Memory::raw_delete(q);
  void* r = Memory::raw_alloc(64 * KiB, owner);
  CHECK(r == p);  // the event completed: p is the lowest free address again
  Memory::raw_delete(r);
}

TEST_CASE("cpu::Memory: a stream destroyed before a block used on it is freed: the use is dropped") {
  // record_stream keeps a view of the stream; once the stream is destroyed its work is done, so the
  // free records no event on it (which would touch a stream that no longer exists) and the block is
  // cached for its own stream at once. And the destroyed stream's own cached blocks serve any stream.
  const auto owner = Streams::default_stream(0);
  void* p = Memory::raw_alloc(64 * KiB, owner);
  {
    accel::cpu::Stream user;
    std::atomic<int> ran{0};
    user.enqueue([&] { ran.fetch_add(1); });
    Memory::record_stream(p, user);
    void* own = Memory::raw_alloc(3 * MiB, user);  // the stream's own block: cached for it when freed
    Memory::raw_delete(own);
    user.synchronize();
    CHECK(ran.load() == 1);
  }
  const auto active = stat("active.all.current");
  Memory::raw_delete(p);
  CHECK(stat("active.all.current") == active - 1);  // not pending on an event
  void* again = Memory::raw_alloc(64 * KiB, owner);
  CHECK(again == p);
  accel::cpu::Stream next;
  const auto segments_made = stat("num_device_alloc");
  void* taken = Memory::raw_alloc(3 * MiB, next);  // a destroyed stream's cached block, not a new segment
  CHECK(stat("num_device_alloc") == segments_made);
  CHECK(taken != nullptr);
  Memory::raw_delete(taken);
  Memory::raw_delete(again);
}

TEST_CASE("cpu::Memory: empty_cache waits for events without holding the allocator") {
  // A task on the stream that empty_cache waits for allocates: it must not deadlock.
  accel::cpu::Stream user;
  const auto owner = Streams::default_stream(0);
  std::atomic<bool> go{false};
  std::atomic<bool> allocated{false};
  user.enqueue([&] {
    while (!go.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
    void* t = Memory::raw_alloc(KiB, Streams::default_stream(0));
    Memory::raw_delete(t);
    allocated = true;
  });
  void* p = Memory::raw_alloc(64 * KiB, owner);
  Memory::record_stream(p, user);
  Memory::raw_delete(p);
  std::thread starter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    go = true;
  });
  const auto syncs = stat("num_sync_all_streams");
  Memory::empty_cache();  // waits for `user`, whose task allocates meanwhile
  starter.join();
  CHECK(allocated.load());
  CHECK(stat("num_sync_all_streams") == syncs + 1);
  CHECK(stat("active.all.current") == 0);
}

TEST_CASE("cpu::Memory: every logical device has its own allocator") {
  const int n = accel::cpu::Devices::device_count();
  if (n < 2) {
    MESSAGE("one CPU device; multi-device cases run with ACCEL_CPU_DEVICE_COUNT=2");
    return;
  }
  const auto s1 = Streams::default_stream(1);
  const std::size_t base0 = Memory::memory_allocated(0);
  const std::size_t base1 = Memory::memory_allocated(1);
  void* p = Memory::raw_alloc(10 * KiB, s1);
  CHECK(Memory::memory_allocated(1) == base1 + 10 * KiB);
  CHECK(Memory::memory_allocated(0) == base0);
  CHECK(Memory::allocator(1).owns(p));
  CHECK_FALSE(Memory::allocator(0).owns(p));
  CHECK(Memory::on_accelerator(p));
  CHECK(Memory::get_memory_info(1).total == Memory::total_memory(0));
  {
    accel::cpu::Stream other(1);
    Memory::record_stream(p, other);  // found on device 1 (device 0's allocator is asked first)
    other.synchronize();
  }
  {
    accel::cpu::Devices::DeviceGuard guard(0);
    Memory::raw_delete(p);  // found on device 1 although device 0 is current
  }
  CHECK(Memory::memory_allocated(1) == base1);
  int local = 0;
  try {
    Memory::raw_delete(&local);
    FAIL("freed a stack address");
  } catch (const accel::InvalidArgumentError& e) {
    CHECK(std::string(e.what()).find("any of the " + std::to_string(n) + " cpu devices") != std::string::npos);
  }
}

TEST_CASE("Buffer: typed, owning, move-only memory on a stream") {
  static_assert(!std::is_copy_constructible_v<accel::FloatBuffer<HostBackend>>);
  static_assert(std::is_nothrow_move_constructible_v<accel::FloatBuffer<HostBackend>>);
  static_assert(std::is_same_v<accel::HalfBuffer<HostBackend>::value_type, accel::half>);
  static_assert(std::is_same_v<accel::BFloat16Buffer<HostBackend>::value_type, accel::bfloat16>);
  static_assert(std::is_same_v<accel::IntBuffer<HostBackend>::value_type, std::int32_t>);
  static_assert(std::is_same_v<accel::LongBuffer<HostBackend>::value_type, std::int64_t>);
  static_assert(std::is_same_v<accel::ByteBuffer<HostBackend>::value_type, std::uint8_t>);
  static_assert(std::is_same_v<accel::DoubleBuffer<HostBackend>::value_type, double>);

  const std::size_t base = Memory::memory_allocated();
  {
    accel::FloatBuffer<HostBackend> w(1000);
    CHECK(w.size() == 1000);
    CHECK(w.bytes() == 4000);
    CHECK_FALSE(w.empty());
    CHECK(w.device_index() == 0);
    CHECK(w.stream() == Streams::current_stream());
    CHECK(Memory::memory_allocated() == base + 4096);
    CHECK(Memory::on_accelerator(w.data()));
    auto span = w.span();
    std::iota(span.begin(), span.end(), 0.0F);
    CHECK(w.data()[999] == 999.0F);

    accel::FloatBuffer<HostBackend> moved = std::move(w);
    CHECK(moved.size() == 1000);
    CHECK(w.empty());  // NOLINT(bugprone-use-after-move)
    CHECK(w.data() == nullptr);
    CHECK(moved.span()[10] == 10.0F);

    accel::cpu::Stream side;
    accel::HalfBuffer<HostBackend> h(10, side);
    CHECK(h.stream() == accel::cpu::StreamRef(side));
    h.record_stream(Streams::default_stream(0));
    accel::ByteBuffer<HostBackend> bytes(0);
    CHECK(bytes.empty());
    CHECK(bytes.data() == nullptr);
    moved = accel::FloatBuffer<HostBackend>(1);
    CHECK(Memory::memory_allocated() == base + 512 + 512);
    side.synchronize();
  }
  CHECK(Memory::memory_allocated() == base);

  accel::LongBuffer<HostBackend> none;
  CHECK(none.empty());
  CHECK_THROWS_AS((void)none.stream(), accel::InvalidStateError);
  CHECK_THROWS_AS(accel::LongBuffer<HostBackend>(std::numeric_limits<std::size_t>::max() / 4), accel::OutOfMemoryError);
}
