// CPU graphs beyond the conformance suite: capture modes, replay ordering across streams, failures
// inside a replay, nested replays, the pool's statistics, and what the CPU backend refuses.
#include <accel/cpu/backend.hpp>
#include <accel/memory/buffer.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using accel::CpuBackend;
using accel::cpu::Stream;

namespace {

bool mentions(const std::exception& e, const char* word) { return std::string(e.what()).find(word) != std::string::npos; }

}  // namespace

TEST_CASE("cpu graph: relaxed mode allows a device synchronize, per_thread only from other threads") {
  const CpuBackend b;
  Stream s;
  {
    auto g = b.create_graph();
    auto capture = b.capture_to_graph(g, s, {}, accel::CaptureMode::relaxed);
    s.enqueue([] {});
    b.synchronize();  // allowed
    capture.end();
    CHECK(g.captured());
    CHECK(g.size() == 1);
  }
  {
    auto g = b.create_graph();
    auto capture = b.capture_to_graph(g, s, {}, accel::CaptureMode::per_thread);
    std::thread other([&] { b.synchronize(); });  // another thread: allowed
    other.join();
    try {
      b.synchronize();
      FAIL("a device synchronize from the capturing thread must throw in per_thread mode");
    } catch (const accel::InvalidStateError& e) {
      CHECK(mentions(e, "per_thread"));
    }
    CHECK_THROWS_AS(capture.end(), accel::InvalidStateError);
    CHECK_FALSE(g.captured());
  }
}

TEST_CASE("cpu graph: a replay is one task; replays of one graph on two streams run one after another") {
  const CpuBackend b;
  Stream s1, s2;
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> runs{0};
  auto g = b.create_graph();
  {
    auto capture = b.capture_to_graph(g, s1);
    s1.enqueue([&] {
      if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      inside.fetch_sub(1);
      runs.fetch_add(1);
    });
  }
  for (int i = 0; i < 4; ++i) b.replay_graph(g, i % 2 == 0 ? s1.ref() : s2.ref());
  s1.synchronize();
  s2.synchronize();
  CHECK(runs.load() == 4);
  CHECK(overlaps.load() == 0);
}

TEST_CASE("cpu graph: a recorded task that throws fails its replay's stream, the rest of the replay runs") {
  const CpuBackend b;
  Stream s;
  std::atomic<int> after{0};
  auto g = b.create_graph();
  {
    auto capture = b.capture_to_graph(g, s);
    s.enqueue([] { throw std::runtime_error("boom in graph"); });
    s.enqueue([&after] { after.fetch_add(1); });
  }
  b.replay_graph(g, s);
  try {
    s.synchronize();
    FAIL("the failure must surface at synchronize");
  } catch (const accel::TaskError& e) {
    CHECK(mentions(e, "boom in graph"));
  }
  CHECK(after.load() == 1);
  b.replay_graph(g, s);  // the stream and the graph stay usable
  CHECK_THROWS_AS(s.synchronize(), accel::TaskError);
  CHECK(after.load() == 2);
}

TEST_CASE("cpu graph: replay on the default stream runs inline; the current stream is the default target") {
  const CpuBackend b;
  Stream s;
  int runs = 0;
  auto g = b.create_graph();
  {
    auto capture = b.capture_to_graph(g, s);
    s.enqueue([&runs] { ++runs; });
  }
  b.replay_graph(g, b.default_stream());
  CHECK(runs == 1);  // inline: done when replay_graph returns
  b.replay_graph(g);  // current stream = default stream here
  CHECK(runs == 2);
  {
    auto guard = b.stream(s);
    b.replay_graph(g);
  }
  s.synchronize();
  CHECK(runs == 3);
}

TEST_CASE("cpu graph: limits — event records during capture, and random draws in nested replays") {
  const CpuBackend b;
  Stream s, outer_stream;
  auto g = b.create_graph();
  {
    auto capture = b.capture_to_graph(g, s);
    accel::cpu::Event e;
    try {
      e.record(s);
      FAIL("an event record on a capturing stream must throw");
    } catch (const accel::NotSupportedError& err) {
      CHECK(mentions(err, "capturing"));
    }
    accel::Buffer<float, CpuBackend> buf(16, s);
    b.fill_uniform(s, buf.data(), buf.size());
    capture.end();  // the refused record did not invalidate the capture
  }
  CHECK(g.captured());
  CHECK(g.random_draws() == 1);

  // A graph without draws replays inside another capture (a child graph); one with draws may not.
  int runs = 0;
  auto plain = b.create_graph();
  {
    auto capture = b.capture_to_graph(plain, s);
    s.enqueue([&runs] { ++runs; });
  }
  auto outer = b.create_graph();
  {
    auto capture = b.capture_to_graph(outer, outer_stream);
    b.replay_graph(plain, outer_stream);
    CHECK_THROWS_AS(b.replay_graph(g, outer_stream), accel::NotSupportedError);
  }
  CHECK(runs == 0);
  b.replay_graph(outer, outer_stream);
  b.replay_graph(outer, outer_stream);
  outer_stream.synchronize();
  CHECK(runs == 2);
}

TEST_CASE("cpu graph: the pool's memory shows in memory_stats and snapshot, and is released with the graph") {
  const CpuBackend b;
  Stream s;
  b.empty_cache();
  auto& allocator = b.allocator(s.device_index());
  const auto before = allocator.stats();
  auto g = b.create_graph();
  void* block = nullptr;
  {
    auto capture = b.capture_to_graph(g, s);
    block = b.raw_alloc(5 << 20, s);
  }
  const auto during = allocator.stats();
  CHECK(during.allocated_bytes.all().current - before.allocated_bytes.all().current >= (5 << 20));
  CHECK(during.reserved_bytes[accel::StatType::large_pool].current > before.reserved_bytes[accel::StatType::large_pool].current);
  CHECK(allocator.pool_reserved_bytes(g.pool().id) >= (5u << 20));
  bool seen = false;
  for (const auto& segment : allocator.snapshot()) seen = seen || segment.pool_id == g.pool().id;
  CHECK(seen);

  b.raw_delete(block);
  b.empty_cache();
  CHECK(allocator.pool_reserved_bytes(g.pool().id) >= (5u << 20));  // kept for replays
  const accel::GraphPoolId pool = g.pool();
  g.reset();
  CHECK(allocator.pool_reserved_bytes(pool.id) == 0);  // free segments go back at once
  CHECK(allocator.stats().reserved_bytes.all().current == before.reserved_bytes.all().current);
}

TEST_CASE("cpu graph: a block still allocated when the graph goes away is released when freed") {
  const CpuBackend b;
  Stream s;
  b.empty_cache();
  auto& allocator = b.allocator(s.device_index());
  const auto reserved_before = allocator.stats().reserved_bytes.all().current;
  void* output = nullptr;
  accel::GraphPoolId pool;
  {
    auto g = b.create_graph();
    {
      auto capture = b.capture_to_graph(g, s);
      output = b.raw_alloc(1 << 20, s);  // a graph output the caller keeps
    }
    pool = g.pool();
  }
  CHECK(allocator.pool_reserved_bytes(pool.id) > 0);
  b.raw_delete(output);
  CHECK(allocator.pool_reserved_bytes(pool.id) == 0);
  CHECK(allocator.stats().reserved_bytes.all().current == reserved_before);
}
