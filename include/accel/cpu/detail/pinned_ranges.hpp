// accel/cpu/detail/pinned_ranges.hpp — the host ranges pin_memory page-locked, and mlock over them.
//
// The ranges are kept as the caller gave them (start -> bytes), so that unpin_memory(p) finds the one
// that starts at p; mlock and munlock work on whole pages, and a page that a neighbouring range shares
// stays locked when one of them is unpinned. An mlock that fails part-way (a hole in the range: Linux
// locks the mappings before it, then reports ENOMEM) is undone. The mutex is held across fork()
// (cpu/memory.hpp's fork handlers take it).
#pragma once

#include <accel/core/error.hpp>
#include <accel/cpu/detail/host_pages.hpp>

#include <sys/mman.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace accel::cpu::detail {

struct PinnedRanges {
  std::mutex mutex;
  std::map<std::uintptr_t, std::size_t> ranges;  // start -> bytes, as the caller gave them
};

inline PinnedRanges& pinned() {
  static PinnedRanges* r = new PinnedRanges;
  return *r;
}

// Unlocks the pages of [start, end) that no recorded range touches: locks do not nest, so a page a
// neighbour shares stays locked. [start, end) itself is not recorded (any more) and overlaps none.
inline void unlock_unshared_pages(const PinnedRanges& state, std::uintptr_t start, std::uintptr_t end) noexcept {
  const std::size_t page = host_page_size();
  std::uintptr_t first = start & ~(std::uintptr_t{page} - 1);
  std::uintptr_t last = (end + page - 1) & ~(std::uintptr_t{page} - 1);
  const auto next = state.ranges.lower_bound(start);
  if (next != state.ranges.begin()) {
    const auto prev = std::prev(next);
    if (prev->first + prev->second > first) first += page;
  }
  if (next != state.ranges.end() && next->first < last) last -= page;
  if (first < last) ::munlock(reinterpret_cast<void*>(first), last - first);
}

/// Page-locks [start, start + bytes) and records it; `what` names the call in errors. Throws
/// InvalidArgumentError when the range overlaps a recorded one, accel::Error when mlock fails.
inline void pin_range(std::uintptr_t start, std::size_t bytes, const std::string& what) {
  const std::uintptr_t end = start + bytes;
  auto& state = pinned();
  std::lock_guard lock(state.mutex);
  const auto next = state.ranges.lower_bound(start);
  const auto overlapping = [&]() -> const std::pair<const std::uintptr_t, std::size_t>* {
    if (next != state.ranges.end() && next->first < end) return &*next;
    if (next != state.ranges.begin()) {
      const auto prev = std::prev(next);
      if (prev->first + prev->second > start) return &*prev;
    }
    return nullptr;
  }();
  if (overlapping != nullptr) {
    throw InvalidArgumentError(what + ": the range overlaps the range pinned at " +
                               address_text(reinterpret_cast<const void*>(overlapping->first)) + " (" +
                               std::to_string(overlapping->second) + " bytes); unpin that first");
  }
  const std::size_t page = host_page_size();
  const std::uintptr_t first = start & ~(std::uintptr_t{page} - 1);
  const std::uintptr_t last = (end + page - 1) & ~(std::uintptr_t{page} - 1);
  if (::mlock(reinterpret_cast<void*>(first), last - first) != 0) {
    const int err = errno;
    unlock_unshared_pages(state, start, end);  // what it locked before failing
    throw Error(Errc::runtime_failure,
                what + " failed: mlock: " + errno_text(err) + " (errno " + std::to_string(err) + "). " +
                    (err == ENOMEM ? "Either part of the range is not mapped, or the limit was reached. " : "") +
                    memlock_hint(),
                err);
  }
  state.ranges.emplace(start, bytes);
}

/// Unlocks the range recorded at `start`; false (and nothing changes) when none starts there.
inline bool unpin_range(std::uintptr_t start) {
  auto& state = pinned();
  std::lock_guard lock(state.mutex);
  const auto it = state.ranges.find(start);
  if (it == state.ranges.end()) return false;
  const std::uintptr_t end = start + it->second;
  state.ranges.erase(it);
  unlock_unshared_pages(state, start, end);
  return true;
}

/// Whether `address` lies inside a recorded range.
inline bool in_pinned_range(std::uintptr_t address) {
  auto& state = pinned();
  std::lock_guard lock(state.mutex);
  auto it = state.ranges.upper_bound(address);
  if (it == state.ranges.begin()) return false;
  --it;
  return address - it->first < it->second;
}

}  // namespace accel::cpu::detail
