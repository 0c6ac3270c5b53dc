// accel/memory/detail/pending_frees.hpp — freed blocks that wait for the streams that used them.
//
// record_stream(p, s) marks p as used on s; when p is freed an event is recorded on every such s and
// the block stays active (not allocated) until those events complete (event_count). The events are
// kept per stream, in record order: process() polls them (at the start of each allocation, while any
// are pending) and synchronize() waits for all (empty_cache and the OOM path). The allocator owns one
// PendingFrees and calls it under its lock; `free_block` returns a block to its pool.
#pragma once

#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <utility>

namespace accel::detail {

template <class RawMemory, class Block>
class PendingFrees {
 public:
  using event_type = typename RawMemory::event_type;

  [[nodiscard]] bool empty() const noexcept { return events_.empty(); }

  /// `block` waits for `event` (recorded on stream `stream_id`) too. When there is no room to track
  /// it, waits for the event now instead.
  void add(std::uint64_t stream_id, event_type&& event, Block* block) {
    try {
      events_[stream_id].emplace_back(std::move(event), block);
      ++block->event_count;
    } catch (...) {
      RawMemory::event_synchronize(event);  // no room to track it: wait for it now
    }
  }

  /// Frees (free_block) the blocks whose last pending event completed; never blocks.
  template <class FreeBlock>
  void process(FreeBlock free_block) {
    for (auto it = events_.begin(); it != events_.end();) {
      EventQueue& queue = it->second;
      while (!queue.empty()) {
        if (!RawMemory::event_done(queue.front().first)) break;
        Block* block = queue.front().second;
        queue.pop_front();
        if (--block->event_count == 0) free_block(block);
      }
      it = queue.empty() ? events_.erase(it) : std::next(it);
    }
  }

  // Waits for every pending event and frees the blocks that were waiting. The waiting happens with
  // the lock released: on a backend whose streams run host tasks (CPU), a task may itself allocate.
  // Meanwhile the blocks stay pending (event_count > 0), so nobody else can take them. `relocked()`
  // runs as soon as the lock is held again, before any block is freed (the allocator finishes a free
  // another thread left unmerged meanwhile).
  template <class Lock, class Relocked, class FreeBlock>
  void synchronize(Lock& lock, Relocked relocked, FreeBlock free_block) {
    if (events_.empty()) return;
    std::map<std::uint64_t, EventQueue> pending;
    pending.swap(events_);
    lock.unlock();
    std::exception_ptr failure;
    try {
      for (auto& [stream, queue] : pending) {
        for (auto& [event, block] : queue) RawMemory::event_synchronize(event);
      }
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    relocked();
    if (failure) {  // put the events back as they were; nothing is freed
      for (auto& [stream, queue] : pending) {
        EventQueue& target = events_[stream];
        for (auto& entry : queue) target.push_back(std::move(entry));
      }
      std::rethrow_exception(failure);
    }
    for (auto& [stream, queue] : pending) {
      for (auto& [event, block] : queue) {
        if (--block->event_count == 0) free_block(block);
      }
    }
  }

  /// Waits for every pending event, freeing nothing (the allocator is being destroyed).
  void wait_all() {
    for (auto& [id, queue] : events_) {
      for (auto& pending : queue) RawMemory::event_synchronize(pending.first);
    }
  }

 private:
  using EventQueue = std::deque<std::pair<event_type, Block*>>;
  std::map<std::uint64_t, EventQueue> events_;  // per stream, in record order
};

}  // namespace accel::detail
