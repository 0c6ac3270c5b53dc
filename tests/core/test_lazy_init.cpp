// accel::detail::LazyInit, the lazy-initialisation queue behind a backend's lazy_call (issue 19, item
// 13): torch's contract from several threads (tests/support/lazy_init_contract.hpp), and the edges.
// The CUDA backend's own queue is checked against the same contract in tests/cuda.
#include "support/lazy_init_contract.hpp"

#include <accel/detail/lazy_init.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>

using accel::detail::LazyInit;

TEST_CASE("LazyInit: torch's contract from several threads: order, initialised last, failures retried") {
  LazyInit lazy("test");
  accel_test::check_lazy_init_contract([&](std::function<void()> fn) { lazy.call(std::move(fn)); },
                                       [&] { lazy.ensure(); }, [&] { return lazy.initialized(); });
}

TEST_CASE("LazyInit: an empty queue initialises at once; empty callbacks are ignored") {
  LazyInit lazy("test");
  lazy.call(std::function<void()>{});
  CHECK_FALSE(lazy.initialized());
  lazy.ensure();
  CHECK(lazy.initialized());
  lazy.call(std::function<void()>{});  // still ignored once initialised
}

TEST_CASE("LazyInit: a callback that keeps failing is retried by every trigger, and what follows waits") {
  LazyInit lazy("cuda");
  std::string order;
  int attempts = 0;
  lazy.call([&] { order += 'a'; });
  lazy.call([&] {
    ++attempts;
    order += 'b';
    if (attempts < 3) throw 42;  // not a std::exception
  });
  lazy.call([&] { order += 'c'; });
  for (int i = 1; i <= 2; ++i) {
    try {
      lazy.ensure();
      FAIL("no TaskError");
    } catch (const accel::TaskError& e) {
      const std::string what = e.what();
      INFO(what);
      CHECK(what.find("cuda: lazy_call callback 2 of 3") != std::string::npos);
      CHECK(what.find("not derived from std::exception") != std::string::npos);
      CHECK_THROWS_AS(std::rethrow_exception(e.original()), int);
    }
    CHECK_FALSE(lazy.initialized());
    CHECK(attempts == i);
  }
  CHECK(order == "abb");  // 'a' ran once; 'c' has not run yet
  lazy.ensure();
  CHECK(lazy.initialized());
  CHECK(order == "abbbc");
  CHECK(attempts == 3);
}

TEST_CASE("LazyInit: what a callback captured is destroyed once it ran, and may queue from its destructor") {
  LazyInit lazy("test");
  int runs = 0;
  struct Queues {
    LazyInit* lazy;
    int* runs;
    bool armed = true;
    Queues(LazyInit* l, int* r) : lazy(l), runs(r) {}
    Queues(Queues&& other) noexcept : lazy(other.lazy), runs(other.runs), armed(std::exchange(other.armed, false)) {}
    Queues(const Queues& other) : lazy(other.lazy), runs(other.runs), armed(other.armed) {}
    ~Queues() {
      if (armed && *runs > 0) lazy->call([r = runs] { *r += 10; });  // runs at once if initialised
    }
    void operator()() const { ++*runs; }
  };
  lazy.call(std::function<void()>(Queues(&lazy, &runs)));
  lazy.ensure();
  CHECK(lazy.initialized());
  CHECK(runs == 11);
}

TEST_CASE("LazyInit: after its own pass failed, a thread's next trigger waits for another thread's pass") {
  LazyInit lazy("test");
  std::atomic<int> attempts{0};
  std::atomic<bool> in_second_pass{false};
  std::atomic<bool> release{false};
  lazy.call([&] {
    if (attempts.fetch_add(1) == 0) throw std::runtime_error("first attempt");
    in_second_pass = true;
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  CHECK_THROWS_AS(lazy.ensure(), accel::TaskError);  // this thread's pass failed and ended
  std::thread other([&] { lazy.ensure(); });
  while (!in_second_pass.load()) std::this_thread::yield();
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    release = true;
  });
  lazy.ensure();  // not re-entry: this thread runs no pass now, so it waits for the other's
  CHECK(lazy.initialized());
  other.join();
  releaser.join();
  CHECK(attempts.load() == 2);
}

TEST_CASE("LazyInit: a callback that triggers another backend's queue: each runs once, both end initialised") {
  LazyInit outer("outer");
  LazyInit inner("inner");
  std::string order;
  inner.call([&] {
    order += 'i';
    outer.ensure();  // re-entry into the pass under way on this thread: returns at once
  });
  outer.call([&] {
    order += 'o';
    inner.ensure();
    outer.ensure();  // still this thread's pass of `outer`, after inner's ended: returns at once
    order += 'O';
  });
  outer.ensure();
  CHECK(order == "oiO");
  CHECK(outer.initialized());
  CHECK(inner.initialized());
  // Both passes are over: a later queue's trigger on this thread runs its pass (not a re-entry).
  LazyInit later("later");
  int runs = 0;
  later.call([&] { ++runs; });
  later.ensure();
  CHECK(runs == 1);
}
