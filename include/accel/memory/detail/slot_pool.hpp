// accel/memory/detail/slot_pool.hpp — fixed-size slots on a free list, for the caching allocator's own
// bookkeeping (its blocks, its segment records, its segment map's nodes).
//
// take() and give() are a pointer pop and push, so the allocator's hot path never calls malloc. The
// slots live in chunks mapped from the system (mmap: what trim() gives back leaves the process's
// resident memory, whatever malloc's thresholds would do with it; operator new under ASan, below). Chunks grow geometrically, 64 slots
// first and then as many as exist already, up to 4096 slots a chunk, so a pool that once held a
// million blocks did it with a few hundred mappings. trim() unmaps every chunk whose slots are all
// free: the allocator calls it from empty_cache(), so that its bookkeeping shrinks with its cache
// (after a peak of a million blocks, ~130 MiB of records would otherwise stay resident).
// reserve(n) is the only member that allocates; it throws std::bad_alloc (address-space limit,
// `ulimit -v`) and then leaves the pool as it was. Not thread-safe: used under the allocator's mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

// LeakSanitizer scans the heap, not memory mapped outside it: under it (ASan), chunks come from
// operator new, so that what a block points to (its record_stream vector) stays reachable.
#if defined(__SANITIZE_ADDRESS__)
#define ACCEL_SLOT_POOL_LEAK_CHECKED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
#define ACCEL_SLOT_POOL_LEAK_CHECKED 1
#endif
#endif
#if __has_include(<sys/mman.h>) && !defined(ACCEL_SLOT_POOL_LEAK_CHECKED)
#include <sys/mman.h>
#define ACCEL_SLOT_POOL_MMAP 1
#endif

namespace accel::detail {

template <std::size_t SlotSize, std::size_t SlotAlign>
class SlotPool {
 public:
  static_assert(SlotSize >= sizeof(void*) && SlotSize % SlotAlign == 0 && SlotAlign % alignof(void*) == 0 &&
                    SlotAlign <= 4096,
                "a slot holds a free-list link; chunks are page-aligned");
  static constexpr std::size_t first_chunk_slots = 64;
  static constexpr std::size_t max_chunk_slots = 4096;

  SlotPool() = default;
  SlotPool(const SlotPool&) = delete;
  SlotPool& operator=(const SlotPool&) = delete;
  ~SlotPool() {
    for (const Chunk& c : chunks_) unmap(c.base, c.bytes);
  }

  /// A free slot; reserve() made sure there is one.
  [[nodiscard]] void* take() noexcept {
    FreeSlot* slot = free_;
    free_ = slot->next;
    --free_count_;
    return slot;
  }
  void give(void* p) noexcept {
    free_ = ::new (p) FreeSlot{free_};
    ++free_count_;
  }

  /// Ensures that the next n take() calls find a slot. Throws std::bad_alloc, changing nothing.
  [[gnu::always_inline]] void reserve(std::size_t n) {
    if (free_count_ < n) [[unlikely]] grow_to(n);
  }
  [[nodiscard]] bool has(std::size_t n) const noexcept { return free_count_ >= n; }

  /// Unmaps every chunk none of whose slots is in use. Never throws (without memory for its
  /// per-chunk counts it keeps what it has).
  void trim() noexcept {
    if (chunks_.empty()) return;
    if (free_count_ == total_slots_) {  // nothing in use: everything goes
      for (const Chunk& c : chunks_) unmap(c.base, c.bytes);
      chunks_.clear();
      chunks_.shrink_to_fit();
      free_ = nullptr;
      free_count_ = total_slots_ = 0;
      return;
    }
    try {
      std::vector<std::size_t> free_in(chunks_.size(), 0);
      for (FreeSlot* s = free_; s != nullptr; s = s->next) ++free_in[chunk_of(s)];
      std::vector<bool> drop(chunks_.size(), false);
      bool any = false;
      for (std::size_t i = 0; i < chunks_.size(); ++i) {
        drop[i] = free_in[i] == chunks_[i].bytes / SlotSize;
        any = any || drop[i];
      }
      if (!any) return;
      FreeSlot* kept = nullptr;  // the free list without the slots of dropped chunks, in the same order
      FreeSlot** tail = &kept;
      for (FreeSlot* s = free_; s != nullptr; s = s->next) {
        if (drop[chunk_of(s)]) continue;
        *tail = s;
        tail = &s->next;
      }
      *tail = nullptr;
      free_ = kept;
      std::size_t out = 0;
      for (std::size_t i = 0; i < chunks_.size(); ++i) {
        const std::size_t slots = chunks_[i].bytes / SlotSize;
        if (drop[i]) {
          unmap(chunks_[i].base, chunks_[i].bytes);
          free_count_ -= slots;
          total_slots_ -= slots;
        } else {
          chunks_[out++] = chunks_[i];
        }
      }
      chunks_.resize(out);
    } catch (...) {  // no memory for the counts: keep every chunk
    }
  }

  /// Bytes of chunks held (in use or free).
  [[nodiscard]] std::size_t bytes() const noexcept {
    std::size_t sum = 0;
    for (const Chunk& c : chunks_) sum += c.bytes;
    return sum;
  }

 private:
  struct FreeSlot {
    FreeSlot* next;
  };
  struct Chunk {
    unsigned char* base;
    std::size_t bytes;
  };

  [[gnu::noinline]] void grow_to(std::size_t n) {
    while (free_count_ < n) grow();
  }

  void grow() {
    std::size_t slots = total_slots_ < first_chunk_slots ? first_chunk_slots : total_slots_;
    if (slots > max_chunk_slots) slots = max_chunk_slots;
    constexpr std::size_t page = 4096;  // whole pages: the mapping is made of them anyway
    const std::size_t bytes = (slots * SlotSize + page - 1) / page * page;
    slots = bytes / SlotSize;
    // chunks_ stays sorted by address (trim looks slots up in it); its storage is taken before the
    // mapping, so that nothing can fail once the chunk exists.
    chunks_.reserve(chunks_.size() + 1);
    auto* base = static_cast<unsigned char*>(map(bytes));
    std::size_t at = chunks_.size();
    while (at > 0 && chunks_[at - 1].base > base) --at;
    chunks_.insert(chunks_.begin() + static_cast<std::ptrdiff_t>(at), Chunk{base, bytes});
    for (std::size_t i = slots; i-- > 0;) give(base + i * SlotSize);
    total_slots_ += slots;
  }

  // The index of the chunk holding slot p (chunks_ is sorted by address).
  [[nodiscard]] std::size_t chunk_of(const void* p) const noexcept {
    const auto* address = static_cast<const unsigned char*>(p);
    std::size_t lo = 0;
    std::size_t hi = chunks_.size();
    while (hi - lo > 1) {
      const std::size_t mid = lo + (hi - lo) / 2;
      if (chunks_[mid].base <= address) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    return lo;
  }

  static void* map(std::size_t bytes) {
#if defined(ACCEL_SLOT_POOL_MMAP)
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return p;
#else
    return ::operator new(bytes);
#endif
  }
  static void unmap(void* p, std::size_t bytes) noexcept {
#if defined(ACCEL_SLOT_POOL_MMAP)
    ::munmap(p, bytes);
#else
    (void)bytes;
    ::operator delete(p);
#endif
  }

  FreeSlot* free_ = nullptr;
  std::size_t free_count_ = 0;
  std::size_t total_slots_ = 0;
  std::vector<Chunk> chunks_;  // sorted by base address
};

}  // namespace accel::detail
