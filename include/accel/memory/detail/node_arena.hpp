// accel/memory/detail/node_arena.hpp — fixed-size node recycling for the allocator's containers.
//
// NodeArena hands out 64-byte slots from 4 KiB chunks and takes them back onto a free list; it frees
// its chunks only when destroyed. ArenaAllocator<T> is a standard allocator over it, so a node-based
// container (the allocator's segment map) inserts and erases without calling malloc once warm. Not thread-safe: used under
// the caching allocator's mutex. reserve(n) lets the allocator take memory for its bookkeeping
// before it changes any state, so a std::bad_alloc there leaves everything as it was.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace accel::detail {

class NodeArena {
 public:
  static constexpr std::size_t slot_size = 64;
  static constexpr std::size_t slots_per_chunk = 64;

  NodeArena() = default;
  NodeArena(const NodeArena&) = delete;
  NodeArena& operator=(const NodeArena&) = delete;
  ~NodeArena() {
    for (void* chunk : chunks_) ::operator delete(chunk);
  }

  [[nodiscard]] void* allocate() {
    if (free_ == nullptr) grow();
    FreeSlot* slot = free_;
    free_ = slot->next;
    --free_count_;
    return slot;
  }

  void deallocate(void* p) noexcept {
    auto* slot = static_cast<FreeSlot*>(p);
    slot->next = free_;
    free_ = slot;
    ++free_count_;
  }

  /// Ensures that the next n allocate() calls do not allocate.
  [[gnu::always_inline]] void reserve(std::size_t n) {
    if (free_count_ < n) [[unlikely]] grow_to(n);
  }

 private:
  struct FreeSlot {
    FreeSlot* next;
  };

  [[gnu::noinline]] void grow_to(std::size_t n) {
    while (free_count_ < n) grow();
  }
  void grow() {
    chunks_.reserve(chunks_.size() + 1);
    auto* chunk = static_cast<unsigned char*>(::operator new(slot_size * slots_per_chunk));
    chunks_.push_back(chunk);
    for (std::size_t i = slots_per_chunk; i-- > 0;) deallocate(chunk + i * slot_size);
  }

  FreeSlot* free_ = nullptr;
  std::size_t free_count_ = 0;
  std::vector<void*> chunks_;
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
