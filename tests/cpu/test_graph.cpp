// CPU graphs beyond the conformance suite: capture modes, replay ordering across streams, failures
// inside a replay, nested replays, events recorded during a capture (external ones recorded by every
// replay; the others points of the capture, as in CUDA), numbers recorded work takes from a counter
// (a communicator's operation numbers) in host order, the pool's statistics, and what the CPU backend
// refuses.
#include <accel/cpu/backend.hpp>
#include <accel/cpu/detail/graph_numbering.hpp>
#include <accel/memory/buffer.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <latch>
#include <memory>
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

TEST_CASE("cpu graph: a graph destroyed by a task of its replay stream, a replay queued behind it: the replay runs") {
  // Replays borrow the graph's recorded work; the graph keeps it until its last replay ran. Destroyed
  // from a task of the stream that replay waits on, it cannot wait: the work goes with a later task.
  const CpuBackend b;
  Stream s;
  std::atomic<int> runs{0};
  auto g = std::make_unique<accel::cpu::Graph>(b.create_graph());
  {
    auto capture = b.capture_to_graph(*g, s);
    s.enqueue([&runs] { runs.fetch_add(1); });
  }
  std::latch go(1);
  s.enqueue([&] {
    go.wait();
    g.reset();  // ~Graph on the worker, before the replay below ran
  });
  b.replay_graph(*g, s);
  b.replay_graph(*g, s);
  go.count_down();
  s.synchronize();
  CHECK(g == nullptr);
  CHECK(runs.load() == 2);
  s.enqueue([&runs] { runs.fetch_add(10); });  // the stream goes on
  s.synchronize();
  CHECK(runs.load() == 12);
}

TEST_CASE("cpu graph: reset() from a task of its replay stream, a replay queued behind it: refused; the graph and the replay stay") {
  // reset() waits for the replays in flight; from a task of their stream that wait could never return, so
  // it is an InvalidStateError saying so, and the graph is left as it was (the destructor, which cannot
  // refuse, hands the work to a later task instead: the case above).
  const CpuBackend b;
  Stream s;
  std::atomic<int> runs{0};
  auto g = b.create_graph();
  {
    auto capture = b.capture_to_graph(g, s);
    s.enqueue([&runs] { runs.fetch_add(1); });
  }
  std::latch go(1);
  std::string refused;
  bool still_captured = false;
  s.enqueue([&] {
    go.wait();
    try {
      g.reset();
    } catch (const accel::InvalidStateError& e) {
      refused = e.what();
    }
    still_captured = g.captured();
  });
  b.replay_graph(g, s);
  go.count_down();
  s.synchronize();
  CHECK(refused.find("would never return") != std::string::npos);
  CHECK(still_captured);
  CHECK(runs.load() == 1);  // the queued replay ran
  CHECK(g.captured());
  g.reset();  // from the host thread it waits and goes
  CHECK_FALSE(g.captured());
}

TEST_CASE("cpu graph: a replay recorded into another graph keeps the inner graph's work after the inner graph is gone") {
  const CpuBackend b;
  Stream s;
  std::atomic<int> runs{0};
  auto outer = b.create_graph();
  {
    auto inner = b.create_graph();
    {
      auto capture = b.capture_to_graph(inner, s);
      s.enqueue([&runs] { runs.fetch_add(1); });
    }
    auto capture = b.capture_to_graph(outer, s);
    b.replay_graph(inner, s);
    s.enqueue([&runs] { runs.fetch_add(100); });
  }  // inner destroyed: the outer graph's replay task shares its work
  for (int i = 0; i < 3; ++i) b.replay_graph(outer, s);
  s.synchronize();
  CHECK(runs.load() == 303);
}

TEST_CASE("cpu graph: a replay recorded into another capture does not order the graph's later replays") {
  // A replay recorded into a capture runs only when the outer graph is replayed, so the next replay of the
  // inner graph on another stream must not wait for the work the capturing stream had queued before its
  // capture began (a CUDA graph launched after being embedded in a capture waits for nothing either).
  const CpuBackend b;
  Stream s, other;
  std::atomic<int> runs{0};
  auto inner = b.create_graph();
  {
    auto capture = b.capture_to_graph(inner, other);
    other.enqueue([&runs] { runs.fetch_add(1); });
  }
  std::latch go(1);
  s.enqueue([&go] { go.wait(); });  // s is busy until `go`
  auto outer = b.create_graph();
  {
    auto capture = b.capture_to_graph(outer, s);
    b.replay_graph(inner, s);
  }
  b.replay_graph(inner, other);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (runs.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(runs.load() == 1);  // ran while s was still blocked
  go.count_down();
  b.replay_graph(outer, s);  // the inner replay recorded in it, now
  s.synchronize();
  other.synchronize();
  CHECK(runs.load() == 2);
}

TEST_CASE("cpu graph: a capture refused on a stream that is already capturing retains nothing of the shared pool") {
  // Refused before the pool is retained for the new graph, so the pool's memory goes once the graph that
  // does hold it is reset.
  const CpuBackend b;
  Stream s;
  b.empty_cache();
  auto& allocator = b.allocator(s.device_index());
  const accel::GraphPoolId pool = b.graph_pool_handle();
  auto first = b.create_graph();
  auto second = b.create_graph();
  {
    auto capture = b.capture_to_graph(first, s, pool);
    b.raw_delete(b.raw_alloc(3 << 20, s));  // a segment of the pool, free again
    CHECK_THROWS_WITH_AS((void)b.capture_to_graph(second, s, pool), doctest::Contains("is already capturing a graph"),
                         accel::InvalidStateError);
    CHECK_FALSE(second.capturing());
    CHECK(second.pool().id == 0);
    CHECK(first.capturing());
  }
  CHECK(first.captured());
  CHECK(allocator.pool_reserved_bytes(pool.id) >= (3u << 20));  // kept for the replays of `first`
  first.reset();
  CHECK(allocator.pool_reserved_bytes(pool.id) == 0);
}

TEST_CASE("cpu graph: a recorded task that throws fails its replay's stream, the rest of the replay runs; the first failure is reported") {
  const CpuBackend b;
  Stream s;
  std::atomic<int> after{0};
  auto g = b.create_graph();
  {
    auto capture = b.capture_to_graph(g, s);
    s.enqueue([] { throw std::runtime_error("boom in graph"); });
    s.enqueue([&after] { after.fetch_add(1); });
    s.enqueue([] { throw std::runtime_error("second failure"); });  // runs too; the first one is reported
  }
  b.replay_graph(g, s);
  try {
    s.synchronize();
    FAIL("the failure must surface at synchronize");
  } catch (const accel::TaskError& e) {
    CHECK(mentions(e, "boom in graph"));
    CHECK_FALSE(mentions(e, "second failure"));
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

TEST_CASE("cpu graph: numbered work takes its numbers when the replay is enqueued (host order), not when it runs") {
  using accel::cpu::detail::CountSlot;
  using accel::cpu::detail::GraphNumbering;
  const CpuBackend b;
  Stream s;
  auto counter = std::make_shared<std::atomic<std::uint64_t>>(0);
  std::vector<std::uint64_t> ran;  // the numbers the recorded tasks read, in the order they ran
  const auto numbered = [&](accel::cpu::StreamRef on) {
    CountSlot slot;
    const std::uint64_t eager = GraphNumbering::take(on, counter, slot);
    on.enqueue([&ran, eager, slot] { ran.push_back(eager != 0 ? eager : accel::cpu::detail::replay_number(slot)); });
  };
  auto g = b.create_graph();
  {
    auto capture = b.capture_to_graph(g, s);
    numbered(s);
    numbered(s);
  }
  CHECK(counter->load() == 0);  // the capture took no number
  std::latch release(1);
  s.enqueue([&] { release.wait(); });  // the replays run late: after the eager calls below took theirs
  b.replay_graph(g, s);                // takes 1 and 2 now
  numbered(s);                         // 3
  b.replay_graph(g, s);                // 4, 5
  numbered(s);                         // 6
  CHECK(counter->load() == 6);
  release.count_down();
  s.synchronize();
  CHECK(ran == std::vector<std::uint64_t>{1, 2, 3, 4, 5, 6});

  // A replay recorded into another capture takes its numbers at each replay of that graph, in the
  // order the outer capture recorded them.
  auto outer = b.create_graph();
  {
    auto capture = b.capture_to_graph(outer, s);
    numbered(s);             // outer's first
    b.replay_graph(g, s);    // then g's two
    numbered(s);             // then one more
  }
  CHECK(counter->load() == 6);
  ran.clear();
  std::latch again(1);
  s.enqueue([&] { again.wait(); });
  b.replay_graph(outer, s);  // 7..10
  numbered(s);               // 11
  b.replay_graph(outer, s);  // 12..15
  again.count_down();
  s.synchronize();
  CHECK(ran == std::vector<std::uint64_t>{7, 8, 9, 10, 11, 12, 13, 14, 15});

  // A recorded numbered task run outside a replay says so.
  CountSlot slot{0, 0};
  CHECK_THROWS_AS((void)accel::cpu::detail::replay_number(slot), accel::InvalidStateError);
}

TEST_CASE("cpu graph: numbered work or an event record reaching a capture that has just ended is refused, not recorded") {
  // The race this guards: another thread ends the capture between a stream's is-capturing check and the
  // record. The recording refuses once it is marked ended, so nothing joins a graph that is already taken.
  accel::cpu::detail::GraphRecording recording(0, accel::CaptureMode::global);
  const auto counter = std::make_shared<std::atomic<std::uint64_t>>(0);
  CHECK(recording.add_count(counter, 2).offset == 0);
  CHECK(recording.add_count(counter, 1).offset == 2);
  recording.mark_ended();
  CHECK_THROWS_WITH_AS((void)recording.add_count(counter, 1), doctest::Contains("capture ended"),
                       accel::InvalidStateError);
  CHECK_THROWS_WITH_AS((void)recording.add_event_record(nullptr), doctest::Contains("capture ended"),
                       accel::InvalidStateError);
  const auto body = recording.take_body();
  REQUIRE(body->counts.size() == 1);
  CHECK(body->counts[0].count == 3);  // the refused count was not added
  CHECK(body->event_records.empty());
  CHECK(counter->load() == 0);  // nothing is taken from the counter until a replay
}

TEST_CASE("cpu graph: limits — random draws and event records in replays recorded into another capture") {
  const CpuBackend b;
  Stream s, outer_stream;
  auto g = b.create_graph();
  {
    auto capture = b.capture_to_graph(g, s);
    accel::Buffer<float, CpuBackend> buf(16, s);
    b.fill_uniform(s, buf.data(), buf.size());
    capture.end();
  }
  CHECK(g.captured());
  CHECK(g.random_draws() == 1);

  accel::cpu::Event external({.external = true});
  auto with_event = b.create_graph();
  {
    auto capture = b.capture_to_graph(with_event, s);
    external.record(s);
  }
  CHECK(with_event.captured());

  // A graph without draws or event records replays inside another capture (a child graph); the others
  // may not, and refusing them leaves the outer capture valid.
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
    try {
      b.replay_graph(with_event, outer_stream);
      FAIL("a replay that records events must not be recorded into another capture");
    } catch (const accel::NotSupportedError& e) {
      CHECK(mentions(e, "record events"));
    }
    capture.end();
  }
  CHECK(runs == 0);
  CHECK_FALSE(external.recorded());
  b.replay_graph(outer, outer_stream);
  b.replay_graph(outer, outer_stream);
  outer_stream.synchronize();
  CHECK(runs == 2);
}

TEST_CASE("cpu graph: a random fill and an event record after a nested replay use the outer replay's offsets and records") {
  // While the nested replay runs it publishes its own (empty) draw positions and event records; the outer
  // replay's must be back for what was recorded after it: the fill then equals the eager draw, and the
  // external event is recorded by the outer replay.
  const CpuBackend b;
  Stream s, outer_stream;
  int runs = 0;
  auto plain = b.create_graph();
  {
    auto capture = b.capture_to_graph(plain, s);
    s.enqueue([&runs] { ++runs; });
  }
  accel::Buffer<float, CpuBackend> buf(64, outer_stream);
  accel::cpu::Event done({.external = true});
  auto outer = b.create_graph();
  {
    auto capture = b.capture_to_graph(outer, outer_stream);
    b.replay_graph(plain, outer_stream);
    b.fill_uniform(outer_stream, buf.data(), buf.size());
    done.record(outer_stream);
  }
  REQUIRE(outer.random_draws() == 1);
  CHECK_FALSE(done.recorded());
  b.manual_seed(1234);
  b.replay_graph(outer, outer_stream);
  outer_stream.synchronize();  // a recorded step that found no positions or records would fail here
  CHECK(done.recorded());
  CHECK(done.query());
  const std::vector<float> replayed(buf.data(), buf.data() + buf.size());
  b.manual_seed(1234);
  b.fill_uniform(outer_stream, buf.data(), buf.size());
  outer_stream.synchronize();
  CHECK(replayed == std::vector<float>(buf.data(), buf.data() + buf.size()));
  CHECK(runs == 1);
  b.manual_seed(accel::Generator::default_seed);
}

TEST_CASE("cpu graph: an external event recorded in a capture is recorded by every replay, after the work before it") {
  const CpuBackend b;
  Stream s, other;
  std::atomic<bool> gate{false};
  std::atomic<int> before{0};
  std::atomic<int> after{0};
  accel::cpu::Event e({.external = true});
  CHECK(e.external());
  auto g = b.create_graph();
  {
    auto capture = b.capture_to_graph(g, s);
    s.enqueue([&] {
      while (!gate.load()) std::this_thread::yield();
      before.fetch_add(1);
    });
    e.record(s);
    s.enqueue([&after] { after.fetch_add(1); });
    capture.end();
  }
  CHECK(g.size() == 3);  // the record is a step of the graph
  CHECK_FALSE(e.recorded());  // only replays record it
  CHECK(e.query());

  b.replay_graph(g, s);
  CHECK(e.recorded());
  CHECK_FALSE(e.query());  // the replayed work before the record is held by the gate
  std::atomic<int> seen{-1};
  other.wait(e);
  other.enqueue([&] { seen.store(before.load()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK_FALSE(e.query());
  CHECK_FALSE(other.query());  // its wait for the event holds it too
  CHECK(seen.load() == -1);
  gate.store(true);
  e.synchronize();
  CHECK(e.query());
  CHECK(before.load() == 1);
  CHECK(after.load() == 1);  // a CPU replay is one stream task: the event completes with all of it
  other.synchronize();
  CHECK(seen.load() == 1);

  // The next replay records it again: it is pending until that replay ran.
  gate.store(false);
  b.replay_graph(g, s);
  CHECK_FALSE(e.query());
  gate.store(true);
  s.synchronize();
  CHECK(e.query());
  CHECK(before.load() == 2);
  CHECK(after.load() == 2);

  // Outside a capture an external event records like any event.
  gate.store(false);
  s.enqueue([&] {
    while (!gate.load()) std::this_thread::yield();
  });
  e.record(s);
  CHECK_FALSE(e.query());
  gate.store(true);
  e.synchronize();
  CHECK(e.query());
}

TEST_CASE("cpu graph: timed external events recorded in a capture time the replayed work between them") {
  const CpuBackend b;
  Stream s;
  accel::cpu::Event start({.enable_timing = true, .external = true});
  accel::cpu::Event stop({.enable_timing = true, .external = true});
  std::atomic<int> runs{0};
  auto g = b.create_graph();
  {
    auto capture = b.capture_to_graph(g, s);
    start.record(s);
    s.enqueue([&runs] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      runs.fetch_add(1);
    });
    stop.record(s);
  }
  CHECK_THROWS_AS((void)start.elapsed_time(stop), accel::InvalidStateError);  // not recorded before a replay

  accel::cpu::Event eager_before{true};
  accel::cpu::Event eager_after{true};
  for (int replay = 1; replay <= 2; ++replay) {
    eager_before.record(s);
    b.replay_graph(g, s);
    eager_after.record(s);
    stop.synchronize();
    CHECK(runs.load() == replay);
    const float inside = start.elapsed_time(stop);
    CHECK(inside >= 19.9F);  // the 20 ms sleep lies between the two records
    CHECK(inside < 10000.0F);
    CHECK(eager_before.elapsed_time(start) >= 0.0F);  // stamped in stream order with the eager events
    s.synchronize();
    CHECK(stop.elapsed_time(eager_after) >= 0.0F);
    CHECK(eager_before.elapsed_time(eager_after) >= inside);
  }
}

TEST_CASE("cpu graph: an external event outlives its Event object in the graph; a moved one sees the replays") {
  const CpuBackend b;
  Stream s;
  std::atomic<int> runs{0};
  auto g = b.create_graph();
  auto moved_from = std::make_unique<accel::cpu::Event>(accel::EventOptions{.enable_timing = true, .external = true});
  {
    auto capture = b.capture_to_graph(g, s);
    moved_from->record(s);
    s.enqueue([&runs] { runs.fetch_add(1); });
  }
  accel::cpu::Event e = std::move(*moved_from);
  moved_from.reset();
  b.replay_graph(g, s);
  e.synchronize();
  CHECK(e.recorded());
  CHECK(e.query());
  CHECK(runs.load() == 1);

  auto gone = b.create_graph();
  {
    auto dropped = std::make_unique<accel::cpu::Event>(accel::EventOptions{.external = true});
    auto capture = b.capture_to_graph(gone, s);
    dropped->record(s);
    s.enqueue([&runs] { runs.fetch_add(1); });
  }  // the Event is destroyed; the graph still records its state
  b.replay_graph(gone, s);
  b.replay_graph(gone, s);
  s.synchronize();
  CHECK(runs.load() == 3);
}

TEST_CASE("cpu graph: an event recorded during a capture (not external) marks a point of it, as in CUDA") {
  const CpuBackend b;
  Stream s, other;
  std::vector<int> log;  // appended by the replay task only
  accel::cpu::Event e;
  accel::cpu::Event timed{true};
  auto g = b.create_graph();
  {
    auto capture = b.capture_to_graph(g, s);
    s.enqueue([&log] { log.push_back(1); });
    CHECK_NOTHROW(e.record(s));
    CHECK_NOTHROW(timed.record(s));
    CHECK(e.recorded());
    CHECK_NOTHROW(s.wait(e));  // the capturing stream: in stream order already
    s.enqueue([&log] { log.push_back(2); });
    CHECK_NOTHROW(capture.end());  // legal: the capture stays valid
  }
  CHECK(g.captured());
  CHECK(g.size() == 2);  // the records added no step
  b.replay_graph(g, s);
  b.replay_graph(g, s);
  s.synchronize();
  CHECK(log == std::vector<int>{1, 2, 1, 2});

  // After the capture the records still name a point of the graph: using them is refused.
  try {
    (void)e.query();
    FAIL("query() of an event recorded during a capture must throw");
  } catch (const accel::InvalidStateError& err) {
    CHECK(mentions(err, "Event::query"));
    CHECK(mentions(err, "graph capture"));
    CHECK_FALSE(mentions(err, "invalidated"));  // that capture is over
  }
  CHECK_THROWS_AS(e.synchronize(), accel::InvalidStateError);
  try {
    other.wait(e);
    FAIL("a wait on an event recorded during an ended capture must throw");
  } catch (const accel::InvalidStateError& err) {
    CHECK(mentions(err, "wait"));
  }
  try {
    (void)timed.elapsed_time(timed);
    FAIL("elapsed_time() of an event recorded during a capture must throw");
  } catch (const accel::InvalidStateError& err) {
    CHECK(mentions(err, "Event::elapsed_time"));
  }

  // Recorded outside a capture, they are ordinary events again.
  e.record(s);
  timed.record(s);
  e.synchronize();
  timed.synchronize();
  CHECK(e.query());
  CHECK(timed.elapsed_time(timed) == 0.0F);
  other.wait(e);
  other.synchronize();
}

TEST_CASE("cpu graph: a record from a capture that has ended is refused without touching its graph") {
  // capture.end() called, the capture object still in scope: a use of an event recorded in it is refused
  // as for any ended capture (nothing invalidated: the captured graph stays good), and a wait, even on
  // the stream that captured, says that the capture has ended.
  const CpuBackend b;
  Stream s, other;
  accel::cpu::Event e;
  std::atomic<int> runs{0};
  auto g = b.create_graph();
  auto capture = b.capture_to_graph(g, s);
  s.enqueue([&runs] { runs.fetch_add(1); });
  e.record(s);
  capture.end();
  REQUIRE(g.captured());
  try {
    (void)e.query();
    FAIL("query() of an event recorded during a capture must throw");
  } catch (const accel::InvalidStateError& err) {
    CHECK(mentions(err, "Event::query"));
    CHECK_FALSE(mentions(err, "invalidated"));
  }
  try {
    other.wait(e);
    FAIL("a wait on an event recorded during an ended capture must throw");
  } catch (const accel::InvalidStateError& err) {
    CHECK(mentions(err, "which has ended"));
  }
  try {
    s.wait(e);  // the stream that captured: no longer capturing, so not in stream order either
    FAIL("a wait on an event recorded during an ended capture must throw");
  } catch (const accel::InvalidStateError& err) {
    CHECK(mentions(err, "which has ended"));
  }
  CHECK(g.captured());
  b.replay_graph(g, s);
  s.synchronize();
  CHECK(runs.load() == 1);
}

TEST_CASE("cpu graph: using an event recorded during a capture while it runs invalidates the capture, naming the call") {
  const CpuBackend b;
  Stream s, other;
  accel::cpu::Event e;
  auto g = b.create_graph();

  const auto expect_invalidated = [&](auto&& illegal, const char* call, auto error_type) {
    auto capture = b.capture_to_graph(g, s);
    s.enqueue([] {});
    e.record(s);
    try {
      illegal();
      FAIL("the call must throw");
    } catch (const decltype(error_type)& err) {
      CHECK(mentions(err, call));
      CHECK(mentions(err, "invalidated"));
    }
    try {
      capture.end();
      FAIL("end() of an invalidated capture must throw");
    } catch (const accel::InvalidStateError& err) {
      CHECK(mentions(err, call));
    }
    CHECK_FALSE(s.is_capturing());
    CHECK_FALSE(g.captured());
  };
  expect_invalidated([&] { (void)e.query(); }, "Event::query", accel::InvalidStateError(""));
  expect_invalidated([&] { e.synchronize(); }, "Event::synchronize", accel::InvalidStateError(""));
  // CUDA would join `other` into the capture; the CPU backend captures one stream per graph.
  expect_invalidated([&] { other.wait(e); }, "one stream per graph", accel::NotSupportedError(""));

  {  // a wait from a stream that captures another graph would merge two captures: both are invalidated
    auto g2 = b.create_graph();
    auto capture = b.capture_to_graph(g, s);
    auto capture2 = b.capture_to_graph(g2, other);
    e.record(s);
    CHECK_THROWS_AS(other.wait(e), accel::InvalidStateError);
    CHECK_THROWS_AS(capture.end(), accel::InvalidStateError);
    CHECK_THROWS_AS(capture2.end(), accel::InvalidStateError);
    CHECK_FALSE(g2.captured());
  }
  CHECK_FALSE(g.captured());

  // The streams, the event and the graph still work.
  std::atomic<int> ran{0};
  {
    auto capture = b.capture_to_graph(g, s);
    s.enqueue([&ran] { ran.fetch_add(1); });
  }
  b.replay_graph(g, s);
  e.record(s);
  other.wait(e);
  other.synchronize();
  CHECK(ran.load() == 1);
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

TEST_CASE("cpu graph: the pool of a failed capture goes when the graph is captured again; a captured one when assigned over") {
  const CpuBackend b;
  Stream s;
  b.empty_cache();
  auto& allocator = b.allocator(s.device_index());
  auto g = b.create_graph();
  {
    auto capture = b.capture_to_graph(g, s);
    b.raw_delete(b.raw_alloc(3 << 20, s));  // a segment of the graph's pool, free again
    CHECK_THROWS_AS(s.synchronize(), accel::InvalidStateError);  // invalidates the capture
    CHECK_THROWS_AS(capture.end(), accel::InvalidStateError);
  }
  CHECK_FALSE(g.captured());
  const accel::GraphPoolId failed_pool = g.pool();
  REQUIRE(failed_pool.id != 0);
  CHECK(allocator.pool_reserved_bytes(failed_pool.id) >= (3u << 20));  // the empty graph still holds it
  {
    auto capture = b.capture_to_graph(g, s);  // captured again: the failed capture's pool goes
    CHECK(g.pool().id != failed_pool.id);
    CHECK(allocator.pool_reserved_bytes(failed_pool.id) == 0);
    b.raw_delete(b.raw_alloc(2 << 20, s));
  }
  REQUIRE(g.captured());
  const accel::GraphPoolId captured_pool = g.pool();
  CHECK(allocator.pool_reserved_bytes(captured_pool.id) >= (2u << 20));
  g = b.create_graph();  // assigned over: the captured work and its pool go
  CHECK_FALSE(g.captured());
  CHECK(g.pool().id == 0);
  CHECK(allocator.pool_reserved_bytes(captured_pool.id) == 0);
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
  CHECK(allocator.pool_reserved_bytes(pool.id) >= (1u << 20));  // at least the output's segment
  b.raw_delete(output);
  CHECK(allocator.pool_reserved_bytes(pool.id) == 0);
  CHECK(allocator.stats().reserved_bytes.all().current == reserved_before);
}
