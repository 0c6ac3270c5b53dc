// CPU events: capture, query, synchronize, cross-stream waits, timing and its errors.
#include <accel/cpu/event.hpp>
#include <accel/cpu/stream.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <string>
#include <thread>
#include <type_traits>

using accel::cpu::Event;
using accel::cpu::Stream;
using accel::cpu::StreamGuard;
using accel::cpu::Streams;
using namespace std::chrono_literals;

static_assert(!std::is_copy_constructible_v<Event> && std::is_nothrow_move_constructible_v<Event>);
static_assert(!std::is_convertible_v<bool, Event>);

TEST_CASE("a never-recorded event is complete, like CUDA's") {
  Event e;
  CHECK(e.query());
  CHECK_FALSE(e.recorded());
  e.synchronize();
  Stream s;
  s.wait(e);  // imposes nothing
  s.synchronize();
}

TEST_CASE("an event on a worker stream completes when the stream reaches it") {
  Stream s;
  std::latch release(1);
  s.enqueue([&] { release.wait(); });
  Event e;
  e.record(s);
  CHECK(e.recorded());
  CHECK_FALSE(e.query());
  std::this_thread::sleep_for(5ms);
  CHECK_FALSE(e.query());
  release.count_down();
  e.synchronize();
  CHECK(e.query());
  CHECK(s.query());  // the marker was the last thing queued
}

TEST_CASE("an event on the default stream completes at once") {
  Event e(true);
  e.record(Streams::default_stream());
  CHECK(e.query());
  Event f;
  f.record();  // the current stream, here the default one
  CHECK(f.query());
}

TEST_CASE("record() uses the current stream") {
  Stream s;
  std::latch release(1);
  s.enqueue([&] { release.wait(); });
  Event e;
  {
    StreamGuard guard(s);
    e.record();
  }
  CHECK_FALSE(e.query());
  release.count_down();
  e.synchronize();
  CHECK(e.query());
}

TEST_CASE("wait(event) orders a consumer stream after the producer's write") {
  Stream producer;
  Stream consumer;
  std::latch release(1);
  int value = 0;
  int seen = -1;
  std::atomic<bool> consumer_ran{false};
  producer.enqueue([&] {
    release.wait();
    value = 42;
  });
  Event ready;
  ready.record(producer);
  consumer.wait(ready);
  consumer.enqueue([&] {
    seen = value;
    consumer_ran = true;
  });
  std::this_thread::sleep_for(5ms);
  CHECK_FALSE(consumer_ran.load());
  CHECK_FALSE(consumer.query());
  release.count_down();
  consumer.synchronize();
  CHECK(seen == 42);
  CHECK(ready.query());
}

TEST_CASE("re-recording starts a new capture; earlier waits keep the capture they saw") {
  Stream blocked;
  Stream consumer;
  std::latch release(1);
  blocked.enqueue([&] { release.wait(); });
  Event e;
  e.record(blocked);
  consumer.wait(e);  // waits for the blocked capture
  std::atomic<bool> consumer_ran{false};
  consumer.enqueue([&] { consumer_ran = true; });
  e.record(Streams::default_stream());  // new capture, complete at once
  CHECK(e.query());
  std::this_thread::sleep_for(5ms);
  CHECK_FALSE(consumer_ran.load());
  release.count_down();
  consumer.synchronize();
  CHECK(consumer_ran.load());

  for (int i = 0; i < 10000; ++i) {  // the capture is reused once nothing else holds it
    e.record(i % 2 == 0 ? blocked.ref() : consumer.ref());
    if (i % 100 == 0) e.synchronize();
  }
  e.synchronize();
  CHECK(e.query());
}

TEST_CASE("the default stream's wait blocks the caller until the event completes") {
  Stream s;
  std::atomic<bool> ran{false};
  s.enqueue([&] {
    std::this_thread::sleep_for(20ms);
    ran = true;
  });
  Event e;
  e.record(s);
  Streams::default_stream().wait(e);
  CHECK(ran.load());
  CHECK(e.query());
  Event f;
  f.record(s);
  f.wait(Streams::default_stream());
  CHECK(f.query());
}

TEST_CASE("elapsed_time measures the stream's progress between two timed events") {
  Stream s;
  Event start(true);
  Event end(true);
  start.record(s);
  s.enqueue([] { std::this_thread::sleep_for(20ms); });
  end.record(s);
  end.synchronize();
  const float ms = start.elapsed_time(end);
  CHECK(ms >= 19.5f);
  CHECK(ms <= 200.0f);
  CHECK(end.elapsed_time(start) == doctest::Approx(-ms));
  CHECK(start.elapsed_time(start) == 0.0f);
}

TEST_CASE("a timed event's timestamp is taken when the stream reaches it, not at record time") {
  Stream s;
  s.enqueue([] { std::this_thread::sleep_for(30ms); });
  Event host(true);
  Event queued(true);
  host.record(Streams::default_stream());  // now
  queued.record(s);                        // recorded now, reached after the 30 ms task
  queued.synchronize();
  const float ms = host.elapsed_time(queued);
  CHECK(ms >= 29.5f);
  CHECK(ms <= 300.0f);
}

TEST_CASE("a timed event re-recorded before its last marker ran keeps the newer record's time") {
  Stream blocked;
  Stream idle;
  std::latch release(1);
  blocked.enqueue([&] { release.wait(); });
  Event start(true);
  Event e(true);
  start.record(idle);
  e.record(blocked);  // its marker waits behind the blocked task
  e.record(idle);     // the record that counts: reached at once
  e.synchronize();
  const float before = start.elapsed_time(e);
  CHECK(before >= 0.0f);
  CHECK(before < 20.0f);
  std::this_thread::sleep_for(30ms);
  release.count_down();
  blocked.synchronize();  // the first record's marker runs now: it must not stamp the newer record
  CHECK(start.elapsed_time(e) == before);
}

TEST_CASE("elapsed_time errors are InvalidStateError naming the problem") {
  Stream s;
  Event untimed;
  Event timed(true);
  Event timed2(true);
  untimed.record(s);
  timed.record(s);
  s.synchronize();
  CHECK_THROWS_WITH_AS((void)untimed.elapsed_time(timed), doctest::Contains("start event was created without timing"),
                       accel::InvalidStateError);
  CHECK_THROWS_WITH_AS((void)timed.elapsed_time(untimed), doctest::Contains("end event was created without timing"),
                       accel::InvalidStateError);
  CHECK_THROWS_WITH_AS((void)timed.elapsed_time(timed2), doctest::Contains("end event was never recorded"),
                       accel::InvalidStateError);
  CHECK_THROWS_WITH_AS((void)timed2.elapsed_time(timed), doctest::Contains("start event was never recorded"),
                       accel::InvalidStateError);
  std::latch release(1);
  s.enqueue([&] { release.wait(); });
  timed2.record(s);
  CHECK_THROWS_WITH_AS((void)timed.elapsed_time(timed2), doctest::Contains("end event has not completed"),
                       accel::InvalidStateError);
  try {
    (void)timed.elapsed_time(timed2);
  } catch (const accel::Error& e) {
    CHECK(e.code() == accel::Errc::invalid_state);
  }
  release.count_down();
  timed2.synchronize();
  CHECK(timed.elapsed_time(timed2) >= 0.0f);
}

TEST_CASE("events move; an event destroyed before its marker ran is safe") {
  Stream s;
  std::latch release(1);
  s.enqueue([&] { release.wait(); });
  Event a(true);
  a.record(s);
  Event b = std::move(a);
  CHECK(a.query());  // NOLINT(bugprone-use-after-move): moved-from = never recorded
  CHECK_FALSE(a.recorded());
  CHECK(b.timing_enabled());
  CHECK_FALSE(b.query());
  {
    Event dropped(true);
    dropped.record(s);
  }
  Event c;
  c = std::move(b);
  CHECK_FALSE(c.query());
  release.count_down();
  c.synchronize();
  s.synchronize();
  CHECK(c.query());
}

TEST_CASE("a failed task does not prevent later events from completing") {
  Stream s;
  s.enqueue([] { throw std::runtime_error("before the event"); });
  Event e;
  e.record(s);
  e.synchronize();
  CHECK(e.query());
  CHECK_THROWS_AS(s.synchronize(), accel::TaskError);
}
