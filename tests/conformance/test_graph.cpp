// GraphApi conformance: capture records instead of running, replays run the recorded work in order,
// random numbers drawn in a graph are fresh per replay and equal to the eager draws, allocations made
// during capture come from the graph's pool, illegal calls are errors that leave the graph empty, and an
// event recorded during capture is a legal point of the capture (using it afterwards is refused) while
// an external one is recorded by every replay.
#include "backends.hpp"

#include <accel/concepts/graph.hpp>
#include <accel/random/fill.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

static_assert(accel::GraphApi<accel::CpuBackend> && accel::GraphApi<accel::AnyBackend>);

// Appends to a list from host tasks (which run on a worker or driver thread).
struct Log {
  std::mutex mutex;
  std::vector<int> entries;
  void add(int v) {
    const std::lock_guard lock(mutex);
    entries.push_back(v);
  }
  std::vector<int> take() {
    const std::lock_guard lock(mutex);
    return std::exchange(entries, {});
  }
};

template <class B, class T>
std::vector<T> to_host(const B& b, typename B::StreamRef s, const T* device, std::size_t n) {
  std::vector<T> host(n);
  b.copy_async(s, host.data(), device, n * sizeof(T));
  s.synchronize();
  return host;
}

template <class B>
constexpr bool concrete = !std::is_same_v<B, accel::AnyBackend>;

bool mentions(const std::exception& e, const char* word) { return std::string(e.what()).find(word) != std::string::npos; }

}  // namespace

TEST_CASE_TEMPLATE_DEFINE("graph: capture records without running; each replay runs the work in order", B, graph_replay) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  typename B::Stream s;
  typename B::Stream other;
  Log log;
  auto g = b.create_graph();
  CHECK_FALSE(g.captured());
  CHECK_FALSE(b.is_current_stream_capturing());
  {
    auto capture = b.capture_to_graph(g, s);
    CHECK(typename B::StreamRef(s).is_capturing());
    CHECK_FALSE(b.is_current_stream_capturing());  // s is not the calling thread's current stream
    {
      const typename B::StreamGuard current = b.stream(s);
      CHECK(b.is_current_stream_capturing());
    }
    CHECK_FALSE(b.is_current_stream_capturing());
    for (int i = 1; i <= 3; ++i) typename B::StreamRef(s).enqueue([&log, i] { log.add(i); });
    capture.end();
  }
  CHECK_FALSE(typename B::StreamRef(s).is_capturing());
  CHECK(g.captured());
  CHECK(g.pool().id != 0);
  typename B::StreamRef(s).synchronize();
  CHECK(log.take().empty());  // recorded, not run

  b.replay_graph(g, s);
  b.replay_graph(g, s);
  typename B::StreamRef(s).synchronize();
  CHECK(log.take() == std::vector<int>{1, 2, 3, 1, 2, 3});

  b.replay_graph(g, other);  // another stream of the same device
  typename B::StreamRef(other).synchronize();
  CHECK(log.take() == std::vector<int>{1, 2, 3});

  // Moved, the recording and its pool go along; the moved-from graph is empty and refuses a replay.
  const auto pool = g.pool().id;
  auto moved = std::move(g);
  CHECK(moved.captured());
  CHECK(moved.pool().id == pool);
  CHECK_FALSE(g.captured());  // NOLINT(bugprone-use-after-move): a moved-from graph is empty
  CHECK(g.pool().id == 0);
  CHECK_THROWS_AS(b.replay_graph(g, s), accel::InvalidStateError);
  // Assigned over a graph holding another recording: that one is released, this one replays.
  auto assigned = b.create_graph();
  {
    auto capture = b.capture_to_graph(assigned, s);
    typename B::StreamRef(s).enqueue([&log] { log.add(9); });
    capture.end();
  }
  CHECK(assigned.pool().id != pool);
  assigned = std::move(moved);
  CHECK(assigned.captured());
  CHECK(assigned.pool().id == pool);
  CHECK_FALSE(moved.captured());  // NOLINT(bugprone-use-after-move)
  b.replay_graph(assigned, s);
  typename B::StreamRef(s).synchronize();
  CHECK(log.take() == std::vector<int>{1, 2, 3});
  g = std::move(assigned);  // back into the moved-from graph, which takes it as a fresh one
  CHECK(g.captured());

  g.reset();
  CHECK_FALSE(g.captured());
  CHECK_THROWS_AS(b.replay_graph(g, s), accel::InvalidStateError);
}

TEST_CASE_TEMPLATE_DEFINE("graph: random numbers are fresh per replay and equal the eager draws", B, graph_random) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  typename B::Stream stream;
  const typename B::StreamRef s = stream;
  const int dev = s.device_index();
  const auto saved = b.get_rng_state(dev);
  b.manual_seed_all(2024);
  constexpr std::size_t n = 1001;  // not a multiple of 4: offsets round up between draws
  accel::Buffer<float, B> uniform(n, s);
  accel::Buffer<double, B> normal(n, s);
  accel::Buffer<float, B> eager_uniform(n, s);
  accel::Buffer<double, B> eager_normal(n, s);

  auto g = b.create_graph();
  {
    auto capture = b.capture_to_graph(g, s);
    b.fill_uniform(s, uniform.data(), n);
    b.fill_normal(s, normal.data(), n, 1.0, 2.0);
    capture.end();
  }
  const auto before = b.get_rng_state(dev);  // capturing drew nothing
  CHECK(before == accel::Generator(2024).get_state());

  for (int replay = 0; replay < 2; ++replay) {
    const auto at_replay = b.get_rng_state(dev);
    b.replay_graph(g, s);
    const auto after_replay = b.get_rng_state(dev);
    const auto replayed_u = to_host(b, s, uniform.data(), n);
    const auto replayed_n = to_host(b, s, normal.data(), n);

    b.set_rng_state(at_replay, dev);  // the same calls, eagerly, from the same state
    b.fill_uniform(s, eager_uniform.data(), n);
    b.fill_normal(s, eager_normal.data(), n, 1.0, 2.0);
    CHECK(b.get_rng_state(dev) == after_replay);  // a replay advances the generator as the calls do
    CHECK(same_bits(replayed_u, to_host(b, s, eager_uniform.data(), n)));
    CHECK(same_bits(replayed_n, to_host(b, s, eager_normal.data(), n)));
    if (replay == 0) {
      CHECK(at_replay == before);
    } else {
      CHECK(at_replay != before);  // the second replay starts where the first left off: fresh numbers
    }
  }
  g.reset();
  b.set_rng_state(saved, dev);
}

TEST_CASE_TEMPLATE_DEFINE("graph: allocations during capture come from the graph's pool until reset", B, graph_pool) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  typename B::Stream stream;
  const typename B::StreamRef s = stream;
  const int dev = s.device_index();
  constexpr std::size_t bytes = 3 << 20;  // large pool
  b.empty_cache();
  const std::size_t reserved_before = b.memory_reserved(dev);

  auto g = b.create_graph();
  void* captured_block = nullptr;
  {
    auto capture = b.capture_to_graph(g, s);
    void* temporary = b.raw_alloc(bytes, s);
    b.raw_delete(temporary);  // freed during capture: reusable within the graph's pool
    captured_block = b.raw_alloc(bytes, s);
    CHECK(captured_block == temporary);
    capture.end();
  }
  CHECK(b.memory_reserved(dev) > reserved_before);
  b.raw_delete(captured_block);  // back to the graph's pool, not to the stream's ordinary cache
  void* ordinary = b.raw_alloc(bytes, s);
  CHECK(ordinary != captured_block);
  b.raw_delete(ordinary);
  b.empty_cache();
  CHECK(b.memory_reserved(dev) > reserved_before);  // the pool stays while the graph lives

  g.reset();
  b.empty_cache();
  CHECK(b.memory_reserved(dev) == reserved_before);
}

TEST_CASE_TEMPLATE_DEFINE("graph: graphs captured with one pool handle share it", B, graph_shared_pool) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  typename B::Stream stream;
  const typename B::StreamRef s = stream;
  const accel::GraphPoolId pool = b.graph_pool_handle();
  CHECK(pool.id != 0);
  CHECK(b.graph_pool_handle() != pool);
  auto first = b.create_graph();
  auto second = b.create_graph();
  void* a = nullptr;
  {
    auto capture = b.capture_to_graph(first, s, pool);
    a = b.raw_alloc(4096, s);
    b.raw_delete(a);
  }
  void* c = nullptr;
  {
    auto capture = b.capture_to_graph(second, s, pool);
    c = b.raw_alloc(4096, s);  // the block the first graph freed into the shared pool
    b.raw_delete(c);
  }
  CHECK(first.pool() == pool);
  CHECK(second.pool() == pool);
  CHECK(a == c);
}

TEST_CASE_TEMPLATE_DEFINE("graph: illegal calls during capture name the call and leave the graph empty", B, graph_errors) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  typename B::Stream stream;
  const typename B::StreamRef s = stream;
  auto g = b.create_graph();

  CHECK_THROWS_WITH_AS((void)b.capture_to_graph(g, b.default_stream()), doctest::Contains("default stream, which"),
                       accel::InvalidArgumentError);
  CHECK_FALSE(g.captured());

  {
    auto capture = b.capture_to_graph(g, s);
    try {
      s.synchronize();
      FAIL("synchronize() of a capturing stream must throw");
    } catch (const accel::InvalidStateError& e) {
      CHECK(mentions(e, "synchronize"));
    }
    CHECK_THROWS_AS((void)s.query(), accel::InvalidStateError);  // a second illegal call: the first is reported
    try {
      capture.end();
      FAIL("end() of an invalidated capture must throw");
    } catch (const accel::InvalidStateError& e) {
      CHECK(mentions(e, "synchronize"));
      CHECK_FALSE(mentions(e, "query"));
    }
  }
  CHECK_FALSE(s.is_capturing());
  CHECK_FALSE(g.captured());
  CHECK_THROWS_WITH_AS(b.replay_graph(g, s), doctest::Contains("holds no captured work"), accel::InvalidStateError);

  {
    auto capture = b.capture_to_graph(g, s);  // the graph is still empty: it can be captured again
    CHECK_THROWS_WITH_AS((void)s.query(), doctest::Contains("query() while the stream is capturing a graph"),
                         accel::InvalidStateError);
  }
  CHECK_FALSE(g.captured());

  {  // a device synchronize in global mode
    auto capture = b.capture_to_graph(g, s);
    CHECK_THROWS_AS(b.synchronize(s.device_index()), accel::InvalidStateError);
    CHECK_THROWS_AS(capture.end(), accel::InvalidStateError);
  }

  // An exception leaving the capture's scope abandons it: the graph stays empty.
  CHECK_THROWS_AS(([&] {
                    auto capture = b.capture_to_graph(g, s);
                    throw std::runtime_error("user code failed");
                  }()),
                  std::runtime_error);
  CHECK_FALSE(s.is_capturing());
  CHECK_FALSE(g.captured());

  // The stream still works, and a good capture still succeeds.
  std::atomic<int> ran{0};
  {
    auto capture = b.capture_to_graph(g, s);
    s.enqueue([&ran] { ran.fetch_add(1); });
  }
  CHECK(g.captured());
  CHECK_THROWS_WITH_AS((void)b.capture_to_graph(g, s), doctest::Contains("the graph already holds a captured graph"),
                       accel::InvalidStateError);
  b.replay_graph(g, s);
  s.synchronize();
  CHECK(ran.load() == 1);
}

// While a capture into a graph is in progress the graph is busy: replaying it, resetting it and capturing
// into it again (from another stream) are InvalidStateErrors saying so, and the capture goes on unharmed.
TEST_CASE_TEMPLATE_DEFINE("graph: a graph being captured refuses replay, reset and a second capture; the capture goes on",
                          B, graph_busy) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  typename B::Stream stream;
  typename B::Stream second_stream;
  const typename B::StreamRef s = stream;
  const typename B::StreamRef second = second_stream;
  auto g = b.create_graph();
  std::atomic<int> ran{0};
  CHECK_FALSE(g.capturing());
  {
    auto capture = b.capture_to_graph(g, s);
    CHECK(g.capturing());
    CHECK_FALSE(g.captured());
    const accel::GraphPoolId pool = g.pool();
    CHECK(pool.id != 0);
    s.enqueue([&ran] { ran.fetch_add(1); });
    CHECK_THROWS_WITH_AS(b.replay_graph(g, second), doctest::Contains("while a capture into the graph is in progress"),
                         accel::InvalidStateError);
    CHECK_THROWS_WITH_AS(g.reset(), doctest::Contains("while a capture into the graph is in progress"),
                         accel::InvalidStateError);
    CHECK_THROWS_WITH_AS((void)b.capture_to_graph(g, second),
                         doctest::Contains("a capture into this graph is already in progress"), accel::InvalidStateError);
    CHECK_FALSE(second.is_capturing());
    auto other = b.create_graph();  // and no graph is captured on a stream that is capturing already
    CHECK_THROWS_WITH_AS((void)b.capture_to_graph(other, s), doctest::Contains("is already capturing a graph"),
                         accel::InvalidStateError);
    CHECK_FALSE(other.capturing());
    CHECK(other.pool().id == 0);
    CHECK(s.is_capturing());
    CHECK(g.capturing());
    CHECK(g.pool().id == pool.id);  // neither the reset nor the second capture touched the pool
    s.enqueue([&ran] { ran.fetch_add(10); });
    capture.end();
    CHECK_FALSE(g.capturing());
    CHECK(g.pool().id == pool.id);
  }
  second.enqueue([&ran] { ran.fetch_add(100); });  // the stream a capture was refused on works as before
  second.synchronize();
  CHECK(ran.load() == 100);
  CHECK(g.captured());
  b.replay_graph(g, s);
  s.synchronize();
  CHECK(ran.load() == 111);
}

// A graph replays only on streams of the device it was captured on (cudaGraphLaunch of a graph of another
// device fails too): refused before anything is enqueued, naming both devices.
TEST_CASE_TEMPLATE_DEFINE("graph: a replay on a stream of another device is refused, naming both devices", B,
                          graph_other_device) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  if (b.device_count() < 2) {
    MESSAGE("SKIPPED on " << b.name() << ": one device (test_conformance_4_cpu_devices runs this case)");
    return;
  }
  std::atomic<int> ran{0};
  auto g = b.create_graph();
  const typename B::DeviceGuard home(0);
  typename B::Stream stream;
  const typename B::StreamRef s = stream;
  REQUIRE(s.device_index() == 0);
  {
    auto capture = b.capture_to_graph(g, s);
    s.enqueue([&ran] { ran.fetch_add(1); });
  }
  {
    const typename B::DeviceGuard away(1);
    typename B::Stream there_stream;
    const typename B::StreamRef there = there_stream;
    REQUIRE(there.device_index() == 1);
    try {
      b.replay_graph(g, there);
      FAIL("a replay on a stream of device 1 must throw");
    } catch (const accel::InvalidArgumentError& e) {
      CHECK(mentions(e, "captured on"));
      CHECK(mentions(e, ":0"));
      CHECK(mentions(e, "belongs to"));
      CHECK(mentions(e, ":1"));
    }
    there.synchronize();
  }
  s.synchronize();
  CHECK(ran.load() == 0);  // nothing ran
  b.replay_graph(g, s);
  s.synchronize();
  CHECK(ran.load() == 1);
}

// A graph moved while it is being captured takes the capture along; one destroyed or assigned over
// abandons it: the stream stops capturing (its work runs again), the graph's pool goes, and the guard has
// nothing left to end.
TEST_CASE_TEMPLATE_DEFINE("graph: moved during a capture the graph takes it along; destroyed or assigned over it abandons it",
                          B, graph_moved_while_capturing) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  typename B::Stream stream;
  const typename B::StreamRef s = stream;
  std::atomic<int> ran{0};
  {  // moved: the capture goes on into the new graph
    auto first = b.create_graph();
    auto capture = b.capture_to_graph(first, s);
    s.enqueue([&ran] { ran.fetch_add(1); });
    auto moved = std::move(first);
    CHECK(moved.capturing());
    CHECK_FALSE(first.capturing());  // NOLINT(bugprone-use-after-move): a moved-from graph is empty
    CHECK(first.pool().id == 0);     // NOLINT(bugprone-use-after-move)
    CHECK(s.is_capturing());
    s.enqueue([&ran] { ran.fetch_add(10); });
    capture.end();
    CHECK_FALSE(moved.capturing());
    CHECK(moved.captured());
    CHECK_FALSE(first.captured());  // NOLINT(bugprone-use-after-move)
    CHECK(ran.load() == 0);
    b.replay_graph(moved, s);
    s.synchronize();
    CHECK(ran.load() == 11);
  }
  ran = 0;
  {  // destroyed: the capture is abandoned, the stream runs its work again
    std::optional<decltype(b.create_graph())> doomed(b.create_graph());
    auto capture = b.capture_to_graph(*doomed, s);
    s.enqueue([&ran] { ran.fetch_add(1); });
    doomed.reset();
    CHECK_FALSE(s.is_capturing());
    s.enqueue([&ran] { ran.fetch_add(10); });
    s.synchronize();
    CHECK(ran.load() == 10);  // the recorded task was dropped, the new one ran
    capture.end();            // nothing left to end
    CHECK_FALSE(s.is_capturing());
  }
  ran = 0;
  {  // assigned over: the same, and the graph then holds what was assigned
    auto target = b.create_graph();
    auto source = b.create_graph();
    {
      auto capture = b.capture_to_graph(source, s);
      s.enqueue([&ran] { ran.fetch_add(100); });
    }
    auto capture = b.capture_to_graph(target, s);
    s.enqueue([&ran] { ran.fetch_add(1); });
    target = std::move(source);
    CHECK_FALSE(s.is_capturing());
    CHECK_FALSE(target.capturing());
    CHECK(target.captured());
    capture.end();
    b.replay_graph(target, s);
    s.synchronize();
    CHECK(ran.load() == 100);
  }
  {  // a capture after all that works as ever
    auto g = b.create_graph();
    {
      auto capture = b.capture_to_graph(g, s);
      s.enqueue([&ran] { ran.fetch_add(1000); });
    }
    b.replay_graph(g, s);
    s.synchronize();
    CHECK(ran.load() == 1100);
  }
}

// cudaEventRecord on a capturing stream is legal: the event becomes a point of the capture (a
// "captured event") and the graph gets no node for it; the capturing stream may wait on it. Querying
// or synchronizing it afterwards is an InvalidStateError on every backend (CUDA's
// cudaErrorCapturedEvent, named); recorded again outside the capture, the event is an ordinary one.
TEST_CASE_TEMPLATE_DEFINE("graph: an event recorded during capture marks a point of it; recorded again it works as before",
                          B, GraphEventRecord) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  typename B::Stream stream;
  const typename B::StreamRef s = stream;
  typename B::Event e;
  e.record(s);  // the event exists before the capture
  e.synchronize();
  Log log;
  auto g = b.create_graph();
  {
    auto capture = b.capture_to_graph(g, s);
    s.enqueue([&log] { log.add(1); });
    e.record(s);
    s.wait(e);  // the capturing stream waits on a point of its own capture
    s.enqueue([&log] { log.add(2); });
    capture.end();  // the record did not invalidate the capture
  }
  CHECK_FALSE(s.is_capturing());
  CHECK(g.captured());
  s.synchronize();
  CHECK(log.take().empty());
  b.replay_graph(g, s);
  b.replay_graph(g, s);
  s.synchronize();
  CHECK(log.take() == std::vector<int>{1, 2, 1, 2});
  try {
    (void)e.query();
    FAIL("query() of an event recorded during a capture must throw");
  } catch (const accel::InvalidStateError& err) {
    CHECK(mentions(err, "Event::query"));
    CHECK(mentions(err, "graph capture"));
    CHECK(mentions(err, "external"));  // says how to get an event each replay records
  }
  CHECK_THROWS_AS(e.synchronize(), accel::InvalidStateError);

  e.record(s);
  e.synchronize();
  CHECK(e.query());
  typename B::Stream other_stream;
  const typename B::StreamRef other = other_stream;
  other.wait(e);
  other.enqueue([&log] { log.add(3); });
  other.synchronize();
  CHECK(log.take() == std::vector<int>{3});
}

// torch's Event(external=True), CUDA's cudaEventRecordExternal: a record during the capture is a step of
// the graph, so each replay records the event at that point — after the replayed work before it —
// and two timed ones measure the replayed work between them.
TEST_CASE_TEMPLATE_DEFINE("graph: an external event recorded during capture is recorded by every replay", B,
                          graph_external_event) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  typename B::Stream stream;
  const typename B::StreamRef s = stream;
  std::atomic<bool> gate{false};
  std::atomic<int> before{0};
  typename B::Event marker(accel::EventOptions{.external = true});
  typename B::Event start(accel::EventOptions{.enable_timing = true, .external = true});
  typename B::Event stop(accel::EventOptions{.enable_timing = true, .external = true});
  CHECK(marker.external());
  CHECK_FALSE(marker.timing_enabled());
  CHECK(start.timing_enabled());
  CHECK_FALSE(typename B::Event{true}.external());
  auto g = b.create_graph();
  {
    auto capture = b.capture_to_graph(g, s);
    start.record(s);
    s.enqueue([&] {
      while (!gate.load()) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      before.fetch_add(1);
    });
    marker.record(s);
    stop.record(s);
    capture.end();
  }
  CHECK(marker.query());  // recorded only into the graph: no replay yet, nothing to wait for
  for (int replay = 1; replay <= 2; ++replay) {
    gate.store(false);
    b.replay_graph(g, s);
    CHECK_FALSE(marker.query());  // the replayed work before the record is held by the gate
    gate.store(true);
    marker.synchronize();
    CHECK(before.load() == replay);  // recorded after the work before it
    stop.synchronize();
    const float ms = start.elapsed_time(stop);
    CHECK(ms >= 9.5F);  // the replayed 10 ms sleep lies between the two records
    CHECK(ms < 10000.0F);
  }
  s.synchronize();
}

TEST_CASE_TEMPLATE_DEFINE("graph: the current-stream forms, and captures in each CaptureMode with a shared pool", B,
                          graph_current_stream) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  typename B::Stream s;
  Log log;
  auto g = b.create_graph();
  {
    const typename B::StreamGuard current = b.stream(s);
    {
      auto capture = b.capture_to_graph(g);  // on the current stream: s
      CHECK(typename B::StreamRef(s).is_capturing());
      CHECK(b.is_current_stream_capturing());
      for (int i = 1; i <= 2; ++i) typename B::StreamRef(s).enqueue([&log, i] { log.add(i); });
      if constexpr (concrete<B>) CHECK(capture.active());
      capture.end();
      if constexpr (concrete<B>) CHECK_FALSE(capture.active());
    }
    CHECK_FALSE(b.is_current_stream_capturing());
    CHECK(g.captured());
    if constexpr (concrete<B>) {  // the backends' own graph accessors (AnyBackend's graph has none)
      CHECK(g.device_index() == typename B::StreamRef(s).device_index());
      CHECK(g.size() >= 2);  // the two tasks (CUDA: at least their two host nodes)
    }
    b.replay_graph(g);  // on the current stream: s
    b.replay_graph(g);
    typename B::StreamRef(s).synchronize();
  }
  CHECK(log.take() == std::vector<int>{1, 2, 1, 2});

  const accel::GraphPoolId pool = b.graph_pool_handle();
  for (const accel::CaptureMode mode :
       {accel::CaptureMode::global, accel::CaptureMode::per_thread, accel::CaptureMode::relaxed}) {
    const std::string mode_name(accel::to_string(mode));
    CAPTURE(mode_name);
    auto h = b.create_graph();
    {
      auto capture = b.capture_to_graph(h, s, pool, mode);
      CHECK(typename B::StreamRef(s).is_capturing());
      typename B::StreamRef(s).enqueue([&log] { log.add(7); });
      capture.end();
    }
    CHECK(h.captured());
    CHECK(h.pool() == pool);
    typename B::StreamRef(s).synchronize();
    CHECK(log.take().empty());  // recorded, not run
    b.replay_graph(h, s);
    typename B::StreamRef(s).synchronize();
    CHECK(log.take() == std::vector<int>{7});
  }
}

TEST_CASE_TEMPLATE_APPLY(graph_replay, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(graph_random, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(graph_pool, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(graph_shared_pool, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(graph_errors, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(graph_busy, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(graph_other_device, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(graph_moved_while_capturing, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(GraphEventRecord, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(graph_external_event, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(graph_current_stream, ConformanceBackends);
