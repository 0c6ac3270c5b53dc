// Stress: events recorded and waited across CPU streams from several threads. Each producer task
// writes a plain (non-atomic) cell on one stream; a consumer task on another stream, ordered only by
// an event wait, must read what was written — ThreadSanitizer checks that this ordering is a real
// happens-before. ACCEL_STRESS_SCALE scales the load.
#include "stress/stress_support.hpp"

#include <accel/cpu/backend.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>
#include <vector>

namespace {

using accel::cpu::Event;
using accel::cpu::Stream;
using accel_test::Rng;
using accel_test::scaled;
using Clock = std::chrono::steady_clock;


}  // namespace

// ---- events recorded and waited across streams from several threads --------------------------------

TEST_CASE("stress: events recorded and waited across streams from several threads") {
  constexpr int threads = 4;
  constexpr int stream_count = 6;
  const std::uint64_t iterations = scaled(20'000, 100);

  std::vector<Stream> streams;
  for (int i = 0; i < stream_count; ++i) streams.emplace_back(0);
  std::atomic<std::uint64_t> order_errors{0};
  std::atomic<std::uint64_t> consumed{0};
  std::atomic<std::uint64_t> other_errors{0};
  std::atomic<std::uint64_t> host_syncs{0};
  const auto start = Clock::now();

  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      try {
        Rng rng(1000 + static_cast<std::uint64_t>(t));
        // One cell per iteration, plain memory: only the event orders the producer's write before
        // the consumer's read (ThreadSanitizer checks that this is a real happens-before).
        std::vector<std::uint64_t> cells(iterations, 0);
        for (std::uint64_t i = 0; i < iterations; ++i) {
          const std::uint64_t a = rng.below(stream_count);
          const std::uint64_t b = (a + 1 + rng.below(stream_count - 1)) % stream_count;
          std::uint64_t* cell = &cells[i];
          streams[a].enqueue([cell, i] { *cell = i + 1; });
          Event produced;
          produced.record(streams[a]);
          streams[b].wait(produced);
          streams[b].enqueue([cell, i, &order_errors, &consumed] {
            if (*cell != i + 1) order_errors.fetch_add(1);
            consumed.fetch_add(1, std::memory_order_relaxed);
          });
          if (i % 64 == 63) {  // the host waits for the consumer, then reads the cell itself
            Event done;
            done.record(streams[b]);
            done.synchronize();
            if (!done.query() || *cell != i + 1) order_errors.fetch_add(1);
            host_syncs.fetch_add(1, std::memory_order_relaxed);
          }
          if (i % 512 == 511) {  // timed events around work on one stream
            Event t0(true);
            Event t1(true);
            t0.record(streams[a]);
            streams[a].enqueue([] { std::this_thread::yield(); });
            t1.record(streams[a]);
            t1.synchronize();
            if (!(t0.elapsed_time(t1) >= 0.0f)) order_errors.fetch_add(1);
          }
        }
        // Everything this thread enqueued has run once the consumer streams ran it.
        for (Stream& s : streams) s.synchronize();
        for (std::uint64_t i = 0; i < iterations; ++i) {
          if (cells[i] != i + 1) order_errors.fetch_add(1);
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "event stress thread %d: %s\n", t, e.what());
        other_errors.fetch_add(1);
      }
    });
  }
  for (auto& th : pool) th.join();
  for (Stream& s : streams) s.synchronize();
  const double seconds = accel_test::seconds_since(start);

  CHECK(other_errors.load() == 0);
  CHECK(order_errors.load() == 0);
  CHECK(consumed.load() == iterations * threads);
  MESSAGE("event stress: " << threads << " threads x " << iterations << " producer/consumer pairs over " << stream_count
                           << " streams (" << host_syncs.load() << " host event waits) in " << seconds << " s");
}
