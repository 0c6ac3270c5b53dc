// accel/memory/detail/node_arena.hpp — fixed-size node recycling for the allocator's containers.
//
// NodeArena hands out 64-byte slots from a SlotPool (memory/detail/slot_pool.hpp) and takes them back
// onto its free list; trim() gives back the chunks whose slots are all free. ArenaAllocator<T> is a
// standard allocator over it, so a node-based container (the allocator's segment map) inserts and
// erases without calling malloc once warm. Not thread-safe: used under the caching allocator's mutex.
// reserve(n) lets the allocator take memory for its bookkeeping before it changes any state, so a
// std::bad_alloc there leaves everything as it was.
#pragma once

#include <accel/memory/detail/slot_pool.hpp>

#include <cstddef>
#include <new>

namespace accel::detail {

class NodeArena {
 public:
  static constexpr std::size_t slot_size = 64;

  NodeArena() = default;
  NodeArena(const NodeArena&) = delete;
  NodeArena& operator=(const NodeArena&) = delete;

  [[nodiscard]] void* allocate() {
    slots_.reserve(1);
    return slots_.take();
  }
  void deallocate(void* p) noexcept { slots_.give(p); }

  /// Ensures that the next n allocate() calls do not allocate.
  [[gnu::always_inline]] void reserve(std::size_t n) { slots_.reserve(n); }
  [[nodiscard]] bool has(std::size_t n) const noexcept { return slots_.has(n); }
  /// Gives back the chunks whose nodes are all free.
  void trim() noexcept { slots_.trim(); }
  [[nodiscard]] std::size_t bytes() const noexcept { return slots_.bytes(); }

 private:
  SlotPool<slot_size, alignof(std::max_align_t)> slots_;
};

/// A standard allocator that serves single nodes of up to 64 bytes from a NodeArena.
template <class T>
class ArenaAllocator {
 public:
  using value_type = T;

  explicit ArenaAllocator(NodeArena* arena) noexcept : arena_(arena) {}
  template <class U>
  ArenaAllocator(const ArenaAllocator<U>& other) noexcept : arena_(other.arena()) {}  // NOLINT

  [[nodiscard]] T* allocate(std::size_t n) {
    if (fits(n)) return static_cast<T*>(arena_->allocate());
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (fits(n)) {
      arena_->deallocate(p);
    } else {
      ::operator delete(p);
    }
  }

  [[nodiscard]] NodeArena* arena() const noexcept { return arena_; }
  template <class U>
  bool operator==(const ArenaAllocator<U>& other) const noexcept {
    return arena_ == other.arena();
  }

 private:
  static constexpr bool fits(std::size_t n) noexcept {
    return n == 1 && sizeof(T) <= NodeArena::slot_size && alignof(T) <= alignof(std::max_align_t);
  }
  NodeArena* arena_;
};

}  // namespace accel::detail
