// accel/memory/detail/segment_info.hpp — what CachingAllocator::snapshot() reports: its segments and
// their blocks, as torch.cuda.memory_snapshot() does (without allocation stack traces); and
// describe_segment, which reads them off a segment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace accel {

/// One block of a segment.
struct BlockInfo {
  enum class State : std::uint8_t {
    active_allocated,     ///< allocated
    active_pending_free,  ///< freed, waiting for events recorded on the streams it was used on
    inactive,             ///< free, cached
  };
  std::uintptr_t address = 0;
  std::size_t size = 0;
  std::size_t requested_size = 0;  ///< 0 unless active
  State state = State::inactive;
};

/// One segment obtained from the raw allocator, with its blocks in address order.
struct SegmentInfo {
  std::uintptr_t address = 0;
  std::size_t total_size = 0;
  std::size_t allocated_size = 0;
  std::size_t active_size = 0;
  std::uint64_t stream = 0;  ///< id of the stream whose blocks these are (2^64 - 1: a retired stream's)
  bool is_small_pool = false;
  std::uint64_t pool_id = 0;  ///< the graph memory pool owning it (GraphPoolId::id); 0: ordinary pools
  std::vector<BlockInfo> blocks;
};

namespace detail {

/// What snapshot() reports of one segment (a CachingSegment, memory/detail/caching_block.hpp).
/// Neighbouring free blocks are reported as the one block they are about to become: the allocator
/// merges them, except the block it freed last while it waits to be merged (CachingAllocator's
/// last_freed_).
template <class Segment>
SegmentInfo describe_segment(const Segment& segment) {
  SegmentInfo info;
  info.address = segment.ptr;
  info.total_size = segment.size;
  info.stream = segment.stream_id;
  info.is_small_pool = segment.small;
  info.pool_id = segment.owner != nullptr ? segment.owner->id : 0;
  for (const auto* b = segment.head; b != nullptr; b = b->next) {
    BlockInfo bi;
    bi.address = b->ptr;
    bi.size = b->size;
    if (b->allocated) {
      bi.state = BlockInfo::State::active_allocated;
      bi.requested_size = b->requested_size;
      info.allocated_size += b->size;
      info.active_size += b->size;
    } else if (b->event_count > 0) {
      bi.state = BlockInfo::State::active_pending_free;
      bi.requested_size = b->requested_size;
      info.active_size += b->size;
    } else if (!info.blocks.empty() && info.blocks.back().state == BlockInfo::State::inactive) {
      info.blocks.back().size += b->size;
      continue;
    }
    info.blocks.push_back(bi);
  }
  return info;
}

}  // namespace detail
}  // namespace accel
