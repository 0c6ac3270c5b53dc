// accel::CachingAllocator against a fake device: every rule of torch's algorithm, deterministically.
#include "support/sanitizer_build.hpp"
#include "support/sizes.hpp"
#include "fake_memory.hpp"

#include <accel/memory/caching_allocator.hpp>

#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

constexpr fake::Stream s1{1};
constexpr fake::Stream s2{2};

std::int64_t stat(const fake::Allocator& a, const std::string& key) {
  const auto flat = a.stats().flat();
  const auto it = flat.find(key);
  REQUIRE_MESSAGE(it != flat.end(), "no key " << key);
  return it->second;
}

std::int64_t i64(std::size_t n) { return static_cast<std::int64_t>(n); }

char* at(void* p, std::size_t offset) { return static_cast<char*>(p) + offset; }

// A fresh fake device and an allocator with a given configuration.
std::unique_ptr<fake::Allocator> make(std::size_t capacity = 40 * MiB, const char* conf = "") {
  fake::device().reset(capacity);
  return std::make_unique<fake::Allocator>(0, accel::AllocatorConfig::parse(conf));
}

}  // namespace

TEST_CASE("CachingAllocator: requests are rounded to 512 B and counted") {
  auto a = make();
  void* p = a->allocate(1, s1);
  REQUIRE(p != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(p) % 512 == 0);
  CHECK(stat(*a, "allocated_bytes.all.current") == 512);
  CHECK(stat(*a, "requested_bytes.all.current") == 1);
  CHECK(stat(*a, "allocation.all.current") == 1);
  CHECK(stat(*a, "active.small_pool.current") == 1);
  void* q = a->allocate(1000, s1);
  CHECK(stat(*a, "allocated_bytes.all.current") == 512 + 1024);
  CHECK(stat(*a, "requested_bytes.small_pool.current") == 1001);
  a->free(p);
  a->free(q);
  CHECK(stat(*a, "allocated_bytes.all.current") == 0);
  CHECK(stat(*a, "requested_bytes.all.current") == 0);
  CHECK(stat(*a, "allocated_bytes.all.allocated") == 512 + 1024);
  CHECK(stat(*a, "allocated_bytes.all.freed") == 512 + 1024);

  auto r = make(40 * MiB, "roundup_power2_divisions:4");
  void* big = r->allocate(MiB + 1, s1);
  CHECK(stat(*r, "allocated_bytes.large_pool.current") == i64(MiB + MiB / 4));
  r->free(big);
}

TEST_CASE("CachingAllocator: small requests share 2 MiB segments; large ones get 20 MiB or their size") {
  auto a = make(64 * MiB);
  void* small = a->allocate(MiB, s1);  // exactly 1 MiB is still small
  CHECK(stat(*a, "segment.small_pool.current") == 1);
  CHECK(stat(*a, "reserved_bytes.small_pool.current") == i64(2 * MiB));
  void* mid = a->allocate(MiB + 1, s1);  // 1-10 MiB: a 20 MiB segment
  CHECK(stat(*a, "segment.large_pool.current") == 1);
  CHECK(stat(*a, "reserved_bytes.large_pool.current") == i64(20 * MiB));
  void* big = a->allocate(11 * MiB + 1, s2);  // >= 10 MiB: rounded up to 2 MiB (another stream, so
                                              // that it is not carved from the 20 MiB segment)
  CHECK(stat(*a, "reserved_bytes.large_pool.current") == i64(32 * MiB));
  CHECK(stat(*a, "reserved_bytes.all.current") == i64(34 * MiB));
  CHECK(stat(*a, "segment.all.current") == 3);
  CHECK(stat(*a, "num_device_alloc") == 3);
  CHECK(fake::device().allocs == 3);
  CHECK(fake::device().live_bytes() == 34 * MiB);
  // A second small request is carved from the same small segment.
  void* small2 = a->allocate(512 * KiB, s1);
  CHECK(stat(*a, "segment.small_pool.current") == 1);
  CHECK(at(small2, 0) == at(small, MiB));
  for (void* p : {small, mid, big, small2}) a->free(p);
  a->empty_cache();
  CHECK(stat(*a, "reserved_bytes.all.current") == 0);
  CHECK(fake::device().live_bytes() == 0);
  CHECK(fake::device().bad_deallocs == 0);
}

TEST_CASE("CachingAllocator: a freed block is reused by its own stream only") {
  auto a = make();
  void* p = a->allocate(1000, s1);
  a->free(p);
  CHECK(stat(*a, "reserved_bytes.all.current") == i64(2 * MiB));  // cached
  void* again = a->allocate(1000, s1);
  CHECK(again == p);
  CHECK(fake::device().allocs == 1);
  a->free(again);

  void* other = a->allocate(1000, s2);  // another stream never takes s1's blocks
  CHECK(other != p);
  CHECK(fake::device().allocs == 2);
  const auto segments = a->snapshot();
  REQUIRE(segments.size() == 2);
  std::set<std::uint64_t> streams;
  for (const auto& s : segments) streams.insert(s.stream);
  CHECK(streams == std::set<std::uint64_t>{1, 2});
  a->free(other);
}

TEST_CASE("CachingAllocator: record_stream holds a block until the other stream's event completes") {
  auto a = make();
  void* p = a->allocate(4096, s1);
  a->record_stream(p, s1);  // the allocation stream: ignored
  a->record_stream(p, s2);
  a->record_stream(p, s2);  // recorded once
  a->free(p);
  CHECK(fake::device().recorded.size() == 1);
  CHECK(stat(*a, "allocation.all.current") == 0);
  CHECK(stat(*a, "allocated_bytes.all.current") == 0);
  CHECK(stat(*a, "active.all.current") == 1);  // active, awaiting the event
  CHECK(stat(*a, "active_bytes.all.current") == 4096);
  CHECK(stat(*a, "requested_bytes.all.current") == 4096);
  {
    const auto segments = a->snapshot();
    REQUIRE(segments.size() == 1);
    CHECK(segments[0].blocks.front().state == accel::BlockInfo::State::active_pending_free);
    CHECK(segments[0].active_size == 4096);
    CHECK(segments[0].allocated_size == 0);
  }
  CHECK_THROWS_AS(a->free(p), accel::InvalidArgumentError);  // already freed, even if pending
  // try_record_stream: false for memory that is not a live allocation (p is freed, pending), nothing
  // recorded; true for null (nothing to hold), as record_stream ignores it
  CHECK_FALSE(a->try_record_stream(p, s2));
  int on_stack = 0;
  CHECK_FALSE(a->try_record_stream(&on_stack, s2));
  CHECK(a->try_record_stream(nullptr, s2));
  CHECK(fake::device().recorded.size() == 1);  // still the one event of the record_stream above
  CHECK_THROWS_AS(a->record_stream(p, s2), accel::InvalidArgumentError);

  void* q = a->allocate(4096, s1);
  CHECK(q != p);  // still in use on s2
  a->free(q);
  void* r = a->allocate(4096, s1);  // the event is still pending
  CHECK(r != p);
  a->free(r);

  fake::device().complete(2);
  void* t = a->allocate(4096, s1);  // events are polled first: p is free again
  CHECK(t == p);
  CHECK(stat(*a, "active.all.current") == 1);
  CHECK(stat(*a, "inactive_split.all.current") == 1);

  // empty_cache() waits for pending events, then releases the whole segment.
  a->record_stream(t, s2);
  a->free(t);
  CHECK(stat(*a, "active.all.current") == 1);
  const int syncs = fake::device().syncs;
  a->empty_cache();
  CHECK(fake::device().syncs == syncs + 1);
  CHECK(stat(*a, "num_sync_all_streams") == 1);
  CHECK(stat(*a, "active.all.current") == 0);
  CHECK(stat(*a, "segment.all.current") == 0);
  CHECK(fake::device().live_bytes() == 0);
}

TEST_CASE("CachingAllocator: a block used on two streams waits for both; each stream's events are polled") {
  auto a = make();
  constexpr fake::Stream s3{3};
  void* p = a->allocate(4096, s1);
  void* x = a->allocate(8192, s1);
  CHECK(x == at(p, 4096));
  a->record_stream(p, s2);
  a->record_stream(p, s3);
  a->record_stream(x, s3);
  a->free(p);
  a->free(x);
  CHECK(fake::device().recorded.size() == 3);
  CHECK(stat(*a, "active.all.current") == 2);
  // s3's events complete, s2's does not. The poll at the next allocation frees x — s3's queue is
  // polled although s2's, before it, is blocked — but not p, which still waits for s2.
  fake::device().complete(3);
  void* y = a->allocate(8192, s1);
  CHECK(y == x);
  CHECK(stat(*a, "active.all.current") == 2);  // y, and p pending
  {
    const auto segments = a->snapshot();
    REQUIRE(segments.size() == 1);
    CHECK(segments[0].blocks.front().state == accel::BlockInfo::State::active_pending_free);
  }
  fake::device().complete(2);
  void* t = a->allocate(4096, s1);
  CHECK(t == p);
  // empty_cache() waits for both of a block's events and frees it once.
  a->record_stream(t, s2);
  a->record_stream(t, s3);
  a->free(t);
  a->free(y);
  a->empty_cache();
  CHECK(fake::device().syncs == 2);
  CHECK(stat(*a, "active.all.current") == 0);
  CHECK(stat(*a, "inactive_split.all.current") == 0);
  CHECK(stat(*a, "segment.all.current") == 0);
  CHECK(fake::device().live_bytes() == 0);
  CHECK(fake::device().bad_deallocs == 0);
}

TEST_CASE("CachingAllocator: an event wait that fails in empty_cache loses no pending block") {
  auto a = make();
  void* p = a->allocate(4096, s1);
  void* keep = a->allocate(4096, s1);
  a->record_stream(p, s2);
  a->free(p);
  fake::device().fail_syncs = true;
  CHECK_THROWS_WITH_AS(a->empty_cache(), "fake: event synchronize failed", std::runtime_error);
  fake::device().fail_syncs = false;
  CHECK(stat(*a, "active.all.current") == 2);  // p still waits for its event, and is tracked
  CHECK(a->snapshot().at(0).blocks.front().state == accel::BlockInfo::State::active_pending_free);
  fake::device().complete(2);
  void* q = a->allocate(4096, s1);  // polled: p is free again
  CHECK(q == p);
  a->free(q);
  a->free(keep);
  a->empty_cache();
  CHECK(stat(*a, "segment.all.current") == 0);
  CHECK(fake::device().live_bytes() == 0);
}

TEST_CASE("CachingAllocator: blocks split and merge; empty_cache releases only whole segments") {
  auto a = make();
  const std::size_t n = 256 * KiB;
  void* A = a->allocate(n, s1);
  void* B = a->allocate(n, s1);
  void* C = a->allocate(n, s1);
  CHECK(at(B, 0) == at(A, n));
  CHECK(at(C, 0) == at(A, 2 * n));
  CHECK(stat(*a, "segment.all.current") == 1);
  CHECK(stat(*a, "inactive_split.small_pool.current") == 1);  // the tail
  CHECK(stat(*a, "inactive_split_bytes.small_pool.current") == i64(2 * MiB - 3 * n));

  a->free(B);  // a hole between A and C
  CHECK(stat(*a, "inactive_split.all.current") == 2);
  CHECK(stat(*a, "inactive_split_bytes.all.current") == i64(2 * MiB - 2 * n));
  a->free(A);  // merges with B's hole
  CHECK(stat(*a, "inactive_split.all.current") == 2);
  CHECK(stat(*a, "inactive_split_bytes.all.current") == i64(2 * MiB - n));
  {
    const auto segments = a->snapshot();
    REQUIRE(segments.size() == 1);
    REQUIRE(segments[0].blocks.size() == 3);
    CHECK(segments[0].blocks[0].size == 2 * n);
    CHECK(segments[0].blocks[0].state == accel::BlockInfo::State::inactive);
    CHECK(segments[0].blocks[1].state == accel::BlockInfo::State::active_allocated);
    CHECK(segments[0].allocated_size == n);
  }
  a->empty_cache();  // C still lives in the segment: nothing can be released
  CHECK(stat(*a, "segment.all.current") == 1);
  CHECK(stat(*a, "num_device_free") == 0);

  // A request that fits the merged hole takes it, best fit, at the lowest address.
  void* D = a->allocate(2 * n, s1);
  CHECK(D == A);
  CHECK(stat(*a, "inactive_split.all.current") == 1);
  a->free(D);
  a->free(C);  // merges with both neighbours: the segment is whole again
  CHECK(stat(*a, "inactive_split.all.current") == 0);
  CHECK(stat(*a, "inactive_split_bytes.all.current") == 0);
  CHECK(a->snapshot().at(0).blocks.size() == 1);
  CHECK(stat(*a, "reserved_bytes.all.current") == i64(2 * MiB));
  a->empty_cache();
  CHECK(stat(*a, "segment.all.current") == 0);
  CHECK(stat(*a, "reserved_bytes.all.current") == 0);
  CHECK(stat(*a, "num_device_free") == 1);
  CHECK(fake::device().frees == 1);
  CHECK(fake::device().bad_deallocs == 0);

  // Freeing in the other order (C, B, A) ends the same way.
  A = a->allocate(n, s1);
  B = a->allocate(n, s1);
  C = a->allocate(n, s1);
  a->free(C);
  CHECK(stat(*a, "inactive_split.all.current") == 1);  // C merged into the tail
  a->free(B);
  CHECK(stat(*a, "inactive_split.all.current") == 1);
  a->free(A);
  CHECK(stat(*a, "inactive_split.all.current") == 0);
  a->empty_cache();
  CHECK(fake::device().live_bytes() == 0);
}

TEST_CASE("CachingAllocator: the block freed last comes back as merging and splitting it would give it") {
  // free() leaves the block unmerged until the next operation; an allocation of its size on its
  // stream takes it back directly. Nothing of this may show: pointers, statistics, snapshots, errors
  // and peaks are those of torch's merge-then-split (tests/memory/differential checks it at random).
  auto a = make();
  void* p = a->allocate(512, s1);
  a->free(p);
  CHECK_FALSE(a->is_allocated(p));
  CHECK(stat(*a, "inactive_split.all.current") == 0);  // the segment is whole again
  CHECK(stat(*a, "inactive_split_bytes.all.current") == 0);
  CHECK(stat(*a, "active.all.current") == 0);
  {
    const auto segments = a->snapshot();
    REQUIRE(segments.size() == 1);
    REQUIRE(segments[0].blocks.size() == 1);
    CHECK(segments[0].blocks[0].size == 2 * MiB);
    CHECK(segments[0].blocks[0].state == accel::BlockInfo::State::inactive);
    CHECK(segments[0].blocks[0].requested_size == 0);
  }
  CHECK_THROWS_AS(a->free(p), accel::InvalidArgumentError);  // freed twice
  void* q = a->allocate(300, s1);
  CHECK(q == p);
  CHECK(stat(*a, "allocation.all.allocated") == 2);
  CHECK(stat(*a, "inactive_split.small_pool.current") == 1);
  CHECK(stat(*a, "inactive_split_bytes.small_pool.current") == i64(2 * MiB - 512));
  CHECK(stat(*a, "requested_bytes.all.current") == 300);
  CHECK(stat(*a, "requested_bytes.all.peak") == 512);

  // A peak reset between the free and the allocation: the allocation makes the new peak.
  a->free(q);
  a->reset_peak_stats();
  CHECK(stat(*a, "allocated_bytes.all.peak") == 0);
  void* r = a->allocate(512, s1);
  CHECK(r == p);
  CHECK(stat(*a, "allocated_bytes.all.peak") == 512);
  CHECK(stat(*a, "active.all.peak") == 1);
  CHECK(stat(*a, "inactive_split.all.peak") == 1);

  // Another stream does not get it.
  a->free(r);
  void* other = a->allocate(512, s2);
  CHECK(other != p);
  a->free(other);

  // Best fit still decides: with A's hole (exactly 512 B) below it, the block freed last (C, which
  // would merge with the free tail into a larger block) is not the one handed out.
  void* A = a->allocate(512, s1);
  void* B = a->allocate(512, s1);
  void* C = a->allocate(512, s1);
  a->free(A);
  a->free(C);
  void* D = a->allocate(512, s1);
  CHECK(D == A);
  CHECK(stat(*a, "inactive_split.all.current") == 1);  // the tail C merged into
  void* C2 = a->allocate(512, s1);
  CHECK(C2 == C);
  // A block freed between two live ones (no merge) comes back, and the split counts follow it.
  a->free(B);
  CHECK(stat(*a, "inactive_split.all.current") == 2);
  CHECK(stat(*a, "inactive_split_bytes.small_pool.current") == i64(2 * MiB - 1024));
  void* E = a->allocate(512, s1);
  CHECK(E == B);
  CHECK(stat(*a, "inactive_split.all.current") == 1);
  CHECK(stat(*a, "inactive_split_bytes.small_pool.current") == i64(2 * MiB - 1536));
  a->free(D);
  a->free(E);
  a->free(C2);
  a->empty_cache();
  CHECK(fake::device().live_bytes() == 0);
  CHECK(stat(*a, "allocated_bytes.all.current") == 0);
}

TEST_CASE("CachingAllocator: a temporary freed and taken back again and again counts as merge-then-split") {
  // The repeat of one block's free and allocation reuses the checks of the first (repeat_block_). The
  // same operations are run twice: as they are, and with the waiting free finished after every
  // operation (retire_stream of a stream that never existed finishes it and changes nothing else), which
  // is torch's merge-then-split. Pointers (as offsets into the first segment), every statistic and the
  // snapshot must agree after every operation — also where the block's neighbours change between repeats
  // (its successor allocated, then freed) and across a peak reset.
  struct Trace {
    std::vector<std::map<std::string, std::int64_t>> stats;
    std::vector<std::vector<std::pair<std::size_t, int>>> blocks;  // each block's size and state, per step
    std::vector<std::ptrdiff_t> offsets;
  };
  const auto run = [](bool finish_each) {
    auto a = make();
    Trace t;
    char* base = nullptr;
    const auto step = [&](void* p) {
      if (finish_each) a->retire_stream(999);
      if (base == nullptr) base = static_cast<char*>(p);
      t.offsets.push_back(p == nullptr ? -1 : static_cast<char*>(p) - base);
      t.stats.push_back(a->stats().flat());
      std::vector<std::pair<std::size_t, int>> blocks;
      for (const auto& segment : a->snapshot()) {
        for (const auto& b : segment.blocks) blocks.emplace_back(b.size, static_cast<int>(b.state));
      }
      t.blocks.push_back(std::move(blocks));
    };
    const auto repeat = [&](void*& x, std::size_t bytes, int times) {
      for (int i = 0; i < times; ++i) {
        a->free(x);
        step(nullptr);
        x = a->allocate(bytes + static_cast<std::size_t>(i), s1);  // the same rounded size, other requests
        step(x);
      }
    };
    void* x = a->allocate(512, s1);  // merges with the segment's free tail when freed
    step(x);
    repeat(x, 300, 4);
    void* y = a->allocate(512, s1);  // x's successor now: x's free no longer merges
    step(y);
    a->free(x);
    step(nullptr);
    x = a->allocate(512, s1);
    step(x);
    repeat(x, 400, 4);
    a->reset_peak_stats();
    step(nullptr);
    repeat(x, 511, 2);
    a->free(y);  // the free tail grows back to x: x's free merges again
    step(nullptr);
    repeat(x, 257, 3);
    a->free(x);
    step(nullptr);
    return t;
  };
  const Trace direct = run(false);
  const Trace finished = run(true);
  REQUIRE(direct.stats.size() == finished.stats.size());
  CHECK(direct.stats.size() == 33);
  for (std::size_t i = 0; i < direct.stats.size(); ++i) {
    CAPTURE(i);
    CHECK(direct.offsets[i] == finished.offsets[i]);
    CHECK(direct.blocks[i] == finished.blocks[i]);
    for (const auto& entry : finished.stats[i]) {  // not a structured binding: clang 14's CAPTURE cannot take one
      const std::string& key = entry.first;
      CAPTURE(key);
      CHECK(direct.stats[i].at(key) == entry.second);
    }
  }
  // What the run did, in figures: x came back at the segment's start every time, y after it.
  for (const std::ptrdiff_t offset : direct.offsets) CHECK((offset == -1 || offset == 0 || offset == 512));
  CHECK(direct.stats.back().at("allocation.all.allocated") == 16);
  CHECK(direct.stats.back().at("allocation.all.current") == 0);
  CHECK(direct.stats.back().at("inactive_split.all.current") == 0);
  CHECK(direct.stats.back().at("requested_bytes.all.allocated") ==
        512 + (300 + 301 + 302 + 303) + 512 + 512 + (400 + 401 + 402 + 403) + (511 + 512) + (257 + 258 + 259));
}

TEST_CASE("CachingAllocator: large-pool splits keep only remainders over 1 MiB") {
  auto a = make(40 * MiB);
  void* p = a->allocate(2 * MiB, s1);  // 20 MiB segment, split: 18 MiB remain
  CHECK(stat(*a, "inactive_split_bytes.large_pool.current") == i64(18 * MiB));
  void* q = a->allocate(19 * MiB, s1);  // its own 20 MiB segment; a 1 MiB remainder is not split off
  CHECK(stat(*a, "allocated_bytes.large_pool.current") == i64(22 * MiB));
  CHECK(stat(*a, "requested_bytes.large_pool.current") == i64(21 * MiB));
  CHECK(stat(*a, "segment.large_pool.current") == 2);
  a->free(q);
  a->free(p);
  CHECK(stat(*a, "inactive_split.all.current") == 0);
}

TEST_CASE("CachingAllocator: small-pool splits keep remainders of 512 B and more") {
  auto a = make(40 * MiB);
  void* A = a->allocate(1024, s1);
  void* B = a->allocate(512, s1);  // keeps A's hole from merging with the segment's tail
  a->free(A);                      // a free block of exactly 1,024 B
  CHECK(stat(*a, "inactive_split.small_pool.current") == 2);
  void* C = a->allocate(512, s1);  // best fit: A's hole, split; the 512 B left is a block (torch: >= kMinBlockSize)
  CHECK(C == A);
  CHECK(stat(*a, "allocated_bytes.small_pool.current") == 1024);
  CHECK(stat(*a, "inactive_split.small_pool.current") == 2);  // the remainder and the tail
  CHECK(stat(*a, "inactive_split_bytes.small_pool.current") == i64(512 + (2 * MiB - 1536)));
  void* D = a->allocate(512, s1);  // the 512 B remainder
  CHECK(D == at(A, 512));
  CHECK(stat(*a, "inactive_split.small_pool.current") == 1);  // the tail only
  CHECK(stat(*a, "inactive_split_bytes.small_pool.current") == i64(2 * MiB - 1536));
  a->free(C);
  a->free(D);
  a->free(B);
  CHECK(stat(*a, "inactive_split.all.current") == 0);
  CHECK(a->snapshot().at(0).blocks.size() == 1);
}

TEST_CASE("CachingAllocator: the OOM ladder releases the cache, retries, then throws with the figures") {
  auto a = make(40 * MiB);
  void* A = a->allocate(16 * MiB, s1);
  void* B = a->allocate(16 * MiB, s1);
  a->free(A);
  a->free(B);
  CHECK(stat(*a, "reserved_bytes.all.current") == i64(32 * MiB));

  // 24 MiB does not fit beside the 32 MiB cache: release it all, retry, succeed.
  void* C = a->allocate(24 * MiB, s1);
  REQUIRE(C != nullptr);
  CHECK(stat(*a, "num_alloc_retries") == 1);
  CHECK(stat(*a, "num_sync_all_streams") == 1);
  CHECK(stat(*a, "num_device_free") == 2);
  CHECK(stat(*a, "num_ooms") == 0);
  CHECK(stat(*a, "reserved_bytes.all.current") == i64(24 * MiB));

  // More than the device holds: the whole ladder, then OutOfMemoryError.
  const auto before = a->stats();
  try {
    (void)a->allocate(100 * MiB, s1);
    FAIL("allocated more than the capacity");
  } catch (const accel::OutOfMemoryError& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(e.code() == accel::Errc::out_of_memory);
    CHECK(e.requested_bytes() == 100 * MiB);
    CHECK(what.find("fake:0 out of memory") != std::string::npos);
    CHECK(what.find("tried to allocate 100.00 MiB") != std::string::npos);
    CHECK(what.find("total capacity of 40.00 MiB") != std::string::npos);
    CHECK(what.find("16.00 MiB is free") != std::string::npos);
    CHECK(what.find("24.00 MiB is allocated") != std::string::npos);
    CHECK(what.find("0 bytes is reserved but unallocated") != std::string::npos);
    CHECK(what.find("No memory fraction limit") != std::string::npos);
  }
  const auto after = a->stats();
  CHECK(after.num_ooms == 1);
  CHECK(after.num_alloc_retries == 2);
  CHECK(after.allocated_bytes == before.allocated_bytes);
  CHECK(after.reserved_bytes == before.reserved_bytes);
  CHECK(after.active == before.active);

  // Still usable.
  a->free(C);
  void* D = a->allocate(8 * MiB, s1);
  CHECK(D == C);  // carved from the cached 24 MiB segment
  a->free(D);
  a->empty_cache();
  CHECK(fake::device().live_bytes() == 0);
}

TEST_CASE("CachingAllocator: max_split_size keeps oversize blocks whole and frees them first") {
  auto a = make(64 * MiB, "max_split_size_mb:20");
  CHECK(stat(*a, "max_split_size") == i64(20 * MiB));
  void* big = a->allocate(24 * MiB, s1);
  CHECK(stat(*a, "oversize_allocations.current") == 1);
  CHECK(stat(*a, "oversize_segments.current") == 1);
  a->free(big);
  CHECK(stat(*a, "oversize_allocations.current") == 0);

  // A request below max_split_size never takes an oversize block.
  void* small = a->allocate(4 * MiB, s1);
  CHECK(small != big);
  CHECK(stat(*a, "segment.large_pool.current") == 2);
  a->free(small);

  // An oversize request takes a cached oversize block less than 20 MiB larger, unsplit.
  void* near = a->allocate(22 * MiB, s1);
  CHECK(near == big);
  CHECK(stat(*a, "allocated_bytes.all.current") == i64(24 * MiB));
  a->free(near);

  // An oversize block too large to round into is released before anything else is.
  a->empty_cache();
  void* huge = a->allocate(44 * MiB, s1);
  a->free(huge);
  a->reset_accumulated_stats();
  void* mid = a->allocate(22 * MiB, s1);  // 44 - 22 >= 20: not taken; 44 + 22 > 64: freed, then allocated
  CHECK(mid != nullptr);
  CHECK(stat(*a, "num_device_free") == 1);
  CHECK(stat(*a, "num_alloc_retries") == 0);
  CHECK(stat(*a, "num_sync_all_streams") == 0);
  a->free(mid);
  a->empty_cache();
  CHECK(stat(*a, "oversize_segments.current") == 0);
  CHECK(fake::device().live_bytes() == 0);
}

TEST_CASE("CachingAllocator: garbage collection frees old cached blocks without a flush") {
  auto a = make(100 * MiB, "garbage_collection_threshold:0.5");
  a->set_memory_fraction(1.0);
  void* x = a->allocate(30 * MiB, s1);
  void* y = a->allocate(30 * MiB, s1);
  a->free(x);
  a->free(y);
  void* z = a->allocate(4 * MiB, s2);  // reserved 60 MiB > 0.5 * 100 MiB: collect first
  CHECK(stat(*a, "num_device_free") >= 1);
  CHECK(stat(*a, "num_sync_all_streams") == 0);
  CHECK(stat(*a, "num_alloc_retries") == 0);
  a->free(z);
}

TEST_CASE("CachingAllocator: a memory fraction caps reserved bytes") {
  auto a = make(40 * MiB);
  a->set_memory_fraction(0.5);  // 20 MiB
  CHECK(a->memory_fraction() == 0.5);
  CHECK(a->allowed_memory() == 20 * MiB);
  void* p = a->allocate(KiB, s1);         // 2 MiB segment
  void* q = a->allocate(16 * MiB, s1);    // 16 MiB segment: 18 MiB reserved
  try {
    (void)a->allocate(4 * MiB, s1);  // a 20 MiB segment would exceed the cap
    FAIL("exceeded the memory fraction");
  } catch (const accel::OutOfMemoryError& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(what.find("tried to allocate 20.00 MiB (a segment for a request of 4194304 bytes)") != std::string::npos);
    CHECK(what.find("The limit is 20.00 MiB (memory fraction 0.5)") != std::string::npos);
  }
  CHECK(fake::device().allocs == 2);         // the device was never asked
  CHECK(fake::device().failed_allocs == 0);
  CHECK(stat(*a, "num_ooms") == 1);
  a->free(q);
  void* r = a->allocate(4 * MiB, s1);  // fits in the cached 16 MiB segment
  CHECK(r == q);
  a->free(r);
  a->empty_cache();  // the 16 MiB segment goes; the 2 MiB one holds p
  // A segment that fills the cap exactly is allowed (torch refuses only reserved + size > the limit).
  void* exact = a->allocate(18 * MiB, s1);
  CHECK(stat(*a, "reserved_bytes.all.current") == i64(20 * MiB));
  CHECK(stat(*a, "num_ooms") == 1);
  CHECK_THROWS_AS((void)a->allocate(2 * MiB, s1), accel::OutOfMemoryError);  // and one byte more is not
  a->free(exact);
  a->free(p);
  for (const auto& value_and_text : {std::pair{0.0, "(0)"}, std::pair{-0.5, "(-0.5)"}, std::pair{1.5, "(1.5)"},
                                     std::pair{std::numeric_limits<double>::quiet_NaN(), "(nan)"},
                                     std::pair{-1e-9, "(-1e-09)"}}) {
    const double bad = value_and_text.first;  // not a structured binding: clang 14 cannot capture one
    CAPTURE(bad);
    const std::string call = std::string("set_per_process_memory_fraction") + value_and_text.second;
    CHECK_THROWS_WITH_AS(a->set_memory_fraction(bad), doctest::Contains(call.c_str()),
                         accel::InvalidArgumentError);  // the value as given, then the rule
    CHECK_THROWS_WITH_AS(a->set_memory_fraction(bad), doctest::Contains("the fraction must be in (0, 1]"),
                         accel::InvalidArgumentError);
  }
  CHECK(a->memory_fraction() == 0.5);
}

TEST_CASE("CachingAllocator: bad frees throw InvalidArgumentError and change nothing") {
  auto a = make();
  void* p = a->allocate(4096, s1);
  void* keep = a->allocate(4096, s1);
  const auto before = a->stats().flat();
  int not_ours = 0;
  try {
    a->free(&not_ours);
    FAIL("freed a foreign pointer");
  } catch (const accel::InvalidArgumentError& e) {
    CHECK(std::string(e.what()).find("was not allocated by fake:0's caching allocator (or was already freed)") !=
          std::string::npos);
  }
  try {
    a->free(at(p, 512));
    FAIL("freed an interior pointer");
  } catch (const accel::InvalidArgumentError& e) {
    CHECK(std::string(e.what()).find("inside") != std::string::npos);
  }
  CHECK_THROWS_AS(a->record_stream(&not_ours, s2), accel::InvalidArgumentError);
  CHECK(a->stats().flat() == before);
  CHECK_FALSE(a->try_free(&not_ours));
  a->free(nullptr);  // a no-op
  CHECK(a->stats().flat() == before);

  a->free(p);
  const auto after_free = a->stats().flat();
  CHECK_THROWS_AS(a->free(p), accel::InvalidArgumentError);  // double free
  CHECK(a->stats().flat() == after_free);
  CHECK(a->owns(p));
  CHECK(a->owns(at(keep, 100)));
  CHECK_FALSE(a->owns(&not_ours));
  CHECK_FALSE(a->is_allocated(p));
  CHECK(a->is_allocated(keep));
  a->free(keep);
}

TEST_CASE("CachingAllocator: zero and huge sizes") {
  auto a = make();
  const auto before = a->stats().flat();
  CHECK(a->allocate(0, s1) == nullptr);
  CHECK(a->stats().flat() == before);

  for (std::size_t huge : {std::numeric_limits<std::size_t>::max(), std::numeric_limits<std::size_t>::max() - 100,
                           accel::caching::max_request + 1, accel::caching::max_request, std::size_t{1} << 40}) {
    CAPTURE(huge);
    const auto ooms = stat(*a, "num_ooms");
    try {
      (void)a->allocate(huge, s1);
      FAIL("a huge allocation succeeded");
    } catch (const accel::OutOfMemoryError& e) {
      CHECK(e.requested_bytes() == huge);
      CHECK(std::string(e.what()).find("fake:0") != std::string::npos);
    }
    CHECK(stat(*a, "num_ooms") == ooms + 1);
    CHECK(stat(*a, "allocated_bytes.all.current") == 0);
    CHECK(stat(*a, "reserved_bytes.all.current") == 0);
    CHECK(stat(*a, "active.all.current") == 0);
  }
  // The same with power-of-two rounding, which must not overflow either.
  auto r = make(40 * MiB, "roundup_power2_divisions:8");
  CHECK_THROWS_AS((void)r->allocate(accel::caching::max_request, s1), accel::OutOfMemoryError);
  void* p = a->allocate(100, s1);
  CHECK(p != nullptr);
  a->free(p);
}

TEST_CASE("CachingAllocator: peak and accumulated resets follow torch") {
  auto a = make();
  void* p = a->allocate(MiB, s1);
  void* q = a->allocate(MiB, s1);  // the rest of the same 2 MiB segment
  CHECK(stat(*a, "segment.all.current") == 1);
  a->free(q);
  CHECK(stat(*a, "allocated_bytes.all.current") == i64(MiB));
  CHECK(stat(*a, "allocated_bytes.all.peak") == i64(2 * MiB));
  CHECK(stat(*a, "allocated_bytes.all.allocated") == i64(2 * MiB));
  CHECK(stat(*a, "allocated_bytes.all.freed") == i64(MiB));
  CHECK(stat(*a, "allocation.small_pool.peak") == 2);

  a->reset_peak_stats();
  CHECK(stat(*a, "allocated_bytes.all.peak") == i64(MiB));
  CHECK(stat(*a, "allocation.small_pool.peak") == 1);
  CHECK(stat(*a, "reserved_bytes.all.peak") == i64(2 * MiB));
  CHECK(stat(*a, "allocated_bytes.all.allocated") == i64(2 * MiB));  // untouched by reset_peak

  a->reset_accumulated_stats();
  const auto flat = a->stats().flat();
  for (const auto& entry : flat) {  // not a structured binding: clang 14 cannot capture one (CAPTURE)
    const std::string& key = entry.first;
    CAPTURE(key);
    if (key.ends_with(".allocated") || key.ends_with(".freed") || key.starts_with("num_")) CHECK(entry.second == 0);
  }
  CHECK(flat.at("allocated_bytes.all.current") == i64(MiB));
  CHECK(flat.at("allocated_bytes.all.peak") == i64(MiB));
  CHECK(flat.at("max_split_size") == -1);
  a->free(p);
  CHECK(stat(*a, "allocated_bytes.all.freed") == i64(MiB));
}

TEST_CASE("MemoryStats::flat has exactly torch's keys") {
  const std::set<std::string> expected = {
    "active.all.allocated", "active.all.current", "active.all.freed", "active.all.peak",
    "active.large_pool.allocated", "active.large_pool.current", "active.large_pool.freed",
    "active.large_pool.peak", "active.small_pool.allocated", "active.small_pool.current",
    "active.small_pool.freed", "active.small_pool.peak", "active_bytes.all.allocated",
    "active_bytes.all.current", "active_bytes.all.freed", "active_bytes.all.peak",
    "active_bytes.large_pool.allocated", "active_bytes.large_pool.current", "active_bytes.large_pool.freed",
    "active_bytes.large_pool.peak", "active_bytes.small_pool.allocated", "active_bytes.small_pool.current",
    "active_bytes.small_pool.freed", "active_bytes.small_pool.peak", "allocated_bytes.all.allocated",
    "allocated_bytes.all.current", "allocated_bytes.all.freed", "allocated_bytes.all.peak",
    "allocated_bytes.large_pool.allocated", "allocated_bytes.large_pool.current",
    "allocated_bytes.large_pool.freed", "allocated_bytes.large_pool.peak",
    "allocated_bytes.small_pool.allocated", "allocated_bytes.small_pool.current",
    "allocated_bytes.small_pool.freed", "allocated_bytes.small_pool.peak", "allocation.all.allocated",
    "allocation.all.current", "allocation.all.freed", "allocation.all.peak",
    "allocation.large_pool.allocated", "allocation.large_pool.current", "allocation.large_pool.freed",
    "allocation.large_pool.peak", "allocation.small_pool.allocated", "allocation.small_pool.current",
    "allocation.small_pool.freed", "allocation.small_pool.peak", "inactive_split.all.allocated",
    "inactive_split.all.current", "inactive_split.all.freed", "inactive_split.all.peak",
    "inactive_split.large_pool.allocated", "inactive_split.large_pool.current",
    "inactive_split.large_pool.freed", "inactive_split.large_pool.peak",
    "inactive_split.small_pool.allocated", "inactive_split.small_pool.current",
    "inactive_split.small_pool.freed", "inactive_split.small_pool.peak",
    "inactive_split_bytes.all.allocated", "inactive_split_bytes.all.current",
    "inactive_split_bytes.all.freed", "inactive_split_bytes.all.peak",
    "inactive_split_bytes.large_pool.allocated", "inactive_split_bytes.large_pool.current",
    "inactive_split_bytes.large_pool.freed", "inactive_split_bytes.large_pool.peak",
    "inactive_split_bytes.small_pool.allocated", "inactive_split_bytes.small_pool.current",
    "inactive_split_bytes.small_pool.freed", "inactive_split_bytes.small_pool.peak", "max_split_size",
    "num_alloc_retries", "num_device_alloc", "num_device_free", "num_ooms", "num_sync_all_streams",
    "oversize_allocations.allocated", "oversize_allocations.current", "oversize_allocations.freed",
    "oversize_allocations.peak", "oversize_segments.allocated", "oversize_segments.current",
    "oversize_segments.freed", "oversize_segments.peak", "requested_bytes.all.allocated",
    "requested_bytes.all.current", "requested_bytes.all.freed", "requested_bytes.all.peak",
    "requested_bytes.large_pool.allocated", "requested_bytes.large_pool.current",
    "requested_bytes.large_pool.freed", "requested_bytes.large_pool.peak",
    "requested_bytes.small_pool.allocated", "requested_bytes.small_pool.current",
    "requested_bytes.small_pool.freed", "requested_bytes.small_pool.peak", "reserved_bytes.all.allocated",
    "reserved_bytes.all.current", "reserved_bytes.all.freed", "reserved_bytes.all.peak",
    "reserved_bytes.large_pool.allocated", "reserved_bytes.large_pool.current",
    "reserved_bytes.large_pool.freed", "reserved_bytes.large_pool.peak",
    "reserved_bytes.small_pool.allocated", "reserved_bytes.small_pool.current",
    "reserved_bytes.small_pool.freed", "reserved_bytes.small_pool.peak", "segment.all.allocated",
    "segment.all.current", "segment.all.freed", "segment.all.peak", "segment.large_pool.allocated",
    "segment.large_pool.current", "segment.large_pool.freed", "segment.large_pool.peak",
    "segment.small_pool.allocated", "segment.small_pool.current", "segment.small_pool.freed",
    "segment.small_pool.peak",
  };
  auto a = make();
  const auto flat = a->stats().flat();
  std::set<std::string> keys;
  for (const auto& [key, value] : flat) keys.insert(key);
  CHECK(keys.size() == 122);
  CHECK(keys == expected);
  CHECK(flat.at("max_split_size") == -1);  // unlimited reads as -1, as in torch
}

TEST_CASE("CachingAllocator: threads allocating and freeing at random keep the books balanced") {
  auto a = make(std::size_t{64} << 30);  // fake addresses: nothing is really reserved
  constexpr int threads = 4;
  constexpr int ops = 20000;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&a, t] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(t) + 1);
      const fake::Stream streams[2] = {fake::Stream{static_cast<std::uint64_t>(t % 2) + 1},
                                       fake::Stream{static_cast<std::uint64_t>(t) + 10}};
      std::vector<void*> live;
      for (int i = 0; i < ops; ++i) {
        if (!live.empty() && (live.size() >= 32 || rng() % 2 == 0)) {
          const std::size_t k = rng() % live.size();
          a->free(live[k]);
          live[k] = live.back();
          live.pop_back();
        } else {
          const std::size_t kind = rng() % 8;
          const std::size_t bytes = kind < 5 ? 1 + rng() % (64 * KiB) : kind < 7 ? 1 + rng() % (4 * MiB) : 1 + rng() % (24 * MiB);
          live.push_back(a->allocate(bytes, streams[rng() % 2]));
        }
      }
      for (void* p : live) a->free(p);
    });
  }
  for (auto& th : pool) th.join();
  const auto stats = a->stats();
  CHECK(stats.allocated_bytes.all().current == 0);
  CHECK(stats.allocation.all().current == 0);
  CHECK(stats.active.all().current == 0);
  CHECK(stats.requested_bytes.all().current == 0);
  CHECK(stats.inactive_split.all().current == 0);  // every segment merged back whole
  CHECK(stats.allocation.all().allocated == stats.allocation.all().freed);
  std::size_t segment_bytes = 0;
  for (const auto& s : a->snapshot()) {
    segment_bytes += s.total_size;
    CHECK(s.blocks.size() == 1);
  }
  CHECK(stats.reserved_bytes.all().current == i64(segment_bytes));
  CHECK(stats.reserved_bytes.all().current == i64(fake::device().live_bytes()));
  CHECK(stats.segment.all().current == stats.num_device_alloc - stats.num_device_free);
  a->empty_cache();
  CHECK(fake::device().live_bytes() == 0);
  CHECK(fake::device().bad_deallocs == 0);
}

TEST_CASE("CachingAllocator: destruction returns every segment") {
  auto a = make();
  void* live = a->allocate(5 * MiB, s1);
  void* cached = a->allocate(KiB, s1);
  a->free(cached);
  a->record_stream(live, s2);
  CHECK(live != nullptr);
  a.reset();
  CHECK(fake::device().live_bytes() == 0);
  CHECK(fake::device().bad_deallocs == 0);
}

namespace {

// Resident bytes of this process (/proc/self/statm), or 0 when it cannot be read.
std::size_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long size = 0;
  unsigned long long resident = 0;
  const int read = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  return read == 2 ? static_cast<std::size_t>(resident) * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)) : 0;
}

// Under the address and thread sanitizers, freed heap memory stays resident (quarantine, shadow), so
// the resident-size checks hold only in plain builds; the allocator's own byte count holds everywhere.
constexpr bool rss_observable = !accel_test::sanitized_build;

}  // namespace

TEST_CASE("CachingAllocator: the bookkeeping of a peak goes back with the cache at empty_cache()") {
  // A peak of 300,000 small blocks (150 MiB of fake memory in 2 MiB segments) needs ~53 MiB of
  // records: blocks, segments, the live-block index. Once the cache is empty, so are they. (A third
  // as many under the sanitizers, where the resident size is not checked and every call is slower.)
  constexpr std::size_t blocks = rss_observable ? 300000 : 100000;
  auto a = make(std::size_t{1} << 30);
  std::vector<void*> live(blocks, nullptr);  // resident before the first measure
  const std::size_t rss_before = resident_bytes();
  for (std::size_t i = 0; i < blocks; ++i) live[i] = a->allocate(512, s1);
  const std::size_t peak_bookkeeping = a->bookkeeping_bytes();
  const std::size_t rss_peak = resident_bytes();
  MESSAGE("bookkeeping at the peak: " << peak_bookkeeping / KiB << " KiB, resident +" << (rss_peak - rss_before) / KiB
                                      << " KiB");
  CHECK(peak_bookkeeping > blocks * 100);  // ~180 bytes a block
  for (void* p : live) a->free(p);
  CHECK(a->bookkeeping_bytes() == peak_bookkeeping);  // cached blocks keep their records until empty_cache

  a->empty_cache();
  CHECK(stat(*a, "reserved_bytes.all.current") == 0);
  CHECK(a->bookkeeping_bytes() < MiB);
  const std::size_t rss_after = resident_bytes();
  MESSAGE("after empty_cache: bookkeeping " << a->bookkeeping_bytes() << " bytes, resident " << i64(rss_after) - i64(rss_before)
                                            << " bytes above the start");
  if (rss_observable) {
    CHECK(rss_peak > rss_before + blocks * 100);
    CHECK(rss_after < rss_before + 2 * MiB);  // a few heap pages may stay with malloc
  }

  // It shrinks with the cache, not only to zero: one live block keeps one segment and a few records.
  for (std::size_t i = 0; i < blocks; ++i) live[i] = a->allocate(512, s1);
  for (std::size_t i = 1; i < blocks; ++i) a->free(live[i]);
  a->empty_cache();
  CHECK(stat(*a, "segment.all.current") == 1);
  CHECK(a->bookkeeping_bytes() < MiB);
  // And everything still works: the surviving block is found, new ones are made.
  void* p = a->allocate(4 * KiB, s1);
  CHECK(a->is_allocated(live[0]));
  CHECK(stat(*a, "allocation.all.current") == 2);
  a->free(live[0]);
  a->free(p);
  a->empty_cache();
  CHECK(fake::device().live_bytes() == 0);
  CHECK(fake::device().bad_deallocs == 0);
}

// ---- streams that are gone (retire_stream) ------------------------------------------------------------

TEST_CASE("CachingAllocator: a retired stream's cached blocks serve the next stream that needs them") {
  auto a = make(64 * MiB);
  constexpr fake::Stream s3{3};
  void* small = a->allocate(3 * KiB, s1);
  void* mid = a->allocate(5 * MiB, s1);  // a 20 MiB segment, split
  void* live = a->allocate(KiB, s1);     // still allocated when s1 goes
  a->free(small);
  a->free(mid);
  CHECK(stat(*a, "segment.all.current") == 2);
  CHECK(fake::device().allocs == 2);

  // Before s1 is retired, s2 never takes its blocks.
  void* other = a->allocate(3 * KiB, s2);
  CHECK(fake::device().allocs == 3);
  a->free(other);

  a->retire_stream(1);
  for (const auto& seg : a->snapshot()) {
    if (seg.stream != 2) CHECK(seg.stream == fake::Allocator::retired_stream);
  }
  // s3 misses in its own pool (it has none) and takes s1's best-fitting block, with its segment.
  void* big = a->allocate(6 * MiB, s3);
  CHECK(big == mid);
  CHECK(fake::device().allocs == 3);  // no new segment
  void* small3 = a->allocate(2 * KiB, s3);
  CHECK(fake::device().allocs == 3);
  CHECK(small3 != nullptr);
  std::map<std::uint64_t, int> segments_of;
  for (const auto& seg : a->snapshot()) ++segments_of[seg.stream];
  CHECK(segments_of == std::map<std::uint64_t, int>{{2, 1}, {3, 2}});

  // s1's last live block, freed after s1 went, merges into its (now s3's) segment's free space.
  a->free(live);
  a->free(small3);
  a->free(big);
  CHECK(stat(*a, "allocation.all.current") == 0);
  CHECK(stat(*a, "inactive_split.all.current") == 0);  // every segment whole again
  a->empty_cache();
  CHECK(stat(*a, "reserved_bytes.all.current") == 0);
  CHECK(fake::device().live_bytes() == 0);
  CHECK(fake::device().bad_deallocs == 0);
}

TEST_CASE("CachingAllocator: retiring a stream keeps the allocation rules and drops its record_stream uses") {
  auto a = make(64 * MiB, "max_split_size_mb:20");
  constexpr fake::Stream s3{3};
  // An oversize block of a retired stream is not given to a small request (the oversize rule).
  void* oversize = a->allocate(30 * MiB, s1);
  a->free(oversize);
  a->retire_stream(1);
  void* small = a->allocate(2 * MiB, s3);
  CHECK(small != oversize);
  CHECK(stat(*a, "segment.all.current") == 2);
  void* again = a->allocate(30 * MiB, s3);  // an oversize request takes it
  CHECK(again == oversize);
  CHECK(stat(*a, "segment.all.current") == 2);

  // A block used on a stream that is retired before the free: that stream's work is done, so the
  // free records no event on it and the block is cached at once.
  void* p = a->allocate(4 * KiB, s3);
  a->record_stream(p, s2);
  const std::size_t events = fake::device().recorded.size();
  a->retire_stream(2);
  a->free(p);
  CHECK(fake::device().recorded.size() == events);
  CHECK(stat(*a, "active.all.current") == 2);  // small and again: p is not pending
  void* q = a->allocate(4 * KiB, s3);
  CHECK(q == p);

  // A block pending on an event when its allocation stream is retired joins the retired blocks once
  // the event completes.
  constexpr fake::Stream s4{4};
  constexpr fake::Stream s5{5};
  void* r = a->allocate(MiB, s4);
  a->record_stream(r, s5);
  a->free(r);
  a->retire_stream(4);
  fake::device().complete(5);
  constexpr fake::Stream s6{6};
  void* t = a->allocate(MiB, s6);
  CHECK(t == r);
  for (void* x : {small, again, q, t}) a->free(x);
  a->empty_cache();
  CHECK(fake::device().live_bytes() == 0);
  CHECK(fake::device().bad_deallocs == 0);
}

TEST_CASE("CachingAllocator: 1,000 steps with a fresh stream each keep one step's working set reserved") {
  // The pattern of an engine that makes a stream per step: a working set of mixed sizes on the
  // step's stream, freed at the end of the step, and the stream destroyed. Before retire_stream,
  // each step cached its whole working set anew (64 MiB a step in the report).
  auto a = make(std::size_t{1} << 30);
  constexpr std::size_t sizes[] = {3 * KiB, 700 * KiB, 300, 5 * MiB, 12 * MiB, 64 * KiB, 2 * MiB + 1};
  std::int64_t first_step_reserved = 0;
  std::int64_t max_reserved = 0;
  for (std::uint64_t step = 0; step < 1000; ++step) {
    const fake::Stream s{100 + step};
    std::vector<void*> buffers;
    for (const std::size_t n : sizes) buffers.push_back(a->allocate(n, s));
    for (void* p : buffers) a->free(p);
    a->retire_stream(s.id());
    const std::int64_t reserved = a->reserved_bytes().current;
    if (step == 0) first_step_reserved = reserved;
    max_reserved = std::max(max_reserved, reserved);
  }
  MESSAGE("reserved after step 1: " << first_step_reserved << " bytes; at most " << max_reserved);
  CHECK(max_reserved <= 2 * first_step_reserved);
  CHECK(stat(*a, "num_alloc_retries") == 0);
  a->empty_cache();
  CHECK(fake::device().live_bytes() == 0);
}

TEST_CASE("CachingAllocator: a graph pool's segments are not handed to other streams when its stream retires") {
  auto a = make(64 * MiB);
  a->begin_allocate_to_pool(7, 1);
  void* p = a->allocate(4 * KiB, s1);
  a->end_allocate_to_pool(7, 1);
  a->free(p);
  a->retire_stream(1);
  void* q = a->allocate(4 * KiB, s2);
  CHECK(q != p);
  CHECK(a->pool_reserved_bytes(7) == i64(2 * MiB));
  a->free(q);
  a->release_pool(7);
  a->empty_cache();
  CHECK(fake::device().live_bytes() == 0);
}

TEST_CASE("CachingAllocator: a graph pool released while its stream still allocates to it keeps serving that stream") {
  // A Graph destroyed (or moved over) during its capture releases the pool before the capture ends;
  // the pool was then forgotten while the stream still routed to it, and its next allocation read
  // freed memory (an ASan heap-buffer-overflow in the pool lookup).
  auto a = make(64 * MiB);
  a->begin_allocate_to_pool(7, 1);
  a->release_pool(7);
  void* p = a->allocate(4 * KiB, s1);
  REQUIRE(p != nullptr);
  CHECK(a->pool_reserved_bytes(7) == i64(2 * MiB));
  CHECK(stat(*a, "reserved_bytes.all.current") == i64(2 * MiB));
  void* q = a->allocate(4 * KiB, s2);  // another stream: not from the pool's segment
  CHECK(stat(*a, "segment.all.current") == 2);
  a->free(p);  // no graph holds the pool: its segment goes back as soon as it is free
  CHECK(a->pool_reserved_bytes(7) == 0);
  CHECK(stat(*a, "num_device_free") == 1);
  void* r = a->allocate(4 * KiB, s1);  // still routed to the pool
  CHECK(a->pool_reserved_bytes(7) == i64(2 * MiB));
  a->end_allocate_to_pool(7, 1);
  a->free(r);
  CHECK(a->pool_reserved_bytes(7) == 0);
  CHECK(stat(*a, "num_device_free") == 2);
  void* t = a->allocate(4 * KiB, s1);  // the ordinary pools again: a new segment, not the pool's
  CHECK(a->pool_reserved_bytes(7) == 0);
  CHECK(stat(*a, "segment.all.current") == 2);
  a->free(t);
  a->free(q);
  a->empty_cache();
  CHECK(fake::device().live_bytes() == 0);
  CHECK(fake::device().bad_deallocs == 0);
}
