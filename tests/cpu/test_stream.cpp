// CPU streams: ordering, asynchrony, the inline default stream, failures, current-stream selection,
// device synchronization and lifetime.
#include <accel/concepts/stream.hpp>
#include <accel/cpu/event.hpp>
#include <accel/cpu/stream.hpp>

#include <doctest/doctest.h>

#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <latch>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

using accel::cpu::Devices;
using accel::cpu::Event;
using accel::cpu::Stream;
using accel::cpu::StreamGuard;
using accel::cpu::StreamRef;
using accel::cpu::Streams;
using namespace std::chrono_literals;

namespace {

struct StreamBackend : Devices, Streams {
  using Stream = accel::cpu::Stream;
  using StreamRef = accel::cpu::StreamRef;
  using Event = accel::cpu::Event;
  using StreamGuard = accel::cpu::StreamGuard;
};
static_assert(accel::StreamApi<StreamBackend>);
static_assert(std::is_trivially_copyable_v<StreamRef>);
static_assert(!std::is_constructible_v<StreamRef, int>);
static_assert(!std::is_constructible_v<StreamRef, std::nullptr_t>);
static_assert(!std::is_convertible_v<int, Stream>);
static_assert(!std::is_copy_constructible_v<Stream> && std::is_nothrow_move_constructible_v<Stream>);
static_assert(!std::is_copy_constructible_v<StreamGuard> && !std::is_move_constructible_v<StreamGuard>);

int counter_for_fn = 0;
void increment_counter() { ++counter_for_fn; }

std::string message_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  }
}

}  // namespace

TEST_CASE("a worker stream runs 1000 tasks in enqueue order, on one thread that is not the caller") {
  Stream s;
  std::vector<int> order;
  std::set<std::thread::id> threads;
  for (int i = 0; i < 1000; ++i) {
    s.enqueue([&order, &threads, i] {
      order.push_back(i);
      threads.insert(std::this_thread::get_id());
    });
  }
  s.synchronize();
  REQUIRE(order.size() == 1000);
  for (int i = 0; i < 1000; ++i) REQUIRE(order[static_cast<std::size_t>(i)] == i);
  CHECK(threads.size() == 1);
  CHECK(threads.count(std::this_thread::get_id()) == 0);
  CHECK(s.query());
  CHECK_FALSE(s.is_default());
  CHECK(s.device_index() == Devices::current_device());
}

TEST_CASE("a worker stream is asynchronous: query() is false while a task blocks") {
  Stream s;
  std::latch release(1);
  std::atomic<bool> ran{false};
  s.enqueue([&] {
    release.wait();
    ran = true;
  });
  CHECK_FALSE(ran.load());
  CHECK_FALSE(s.query());
  std::this_thread::sleep_for(5ms);
  CHECK_FALSE(s.query());
  release.count_down();
  s.synchronize();
  CHECK(ran.load());
  CHECK(s.query());
}

TEST_CASE("the default stream runs tasks inline, before enqueue returns") {
  StreamRef d = Streams::default_stream();
  CHECK(d.is_default());
  CHECK(d == Streams::current_stream());
  CHECK(d == Streams::default_stream(0));
  bool ran = false;
  std::thread::id where;
  d.enqueue([&] {
    ran = true;
    where = std::this_thread::get_id();
  });
  CHECK(ran);
  CHECK(where == std::this_thread::get_id());
  CHECK(d.query());
  d.synchronize();
  counter_for_fn = 0;
  d.enqueue(&increment_counter);
  d.enqueue(increment_counter);
  CHECK(counter_for_fn == 2);
}

TEST_CASE("a burst queued behind a blocked task runs in order, and the stream is reusable after it") {
  Stream s;
  std::latch release(1);
  s.enqueue([&] { release.wait(); });
  std::vector<int> order;
  order.reserve(50000);
  for (int i = 0; i < 50000; ++i) s.enqueue([&order, i] { order.push_back(i); });
  CHECK_FALSE(s.query());
  release.count_down();
  s.synchronize();
  REQUIRE(order.size() == 50000);
  bool in_order = true;
  for (int i = 0; i < 50000; ++i) in_order = in_order && order[static_cast<std::size_t>(i)] == i;
  CHECK(in_order);
  for (int round = 0; round < 3; ++round) {  // queue blocks are recycled
    for (int i = 0; i < 500; ++i) s.enqueue([&order] { order.push_back(-1); });
    s.synchronize();
  }
  CHECK(order.size() == 51500);
}

TEST_CASE("enqueue accepts plain function pointers, move-only and large callables; rejects null") {
  Stream s;
  counter_for_fn = 0;
  s.enqueue(&increment_counter);
  void (*fp)() = increment_counter;
  s.enqueue(fp);
  auto owned = std::make_unique<int>(5);
  int seen = 0;
  s.enqueue([p = std::move(owned), &seen] { seen += *p; });  // move-only
  std::array<std::uint64_t, 32> big{};                       // 256 bytes: stored on the heap
  big[31] = 7;
  s.enqueue([big, &seen] { seen += static_cast<int>(big[31]); });
  s.enqueue([]() { return 42; });  // the result is discarded
  s.synchronize();
  CHECK(counter_for_fn == 2);
  CHECK(seen == 12);
  void (*null_fn)() = nullptr;
  CHECK_THROWS_AS(s.enqueue(null_fn), accel::InvalidArgumentError);
}

TEST_CASE("wait_stream orders a consumer stream after everything enqueued on a producer so far") {
  Stream producer;
  Stream consumer;
  std::latch release(1);
  int value = 0;
  int seen = -1;
  producer.enqueue([&] {
    release.wait();
    value = 42;
  });
  consumer.wait_stream(producer);
  consumer.enqueue([&] { seen = value; });
  std::this_thread::sleep_for(5ms);
  CHECK_FALSE(consumer.query());
  release.count_down();
  consumer.synchronize();
  CHECK(seen == 42);
  consumer.wait_stream(consumer);                    // no-op
  consumer.wait_stream(Streams::default_stream());  // the inline stream is always done
  consumer.synchronize();
}

TEST_CASE("a throwing task surfaces as TaskError at synchronize; later tasks run; the stream recovers") {
  Stream s;
  bool later_ran = false;
  CHECK_NOTHROW(s.enqueue([] { throw std::runtime_error("boom"); }));
  s.enqueue([&] { later_ran = true; });
  try {
    s.synchronize();
    FAIL("synchronize() did not report the task failure");
  } catch (const accel::TaskError& e) {
    const std::string what = e.what();
    CHECK(what.find("boom") != std::string::npos);
    CHECK(what.find("cpu:" + std::to_string(s.device_index()) + " stream " + std::to_string(s.id()) +
                    ": task failed: boom") != std::string::npos);
    CHECK(e.code() == accel::Errc::task_failed);
    REQUIRE(e.original());
    CHECK_THROWS_WITH_AS(std::rethrow_exception(e.original()), "boom", std::runtime_error);
  }
  CHECK(later_ran);
  CHECK_NOTHROW(s.synchronize());  // cleared once reported
  int n = 0;
  s.enqueue([&] { ++n; });
  s.synchronize();
  CHECK(n == 1);

  // several failures: the first is reported, the count of the others is mentioned
  s.enqueue([] { throw std::logic_error("first"); });
  s.enqueue([] { throw 42; });
  try {
    s.synchronize();
    FAIL("no TaskError");
  } catch (const accel::TaskError& e) {
    CHECK(std::string(e.what()).find("first") != std::string::npos);
    CHECK(std::string(e.what()).find("1 later task failure") != std::string::npos);
  }
  s.enqueue([] { throw 42; });
  CHECK_THROWS_WITH_AS(s.synchronize(), doctest::Contains("not derived from std::exception"), accel::TaskError);
}

TEST_CASE("a throwing task on the default stream is stored, not thrown from enqueue") {
  StreamRef d = Streams::default_stream();
  CHECK_NOTHROW(d.enqueue([] { throw std::runtime_error("inline boom"); }));
  CHECK_THROWS_WITH_AS(d.synchronize(), doctest::Contains("inline boom"), accel::TaskError);
  CHECK_NOTHROW(d.synchronize());
  d.enqueue([] { throw std::runtime_error("inline again"); });
  CHECK_THROWS_WITH_AS(Streams::synchronize(), doctest::Contains("inline again"), accel::TaskError);
  CHECK_NOTHROW(Streams::synchronize());
}

TEST_CASE("synchronizing a stream from one of its own tasks is refused, not a deadlock") {
  Stream s;
  StreamRef r = s;
  s.enqueue([r] { r.synchronize(); });
  try {
    s.synchronize();
    FAIL("no TaskError");
  } catch (const accel::TaskError& e) {
    CHECK_THROWS_AS(std::rethrow_exception(e.original()), accel::InvalidStateError);
    CHECK(message_of(e.original()).find("own tasks") != std::string::npos);
  }
}

TEST_CASE("device synchronize waits for every live stream of the device and reports their failures") {
  const int dev = Devices::current_device();
  Stream a;
  Stream b;
  std::atomic<int> done{0};
  for (Stream* s : {&a, &b}) {
    s->enqueue([&] {
      std::this_thread::sleep_for(20ms);
      ++done;
    });
  }
  Streams::synchronize(dev);
  CHECK(done.load() == 2);
  CHECK(a.query());
  CHECK(b.query());

  b.enqueue([] {
    std::this_thread::sleep_for(5ms);
    throw std::runtime_error("from b");
  });
  CHECK_THROWS_WITH_AS(Streams::synchronize(), doctest::Contains(("stream " + std::to_string(b.id())).c_str()),
                       accel::TaskError);
  CHECK_NOTHROW(b.synchronize());  // reported once
  CHECK_NOTHROW(Streams::synchronize(dev));

  // Failures on two streams: the older first (a's, ordered before b's by wait_stream), then the other.
  a.enqueue([] { throw std::runtime_error("from a"); });
  b.wait_stream(a);
  b.enqueue([] { throw std::runtime_error("from b"); });
  const std::string from_a = "stream " + std::to_string(a.id()) + ": task failed: from a";
  const std::string from_b = "stream " + std::to_string(b.id()) + ": task failed: from b";
  CHECK_THROWS_WITH_AS(Streams::synchronize(dev), doctest::Contains(from_a.c_str()), accel::TaskError);
  CHECK_THROWS_WITH_AS(Streams::synchronize(dev), doctest::Contains(from_b.c_str()), accel::TaskError);
  CHECK_NOTHROW(Streams::synchronize(dev));
}

TEST_CASE("StreamGuard, stream() and set_stream change the current stream of the calling thread only") {
  Stream s;
  const StreamRef d = Streams::default_stream();
  REQUIRE(Streams::current_stream() == d);
  {
    StreamGuard guard(s);
    CHECK(Streams::current_stream() == s);
    CHECK(Streams::current_stream(s.device_index()) == s);
    StreamRef seen_elsewhere = s;
    std::thread([&] { seen_elsewhere = Streams::current_stream(); }).join();
    CHECK(seen_elsewhere == d);
    {
      auto inner = Streams::stream(d);
      CHECK(Streams::current_stream() == d);
    }
    CHECK(Streams::current_stream() == s);
  }
  CHECK(Streams::current_stream() == d);

  Streams::set_stream(s);
  CHECK(Streams::current_stream() == s);
  Streams::set_stream(d);
  CHECK(Streams::current_stream() == d);

  {  // a destroyed stream that was current on this thread falls back to the default stream
    Stream t;
    Streams::set_stream(t);
    CHECK(Streams::current_stream() == t);
  }
  CHECK(Streams::current_stream() == d);
}

TEST_CASE("stream ids are unique and stable; equality and hashing follow identity") {
  std::vector<Stream> streams;
  for (int i = 0; i < 64; ++i) streams.emplace_back();
  std::unordered_set<std::uint64_t> ids;
  for (const Stream& s : streams) ids.insert(s.id());
  ids.insert(Streams::default_stream().id());
  CHECK(ids.size() == 65);
  const std::uint64_t first = streams.front().id();
  Stream moved = std::move(streams.front());
  CHECK(moved.id() == first);
  CHECK(moved == moved.ref());
  CHECK(moved != streams.back());
  CHECK(std::hash<StreamRef>{}(moved) == std::hash<StreamRef>{}(moved.ref()));
  std::unordered_set<std::size_t> hashes;  // the hash is the id: distinct streams, distinct hashes
  for (const Stream& s : streams) hashes.insert(std::hash<StreamRef>{}(s));
  CHECK(hashes.size() == 64);
  CHECK(std::hash<StreamRef>{}(moved) == first);
  streams.clear();
  Stream later;
  CHECK(ids.count(later.id()) == 0);  // never reused
  CHECK(Stream(Devices::current_device(), -1).priority() == -1);
  CHECK(Streams::default_stream().priority() == 0);
}

TEST_CASE("bad device indices throw InvalidArgumentError naming the device") {
  CHECK_THROWS_WITH_AS(Stream(5), doctest::Contains("cpu:5"), accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(Stream(-1, 0), doctest::Contains("cpu:-1"), accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS((void)Streams::default_stream(5), doctest::Contains("cpu:5"), accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS((void)Streams::current_stream(5), doctest::Contains("cpu:5"), accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(Streams::synchronize(5), doctest::Contains("cpu:5"), accel::InvalidArgumentError);
}

TEST_CASE("a moved-from Stream is inert: no crash, operations throw InvalidStateError, reassignable") {
  Stream a;
  const std::uint64_t id = a.id();
  Stream b = std::move(a);
  CHECK_FALSE(a.valid());  // NOLINT(bugprone-use-after-move)
  CHECK(b.valid());
  CHECK(b.id() == id);
  CHECK_THROWS_AS(a.enqueue([] {}), accel::InvalidStateError);
  CHECK_THROWS_WITH_AS(a.synchronize(), doctest::Contains("moved-from"), accel::InvalidStateError);
  CHECK_THROWS_AS((void)a.query(), accel::InvalidStateError);
  CHECK_THROWS_AS(StreamGuard{a}, accel::InvalidStateError);
  int n = 0;
  b.enqueue([&] { ++n; });
  b.synchronize();
  CHECK(n == 1);
  a = Stream();  // a moved-from stream can be assigned again
  a.enqueue([&] { ++n; });
  a.synchronize();
  CHECK(n == 2);
  std::atomic<bool> old_ran{false};
  b.enqueue([&] {
    std::this_thread::sleep_for(20ms);
    old_ran = true;
  });
  const std::uint64_t old_id = b.id();
  b = std::move(a);  // drains and replaces b's old stream
  CHECK(old_ran.load());  // the assignment destroyed the old stream, which ran its queue first
  CHECK(b.valid());
  CHECK(b.id() != old_id);
  Stream& alias = b;
  b = std::move(alias);  // self-move is harmless
  CHECK(b.valid());
}

TEST_CASE("the destructor drains pending tasks and never throws") {
  std::atomic<int> ran{0};
  {
    Stream s;
    for (int i = 0; i < 100; ++i) {
      s.enqueue([&] {
        std::this_thread::sleep_for(50us);
        ++ran;
      });
    }
  }
  CHECK(ran.load() == 100);
  // An unreported failure at destruction goes to stderr, not out of the destructor: stderr is caught
  // in a file for the destruction, and must name the failure.
  std::FILE* caught = std::tmpfile();
  REQUIRE(caught != nullptr);
  std::fflush(stderr);
  const int saved = ::dup(STDERR_FILENO);
  REQUIRE(saved >= 0);
  ::dup2(::fileno(caught), STDERR_FILENO);
  bool threw = false;
  try {
    Stream s;
    s.enqueue([] { throw std::runtime_error("unreported failure 7f3a"); });
  } catch (...) {
    threw = true;
  }
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::string text(4096, '\0');
  std::rewind(caught);
  text.resize(std::fread(text.data(), 1, text.size(), caught));
  std::fclose(caught);
  CHECK_FALSE(threw);
  CHECK(text.find("unreported failure 7f3a") != std::string::npos);
}

TEST_CASE("a task may destroy the stream it runs on") {
  auto holder = std::make_unique<Stream>();
  std::atomic<bool> done{false};
  holder->enqueue([&] {
    holder.reset();
    done = true;
  });
  while (!done.load()) std::this_thread::sleep_for(1ms);
  CHECK(holder == nullptr);
}

TEST_CASE("concurrent enqueuers keep their own order on one stream") {
  Stream s;
  constexpr int threads = 4;
  constexpr int per_thread = 2000;
  std::vector<std::vector<int>> seen(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) s.enqueue([&seen, t, i] { seen[static_cast<std::size_t>(t)].push_back(i); });
    });
  }
  for (auto& th : pool) th.join();
  s.synchronize();
  for (const auto& v : seen) {
    REQUIRE(v.size() == per_thread);
    for (int i = 0; i < per_thread; ++i) REQUIRE(v[static_cast<std::size_t>(i)] == i);
  }
}

TEST_CASE("two devices: streams, guards and device synchronize are per device") {
  if (Devices::device_count() < 2) {
    MESSAGE("skipped: needs ACCEL_CPU_DEVICE_COUNT >= 2 (the test_cpu_stream_2dev entry sets it)");
    return;
  }
  REQUIRE(Devices::current_device() == 0);
  Stream s1(1);
  CHECK(s1.device_index() == 1);
  CHECK(Streams::default_stream(1).device_index() == 1);
  CHECK(Streams::default_stream(1) != Streams::default_stream(0));
  CHECK(Streams::current_stream(1) == Streams::default_stream(1));
  {
    auto guard = Streams::stream(s1);
    CHECK(Devices::current_device() == 1);
    CHECK(Streams::current_stream() == s1);
    CHECK(Streams::current_stream(0) == Streams::default_stream(0));
    Stream here;  // created on the current device
    CHECK(here.device_index() == 1);
  }
  CHECK(Devices::current_device() == 0);
  CHECK(Streams::current_stream(1) == Streams::default_stream(1));

  // set_stream makes the stream's device current too (as torch.cuda.set_stream does); the device
  // synchronize without an argument is the current device's.
  Streams::set_stream(s1);
  CHECK(Devices::current_device() == 1);
  CHECK(Streams::current_stream() == s1);
  std::atomic<bool> ran_on_1{false};
  s1.enqueue([&] {
    std::this_thread::sleep_for(10ms);
    ran_on_1 = true;
  });
  Streams::synchronize();
  CHECK(ran_on_1.load());
  Streams::set_stream(Streams::default_stream(0));
  CHECK(Devices::current_device() == 0);
  Streams::set_stream(Streams::default_stream(1));  // device 1's current stream back to its default
  Devices::set_device(0);
  CHECK(Streams::current_stream(1) == Streams::default_stream(1));

  // synchronize(1) does not wait for device 0's streams
  Stream s0(0);
  std::latch release(1);
  s0.enqueue([&] { release.wait(); });
  std::atomic<bool> ran1{false};
  s1.enqueue([&] {
    std::this_thread::sleep_for(10ms);
    ran1 = true;
  });
  Streams::synchronize(1);
  CHECK(ran1.load());
  CHECK_FALSE(s0.query());
  release.count_down();
  Streams::synchronize(0);
  CHECK(s0.query());
  CHECK_THROWS_WITH_AS(Stream(2), doctest::Contains("cpu:2"), accel::InvalidArgumentError);
}
