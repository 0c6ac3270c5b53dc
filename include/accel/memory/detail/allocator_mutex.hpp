// accel/memory/detail/allocator_mutex.hpp — the caching allocator's lock: a futex-style mutex whose
// uncontended lock and unlock are one atomic instruction each, inline.
//
// std::mutex goes through pthread_mutex_lock/unlock (a call, a type dispatch and the elision checks:
// ~30 instructions each way), which was about an eighth of a cache-hit alloc+free pair. This lock is
// the classic three-state futex mutex (Drepper, "Futexes Are Tricky", mutex #3): 0 free, 1 held,
// 2 held with possible waiters; a contended lock spins briefly, then sleeps in std::atomic::wait
// (a futex on Linux); unlock wakes one sleeper only when the state says someone may sleep.
// It is a standard Lockable (std::unique_lock / std::lock_guard work), not recursive, and safe to
// take in a pthread_atfork prepare handler and release in the parent and child handlers.
#pragma once

#include <atomic>

namespace accel::detail {

class AllocatorMutex {
 public:
  AllocatorMutex() = default;
  AllocatorMutex(const AllocatorMutex&) = delete;
  AllocatorMutex& operator=(const AllocatorMutex&) = delete;

  [[gnu::always_inline]] void lock() noexcept {
    int expected = 0;
    if (state_.compare_exchange_strong(expected, 1, std::memory_order_acquire, std::memory_order_relaxed)) [[likely]] {
      return;
    }
    lock_contended();
  }

  [[nodiscard]] bool try_lock() noexcept {
    int expected = 0;
    return state_.compare_exchange_strong(expected, 1, std::memory_order_acquire, std::memory_order_relaxed);
  }

  [[gnu::always_inline]] void unlock() noexcept {
    if (state_.exchange(0, std::memory_order_release) == 2) [[unlikely]] state_.notify_one();
  }

 private:
  [[gnu::noinline]] void lock_contended() noexcept {
    // A short spin first: the holder is inside a few hundred instructions of bookkeeping.
    for (int spin = 0; spin < 64; ++spin) {
      pause();
      int expected = 0;
      if (state_.load(std::memory_order_relaxed) == 0 &&
          state_.compare_exchange_weak(expected, 1, std::memory_order_acquire, std::memory_order_relaxed)) {
        return;
      }
    }
    // Then sleep. Whoever takes the lock from here marks it contended (2): its unlock wakes the next.
    while (state_.exchange(2, std::memory_order_acquire) != 0) state_.wait(2, std::memory_order_relaxed);
  }

  static void pause() noexcept {
#if defined(__CUDA_ARCH__)
#elif (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
    __builtin_ia32_pause();
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
    asm volatile("yield");
#endif
  }

  std::atomic<int> state_{0};
};

}  // namespace accel::detail
