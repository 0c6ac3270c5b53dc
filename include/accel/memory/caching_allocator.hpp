// accel/memory/caching_allocator.hpp — accel::CachingAllocator: torch's CUDA caching allocator, for
// every backend.
//
// One instance per device, over a raw-memory policy. It follows c10/cuda/CUDACachingAllocator.cpp:
// - sizes are rounded (memory/detail/caching_rules.hpp: 512 B steps, roundup_power2_divisions);
//   requests of <= 1 MiB come from a small pool of 2 MiB segments, larger ones from a large pool
//   (20 MiB segments for 1-10 MiB, else the size rounded to 2 MiB);
// - a free block is found best-fit by (stream id, size, address) and only on the caller's stream;
//   a found block is split when the remainder is worth keeping (small pool: >= 512 B; large pool:
//   > 1 MiB and the request is below max_split_size), and a freed block merges with free neighbours;
// - retire_stream(id): a destroyed stream whose work is done; its cached blocks go to whichever stream
//   next misses before it would ask for a new segment (best fit, a segment at a time), so that a
//   stream made per step does not cache a new working set every step;
// - record_stream(p, s) marks p as used on s; when p is freed an event is recorded on every such s and
//   the block stays active (not allocated) until those events complete (memory/detail/pending_frees.hpp).
//   Events are polled at the start of each allocation; empty_cache() and the OOM path synchronize them;
// - when no cached block fits and a new segment cannot be had: free oversize cached blocks (only when
//   max_split_size is set), then synchronize events, release every unsplit cached segment and retry
//   (num_alloc_retries), then throw accel::OutOfMemoryError (num_ooms) with the device, the request and
//   the allocated / reserved / free / total / allowed figures. A memory fraction caps reserved bytes,
//   and going over it counts as a failed raw allocation, as with torch's per-process fraction. When
//   the allocator's own records cannot grow (std::bad_alloc: `ulimit -v`, an exhausted heap), the same
//   ladder runs and the same OutOfMemoryError says so: no std::bad_alloc leaves allocate(). Which
//   cached segments the ladder gives back: memory/detail/oom_path.hpp;
// - the records of blocks and segments (memory/detail/slot_pool.hpp) and the live-block index shrink
//   with the cache at empty_cache() (bookkeeping_bytes());
// - statistics (core/memory_stats.hpp) mean what torch's mean.
// - graph pools (torch's private pools, memory/detail/graph_pools.hpp): while a graph captures on a
//   stream, begin_allocate_to_pool routes that stream's allocations to the graph's pool, whose segments
//   serve nothing else until every graph holding it released it.
// Differences: no expandable segments; a pointer that is not a live allocation is an
// InvalidArgumentError at free() (torch asserts), and changes nothing.
//
// The RawMemory policy (memory/detail/raw_memory_policy.hpp) gives raw segments, stream ids and
// events; the allocator never touches the memory it hands out.
// Thread-safe: one lock per instance (memory/detail/allocator_mutex.hpp).
//
// The hot path — a cached block on the same stream, no record_stream events pending — allocates
// nothing and calls nothing outside this header: the free blocks of a pool are an intrusive tree
// threaded through the blocks (no node per cached block), a split or merge keeps the surviving free
// block's place in the tree when its neighbours still sort around it (no rebalancing in the common
// alloc/free pattern), live blocks are found by address in an open-addressing table, statistics are
// kept in a form that costs one add per decrease (memory/detail/live_stats.hpp), and events are polled
// only while some are pending. The raw policy is called only on a miss. Shorter still, a freed block
// that was the one allocated last waits unmerged until the next operation, and an allocation that
// torch's best fit would serve with exactly that block takes it back without the merge and the split
// (a temporary allocated, freed and allocated again: 533 -> 334 instructions a pair, benchmarks/
// RESULTS.md; "the block freed last" below). Nothing of it shows: pointers, statistics and snapshot()
// are those of the merge-then-split.
#pragma once

#include <accel/core/error.hpp>
#include <accel/core/memory_stats.hpp>
#include <accel/detail/format_number.hpp>
#include <accel/detail/min_max.hpp>
#include <accel/memory/allocator_config.hpp>
#include <accel/memory/detail/allocator_mutex.hpp>
#include <accel/memory/detail/caching_block.hpp>
#include <accel/memory/detail/caching_rules.hpp>
#include <accel/memory/detail/graph_pools.hpp>
#include <accel/memory/detail/live_stats.hpp>
#include <accel/memory/detail/node_arena.hpp>
#include <accel/memory/detail/oom_path.hpp>
#include <accel/memory/detail/pending_frees.hpp>
#include <accel/memory/detail/pointer_map.hpp>
#include <accel/memory/detail/raw_memory_policy.hpp>
#include <accel/memory/detail/segment_info.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace accel {

template <RawMemoryPolicy RawMemory>
class CachingAllocator {
 public:
  using raw_memory = RawMemory;
  using stream_type = typename RawMemory::stream_type;
  using event_type = typename RawMemory::event_type;
  /// The stream id of the segments of retired streams (retire_stream), as snapshot() reports it; no
  /// stream may have it.
  static constexpr std::uint64_t retired_stream = ~std::uint64_t{0};

  /// An allocator for `device`; the configuration defaults to ACCEL_ALLOC_CONF.
  explicit CachingAllocator(int device, AllocatorConfig config = AllocatorConfig::from_env())
      : device_(device), name_(RawMemory::device_name(device)), config_(config) {}
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  /// Waits for pending events and returns every segment to the raw allocator, live blocks included.
  ~CachingAllocator() {
    flush_last_freed();
    pending_frees_.wait_all();
    // Unlink every cached block from its tree before the blocks go.
    large_blocks_.blocks.clear();
    small_blocks_.blocks.clear();
    graph_pools_.for_each([](PrivatePoolT& pool) {
      pool.large.blocks.clear();
      pool.small.blocks.clear();
    });
    for (auto& [address, segment] : segments_) {
      RawMemory::deallocate(device_, reinterpret_cast<void*>(address), segment->size);
      for (Block* b = segment->head; b != nullptr;) {
        Block* next = b->next;
        b->~Block();
        b = next;
      }
      segment_records_.destroy(segment);
    }
    segments_.clear();
  }

  [[nodiscard]] int device() const noexcept { return device_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] const AllocatorConfig& config() const noexcept { return config_; }

  /// `bytes` of memory for use on `stream`; nullptr for 0 bytes. Throws OutOfMemoryError.
  [[nodiscard]] void* allocate(std::size_t bytes, stream_type stream) {
    if (bytes == 0) return nullptr;
    const auto stream_id = static_cast<std::uint64_t>(stream.id());
    Lock lock(mutex_);
    if (last_freed_ != nullptr) {
      if (void* p = reallocate_last_freed(bytes, stream_id)) return p;
    }
    repeat_block_ = nullptr;  // the pools change below
    if (!pending_frees_.empty()) [[unlikely]] process_events();
    if (bytes > caching::max_request) [[unlikely]] throw out_of_memory(bytes, bytes);
    if (!bookkeeping_ready()) [[unlikely]] ensure_bookkeeping(lock, bytes, false);

    const std::size_t size = round_size(bytes);
    const bool small = caching::is_small(size);
    PrivatePoolT* const owner = graph_pools_.route(stream_id);
    Pool& pool = owner != nullptr ? (small ? owner->small : owner->large) : (small ? small_blocks_ : large_blocks_);
    if (Block* block = get_free_block(pool, stream_id, size)) [[likely]] {
      return alloc_found_block(block, size, bytes, stream_id, pool, true);
    }
    Block* block = alloc_new_segment(lock, bytes, size, stream_id, small, owner, pool);
    return alloc_found_block(block, size, bytes, stream_id, pool, false);
  }

  /// Returns p to the cache. nullptr is a no-op; a pointer that is not a live allocation of this
  /// allocator throws InvalidArgumentError and changes nothing.
  void free(void* p) {
    if (p == nullptr) return;
    Lock lock(mutex_);
    if (!free_locked(p)) [[unlikely]] throw not_allocated(p, "free");
    graph_pools_.erase_dead();
  }

  /// free() that returns false, changing nothing, when p is not a live allocation of this allocator.
  // Forced inline: the whole free path of raw_delete and AnyBackend's try_raw_delete is then one call
  // (free_locked) inside the inline lock, where g++ had called try_free out of line for some callers
  // (the virtual and variant ways of benchmarks/dispatch) and not others.
  [[nodiscard]] [[gnu::always_inline]] bool try_free(void* p) {
    if (p == nullptr) return true;
    Lock lock(mutex_);
    const bool freed = free_locked(p);
    graph_pools_.erase_dead();
    return freed;
  }

  /// p (a live allocation) is also used on `stream`: after free(p) it is not reused until the work
  /// enqueued on `stream` before the free has completed. A use on the allocation stream is ignored.
  /// Throws InvalidArgumentError, changing nothing, when p is not a live allocation.
  void record_stream(void* p, stream_type stream) {
    if (!try_record_stream(p, stream)) {
      Lock lock(mutex_);
      throw not_allocated(p, "record_stream");
    }
  }

  /// record_stream() that returns false, changing nothing, when p is not a live allocation.
  [[nodiscard]] bool try_record_stream(void* p, stream_type stream) {
    if (p == nullptr) return true;
    const auto stream_id = static_cast<std::uint64_t>(stream.id());
    Lock lock(mutex_);
    flush_last_freed();
    Block* block = map_.find(reinterpret_cast<std::uintptr_t>(p));
    if (block == nullptr) return false;
    if (stream_id == block->stream_id) return true;
    for (const stream_type& s : block->stream_uses) {
      if (static_cast<std::uint64_t>(s.id()) == stream_id) return true;
    }
    block->stream_uses.push_back(stream);
    if (block->stream_uses.size() == 1) ++blocks_with_uses_;
    return true;
  }

  /// The stream with id `stream_id` is gone, and all the work it was given has completed (the
  /// backends' Stream destructors call this once the stream is drained). Its cached blocks become
  /// usable by any stream: they wait under the id retired_stream, and a stream that finds no cached
  /// block of its own takes the best-fitting one of them, with the rest of its segment, before it
  /// asks for a new segment. Its live blocks join them when freed. A record_stream use of it is
  /// dropped: that work is done. So an engine that makes a stream per step reuses one step's memory
  /// instead of caching a new working set every step (torch gets there by recycling its streams
  /// from a pool). Graph pools' segments are left as they are. Never throws.
  void retire_stream(std::uint64_t stream_id) noexcept {
    if (stream_id == retired_stream) return;
    Lock lock(mutex_);
    flush_last_freed();
    for (auto& [address, segment] : segments_) {
      if (segment->owner == nullptr && segment->stream_id == stream_id) relabel_segment(segment, retired_stream);
    }
    if (blocks_with_uses_ == 0) return;
    map_.for_each([&](std::uintptr_t, Block* block) {
      std::vector<stream_type>& uses = block->stream_uses;
      if (uses.empty()) return;
      for (std::size_t i = 0; i < uses.size();) {
        if (static_cast<std::uint64_t>(uses[i].id()) == stream_id) {
          uses.erase(uses.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
          ++i;
        }
      }
      if (uses.empty()) --blocks_with_uses_;
    });
  }

  // ---- graph pools (memory/detail/graph_pools.hpp) -------------------------------------------------

  /// From now on, allocations on stream `stream_id` come from graph pool `pool_id`, created with a use
  /// count of 1 if new (a new graph's own pool), else retained once more (a pool shared between graphs).
  void begin_allocate_to_pool(std::uint64_t pool_id, std::uint64_t stream_id) {
    if (pool_id == 0) throw InvalidArgumentError(name_ + ": graph pool id 0 names no pool");
    Lock lock(mutex_);
    flush_last_freed();
    graph_pools_.begin(pool_id, stream_id, name_);
  }

  /// Allocations on `stream_id` go to the ordinary pools again (the capture ended).
  void end_allocate_to_pool(std::uint64_t pool_id, std::uint64_t stream_id) noexcept {
    Lock lock(mutex_);
    flush_last_freed();
    graph_pools_.end(pool_id, stream_id);
    graph_pools_.erase_dead();  // a pool released during the capture may go now
  }

  /// A graph lets go of pool `pool_id`. Once no graph holds it, its free segments are released now and
  /// the others as soon as their blocks are freed. An unknown id is ignored (nothing was allocated).
  /// Released while a stream still allocates to it (its capture goes on), the pool keeps serving that
  /// stream until end_allocate_to_pool, giving each segment back once it is free.
  void release_pool(std::uint64_t pool_id) noexcept {
    Lock lock(mutex_);
    flush_last_freed();
    PrivatePoolT* pool = graph_pools_.find(pool_id);
    if (pool == nullptr) return;
    if (pool->use_count > 0 && --pool->use_count == 0) {
      release_blocks(pool->large);
      release_blocks(pool->small);
    }
    graph_pools_.erase_dead();
  }

  /// Bytes of segments owned by graph pool `pool_id` (0 for an unknown id).
  [[nodiscard]] std::size_t pool_reserved_bytes(std::uint64_t pool_id) const {
    Lock lock(mutex_);
    std::size_t bytes = 0;
    for (const auto& [address, segment] : segments_) {
      if (segment->owner != nullptr && segment->owner->id == pool_id) bytes += segment->size;
    }
    return bytes;
  }

  /// Synchronizes pending events and releases every cached segment that is entirely free (a graph
  /// pool's only once no graph holds the pool), and the bookkeeping that recorded them.
  void empty_cache() {
    Lock lock(mutex_);
    flush_last_freed();
    release_cached_blocks(lock);
    trim_bookkeeping();
  }

  /// Bytes of the allocator's own records, outside its segments: blocks, segments, the segment map's
  /// nodes and the index of live blocks. They grow with the number of blocks and shrink again at
  /// empty_cache(): with nothing reserved, a few KiB at most.
  [[nodiscard]] std::size_t bookkeeping_bytes() const {
    Lock lock(mutex_);
    return blocks_.bytes() + segment_records_.bytes() + arena_.bytes() + map_.bytes();
  }

  /// Whether p lies inside a segment of this allocator (allocated or cached).
  [[nodiscard]] bool owns(const void* p) const {
    const auto address = reinterpret_cast<std::uintptr_t>(p);
    Lock lock(mutex_);
    return find_segment(address) != nullptr;
  }

  /// Whether p is the start of a live allocation of this allocator.
  [[nodiscard]] bool is_allocated(const void* p) const {
    Lock lock(mutex_);
    const Block* block = map_.find(reinterpret_cast<std::uintptr_t>(p));
    return block != nullptr && block->allocated;  // the block freed last keeps its entry (last_freed_)
  }

  [[nodiscard]] MemoryStats stats() const {
    Lock lock(mutex_);
    const auto max_split = static_cast<std::int64_t>(config_.max_split_size);
    if (last_freed_ != nullptr) return stats_with_last_freed_finished().snapshot(max_split);
    return stats_.snapshot(max_split);
  }
  /// stats().allocated_bytes.all() and friends, without building the whole set.
  [[nodiscard]] Stat allocated_bytes() const {
    Lock lock(mutex_);
    return stats_.allocated_bytes.all();
  }
  [[nodiscard]] Stat reserved_bytes() const {
    Lock lock(mutex_);
    return stats_.reserved_bytes.all();
  }

  /// Sets peak = current on every statistic (torch's reset_peak_memory_stats).
  void reset_peak_stats() {
    Lock lock(mutex_);
    flush_last_freed();  // reallocate_last_freed relies on no reset since the free
    stats_.reset_peak();
  }
  /// Zeroes the allocated/freed totals and the num_* counters (torch's reset_accumulated_memory_stats).
  void reset_accumulated_stats() {
    Lock lock(mutex_);
    flush_last_freed();
    stats_.reset_accumulated();
  }

  /// Caps reserved memory at fraction * total memory (0 < fraction <= 1; torch's
  /// set_per_process_memory_fraction); a segment that would exceed it counts as a failed allocation.
  void set_memory_fraction(double fraction) {
    if (!(fraction > 0.0 && fraction <= 1.0)) {
      throw InvalidArgumentError("set_per_process_memory_fraction(" + detail::format_number(fraction) + ") on " +
                                 name_ + ": the fraction must be in (0, 1]");
    }
    const MemoryInfo info = RawMemory::memory_info(device_);
    Lock lock(mutex_);
    flush_last_freed();  // garbage collection may start: it needs every free block in its pool
    fraction_ = fraction;
    allowed_ = static_cast<std::size_t>(fraction * static_cast<double>(info.total));
    fraction_set_ = true;
    gc_enabled_ = config_.garbage_collection_threshold > 0.0;
  }
  /// The fraction set, or a negative value when none is.
  [[nodiscard]] double memory_fraction() const {
    Lock lock(mutex_);
    return fraction_set_ ? fraction_ : -1.0;
  }
  /// The most bytes this allocator may reserve: fraction * total, or SIZE_MAX when no fraction is set.
  [[nodiscard]] std::size_t allowed_memory() const {
    Lock lock(mutex_);
    return fraction_set_ ? allowed_ : static_cast<std::size_t>(-1);
  }

  /// fork() support, for the backend that owns the allocator (cpu/memory.hpp): its pthread_atfork
  /// prepare handler takes the mutex, so no other thread is inside the allocator at the fork, and
  /// its parent and child handlers give it back. Not for other use.
  void lock_for_fork() const noexcept { mutex_.lock(); }
  void unlock_after_fork() const noexcept { mutex_.unlock(); }

  /// Every segment and its blocks, in address order (torch's memory_snapshot(), without traces).
  [[nodiscard]] std::vector<SegmentInfo> snapshot() const {
    Lock lock(mutex_);
    std::vector<SegmentInfo> out;
    out.reserve(segments_.size());
    for (const auto& [address, segment] : segments_) out.push_back(detail::describe_segment(*segment));
    return out;
  }

 private:
  using Block = detail::CachingBlock<stream_type>;
  using Segment = detail::CachingSegment<stream_type>;
  using Pool = detail::BlockPool<stream_type>;
  using PrivatePoolT = detail::PrivatePool<stream_type>;
  using Lock = detail::AllocatorLock;
  using SegmentMap = std::map<std::uintptr_t, Segment*, std::less<>,
                              detail::ArenaAllocator<std::pair<const std::uintptr_t, Segment*>>>;

  // ---- lookups --------------------------------------------------------------------------------

  const Segment* find_segment(std::uintptr_t address) const noexcept {
    auto it = segments_.upper_bound(address);
    if (it == segments_.begin()) return nullptr;
    --it;
    return address - it->first < it->second->size ? it->second : nullptr;
  }

  // The index of a pool in detail::LiveStatArray: 0 small, 1 large.
  [[nodiscard]] static std::size_t stat_index(bool small) noexcept { return static_cast<std::size_t>(!small); }
  [[nodiscard]] Pool& pool_of(const Block* b) noexcept {
    PrivatePoolT* const owner = b->segment->owner;
    if (owner != nullptr) return b->small ? owner->small : owner->large;
    return b->small ? small_blocks_ : large_blocks_;
  }
  // Garbage collection runs only with a memory fraction and a threshold (set_memory_fraction).
  [[nodiscard]] bool gc_enabled() const noexcept { return gc_enabled_; }

  // The storage an allocation may need is taken before anything changes, so that running out of it
  // leaves the allocator as it was: an entry in the live-block index, and for a split or a new segment
  // one block each; a new segment also needs its record and a node of the segment map.
  [[gnu::always_inline]] bool bookkeeping_ready() const noexcept {
    return map_.has_room_for_one() && arena_.has(1) && blocks_.has(2);
  }
  bool try_reserve_bookkeeping(bool new_segment) noexcept {
    try {
      map_.reserve_one();
      arena_.reserve(1);
      blocks_.reserve(2);
      if (new_segment) segment_records_.reserve(1);
      return true;
    } catch (const std::bad_alloc&) {  // the process is out of address space or heap (ulimit -v)
      return false;
    }
  }
  // Storage for the bookkeeping, by the OOM ladder when the system refuses it: release the cached
  // segments (and the records they free), retry, then OutOfMemoryError saying what could not grow
  // (never a std::bad_alloc out of allocate: torch users catch the out-of-memory error).
  [[gnu::noinline]] void ensure_bookkeeping(Lock& lock, std::size_t bytes, bool new_segment) {
    if (try_reserve_bookkeeping(new_segment)) return;
    release_cached_blocks(lock);  // may wait for events with the lock released
    trim_bookkeeping();
    ++stats_.num_alloc_retries;
    if (try_reserve_bookkeeping(new_segment)) return;
    throw out_of_memory(bytes, 0);
  }
  // Returns the chunks of records that are all free, and shrinks a sparse live-block index.
  void trim_bookkeeping() noexcept {
    blocks_.trim();
    segment_records_.trim();
    arena_.trim();
    map_.shrink();
  }

  // ---- malloc ---------------------------------------------------------------------------------

  // The best-fit free block for the request, left in the pool (alloc_found_block takes it out).
  Block* get_free_block(Pool& pool, std::uint64_t stream_id, std::size_t size) noexcept {
    if (gc_enabled()) ++pool.get_free_blocks_call_count;
    Block* block = pool.lower_bound(stream_id, size);
    if (block == nullptr) return nullptr;
    return fits(block, size) ? block : nullptr;
  }

  // Do not return an oversize block for a smaller request; round oversize requests up only a little.
  [[gnu::always_inline]] bool fits(const Block* block, std::size_t size) const noexcept {
    const std::size_t max_split = config_.max_split_size;
    if (size < max_split && block->size >= max_split) [[unlikely]] return false;
    if (size >= max_split && block->size - size >= config_.max_non_split_rounding_size) [[unlikely]] return false;
    return true;
  }

  // No cached block fits: a new segment, after the OOM ladder if need be (torch's malloc slow path).
  // The block returned is not in any pool.
  [[gnu::noinline]] Block* alloc_new_segment(Lock& lock, std::size_t bytes, std::size_t size, std::uint64_t stream_id,
                                             bool small, PrivatePoolT* owner, Pool& pool) {
    if (Block* adopted = adopt_retired_block(pool, stream_id, size)) return adopted;
    const std::size_t alloc_size = caching::segment_size(size);
    if (gc_enabled()) garbage_collect_cached_blocks();
    ensure_bookkeeping(lock, bytes, true);
    Block* block = alloc_block(alloc_size, stream_id, small, false, owner);
    if (block == nullptr && release_available_cached_blocks(pool, stream_id, size)) {
      block = alloc_block(alloc_size, stream_id, small, false, owner);
    }
    if (block == nullptr) {
      release_cached_blocks(lock);  // may wait for events with the lock released
      ensure_bookkeeping(lock, bytes, true);
      block = alloc_block(alloc_size, stream_id, small, true, owner);
    }
    if (block == nullptr) throw out_of_memory(bytes, alloc_size);
    return block;
  }

  // The best-fitting cached block of a retired stream, taken out of the pool, its whole segment now
  // `stream_id`'s (retire_stream); nullptr when there is none.
  Block* adopt_retired_block(Pool& pool, std::uint64_t stream_id, std::size_t size) noexcept {
    Block* block = pool.lower_bound(retired_stream, size);
    if (block == nullptr || !fits(block, size)) return nullptr;
    relabel_segment(block->segment, stream_id);
    pool.erase(block);
    return block;
  }

  // Every block of an ordinary pool's segment is keyed by `stream_id` from now on (free ones re-sorted).
  void relabel_segment(Segment* segment, std::uint64_t stream_id) noexcept {
    Pool& pool = segment->small ? small_blocks_ : large_blocks_;
    segment->stream_id = stream_id;
    for (Block* b = segment->head; b != nullptr; b = b->next) {
      if (b->is_free()) {
        pool.erase(b);
        b->stream_id = stream_id;
        pool.insert(b);
      } else {
        b->stream_id = stream_id;
      }
    }
  }

  // caching::round_size, with the common configuration (no roundup_power2_divisions) inline.
  [[nodiscard]] std::size_t round_size(std::size_t bytes) const noexcept {
    if (!has_divisions_) [[likely]] {
      return bytes < caching::min_block_size ? caching::min_block_size
                                             : (bytes + caching::min_block_size - 1) & ~(caching::min_block_size - 1);
    }
    return caching::round_size(bytes, config_);
  }

  [[nodiscard]] bool should_split(const Block* block, std::size_t size) const noexcept {
    const std::size_t remaining = block->size - size;
    if (block->small) return remaining >= caching::min_block_size;
    return size < config_.max_split_size && remaining > caching::small_size;
  }

  // Hands out `block` (in `pool` when in_pool: from get_free_block; else a new segment's), split
  // when the rest is worth keeping.
  [[gnu::always_inline]] void* alloc_found_block(Block* block, std::size_t size, std::size_t requested,
                                                 std::uint64_t stream, Pool& pool, bool in_pool) noexcept {
    const std::size_t st = stat_index(pool.small);
    const bool already_split = block->is_split();
    if (should_split(block, size)) {
      Block* remaining = block;  // stays free, keeps its Block and (mostly) its place in the tree
      block = blocks_.make(remaining->ptr, size, stream, remaining->segment, pool.small);
      block->prev = remaining->prev;
      if (block->prev != nullptr) {
        block->prev->next = block;
      } else {
        block->segment->head = block;
      }
      block->next = remaining;
      remaining->prev = block;
      remaining->ptr += size;
      remaining->size -= size;
      if (!in_pool) {
        pool.insert(remaining);
      } else if (remaining->size >= size) {
        // Still sorts after every block before it: those are below (stream, size, 0), the remainder
        // is at least (stream, size, ...). And it shrank, so it still sorts before its successor.
        remaining->gc_count_base = pool.get_free_blocks_call_count;
      } else {
        pool.key_decreased(remaining);
      }
      if (already_split) {
        stats_.inactive_split_bytes.decrease(st, static_cast<std::int64_t>(block->size));
      } else {
        stats_.inactive_split_bytes.increase(st, static_cast<std::int64_t>(remaining->size));
        stats_.inactive_split.increase(st, 1);
      }
    } else {
      if (in_pool) pool.erase(block);
      if (already_split) {
        stats_.inactive_split_bytes.decrease(st, static_cast<std::int64_t>(block->size));
        stats_.inactive_split.decrease(st, 1);
      }
    }
    block->allocated = true;
    block->requested_size = requested;
    last_allocated_ = block;
    map_.insert(block->ptr, block);  // reserved: no allocation
    const auto bytes = static_cast<std::int64_t>(block->size);
    stats_.allocation.increase(st, 1);
    stats_.allocated_bytes.increase(st, bytes);
    stats_.active.increase(st, 1);
    stats_.active_bytes.increase(st, bytes);
    stats_.requested_bytes.increase(st, static_cast<std::int64_t>(requested));
    if (block->size >= config_.max_split_size) stats_.oversize_allocations.increase(1);
    return reinterpret_cast<void*>(block->ptr);
  }

  // A new segment of `size` bytes, or nullptr when the raw allocator or the fraction cap refuses.
  // Its records come from storage reserved by ensure_bookkeeping(..., true).
  Block* alloc_block(std::size_t size, std::uint64_t stream, bool small, bool is_retry, PrivatePoolT* owner) noexcept {
    if (is_retry) ++stats_.num_alloc_retries;
    if (fraction_set_ && (reserved_ > allowed_ || size > allowed_ - reserved_)) return nullptr;
    void* p = RawMemory::allocate(device_, size);
    if (p == nullptr) return nullptr;
    Segment* segment = segment_records_.make();
    const auto address = reinterpret_cast<std::uintptr_t>(p);
    segment->ptr = address;
    segment->size = size;
    segment->stream_id = stream;
    segment->small = small;
    segment->owner = owner;
    if (owner != nullptr) ++owner->segments;
    Block* block = blocks_.make(address, size, stream, segment, small);
    segment->head = block;
    segments_.emplace(address, segment);  // node storage was reserved
    reserved_ += size;
    const std::size_t st = stat_index(small);
    stats_.segment.increase(st, 1);
    stats_.reserved_bytes.increase(st, static_cast<std::int64_t>(size));
    if (size >= config_.max_split_size) stats_.oversize_segments.increase(1);
    ++stats_.num_device_alloc;
    return block;
  }

  // ---- free -----------------------------------------------------------------------------------

  bool free_locked(void* p) {
    if (last_freed_ != nullptr) flush_last_freed();  // also makes a second free of it fail below
    const auto address = reinterpret_cast<std::uintptr_t>(p);
    Block* const newest = last_allocated_;
    last_allocated_ = nullptr;  // from here on it may be freed: a second free goes through the index
    if (newest != nullptr && newest->ptr == address && newest->stream_uses.empty() &&
        (newest == repeat_block_ || may_keep_unmerged(newest))) {
      // The block allocated last, freed now (a temporary): no longer allocated; the rest of its free —
      // the merge and what it counts — waits (last_freed_), and its index entry stays.
      newest->allocated = false;
      const std::size_t st = stat_index(newest->small);
      stats_.allocation.decrease(st, 1);
      stats_.allocated_bytes.decrease(st, static_cast<std::int64_t>(newest->size));
      last_freed_ = newest;
      return true;
    }
    repeat_block_ = nullptr;  // the pools change below
    const std::size_t slot = map_.find_index(address);
    if (slot == detail::PointerMap<Block>::npos) [[unlikely]] return false;
    Block* block = map_.value_at(slot);
    if (!block->stream_uses.empty()) [[unlikely]] return free_with_stream_uses(block, address);
    map_.erase_at(slot);
    block->allocated = false;
    const std::size_t st = stat_index(block->small);
    stats_.allocation.decrease(st, 1);
    stats_.allocated_bytes.decrease(st, static_cast<std::int64_t>(block->size));
    if (block->size >= config_.max_split_size) stats_.oversize_allocations.decrease(1);
    free_block(block);
    return true;
  }

  // ---- the block freed last (last_freed_) ------------------------------------------------------
  //
  // free() of the block allocated last (a temporary: allocated, used, freed) counts it as no longer
  // allocated and leaves the rest for later: the block stays out of its pool, unmerged, with its entry
  // in the live-block index. The next operation of any other kind first finishes the free
  // (flush_last_freed); stats() shows it finished (merge_delta). Other frees go the ordinary way: a
  // block freed in another order is seldom asked for again at once, and waiting would only add work.
  // An allocation for which torch's best fit would carve out exactly this block again — same stream,
  // same rounded size, and no other free block sorting before the one the merge would make — takes it
  // back at once: no merge, no tree search result to split, no index update (a temporary of a loop or
  // a training step, allocated again). Every pointer, statistic and snapshot() is what the
  // merge-then-split would have given (tests/memory/differential checks it against the allocator
  // without this).

  // Blocks whose free may wait: those an allocation could take back as they are — the merge keeps
  // their address (no free predecessor), the merged block fits a request of their size and would be
  // split back into them (is_best_fit_again) — of the ordinary pools (a graph pool may give segments
  // back on free), without garbage collection ages to keep.
  [[nodiscard]] bool may_keep_unmerged(const Block* block) const noexcept {
    if (block->segment->owner != nullptr || gc_enabled_ || block->size >= config_.max_split_size) return false;
    if (block->prev != nullptr && block->prev->is_free()) return false;
    const Block* const next = block->next;
    if (next == nullptr || !next->is_free()) return true;
    return block->size + next->size < config_.max_split_size && (block->small || next->size > caching::small_size);
  }

  // Finishes the waiting free, if any: the index entry goes, the block merges into its pool.
  [[gnu::noinline]] void flush_last_freed() noexcept {
    repeat_block_ = nullptr;  // every operation other than the repeat's free and allocation comes here
    if (last_freed_ == nullptr) return;
    Block* block = last_freed_;
    last_freed_ = nullptr;
    map_.erase(block->ptr);
    free_block(block);
  }

  // The pointer of an allocation that takes back the block freed last, when torch's choice would be that
  // block; else nullptr, the free finished (flush_last_freed) and the caller goes the ordinary way.
  [[gnu::always_inline]] void* reallocate_last_freed(std::size_t bytes, std::uint64_t stream_id) noexcept {
    Block* const block = last_freed_;
    if (bytes <= caching::max_request && block->size == round_size(bytes) && block->stream_id == stream_id &&
        pending_frees_.empty() && graph_pools_.route(stream_id) == nullptr &&
        (block == repeat_block_ || is_best_fit_again(block))) [[likely]] {
      last_freed_ = nullptr;
      last_allocated_ = block;
      // What torch counts for the free finished (free_block) and the allocation that splits the merged
      // block back (alloc_found_block), folded: the merge's change to inactive_split and the split's
      // undo of it, the block inactive and active again. No peak was reset since the free (every
      // other operation flushes first), so a count back where it was passes no peak.
      const std::size_t st = stat_index(block->small);
      const auto size = static_cast<std::int64_t>(block->size);
      const MergeDelta merge = block == repeat_block_ ? repeat_merge_ : merge_delta(block);
      repeat_block_ = block;
      repeat_merge_ = merge;
      stats_.allocation.restore(st, 1);
      stats_.allocated_bytes.restore(st, size);
      stats_.active.decrease_then_increase(st, 1);
      stats_.active_bytes.decrease_then_increase(st, size);
      stats_.requested_bytes.decrease_then_increase(st, static_cast<std::int64_t>(block->requested_size),
                                                    static_cast<std::int64_t>(bytes));
      if (merge.blocks > 0) stats_.inactive_split.increase_then_decrease(st, merge.blocks);
      if (merge.blocks < 0) stats_.inactive_split.decrease_then_increase(st, -merge.blocks);
      if (merge.bytes > 0) stats_.inactive_split_bytes.increase_then_decrease(st, merge.bytes);
      if (merge.bytes < 0) stats_.inactive_split_bytes.decrease_then_increase(st, -merge.bytes);
      block->allocated = true;
      block->requested_size = bytes;
      return reinterpret_cast<void*>(block->ptr);
    }
    flush_last_freed();
    return nullptr;
  }

  // Whether torch, having merged `block` (freed last, the request's size) with its free successor, would
  // hand out exactly `block` for the request: the merged block is the best fit — no free block of the
  // pool sorts between the request and it. (That the merged block starts where `block` does, fits the
  // request and would be split back into `block`, may_keep_unmerged checked at the free.)
  [[nodiscard]] bool is_best_fit_again(const Block* block) noexcept {
    Block* const next = block->next != nullptr && block->next->is_free() ? block->next : nullptr;
    const std::size_t merged_size = block->size + (next != nullptr ? next->size : 0);
    Pool& pool = block->small ? small_blocks_ : large_blocks_;
    auto it = pool.blocks.lower_bound(detail::BlockKey{block->stream_id, block->size, 0}, detail::BlockLess{});
    if (it != pool.blocks.end() && &*it == next) ++it;  // in torch's pool it is part of the merged block
    if (it == pool.blocks.end() || it->stream_id != block->stream_id) return true;
    return detail::BlockLess{}(detail::BlockKey{block->stream_id, merged_size, block->ptr}, *it);
  }

  // free() of a block used on other streams: an event on each, and the block waits for them.
  [[gnu::noinline]] bool free_with_stream_uses(Block* block, std::uintptr_t address) {
    // Events first: if recording one throws, nothing has changed.
    std::vector<std::pair<std::uint64_t, event_type>> recorded;
    if (!block->stream_uses.empty()) {
      recorded.reserve(block->stream_uses.size());
      for (const stream_type& s : block->stream_uses) {
        recorded.emplace_back(static_cast<std::uint64_t>(s.id()), RawMemory::record_event(s));
      }
    }
    map_.erase(address);
    block->allocated = false;
    const std::size_t st = stat_index(block->small);
    stats_.allocation.decrease(st, 1);
    stats_.allocated_bytes.decrease(st, static_cast<std::int64_t>(block->size));
    if (block->size >= config_.max_split_size) stats_.oversize_allocations.decrease(1);
    if (recorded.empty()) {
      free_block(block);
      return true;
    }
    block->stream_uses.clear();
    --blocks_with_uses_;
    for (auto& [stream_id, event] : recorded) pending_frees_.add(stream_id, std::move(event), block);
    if (block->event_count == 0) free_block(block);
    return true;
  }

  // What merging a freed block into its pool does to the inactive_split statistics: blocks and bytes.
  struct MergeDelta {
    std::int64_t blocks = 0;
    std::int64_t bytes = 0;
  };

  // The change free_block(block) will make to inactive_split: the free neighbours it absorbs stop
  // counting, and the block that results counts if it is still part of a split segment.
  [[nodiscard, gnu::always_inline]] static MergeDelta merge_delta(const Block* block) noexcept {
    const Block* const prev = block->prev;
    const Block* const next = block->next;
    const bool merge_prev = prev != nullptr && prev->is_free();
    const bool merge_next = next != nullptr && next->is_free();
    MergeDelta d;
    std::size_t merged = block->size;
    if (merge_prev) {
      d.blocks -= 1;
      d.bytes -= static_cast<std::int64_t>(prev->size);
      merged += prev->size;
    }
    if (merge_next) {
      d.blocks -= 1;
      d.bytes -= static_cast<std::int64_t>(next->size);
      merged += next->size;
    }
    const bool split = (merge_prev ? prev->prev : prev) != nullptr || (merge_next ? next->next : next) != nullptr;
    if (split) {
      d.blocks += 1;
      d.bytes += static_cast<std::int64_t>(merged);
    }
    return d;
  }

  // What a free counts once its block is merged into its pool: inactive_split changed by the merge,
  // the block no longer active.
  [[gnu::always_inline]] static void count_free(detail::LiveStats& stats, std::size_t st, MergeDelta merge,
                                                std::int64_t size, std::int64_t requested) noexcept {
    if (merge.blocks > 0) stats.inactive_split.increase(st, merge.blocks);
    if (merge.blocks < 0) stats.inactive_split.decrease(st, -merge.blocks);
    if (merge.bytes > 0) stats.inactive_split_bytes.increase(st, merge.bytes);
    if (merge.bytes < 0) stats.inactive_split_bytes.decrease(st, -merge.bytes);
    stats.active.decrease(st, 1);
    stats.active_bytes.decrease(st, size);
    stats.requested_bytes.decrease(st, requested);
  }

  // The statistics of the waiting free once finished, as free_block counts them (stats() of a state
  // with one waiting: tests/memory/differential compares them after every operation).
  [[nodiscard]] detail::LiveStats stats_with_last_freed_finished() const noexcept {
    detail::LiveStats out = stats_;
    const Block* const block = last_freed_;
    count_free(out, stat_index(block->small), merge_delta(block), static_cast<std::int64_t>(block->size),
               static_cast<std::int64_t>(block->requested_size));
    return out;
  }

  // Returns a block whose events are done to its pool, merging free neighbours (torch's free_block).
  // A free neighbour is already in the tree: it absorbs the block (and the other neighbour), and keeps
  // its place there when it still sorts before its successor, so the common free costs no tree
  // rebalancing. Which Block object survives a merge is invisible: blocks are known by address.
  [[gnu::always_inline]] void free_block(Block* block) noexcept {
    const auto original_size = static_cast<std::int64_t>(block->size);
    const auto requested = static_cast<std::int64_t>(block->requested_size);
    Pool& pool = pool_of(block);
    Block* const prev = block->prev;
    Block* const next = block->next;
    const bool merge_prev = prev != nullptr && prev->is_free();
    const bool merge_next = next != nullptr && next->is_free();
    std::int64_t net_blocks = 0;
    std::int64_t net_bytes = 0;
    Block* cached = block;  // the free block that results
    if (!merge_prev && !merge_next) {
      block->requested_size = 0;
      pool.insert(block);
    } else {
      if (merge_prev && merge_next) {  // [prev block next] -> prev
        net_blocks = -2;
        net_bytes = -static_cast<std::int64_t>(prev->size + next->size);
        prev->size += block->size + next->size;
        prev->next = next->next;
        if (prev->next != nullptr) prev->next->prev = prev;
        pool.erase(next);
        blocks_.destroy(next);
        cached = prev;
      } else if (merge_prev) {  // [prev block] -> prev
        net_blocks = -1;
        net_bytes = -static_cast<std::int64_t>(prev->size);
        prev->size += block->size;
        prev->next = next;
        if (next != nullptr) next->prev = prev;
        cached = prev;
      } else {  // [block next] -> next
        net_blocks = -1;
        net_bytes = -static_cast<std::int64_t>(next->size);
        next->ptr = block->ptr;
        next->size += block->size;
        next->prev = prev;
        if (prev != nullptr) {
          prev->next = next;
        } else {
          next->segment->head = next;
        }
        cached = next;
      }
      blocks_.destroy(block);
      pool.key_increased(cached);  // larger than before: only its successor can be out of order
    }
    if (cached->is_split()) {
      net_blocks += 1;
      net_bytes += static_cast<std::int64_t>(cached->size);
    }
    count_free(stats_, stat_index(pool.small), MergeDelta{net_blocks, net_bytes}, original_size, requested);
    // A graph pool no graph holds any more gives its segments back as they become free (the caller
    // erases the emptied pool: erase_dead_pools).
    const PrivatePoolT* owner = cached->segment->owner;
    if (owner != nullptr && owner->use_count == 0 && !cached->is_split()) [[unlikely]] release_block(cached);
  }

  // ---- events of record_stream uses (memory/detail/pending_frees.hpp) ----------------------------

  void process_events() {
    pending_frees_.process([this](Block* block) { free_block(block); });
  }

  // Waits for every pending event (with the lock released) and frees the blocks that were waiting.
  // Another thread may free a block while the lock is released: its merge is finished first.
  void synchronize_and_free_events(Lock& lock) {
    ++stats_.num_sync_all_streams;
    pending_frees_.synchronize(lock, [this] { flush_last_freed(); }, [this](Block* block) { free_block(block); });
  }

  // ---- releasing cached segments ----------------------------------------------------------------

  void release_block(Block* block) noexcept {
    Segment* segment = block->segment;
    Pool& pool = pool_of(block);
    ++stats_.num_device_free;
    pool.erase(block);
    if (segment->owner != nullptr) --segment->owner->segments;
    RawMemory::deallocate(device_, reinterpret_cast<void*>(block->ptr), block->size);
    reserved_ -= block->size;
    const std::size_t st = stat_index(pool.small);
    stats_.segment.decrease(st, 1);
    stats_.reserved_bytes.decrease(st, static_cast<std::int64_t>(block->size));
    if (block->size >= config_.max_split_size) stats_.oversize_segments.decrease(1);
    segments_.erase(segment->ptr);
    segment_records_.destroy(segment);
    blocks_.destroy(block);
  }

  void release_blocks(Pool& pool) noexcept {
    for (auto it = pool.blocks.begin(); it != pool.blocks.end();) {
      Block* block = &*it;
      ++it;
      if (!block->is_split()) release_block(block);
    }
  }

  // empty_cache's work: every event waited for, every unsplit cached segment released.
  void release_cached_blocks(Lock& lock) {
    synchronize_and_free_events(lock);
    release_blocks(large_blocks_);
    release_blocks(small_blocks_);
    graph_pools_.for_each([this](PrivatePoolT& pool) {
      if (pool.use_count == 0) {
        release_blocks(pool.large);
        release_blocks(pool.small);
      }
    });
    graph_pools_.erase_dead();
  }

  // The OOM path's choices of segments to give back (memory/detail/oom_path.hpp).
  bool release_available_cached_blocks(Pool& pool, std::uint64_t stream_id, std::size_t size) noexcept {
    return detail::release_available_cached_blocks(pool, stream_id, size, config_.max_split_size,
                                                   [this](Block* block) { release_block(block); });
  }
  void garbage_collect_cached_blocks() noexcept {
    const auto threshold = static_cast<std::size_t>(config_.garbage_collection_threshold * static_cast<double>(allowed_));
    detail::garbage_collect_cached_blocks(large_blocks_, reserved_, threshold, [this](Block* block) { release_block(block); });
  }

  // ---- errors ---------------------------------------------------------------------------------

  // alloc_size 0: what could not be had is the allocator's own bookkeeping, not a segment.
  OutOfMemoryError out_of_memory(std::size_t requested, std::size_t alloc_size) {
    ++stats_.num_ooms;
    caching::OomFigures figures;
    figures.requested = requested;
    figures.alloc_size = alloc_size;
    figures.fraction = fraction_set_ ? fraction_ : -1.0;
    figures.allowed = allowed_;
    figures.allocated = static_cast<std::size_t>(stats_.allocated_bytes.current());
    figures.reserved = static_cast<std::size_t>(stats_.reserved_bytes.current());
    return detail::out_of_memory_error<RawMemory>(device_, name_, figures);
  }

  InvalidArgumentError not_allocated(const void* p, const char* what) const {
    char address[32];
    std::snprintf(address, sizeof address, "%p", p);
    std::string msg = std::string(what) + "(" + address + "): the pointer was not allocated by " + name_ +
                      "'s caching allocator (or was already freed)";
    if (find_segment(reinterpret_cast<std::uintptr_t>(p)) != nullptr) {
      msg += "; it lies inside one of its segments but is not the start of a live allocation";
    }
    return InvalidArgumentError(msg);
  }

  // ---- state ----------------------------------------------------------------------------------

  mutable detail::AllocatorMutex mutex_;
  const int device_;
  const std::string name_;
  const AllocatorConfig config_;
  const bool has_divisions_ = [this] {
    for (const std::size_t divisions : config_.roundup_power2_divisions) {
      if (divisions > 1) return true;
    }
    return false;
  }();
  detail::NodeArena arena_;  // before the containers that use it
  detail::ObjectPool<Block> blocks_;
  detail::ObjectPool<Segment> segment_records_;
  Pool large_blocks_{false};
  Pool small_blocks_{true};
  detail::PointerMap<Block> map_;  // live allocations by address
  SegmentMap segments_{detail::ArenaAllocator<std::pair<const std::uintptr_t, Segment*>>(&arena_)};
  detail::PendingFrees<RawMemory, Block> pending_frees_;  // blocks freed while used on other streams
  detail::GraphPools<stream_type> graph_pools_;
  detail::LiveStats stats_;
  std::size_t reserved_ = 0;
  std::size_t blocks_with_uses_ = 0;  // live blocks with record_stream uses (retire_stream scans them)
  Block* last_freed_ = nullptr;       // freed, not merged yet ("the block freed last" above)
  Block* last_allocated_ = nullptr;   // the block allocate() returned last, while it is live
  // The block taken back last (reallocate_last_freed) and its merge's statistics. Until any other
  // operation (each clears it), only this block is freed and taken back, and each such pair leaves the
  // pools and its neighbours as they were: its free may wait again (may_keep_unmerged), it is the best
  // fit again (is_best_fit_again), and the merge would count the same (merge_delta), without asking
  // again. A loop's temporary then costs its statistics and a few comparisons.
  const Block* repeat_block_ = nullptr;
  MergeDelta repeat_merge_;
  bool fraction_set_ = false;
  bool gc_enabled_ = false;  // fraction_set_ && config_.garbage_collection_threshold > 0
  double fraction_ = 1.0;
  std::size_t allowed_ = 0;
};

}  // namespace accel
