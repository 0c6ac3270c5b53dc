// accel/cpu/detail/host_pages.hpp — the CPU backend's raw host memory: pages and their release.
//
// What the raw policies of cpu/memory.hpp stand on: the page size, the host's physical and available
// memory (/proc/meminfo, within the process's cgroup memory limit: cpu/detail/cgroup.hpp), anonymous mappings (2 MiB aligned and THP-advised from 2 MiB up), the mlock
// error and its RLIMIT_MEMLOCK hint, and the deferred release of segments that queued stream work may
// still use (release_segment).
#pragma once

#include <accel/cpu/detail/cgroup.hpp>
#include <accel/cpu/detail/stream_registry.hpp>
#include <accel/cpu/detail/stream_state.hpp>
#include <accel/detail/min_max.hpp>
#include <accel/memory/detail/caching_rules.hpp>

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace accel::cpu::detail {

inline std::size_t host_page_size() noexcept {
  static const std::size_t size = [] {
    const long p = ::sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<std::size_t>(p) : std::size_t{4096};
  }();
  return size;
}

/// A field of /proc/meminfo in bytes ("MemAvailable"), or 0 when it cannot be read.
inline std::size_t meminfo_bytes(const char* field) noexcept {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return 0;
  char line[256];
  std::size_t bytes = 0;
  const std::size_t len = std::strlen(field);
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, field, len) == 0 && line[len] == ':') {
      unsigned long long kib = 0;
      if (std::sscanf(line + len + 1, "%llu", &kib) == 1) bytes = static_cast<std::size_t>(kib) * 1024;
      break;
    }
  }
  std::fclose(f);
  return bytes;
}

/// Physical RAM of the host (sysconf, else /proc/meminfo's MemTotal), or the process's cgroup memory
/// limit where that is smaller (a container's: the kernel kills past it). Read once.
inline std::size_t physical_memory() noexcept {
  static const std::size_t total = [] {
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    std::size_t ram = pages > 0 ? static_cast<std::size_t>(pages) * host_page_size() : meminfo_bytes("MemTotal");
    if (const auto cgroup = memory_limit()) ram = accel::detail::min_of(ram, static_cast<std::size_t>(cgroup->limit));
    return ram;
  }();
  return total;
}

/// MemAvailable (MemFree on kernels without it), at most the physical total and the room left under
/// the process's cgroup memory limits.
inline std::size_t available_host_memory() noexcept {
  std::size_t free = meminfo_bytes("MemAvailable");
  if (free == 0) free = meminfo_bytes("MemFree");
  if (const auto cgroup = memory_limit()) free = accel::detail::min_of(free, static_cast<std::size_t>(cgroup->room));
  return accel::detail::min_of(free, physical_memory());
}

inline constexpr std::size_t huge_page = std::size_t{2} << 20;
inline constexpr std::size_t heap_threshold = std::size_t{64} << 10;  // below: aligned_alloc

/// `bytes` of zero-filled anonymous memory; from 2 MiB up aligned to 2 MiB and advised for
/// transparent huge pages. nullptr on failure.
inline void* map_pages(std::size_t bytes) noexcept {
  const std::size_t page = host_page_size();
  const std::size_t length = (bytes + page - 1) / page * page;
  if (length < huge_page) {
    void* p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  void* raw = ::mmap(nullptr, length + huge_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto base = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (base + huge_page - 1) & ~(std::uintptr_t{huge_page} - 1);
  if (aligned > base) ::munmap(raw, aligned - base);
  const std::uintptr_t tail = base + length + huge_page - (aligned + length);
  if (tail > 0) ::munmap(reinterpret_cast<void*>(aligned + length), tail);
#if defined(MADV_HUGEPAGE)
  ::madvise(reinterpret_cast<void*>(aligned), length, MADV_HUGEPAGE);
#endif
  return reinterpret_cast<void*>(aligned);
}

inline void unmap_pages(void* p, std::size_t bytes) noexcept {
  const std::size_t page = host_page_size();
  ::munmap(p, (bytes + page - 1) / page * page);
}

inline std::string errno_text(int err) {
  char buf[128];
  // GNU strerror_r may return a static string instead of filling buf.
  const auto text = [&](auto result) -> std::string {
    if constexpr (std::is_same_v<decltype(result), char*>) {
      return result;
    } else {
      return result == 0 ? buf : "error " + std::to_string(err);
    }
  };
  return text(::strerror_r(err, buf, sizeof buf));
}

/// "the locked-memory limit RLIMIT_MEMLOCK is 8.00 MiB (ulimit -l) ..." — what to do when mlock fails.
inline std::string memlock_hint() {
  std::string limit = "unknown";
  rlimit rl{};
  if (::getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
    limit = rl.rlim_cur == RLIM_INFINITY ? "unlimited" : caching::format_size(rl.rlim_cur);
  }
  return "The locked-memory limit RLIMIT_MEMLOCK is " + limit +
         " (see `ulimit -l`); raise it (ulimit -l unlimited, `memlock` in /etc/security/limits.conf, "
         "docker run --ulimit memlock=-1) or grant the process CAP_IPC_LOCK.";
}

inline std::atomic<int>& last_mlock_errno() noexcept {
  static std::atomic<int> err{0};
  return err;
}

inline std::string address_text(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

// Segments the allocator gives back (empty_cache, the OOM retry) may still be used by tasks queued
// on a stream before their blocks were freed: the stream-ordered contract lets a block be freed as
// soon as its last use is enqueued. cudaFree waits for the device; here the release is deferred,
// never blocking, until every stream has run the work enqueued before it.
struct DeferredRelease {
  void* p;
  std::size_t bytes;
  bool pinned;
  std::vector<detail::StreamPoint> frontier;
};

inline void release_segment_now(void* p, std::size_t bytes, bool pinned) noexcept {
  if (pinned || bytes >= heap_threshold) {  // munmap unlocks a pinned segment's pages too
    unmap_pages(p, bytes);
  } else {
    std::free(p);
  }
}

struct DeferredReleases {
  std::mutex mutex;
  std::vector<DeferredRelease> pending;
  std::atomic<std::size_t> count{0};
};
inline DeferredReleases& deferred() {
  static auto* const instance = new DeferredReleases();  // never destroyed: used from exiting threads
  return *instance;
}

/// Releases the deferred segments whose streams have caught up. Cheap when there are none.
inline void reap_deferred_releases() noexcept {
  DeferredReleases& d = deferred();
  if (d.count.load(std::memory_order_acquire) == 0) return;
  std::vector<DeferredRelease> ready;
  {
    std::lock_guard<std::mutex> lock(d.mutex);
    for (auto it = d.pending.begin(); it != d.pending.end();) {
      bool done = true;
      for (const StreamPoint& point : it->frontier) done = done && point.done();
      if (done) {
        ready.push_back(std::move(*it));
        it = d.pending.erase(it);
      } else {
        ++it;
      }
    }
    d.count.store(d.pending.size(), std::memory_order_release);
  }
  for (auto& r : ready) release_segment_now(r.p, r.bytes, r.pinned);
}

inline void release_segment(void* p, std::size_t bytes, bool pinned) noexcept {
  reap_deferred_releases();
  try {
    std::vector<detail::StreamPoint> frontier = detail::stream_frontier();
    if (frontier.empty()) {
      release_segment_now(p, bytes, pinned);
      return;
    }
    DeferredReleases& d = deferred();
    std::lock_guard<std::mutex> lock(d.mutex);
    d.pending.push_back({p, bytes, pinned, std::move(frontier)});
    d.count.store(d.pending.size(), std::memory_order_release);
  } catch (...) {
    // Out of memory for the bookkeeping: keep the segment mapped (leaked) rather than risk a task's data.
  }
}

}  // namespace accel::cpu::detail
