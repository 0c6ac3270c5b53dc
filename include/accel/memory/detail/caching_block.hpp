// accel/memory/detail/caching_block.hpp — CachingAllocator's bookkeeping types.
//
//   CachingBlock<S>    one block of a segment: address, size, allocation stream id, neighbours
//                      in the segment (prev/next), state, the extra streams it was used on, and the
//                      hook that links it into its pool while it is free
//   CachingSegment<S>  one raw allocation: address, size, pool, its lowest-address block
//   BlockPool<S>       the free blocks of one pool, ordered by (stream id, size, address): an
//                      intrusive red-black tree (Boost.Intrusive) threaded through the blocks, so
//                      caching a block allocates nothing and finding its place from the block is O(1)
//   PrivatePool<S>     a graph's private pair of pools (torch's PrivatePool): its segments serve only
//                      allocations routed to it while a graph captures
//   ObjectPool<T>      recycled storage for blocks: a free list over chunks (memory/detail/slot_pool.hpp)
//
// A block's key may change while it sits in the tree (a split shrinks the free remainder, a merge
// grows the surviving neighbour): BlockPool::key_decreased / key_increased keep its place when its
// tree neighbours still sort around it (the common case: no rebalancing at all) and re-sort it
// otherwise.
#pragma once

#include <accel/memory/detail/slot_pool.hpp>

#include <boost/intrusive/set.hpp>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <new>
#include <utility>
#include <vector>

namespace accel::detail {

/// The order of free blocks: stream id, then size, then address (torch's BlockComparatorSize).
struct BlockKey {
  std::uint64_t stream_id;
  std::size_t size;
  std::uintptr_t ptr;
};

struct BlockLess {
  template <class B>
  static BlockKey key(const B& b) noexcept {
    return {b.stream_id, b.size, b.ptr};
  }
  static const BlockKey& key(const BlockKey& k) noexcept { return k; }
  template <class A, class B>
  bool operator()(const A& a, const B& b) const noexcept {
    const BlockKey ka = key(a);
    const BlockKey kb = key(b);
    if (ka.stream_id != kb.stream_id) return ka.stream_id < kb.stream_id;
    if (ka.size != kb.size) return ka.size < kb.size;
    return ka.ptr < kb.ptr;
  }
};

template <class Stream>
struct CachingBlock;

template <class Stream>
struct PrivatePool;

template <class Stream>
struct CachingSegment {
  std::uintptr_t ptr = 0;
  std::size_t size = 0;
  std::uint64_t stream_id = 0;
  bool small = false;
  CachingBlock<Stream>* head = nullptr;  // lowest-address block
  PrivatePool<Stream>* owner = nullptr;  // the graph pool it belongs to; null: the ordinary pools
};

/// The hook of a block in its pool's tree (no safe-mode or auto-unlink checks: the pool and the
/// allocator know which blocks are linked).
using PoolHook = boost::intrusive::set_member_hook<boost::intrusive::link_mode<boost::intrusive::normal_link>>;

template <class Stream>
struct CachingBlock {
  CachingBlock(std::uintptr_t p, std::size_t s, std::uint64_t stream, CachingSegment<Stream>* seg, bool is_small) noexcept
      : ptr(p), size(s), stream_id(stream), segment(seg), small(is_small) {}
  std::uintptr_t ptr;
  std::size_t size;
  std::size_t requested_size = 0;
  std::uint64_t stream_id;  // the allocation stream (only its id: the stream may be gone by now)
  CachingSegment<Stream>* segment;
  CachingBlock* prev = nullptr;
  CachingBlock* next = nullptr;
  bool allocated = false;
  bool small;
  int event_count = 0;              // events still pending after a free with stream uses
  std::uint64_t gc_count_base = 0;  // the pool's free-block-search count when cached
  PoolHook pool_hook;               // linked while the block is free in its pool
  std::vector<Stream> stream_uses;  // record_stream streams other than the allocation stream
  [[nodiscard]] bool is_split() const noexcept { return prev != nullptr || next != nullptr; }
  /// Free and cached: in its pool's tree, and so mergeable with a neighbour that is freed.
  [[nodiscard]] bool is_free() const noexcept { return !allocated && event_count == 0 && stream_uses.empty(); }
};

template <class Stream>
struct BlockPool {
  using Block = CachingBlock<Stream>;
  using Set = boost::intrusive::multiset<Block, boost::intrusive::member_hook<Block, PoolHook, &Block::pool_hook>,
                                         boost::intrusive::compare<BlockLess>,
                                         boost::intrusive::constant_time_size<false>>;
  using iterator = typename Set::iterator;

  explicit BlockPool(bool is_small) noexcept : small(is_small) {}
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;
  ~BlockPool() { blocks.clear(); }

  Set blocks;
  bool small;
  std::uint64_t get_free_blocks_call_count = 0;  // for garbage collection ages

  void insert(Block* block) noexcept {
    block->gc_count_base = get_free_blocks_call_count;
    blocks.insert(*block);
  }
  void erase(Block* block) noexcept { blocks.erase(blocks.iterator_to(*block)); }

  /// The first block not below (stream_id, size, 0), when it belongs to stream_id; else nullptr.
  [[nodiscard]] Block* lower_bound(std::uint64_t stream_id, std::size_t size) noexcept {
    const auto it = blocks.lower_bound(BlockKey{stream_id, size, 0}, BlockLess{});
    if (it == blocks.end() || it->stream_id != stream_id) return nullptr;
    return &*it;
  }

  /// `block`, in the tree, got a smaller key (and is cached anew): re-sorted only if its predecessor
  /// no longer sorts before it.
  void key_decreased(Block* block) noexcept {
    block->gc_count_base = get_free_blocks_call_count;
    const auto it = blocks.iterator_to(*block);
    if (it == blocks.begin() || BlockLess{}(*std::prev(it), *block)) return;
    blocks.erase(it);
    blocks.insert(*block);
  }
  /// `block`, in the tree, got a larger key (and is cached anew): re-sorted only if its successor no
  /// longer sorts after it.
  void key_increased(Block* block) noexcept {
    block->gc_count_base = get_free_blocks_call_count;
    const auto it = blocks.iterator_to(*block);
    const auto next = std::next(it);
    if (next == blocks.end() || BlockLess{}(*block, *next)) return;
    blocks.erase(it);
    blocks.insert(*block);
  }
};

/// The pools of one graph memory pool. Its segments are reserved for the graphs sharing it: they are
/// released only once every such graph let go of the pool (use_count 0) and their blocks are free.
template <class Stream>
struct PrivatePool {
  explicit PrivatePool(std::uint64_t pool_id) noexcept : large(false), small(true), id(pool_id) {}
  BlockPool<Stream> large;
  BlockPool<Stream> small;
  std::uint64_t id;
  int use_count = 1;        // graphs (or captures) holding the pool
  std::size_t segments = 0;  // segments it owns
};

/// Objects of one type on a free list over chunks (a SlotPool); trim() gives back the chunks whose
/// objects are all destroyed.
template <class T>
class ObjectPool {
 public:
  ObjectPool() = default;
  ObjectPool(const ObjectPool&) = delete;
  ObjectPool& operator=(const ObjectPool&) = delete;

  /// Ensures that the next n make() calls do not allocate.
  [[gnu::always_inline]] void reserve(std::size_t n) { slots_.reserve(n); }
  [[nodiscard]] bool has(std::size_t n) const noexcept { return slots_.has(n); }
  /// Constructs an object in reserved storage.
  template <class... Args>
  T* make(Args&&... args) noexcept {
    return ::new (slots_.take()) T(std::forward<Args>(args)...);
  }
  void destroy(T* object) noexcept {
    object->~T();
    slots_.give(object);
  }
  void trim() noexcept { slots_.trim(); }
  [[nodiscard]] std::size_t bytes() const noexcept { return slots_.bytes(); }

 private:
  SlotPool<sizeof(T), alignof(T)> slots_;
};

}  // namespace accel::detail
