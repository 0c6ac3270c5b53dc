// StreamApi conformance: streams are in-order queues, events order and time them, failures surface.
#include "backends.hpp"

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

TEST_CASE_TEMPLATE_DEFINE("streams: tasks run in order and synchronize waits for them", B, stream_order) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  typename B::Stream stream;
  const typename B::StreamRef ref = stream;
  CHECK(ref.device_index() == b.current_device());
  CHECK(ref.id() != b.default_stream().id());
  std::vector<int> seen;
  for (int i = 0; i < 1000; ++i) ref.enqueue([&seen, i] { seen.push_back(i); });
  ref.synchronize();
  REQUIRE(seen.size() == 1000);
  for (int i = 0; i < 1000; ++i) CHECK_EQ(seen[i], i);
  CHECK(ref.query());
}

TEST_CASE_TEMPLATE_DEFINE("streams: created streams run asynchronously", B, stream_async) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  typename B::Stream stream;
  std::atomic<bool> release{false};
  std::atomic<bool> ran{false};
  stream.enqueue([&] {
    while (!release.load()) std::this_thread::sleep_for(100us);
    ran = true;
  });
  CHECK_FALSE(stream.query());
  typename B::Event event;
  event.record(stream);
  CHECK_FALSE(event.query());
  release = true;
  event.synchronize();
  CHECK(event.query());
  CHECK(ran.load());
  CHECK(stream.query());
}

TEST_CASE_TEMPLATE_DEFINE("streams: wait(event) orders work across streams", B, StreamWait) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  typename B::Stream producer;
  typename B::Stream consumer;
  std::atomic<int> value{0};
  int observed = -1;
  producer.enqueue([&] {
    std::this_thread::sleep_for(20ms);
    value = 42;
  });
  typename B::Event produced;
  produced.record(producer);
  consumer.wait(produced);
  consumer.enqueue([&] { observed = value.load(); });
  consumer.synchronize();
  CHECK(observed == 42);

  // wait_stream: everything enqueued on `producer` so far, without an explicit event.
  producer.enqueue([&] {
    std::this_thread::sleep_for(10ms);
    value = 7;
  });
  consumer.wait_stream(producer);
  consumer.enqueue([&] { observed = value.load(); });
  consumer.synchronize();
  CHECK(observed == 7);
}

TEST_CASE_TEMPLATE_DEFINE("events: elapsed_time measures the work between two timed events", B, event_timing) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  typename B::Stream stream;
  typename B::Event start{true};
  typename B::Event end{true};
  start.record(stream);
  stream.enqueue([] { std::this_thread::sleep_for(20ms); });
  end.record(stream);
  end.synchronize();
  const float ms = start.elapsed_time(end);
  CHECK(ms >= 19.5F);
  CHECK(ms < 1000.0F);

  typename B::Event untimed;
  untimed.record(stream);
  untimed.synchronize();
  CHECK_THROWS_AS((void)start.elapsed_time(untimed), accel::InvalidStateError);
  typename B::Event never_recorded{true};
  CHECK_THROWS_AS((void)start.elapsed_time(never_recorded), accel::InvalidStateError);
}

TEST_CASE_TEMPLATE_DEFINE("streams: current stream, guards and defaults", B, stream_current) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  const auto original = b.current_stream();
  CHECK(original == b.default_stream());
  typename B::Stream side;
  {
    auto guard = b.stream(side);
    CHECK(b.current_stream() == typename B::StreamRef(side));
    typename B::StreamRef seen_elsewhere = b.default_stream();
    std::thread([&] { seen_elsewhere = b.current_stream(); }).join();
    CHECK(seen_elsewhere == b.default_stream());  // current streams are per thread
  }
  CHECK(b.current_stream() == original);
  b.set_stream(side);
  CHECK(b.current_stream() == typename B::StreamRef(side));
  b.set_stream(original);
  CHECK(b.current_stream() == original);
}

TEST_CASE_TEMPLATE_DEFINE("streams: a task's exception surfaces at synchronize and loses nothing", B, stream_failure) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  typename B::Stream stream;
  int after = 0;
  stream.enqueue([] { throw std::runtime_error("disk full"); });
  stream.enqueue([&] { after = 1; });  // later work still runs
  try {
    stream.synchronize();
    FAIL("the task's failure was lost");
  } catch (const accel::TaskError& e) {
    CHECK(std::string(e.what()).find("disk full") != std::string::npos);
    CHECK(e.code() == accel::Errc::task_failed);
  }
  CHECK(after == 1);
  // Reported once; the stream is usable again.
  stream.enqueue([&] { after = 2; });
  stream.synchronize();
  CHECK(after == 2);
  // Device-wide synchronize reports failures of any stream on the device.
  stream.enqueue([] { throw std::runtime_error("late failure"); });
  CHECK_THROWS_AS(b.synchronize(stream.device_index()), accel::TaskError);
  stream.synchronize();
}

TEST_CASE_TEMPLATE_DEFINE("streams: a device synchronize waits for every stream of the device", B, device_synchronize) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  typename B::Stream first;
  typename B::Stream second;
  std::atomic<int> done{0};
  first.enqueue([&] {
    std::this_thread::sleep_for(20ms);
    ++done;
  });
  second.enqueue([&] {
    std::this_thread::sleep_for(30ms);
    ++done;
  });
  b.synchronize();
  CHECK(done.load() == 2);
  CHECK(typename B::StreamRef(first).query());
  CHECK(typename B::StreamRef(second).query());
  first.enqueue([&] {
    std::this_thread::sleep_for(20ms);
    ++done;
  });
  b.synchronize(typename B::StreamRef(first).device_index());
  CHECK(done.load() == 3);
}

TEST_CASE_TEMPLATE_DEFINE("events: record() without a stream records on the calling thread's current stream", B,
                          event_record_current) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  typename B::Stream side;
  Gate gate;
  gate.hold(side);
  typename B::Event event;
  {
    auto guard = b.stream(side);
    event.record();
  }
  CHECK_FALSE(event.query());  // behind the held task on `side`, not on the default stream
  gate.open();
  event.synchronize();
  CHECK(event.query());
  CHECK(typename B::StreamRef(side).query());
}

TEST_CASE_TEMPLATE_DEFINE("events: e.wait(s) and e.wait() hold later work on s, or on the current stream, behind e", B,
                          event_wait) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  typename B::Stream producer;
  typename B::Stream consumer;
  Gate gate;
  gate.hold(producer);
  std::atomic<int> value{0};
  producer.enqueue([&] { value = 1; });
  typename B::Event produced;
  produced.record(producer);
  produced.wait(consumer);
  int seen = -1;
  consumer.enqueue([&] { seen = value.load(); });
  typename B::Event consumed;
  consumed.record(consumer);
  CHECK_FALSE(consumed.query());  // the consumer waits for the held producer
  gate.open();
  consumed.synchronize();
  CHECK(seen == 1);

  Gate second;
  second.hold(producer);
  producer.enqueue([&] { value = 2; });
  produced.record(producer);
  {
    auto guard = b.stream(consumer);
    produced.wait();  // on the current stream: consumer
  }
  consumer.enqueue([&] { seen = value.load(); });
  consumed.record(consumer);
  CHECK_FALSE(consumed.query());
  second.open();
  consumed.synchronize();
  CHECK(seen == 2);
}

TEST_CASE_TEMPLATE_DEFINE("events: elapsed_time before the end event completes is an InvalidStateError", B,
                          event_timing_pending) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  typename B::Stream stream;
  Gate gate;
  typename B::Event start{true};
  typename B::Event end{true};
  start.record(stream);
  gate.hold(stream);
  end.record(stream);
  CHECK_FALSE(end.query());
  CHECK_THROWS_AS((void)start.elapsed_time(end), accel::InvalidStateError);
  gate.open();
  end.synchronize();
  CHECK(start.elapsed_time(end) >= 0.0F);
}

TEST_CASE_TEMPLATE_DEFINE("streams: the per-device forms: current_stream(i), default_stream(i), Stream{device, priority}, priority()",
                          B, stream_device_forms) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  const int dev = b.current_device();
  CHECK(b.current_stream(dev) == b.current_stream());
  CHECK(b.default_stream(dev) == b.default_stream());
  typename B::Stream placed(dev, 0);
  const typename B::StreamRef ref = placed;
  CHECK(ref.device_index() == dev);
  CHECK(ref.id() != b.default_stream(dev).id());
  // Priorities as torch's: 0 by default, lower is higher (-1 lies in every CUDA device's range, which
  // CUDA clamps to).
  CHECK(ref.priority() == 0);
  CHECK(b.default_stream(dev).priority() == 0);
  const typename B::Stream high(dev, -1);
  CHECK(typename B::StreamRef(high).priority() == -1);
  int ran = 0;
  ref.enqueue([&] { ran = 1; });
  ref.synchronize();
  CHECK(ran == 1);
  {
    auto guard = b.stream(placed);
    CHECK(b.current_stream(dev) == ref);
  }
  CHECK(b.current_stream(dev) == b.default_stream(dev));
  CHECK_THROWS_AS(typename B::Stream(b.device_count(), 0), accel::InvalidArgumentError);
  CHECK_THROWS_AS((void)b.current_stream(b.device_count()), accel::InvalidArgumentError);
  CHECK_THROWS_AS((void)b.default_stream(-1), accel::InvalidArgumentError);
}

TEST_CASE_TEMPLATE_APPLY(stream_order, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(stream_async, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(StreamWait, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(event_timing, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(stream_current, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(stream_failure, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(device_synchronize, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(event_record_current, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(event_timing_pending, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(stream_device_forms, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(event_wait, ConformanceBackends);
