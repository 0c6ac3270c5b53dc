// accel/detail/lazy_init.hpp — a backend's lazy-initialisation queue: lazy_call and its trigger.
//
// torch's contract (torch.cuda._lazy_call / _lazy_init), which DeepSpeed's lazy_call forwards to:
//   - call(fn) before initialisation queues fn; afterwards it runs fn at once, on the calling thread
//     (an exception then reaches that caller).
//   - ensure() — called by everything that initialises the backend's runtime — runs the queued
//     callbacks once, in queue order, on the first thread that gets there. Threads that trigger
//     meanwhile wait until it is over; a callback that triggers again (on the initialising thread)
//     returns at once, as torch's is_initializing flag does; callbacks queued meanwhile, by any thread
//     or by a callback, run in the same pass, after those queued before them.
//   - initialized() becomes true only after every callback ran.
//   - When a callback throws, the pass stops there: the trigger that ran it throws TaskError (holding
//     the callback's exception, saying it will be retried), the runtime stays uninitialised, and the
//     next trigger — a waiting thread, or a later call — runs the queue again from that callback.
//     Callbacks that succeeded are not run twice (torch re-runs its whole queue); none is skipped.
// A callback that waits for another thread which itself triggers initialisation deadlocks, as in torch.
// Internal: backends own one each (cuda/device.hpp) and expose lazy_call and is_initialized.
#pragma once

#include <accel/core/error.hpp>
#include <accel/detail/describe_exception.hpp>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace accel::detail {

class LazyInit {
 public:
  /// `backend` names the backend in errors ("cuda").
  explicit LazyInit(std::string backend) : backend_(std::move(backend)) {}
  LazyInit(const LazyInit&) = delete;
  LazyInit& operator=(const LazyInit&) = delete;

  /// True once every queued callback ran. One atomic load.
  [[nodiscard]] bool initialized() const noexcept { return initialized_.load(std::memory_order_acquire); }

  /// Queues `fn` until the runtime is initialised, or runs it now if it is. An empty fn is ignored.
  void call(std::function<void()> fn) {
    if (!fn) return;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (!initialized_.load(std::memory_order_relaxed)) {
        queue_.push_back(std::make_unique<std::function<void()>>(std::move(fn)));
        return;
      }
    }
    fn();
  }

  /// Runs the queued callbacks unless that is done; see the top of this header.
  void ensure() {
    if (!initialized()) [[unlikely]] run();
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (initialized_.load(std::memory_order_relaxed)) return;
      if (runner_ == std::thread::id()) break;  // no pass under way
      if (runner_ == std::this_thread::get_id()) return;  // re-entered from a callback: under way
      finished_.wait(lock);
    }
    runner_ = std::this_thread::get_id();
    // Ends this pass (with mutex_ held): another trigger may start the next one.
    const auto end_pass = [&] {
      runner_ = std::thread::id();
      finished_.notify_all();
    };
    while (next_ < queue_.size()) {
      // The callback stays in the queue while it runs (its address is stable: queue_ holds pointers),
      // so a failure leaves it first in line for the next trigger.
      std::function<void()>& callback = *queue_[next_];
      lock.unlock();
      try {
        callback();
      } catch (...) {
        std::exception_ptr error = std::current_exception();
        lock.lock();
        const std::size_t position = next_ + 1;
        const std::size_t count = queue_.size();
        end_pass();
        lock.unlock();
        const std::string message = backend_ + ": lazy_call callback " + std::to_string(position) + " of " +
                                    std::to_string(count) + " failed during initialisation: " + describe_exception(error) +
                                    " (the runtime is not marked initialised; the next initialisation runs the "
                                    "queue again from this callback)";
        throw TaskError(message, std::move(error));
      }
      lock.lock();
      std::unique_ptr<std::function<void()>> ran = std::move(queue_[next_]);
      ++next_;
      lock.unlock();
      ran.reset();  // what it captured is destroyed without the lock (its destructor may call lazy_call)
      lock.lock();
    }
    queue_.clear();
    next_ = 0;
    initialized_.store(true, std::memory_order_release);
    end_pass();
  }

  const std::string backend_;
  std::mutex mutex_;                  // guards everything below but initialized_'s reads
  std::condition_variable finished_;  // a pass ended
  std::vector<std::unique_ptr<std::function<void()>>> queue_;
  std::size_t next_ = 0;  // the first callback that has not run
  // The thread running a pass now (none: no pass is under way). A trigger from it — a callback's,
  // however deeply nested in other queues' passes — returns at once, as torch's per-thread
  // is_initializing flag does.
  std::thread::id runner_;
  std::atomic<bool> initialized_{false};
};

}  // namespace accel::detail
