// accel/memory/detail/oom_path.hpp — the pieces of a CachingAllocator's OOM path: which cached segments
// to give back before a new segment is asked for (torch's release_available_cached_blocks and
// garbage_collect_cached_blocks), and the OutOfMemoryError that ends it.
//
// The two release steps walk one pool's tree of free blocks and call `release(block)` for the whole
// segments (unsplit blocks) they choose; the allocator's release returns the segment to the raw
// allocator and erases the block from the pool, so the walks step past a block before releasing it.
// The ladder itself (release, retry, then throw) is CachingAllocator::alloc_new_segment.
#pragma once

#include <accel/core/error.hpp>
#include <accel/detail/min_max.hpp>
#include <accel/memory/allocator_config.hpp>
#include <accel/memory/detail/caching_block.hpp>
#include <accel/memory/detail/caching_rules.hpp>
#include <accel/memory/detail/raw_memory_policy.hpp>

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>

namespace accel::detail {

// With max_split_size set: releases one cached oversize block that fits, or oversize blocks of this
// stream, largest first, until `size` bytes are released. True when enough was released.
template <class Pool, class Release>
bool release_available_cached_blocks(Pool& pool, std::uint64_t stream_id, std::size_t size, std::size_t max_split,
                                     Release release) noexcept {
  if (max_split == AllocatorConfig::unlimited) return false;
  const std::size_t key_size = max_of(size, max_split);
  auto it = pool.blocks.lower_bound(BlockKey{stream_id, key_size, 0}, BlockLess{});
  if (it == pool.blocks.end() || it->stream_id != stream_id) {
    if (it == pool.blocks.begin()) return false;
    std::size_t released = 0;
    --it;
    while (released < key_size && it->size >= max_split && it->stream_id == stream_id) {
      const auto current = it;
      const bool is_first = current == pool.blocks.begin();
      if (!is_first) --it;
      auto* block = &*current;
      if (!block->is_split()) {
        released += block->size;
        release(block);
      }
      if (is_first) break;
    }
    return released >= key_size;
  }
  if (it->is_split()) return false;
  release(&*it);
  return true;
}

// Frees old unsplit blocks of `pool` (the large one), without synchronizing, until `reserved` is down
// to `threshold` (garbage_collection_threshold * the allowed maximum) or nothing old enough is left.
template <class Pool, class Release>
void garbage_collect_cached_blocks(Pool& pool, std::size_t reserved, std::size_t threshold, Release release) noexcept {
  if (reserved <= threshold) return;
  const std::size_t target = reserved - threshold;
  using Block = typename Pool::Block;
  const auto age = [&pool](const Block* b) { return pool.get_free_blocks_call_count - b->gc_count_base; };
  std::uint64_t total_age = 0;
  std::uint64_t freeable = 0;
  for (const Block& b : pool.blocks) {
    if (!b.is_split()) {
      total_age += age(&b);
      ++freeable;
    }
  }
  std::size_t reclaimed = 0;
  bool freed = true;
  while (reclaimed < target && freed && freeable > 0) {
    const double age_threshold = static_cast<double>(total_age) / static_cast<double>(freeable);
    freed = false;
    for (auto it = pool.blocks.begin(); it != pool.blocks.end();) {
      Block* b = &*it;
      ++it;
      if (!b->is_split() && static_cast<double>(age(b)) >= age_threshold) {
        freed = true;
        reclaimed += b->size;
        total_age -= age(b);
        --freeable;
        release(b);
      }
    }
  }
}

// The OutOfMemoryError of `device`, named `name`: `figures` as the allocator knows them, completed with
// the raw policy's memory_info (best effort) and oom_hint. figures.alloc_size 0: what could not be had is
// the allocator's own bookkeeping, not a segment. No std::bad_alloc for a long message: a short one.
template <class RawMemory>
OutOfMemoryError out_of_memory_error(int device, const std::string& name, caching::OomFigures figures) {
  const std::size_t requested = figures.requested;
  try {
    figures.device = name;
    try {
      const MemoryInfo info = RawMemory::memory_info(device);
      figures.free = info.free;
      figures.total = info.total;
    } catch (...) {  // the figures are best effort; the error is the out-of-memory one
    }
    if constexpr (RawMemoryWithOomHint<RawMemory>) figures.hint = RawMemory::oom_hint(device);
    return OutOfMemoryError(caching::out_of_memory_message(figures), requested);
  } catch (const std::bad_alloc&) {  // no memory left even for the message: a short one
    return OutOfMemoryError("out of memory (and of memory to describe it)", requested);
  }
}

}  // namespace accel::detail
