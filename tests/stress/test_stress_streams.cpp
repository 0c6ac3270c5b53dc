// Stress: thousands of CPU streams created and destroyed from several threads, with work on each —
// tasks, stream-ordered memory, events that other streams wait on after the stream is gone. Nothing
// is lost (every task ran, even on streams destroyed with work queued), ids are never reused, and
// every worker thread is joined. ACCEL_STRESS_SCALE scales the load.
#include "support/sizes.hpp"
#include "stress/stress_support.hpp"

#include <accel/cpu/backend.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

using accel::CpuBackend;
using accel::cpu::Event;
using accel::cpu::Memory;
using accel::cpu::Stream;
using accel_test::Rng;
using accel_test::scaled;
using Clock = std::chrono::steady_clock;


}  // namespace

// ---- many streams created and destroyed, with work on each ------------------------------------------

TEST_CASE("stress: thousands of streams created and destroyed with work on each") {
  constexpr int threads = 4;
  const std::uint64_t streams_total = scaled(2000, 8);
  const std::uint64_t per_thread = (streams_total + threads - 1) / threads;
  constexpr int tasks_per_stream = 5;
  Stream survivor(0);  // waits on events of streams that are gone by the time it runs
  const int threads_before = accel_test::thread_count();
  std::atomic<std::uint64_t> counter{0};
  std::atomic<std::uint64_t> expected{0};
  std::atomic<std::uint64_t> errors{0};
  std::mutex ids_mutex;
  std::set<std::uint64_t> ids;
  const auto start = Clock::now();

  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      Rng rng(100 + static_cast<std::uint64_t>(t));
      std::vector<std::uint64_t> mine;
      try {
        for (std::uint64_t i = 0; i < per_thread; ++i) {
          Stream s(0);
          mine.push_back(s.id());
          for (int k = 0; k < tasks_per_stream; ++k) s.enqueue([&counter] { counter.fetch_add(1, std::memory_order_relaxed); });
          expected.fetch_add(tasks_per_stream, std::memory_order_relaxed);
          switch (rng.below(4)) {
            case 0: {  // memory used in stream order, freed while the task may still be queued
              const std::size_t n = rng.log_uniform(1, 256 * KiB);
              auto* p = static_cast<unsigned char*>(Memory::raw_alloc(n, s));
              s.enqueue([p, n] { std::memset(p, 0xAB, n); });
              Memory::raw_delete(p);
              break;
            }
            case 1: {  // another stream waits for this one, which is destroyed before the wait runs
              Event e;
              e.record(s);
              survivor.wait(e);
              break;
            }
            case 2:
              s.synchronize();
              if (!s.query()) errors.fetch_add(1);
              break;
            default:  // destroyed with its tasks still queued: the destructor runs them
              break;
          }
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "stream stress thread %d: %s\n", t, e.what());
        errors.fetch_add(1);
      }
      std::lock_guard lock(ids_mutex);
      ids.insert(mine.begin(), mine.end());
    });
  }
  for (auto& th : pool) th.join();
  survivor.synchronize();
  CpuBackend::synchronize(0);  // every live stream of cpu:0: only `survivor` is left
  const double seconds = accel_test::seconds_since(start);

  CHECK(errors.load() == 0);
  CHECK(counter.load() == expected.load());  // no task lost, even of streams destroyed with work queued
  CHECK(ids.size() == per_thread * threads);  // ids are never reused
  // Every worker thread of a destroyed stream was joined.
  if (threads_before > 0) CHECK(accel_test::thread_count() == threads_before);
  Memory::empty_cache();
  CHECK(Memory::memory_allocated(0) == 0);
  CHECK(Memory::memory_reserved(0) == 0);
  MESSAGE("stream stress: " << per_thread * threads << " streams from " << threads << " threads, " << counter.load()
                            << " tasks, in " << seconds << " s");
}

