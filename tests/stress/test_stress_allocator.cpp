// Stress: the CPU backend's caching allocator under 8 threads of random-size allocations and frees,
// across streams, with record_stream. A monitor thread checks the statistics' invariants about every
// millisecond; at the end, after every free, nothing is allocated, reserved is exactly the sum of
// the snapshot's segments, and after empty_cache() nothing is reserved. Every live allocation carries
// a tag at both ends, checked at free and by the streams it was used on: a block handed out twice,
// or reused before a stream that used it ran, breaks a tag. ACCEL_STRESS_SCALE scales the load.
#include "support/sizes.hpp"
#include "stress/stress_stats.hpp"
#include "stress/stress_support.hpp"

#include <accel/cpu/backend.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>
#include <array>

namespace {

using accel::cpu::Memory;
using accel::cpu::Stream;
using accel::cpu::StreamRef;
using accel_test::Rng;
using accel_test::scaled;
using Clock = std::chrono::steady_clock;

using accel_test::check_invariants;
using accel_test::check_monotone;
using accel_test::StatsMonitor;

// A size for the allocator stress: mostly small-pool requests (1 B .. 1 MiB), some large ones up to
// 24 MiB, every size class of the rounding rules touched.
std::size_t random_size(Rng& rng) {
  const std::uint64_t pick = rng.below(100);
  if (pick < 55) return rng.log_uniform(1, 64 * KiB);
  if (pick < 90) return rng.log_uniform(64 * KiB, MiB);
  return rng.log_uniform(MiB, 24 * MiB);
}

// The tag an allocation carries in its first and last 8 bytes while it is live: if the allocator
// handed its block (or a block overlapping its ends) to anyone else, or reused it before a stream
// that used it ran, a check of the tag fails.
// (Below 16 bytes the two would overlap: only the head; below 8 bytes no tag.)
void write_tag(void* p, std::size_t n, std::uint64_t tag) {
  if (n >= 8) std::memcpy(p, &tag, 8);
  if (n >= 16) std::memcpy(static_cast<char*>(p) + n - 8, &tag, 8);
}
bool tag_intact(const void* p, std::size_t n, std::uint64_t tag) {
  std::uint64_t head = tag;
  std::uint64_t tail = tag;
  if (n >= 8) std::memcpy(&head, p, 8);
  if (n >= 16) std::memcpy(&tail, static_cast<const char*>(p) + n - 8, 8);
  return head == tag && tail == tag;
}

}  // namespace

// ---- the caching allocator under 8 threads, across streams, with record_stream -------------------

TEST_CASE("stress: 8 threads of random-size allocations and frees across streams with record_stream") {
  constexpr int threads = 8;
  constexpr std::size_t max_live = 32;
  constexpr int use_streams = 4;
  const std::uint64_t ops = scaled(100'000, 200);

  Memory::empty_cache();
  Memory::reset_peak_memory_stats(0);
  REQUIRE(Memory::memory_allocated(0) == 0);
  const accel::MemoryStats before = Memory::memory_stats(0);

  // Streams that other threads' allocations are also used on (record_stream), shared by all threads.
  std::vector<Stream> users;
  for (int i = 0; i < use_streams; ++i) users.emplace_back(0);

  std::atomic<std::uint64_t> tag_errors{0};
  std::atomic<std::uint64_t> allocations{0};
  std::atomic<std::uint64_t> cross_stream_uses{0};
  std::atomic<std::uint64_t> tasks_run{0};
  std::atomic<std::uint64_t> other_errors{0};
  StatsMonitor monitor;
  const auto start = Clock::now();

  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      try {
        Rng rng(static_cast<std::uint64_t>(t) + 1);
        // Two allocation streams of this thread's own, created here (the registry sees them come
        // and go from several threads at once).
        std::array<Stream, 2> own{Stream(0), Stream(0)};
        struct Live {
          void* p;
          std::size_t n;
          std::uint64_t tag;
        };
        std::vector<Live> live;
        live.reserve(max_live);
        std::uint64_t serial = 0;

        const auto release = [&](std::size_t index) {
          const Live a = live[index];
          live[index] = live.back();
          live.pop_back();
          if (!tag_intact(a.p, a.n, a.tag)) tag_errors.fetch_add(1);
          if (rng.below(6) == 0) {
            // Used on another stream too: that stream reads the tag after the host has freed the
            // block, so the block must not be reused before the stream ran.
            StreamRef user = users[rng.below(use_streams)];
            Memory::record_stream(a.p, user);
            user.enqueue([a, &tag_errors, &tasks_run] {
              if (!tag_intact(a.p, a.n, a.tag)) tag_errors.fetch_add(1);
              tasks_run.fetch_add(1, std::memory_order_relaxed);
            });
            cross_stream_uses.fetch_add(1, std::memory_order_relaxed);
          }
          Memory::raw_delete(a.p);
        };

        for (std::uint64_t i = 0; i < ops; ++i) {
          if (live.size() < max_live && (live.empty() || rng.below(2) == 0)) {
            const std::size_t n = random_size(rng);
            StreamRef s = own[rng.below(2)];
            void* p = Memory::raw_alloc(n, s);
            const std::uint64_t tag = (static_cast<std::uint64_t>(t) << 56) | ++serial;
            write_tag(p, n, tag);
            live.push_back({p, n, tag});
            allocations.fetch_add(1, std::memory_order_relaxed);
          } else {
            release(rng.below(live.size()));
          }
          if (rng.below(4096) == 0) Memory::empty_cache();  // a flush while the others allocate
        }
        while (!live.empty()) release(live.size() - 1);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "allocator stress thread %d: %s\n", t, e.what());
        other_errors.fetch_add(1);
      }
    });
  }
  for (auto& th : pool) th.join();
  for (Stream& s : users) s.synchronize();
  const double seconds = accel_test::seconds_since(start);
  monitor.stop();

  CHECK(other_errors.load() == 0);
  CHECK(tag_errors.load() == 0);
  CHECK(tasks_run.load() == cross_stream_uses.load());
  CHECK_MESSAGE(monitor.violation().empty(), monitor.violation());
  CHECK(monitor.samples() > 0);

  // Everything freed: nothing allocated; reserved is exactly the segments the snapshot lists.
  const accel::MemoryStats after = Memory::memory_stats(0);
  CHECK(check_invariants(after).empty());
  CHECK(check_monotone(before, after).empty());
  CHECK(after.allocated_bytes.all().current == 0);
  CHECK(after.allocation.all().current == 0);
  const std::vector<accel::SegmentInfo> segments = Memory::allocator(0).snapshot();
  std::int64_t sum = 0;
  std::int64_t small_sum = 0;
  for (const auto& seg : segments) {
    sum += static_cast<std::int64_t>(seg.total_size);
    if (seg.is_small_pool) small_sum += static_cast<std::int64_t>(seg.total_size);
    CHECK(seg.allocated_size == 0);
    std::size_t block_sum = 0;
    for (const auto& b : seg.blocks) block_sum += b.size;
    CHECK(block_sum == seg.total_size);
  }
  CHECK(after.reserved_bytes.all().current == sum);
  CHECK(after.reserved_bytes[accel::StatType::small_pool].current == small_sum);
  CHECK(after.segment.all().current == static_cast<std::int64_t>(segments.size()));
  CHECK(after.num_ooms == before.num_ooms);
  CHECK(after.allocation.all().allocated - before.allocation.all().allocated ==
        static_cast<std::int64_t>(allocations.load()));

  // After the flush, the frees that waited for the user streams are done and every segment is free.
  Memory::empty_cache();
  const accel::MemoryStats flushed = Memory::memory_stats(0);
  CHECK(flushed.active.all().current == 0);
  CHECK(flushed.active_bytes.all().current == 0);
  CHECK(flushed.requested_bytes.all().current == 0);
  CHECK(flushed.reserved_bytes.all().current == 0);
  CHECK(flushed.segment.all().current == 0);
  CHECK(Memory::allocator(0).snapshot().empty());
  CHECK(check_invariants(flushed).empty());

  MESSAGE("allocator stress: " << threads << " threads x " << ops << " ops (" << allocations.load()
                               << " allocations, " << cross_stream_uses.load() << " record_stream uses, peak reserved "
                               << after.reserved_bytes.all().peak / static_cast<std::int64_t>(MiB) << " MiB, "
                               << after.num_device_alloc - before.num_device_alloc << " segments mapped, "
                               << monitor.samples() << " statistics samples) in " << seconds << " s");
}

