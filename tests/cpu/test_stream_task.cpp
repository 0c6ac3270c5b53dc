// The pieces a CPU stream queues work with: StreamTask (a move-only void() with a 48-byte inline buffer)
// and StreamQueue (a chain of 63-task blocks, emptied blocks kept for reuse). What a stream's users never
// see directly but depend on: every captured object destroyed exactly once, whether the task ran, moved,
// was reset or was dropped with its queue; order kept across blocks; no block lost or shared.
#include <accel/cpu/detail/stream_queue.hpp>
#include <accel/cpu/detail/stream_task.hpp>

#include <doctest/doctest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

using accel::cpu::detail::StreamQueue;
using accel::cpu::detail::StreamTask;

namespace {

// Counts its live copies, and where its call ran, so a test sees every construction and destruction.
struct Tally {
  int live = 0;
  int calls = 0;
  const void* called_at = nullptr;
};

template <std::size_t Bytes, std::size_t Align = alignof(void*), bool NothrowMove = true>
struct alignas(Align) Counted {
  Tally* tally;
  unsigned char pad[Bytes - sizeof(Tally*)] = {};

  explicit Counted(Tally* t) : tally(t) { ++tally->live; }
  Counted(const Counted& o) : tally(o.tally) { ++tally->live; }
  Counted(Counted&& o) noexcept(NothrowMove) : tally(o.tally) { ++tally->live; }
  ~Counted() { --tally->live; }
  void operator()() {
    ++tally->calls;
    tally->called_at = this;
  }
};

// Whether the callable ran inside the task object's own bytes (stored inline) or elsewhere (the heap).
bool ran_inside(const StreamTask& task, const Tally& t) {
  const auto* first = reinterpret_cast<const unsigned char*>(&task);
  const auto* at = static_cast<const unsigned char*>(t.called_at);
  return at >= first && at < first + sizeof(StreamTask);
}

struct Trivial {  // trivially copyable: moved by memcpy, never destroyed
  int* hits;
  void operator()() const { ++*hits; }
};

}  // namespace

TEST_CASE("StreamTask: up to 48 bytes, aligned to max_align_t and nothrow-movable, is stored inline") {
  CHECK(StreamTask::stored_inline<Counted<48>>);
  CHECK_FALSE(StreamTask::stored_inline<Counted<56>>);
  CHECK(StreamTask::stored_inline<Counted<16, alignof(std::max_align_t)>>);
  CHECK_FALSE(StreamTask::stored_inline<Counted<32, 2 * alignof(std::max_align_t)>>);
  CHECK_FALSE(StreamTask::stored_inline<Counted<16, alignof(void*), false>>);  // a move that may throw

  Tally small, big, over_aligned, throwing_move;
  {
    StreamTask a{Counted<48>(&small)};
    StreamTask b{Counted<56>(&big)};
    StreamTask c{Counted<32, 2 * alignof(std::max_align_t)>(&over_aligned)};
    StreamTask d{Counted<16, alignof(void*), false>(&throwing_move)};
    a();
    b();
    c();
    d();
    CHECK(ran_inside(a, small));
    CHECK_FALSE(ran_inside(b, big));
    CHECK_FALSE(ran_inside(c, over_aligned));
    CHECK(reinterpret_cast<std::uintptr_t>(over_aligned.called_at) % (2 * alignof(std::max_align_t)) == 0);
    CHECK_FALSE(ran_inside(d, throwing_move));
    CHECK(small.live == 1);
    CHECK(big.live == 1);
  }
  CHECK(small.live == 0);
  CHECK(big.live == 0);
  CHECK(over_aligned.live == 0);
  CHECK(throwing_move.live == 0);
}

TEST_CASE("StreamTask: a move hands the callable over; each captured object is destroyed exactly once") {
  Tally inl, heap;
  {
    StreamTask a{Counted<24>(&inl)};
    StreamTask b{Counted<200>(&heap)};
    CHECK(inl.live == 1);
    CHECK(heap.live == 1);

    StreamTask a2(std::move(a));
    StreamTask b2(std::move(b));
    CHECK_FALSE(a);
    CHECK_FALSE(b);
    CHECK(a2);
    CHECK(b2);
    CHECK(inl.live == 1);  // the moved-from inline copy was destroyed by the move
    CHECK(heap.live == 1);  // the heap object itself changed hands
    a2();
    CHECK(ran_inside(a2, inl));
    b2();
    CHECK(inl.calls == 1);
    CHECK(heap.calls == 1);

    StreamTask from_empty(std::move(a));  // moving an empty task gives an empty task
    CHECK_FALSE(from_empty);
  }
  CHECK(inl.live == 0);
  CHECK(heap.live == 0);
}

TEST_CASE("StreamTask: move assignment destroys what the target held; assigning to itself keeps it") {
  Tally first, second, heap;
  int hits = 0;
  {
    StreamTask t{Counted<24>(&first)};
    t = StreamTask{Counted<24>(&second)};
    CHECK(first.live == 0);
    CHECK(second.live == 1);

    StreamTask& same = t;
    t = std::move(same);
    REQUIRE(t);
    t();
    CHECK(second.calls == 1);
    CHECK(second.live == 1);

    // A trivially copyable callable, then a non-trivial one into the same task: the second is still
    // destroyed (the task does not keep the first one's "nothing to destroy").
    StreamTask u{Trivial{&hits}};
    u();
    CHECK(hits == 1);
    u = StreamTask{Counted<200>(&heap)};
    CHECK(heap.live == 1);
    StreamTask v{Trivial{&hits}};
    v = StreamTask{Counted<24>(&first)};
    CHECK(first.live == 1);
  }
  CHECK(second.live == 0);
  CHECK(heap.live == 0);
  CHECK(first.live == 0);
}

TEST_CASE("StreamTask: reset destroys the callable once and leaves the task empty") {
  Tally inl, heap;
  {
    StreamTask a{Counted<24>(&inl)};
    StreamTask b{Counted<200>(&heap)};
    a.reset();
    b.reset();
    CHECK_FALSE(a);
    CHECK_FALSE(b);
    CHECK(inl.live == 0);
    CHECK(heap.live == 0);
    a.reset();  // again: nothing more to destroy
    CHECK(inl.live == 0);
  }
  CHECK(inl.live == 0);  // not destroyed a second time by the destructor
  CHECK(heap.live == 0);
}

TEST_CASE("StreamTask: shared ownership captured by a lambda ends with the task, inline or not") {
  auto owner = std::make_shared<int>(7);
  int seen = 0;
  {
    StreamTask small([owner, &seen] { seen = *owner; });
    std::vector<StreamTask> moved;
    moved.push_back(std::move(small));
    CHECK(owner.use_count() == 2);
    moved.back()();
    CHECK(seen == 7);
  }
  CHECK(owner.use_count() == 1);
  {
    std::vector<int> big_capture(100, 1);
    StreamTask large([owner, big_capture, pad = std::array<char, 64>{}] { (void)pad; });
    CHECK(owner.use_count() == 2);
  }
  CHECK(owner.use_count() == 1);
}

TEST_CASE("StreamTask: an exception from the callable reaches the caller and the task stays whole") {
  Tally t;
  StreamTask task([&t] {
    ++t.calls;
    throw std::runtime_error("from the task");
  });
  CHECK_THROWS_WITH_AS(task(), "from the task", std::runtime_error);
  CHECK(task);
  CHECK_THROWS_AS(task(), std::runtime_error);
  CHECK(t.calls == 2);
}

namespace {

std::vector<std::uint32_t> block_counts(StreamQueue::Block* chain) {
  std::vector<std::uint32_t> counts;
  for (; chain != nullptr; chain = chain->next) counts.push_back(chain->count);
  return counts;
}

// Runs and destroys every task of a chain, as the stream's worker does.
void run_chain(StreamQueue::Block* chain) {
  for (StreamQueue::Block* b = chain; b != nullptr; b = b->next) {
    for (std::uint32_t i = 0; i < b->count; ++i) {
      (*b)[i]();
      (*b)[i].~StreamTask();
    }
  }
}

}  // namespace

TEST_CASE("StreamQueue: tasks come out in order, 63 to a block") {
  StreamQueue q;
  CHECK(q.empty());
  std::vector<int> order;
  for (int i = 0; i < 130; ++i) q.push(StreamTask([&order, i] { order.push_back(i); }));
  CHECK_FALSE(q.empty());
  StreamQueue::Block* chain = q.take_all();
  CHECK(q.empty());
  CHECK(block_counts(chain) == std::vector<std::uint32_t>{63, 63, 4});
  run_chain(chain);
  q.recycle(chain);
  REQUIRE(order.size() == 130);
  for (int i = 0; i < 130; ++i) CHECK(order[static_cast<std::size_t>(i)] == i);
  CHECK(q.cached_blocks() == 3);
}

TEST_CASE("StreamQueue: a push after take_all starts a new chain; the taken one is not touched") {
  StreamQueue q;
  std::vector<int> order;
  q.push(StreamTask([&order] { order.push_back(1); }));
  StreamQueue::Block* first = q.take_all();
  q.push(StreamTask([&order] { order.push_back(2); }));
  q.push(StreamTask([&order] { order.push_back(3); }));
  CHECK(block_counts(first) == std::vector<std::uint32_t>{1});
  StreamQueue::Block* second = q.take_all();
  CHECK(second != first);
  CHECK(block_counts(second) == std::vector<std::uint32_t>{2});
  run_chain(first);
  run_chain(second);
  CHECK(order == std::vector<int>{1, 2, 3});
  q.recycle(first);
  q.recycle(second);
  CHECK(q.cached_blocks() == 2);
}

TEST_CASE("StreamQueue: emptied blocks are reused, as fresh blocks, up to 16 kept") {
  StreamQueue q;
  int runs = 0;
  for (int i = 0; i < 3 * 63; ++i) q.push(StreamTask([&runs] { ++runs; }));
  StreamQueue::Block* chain = q.take_all();
  std::vector<StreamQueue::Block*> blocks;
  for (StreamQueue::Block* b = chain; b != nullptr; b = b->next) blocks.push_back(b);
  REQUIRE(blocks.size() == 3);
  run_chain(chain);
  q.recycle(chain);
  CHECK(q.cached_blocks() == 3);

  // One task: one cached block, emptied and cut from the others.
  q.push(StreamTask([&runs] { ++runs; }));
  CHECK(q.cached_blocks() == 2);
  StreamQueue::Block* one = q.take_all();
  CHECK((one == blocks[0] || one == blocks[1] || one == blocks[2]));
  CHECK(block_counts(one) == std::vector<std::uint32_t>{1});
  run_chain(one);
  q.recycle(one);
  CHECK(q.cached_blocks() == 3);
  CHECK(runs == 3 * 63 + 1);

  // A burst of 20 blocks: 16 kept, the rest freed.
  for (int i = 0; i < 20 * 63; ++i) q.push(StreamTask([&runs] { ++runs; }));
  CHECK(q.cached_blocks() == 0);
  StreamQueue::Block* burst = q.take_all();
  CHECK(block_counts(burst).size() == 20);
  run_chain(burst);
  q.recycle(burst);
  CHECK(q.cached_blocks() == StreamQueue::max_cached_blocks);
}

TEST_CASE("StreamQueue: tasks never run are destroyed by destroy_chain and by the queue's destructor") {
  Tally dropped, pending;
  {
    StreamQueue q;
    for (int i = 0; i < 70; ++i) q.push(StreamTask(Counted<24>(&dropped)));
    CHECK(dropped.live == 70);
    StreamQueue::destroy_chain(q.take_all());
    CHECK(dropped.live == 0);
    for (int i = 0; i < 70; ++i) q.push(StreamTask(Counted<200>(&pending)));
    CHECK(pending.live == 70);
  }
  CHECK(pending.live == 0);
  CHECK(dropped.calls == 0);
  CHECK(pending.calls == 0);
}
