// torch's lazy-initialisation contract (issue 19, item 13), checked on a queue that has not been
// initialised yet — a fresh accel::detail::LazyInit (tests/core) or the CUDA backend's own, in a
// process of its own (tests/cuda). `call(fn)` is lazy_call, `trigger()` what initialises the runtime,
// `initialized()` is_initialized.
//
//   1. Four threads queue 50 callbacks each (and the main thread one, first, that throws the first
//      time it runs).
//   2. Four threads trigger at once; meanwhile callbacks queue more (from inside a callback, and from
//      a fifth thread), and one callback triggers again (it must return at once, not deadlock).
//   3. Then: exactly one trigger threw, a TaskError holding the callback's exception; every trigger
//      that returned did so after every callback ran; is_initialized() was false inside every
//      callback and is true now; the throwing callback ran twice (first, both times) and every other
//      callback once, each thread's in the order it queued them; lazy_call now runs at once.
#pragma once

#include <accel/core/error.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace accel_test {

template <class Call, class Trigger, class Initialized>
void check_lazy_init_contract(Call call, Trigger trigger, Initialized initialized) {
  constexpr int queuers = 4;
  constexpr int per_thread = 50;
  constexpr int triggers = 4;

  REQUIRE_FALSE(initialized());
  std::mutex log_mutex;
  std::vector<int> log;  // who ran, in order: thread * 1000 + k; -1 the throwing callback; 9000+ later ones
  const auto record = [&](int id) {
    const std::lock_guard<std::mutex> lock(log_mutex);
    log.push_back(id);
  };
  std::atomic<int> initialized_inside{0};  // callbacks that saw is_initialized() == true
  std::atomic<int> total_run{0};           // callbacks that completed

  // 1. Queue.
  std::atomic<int> throwing_attempts{0};
  call(std::function<void()>([&] {
    if (initialized()) initialized_inside.fetch_add(1);
    record(-1);
    if (throwing_attempts.fetch_add(1) == 0) throw std::runtime_error("seed failed once");
    total_run.fetch_add(1);
  }));
  std::atomic<bool> reentered{false};
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < queuers; ++t) {
      threads.emplace_back([&, t] {
        for (int k = 0; k < per_thread; ++k) {
          call(std::function<void()>([&, t, k] {
            if (initialized()) initialized_inside.fetch_add(1);
            record(t * 1000 + k);
            if (t == 0 && k == 10) {
              // From inside a callback: a trigger returns at once (initialisation is under way) and a
              // lazy_call is queued behind everything queued so far.
              trigger();
              reentered.store(true);
              call(std::function<void()>([&] {
                record(9000);
                total_run.fetch_add(1);
              }));
            }
            total_run.fetch_add(1);
          }));
        }
      });
    }
    for (std::thread& th : threads) th.join();
  }
  CHECK_FALSE(initialized());
  CHECK(total_run.load() == 0);  // nothing runs before a trigger

  // 2. Trigger from several threads; a fifth thread queues while that happens.
  const int queued_before = 1 + queuers * per_thread;
  std::atomic<bool> go{false};
  std::atomic<int> task_errors{0};
  std::atomic<int> other_errors{0};
  std::atomic<int> early_returns{0};  // a trigger returned before every callback had run
  std::string task_error_message;
  std::string task_error_original;
  std::vector<std::thread> threads;
  for (int i = 0; i < triggers; ++i) {
    threads.emplace_back([&] {
      while (!go.load()) std::this_thread::yield();
      try {
        trigger();
        if (total_run.load() < queued_before + 1 || !initialized()) early_returns.fetch_add(1);
      } catch (const accel::TaskError& e) {
        if (task_errors.fetch_add(1) == 0) {
          task_error_message = e.what();
          try {
            std::rethrow_exception(e.original());
          } catch (const std::exception& original) {
            task_error_original = original.what();
          }
        }
      } catch (...) {
        other_errors.fetch_add(1);
      }
    });
  }
  std::atomic<int> late_ran{0};
  threads.emplace_back([&] {
    while (!go.load()) std::this_thread::yield();
    call(std::function<void()>([&] {
      record(9001);
      late_ran.fetch_add(1);
    }));
  });
  go.store(true);
  for (std::thread& th : threads) th.join();
  // A trigger after the failed pass found nothing left, or the fifth thread's callback ran in a pass:
  // either way, one more trigger leaves everything run.
  trigger();

  // 3. What happened.
  INFO("TaskError: " << task_error_message);
  CHECK(task_errors.load() == 1);
  CHECK(other_errors.load() == 0);
  CHECK(task_error_original == "seed failed once");
  CHECK(task_error_message.find("seed failed once") != std::string::npos);
  CHECK(task_error_message.find("again") != std::string::npos);  // says it will be retried
  CHECK(early_returns.load() == 0);
  CHECK(initialized_inside.load() == 0);
  CHECK(initialized());
  CHECK(reentered.load());
  CHECK(throwing_attempts.load() == 2);
  CHECK(late_ran.load() == 1);
  CHECK(total_run.load() == queued_before + 1);  // the throwing one counts once: when it succeeded

  const std::lock_guard<std::mutex> lock(log_mutex);
  REQUIRE(log.size() == static_cast<std::size_t>(queued_before + 3));  // + the retry, 9000 and 9001
  CHECK(log[0] == -1);  // the throwing callback ran first...
  CHECK(log[1] == -1);  // ...and first again at the retry: nothing before it was skipped or re-run
  std::vector<int> next(queuers, 0);
  int pos_9000 = -1;
  int last_queued_pos = -1;
  for (std::size_t i = 2; i < log.size(); ++i) {
    const int id = log[i];
    if (id == 9000) {
      pos_9000 = static_cast<int>(i);
      continue;
    }
    if (id == 9001) continue;
    const int t = id / 1000;
    const int k = id % 1000;
    REQUIRE((t >= 0 && t < queuers));
    CHECK(k == next[t]);  // each thread's callbacks in the order it queued them, each once
    next[t] = k + 1;
    last_queued_pos = static_cast<int>(i);
  }
  for (int t = 0; t < queuers; ++t) CHECK(next[t] == per_thread);
  CHECK(pos_9000 > last_queued_pos);  // queued from inside a callback: behind everything queued before

  // 4. Initialised: lazy_call runs at once, on the caller, and its exception reaches the caller.
  int now = 0;
  call(std::function<void()>([&] { now = 1; }));
  CHECK(now == 1);
  CHECK_THROWS_WITH_AS(call(std::function<void()>([] { throw std::logic_error("after init"); })), "after init",
                       std::logic_error);
  CHECK_NOTHROW(trigger());
}

}  // namespace accel_test
