// accel/memory/detail/allocator_mutex.hpp — the caching allocator's lock: a futex-style mutex whose
// uncontended lock and unlock are one atomic instruction each, inline, and none while the process
// has a single thread; and AllocatorLock, its std::unique_lock.
//
// std::mutex goes through pthread_mutex_lock/unlock (a call, a type dispatch and the elision checks:
// ~30 instructions each way), which was about an eighth of a cache-hit alloc+free pair. This lock is
// the classic three-state futex mutex (Drepper, "Futexes Are Tricky", mutex #3): 0 free, 1 held,
// 2 held with possible waiters; a contended lock spins briefly, then sleeps in std::atomic::wait
// (a futex on Linux); unlock wakes one sleeper only when the state says someone may sleep.
// It is a standard Lockable (std::unique_lock / std::lock_guard work), not recursive, and safe to
// take in a pthread_atfork prepare handler and release in the parent and child handlers.
//
// Single-threaded: while glibc's __libc_single_threaded (2.32+) says this thread is the process's only
// one, lock and unlock are a plain load and store, as glibc's malloc skips its arena lock then
// (SINGLE_THREAD_P). A locked instruction waits until every earlier store has reached the L1 cache;
// after the caller wrote a block it just got — a store per 4 KiB page, all in one L1 set, so all
// missing it — that wait was part of why accel's 64-128 KiB alloc+touch+free took ~2x glibc's: two
// locked instructions per pair added to glibc's loop cost it 20-45 ns there, taking accel's out saved
// 5-15 ns (30 ns at 256 KiB; benchmarks/RESULTS.md, issue 24). Why it is safe: no other thread
// exists to see or race for the lock; the flag turns false only when a thread starts (pthread_create,
// so the new thread sees every store before it), and a thread started while the lock is held (inside
// the raw allocator) finds it held and waits: unlock then sees the flag false and takes the atomic
// path that wakes it.
#pragma once

#include <atomic>

#if defined(__has_include)
#if __has_include(<sys/single_threaded.h>)
#include <sys/single_threaded.h>
#define ACCEL_DETAIL_HAS_SINGLE_THREADED 1
#endif
#endif

namespace accel::detail {

class AllocatorMutex {
 public:
  AllocatorMutex() = default;
  AllocatorMutex(const AllocatorMutex&) = delete;
  AllocatorMutex& operator=(const AllocatorMutex&) = delete;

  [[gnu::always_inline]] void lock() noexcept {
    if (single_threaded() && state_.load(std::memory_order_relaxed) == 0) {
      state_.store(1, std::memory_order_relaxed);
      std::atomic_signal_fence(std::memory_order_seq_cst);  // the compiler keeps the section after it
      return;
    }
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
    if (single_threaded()) {  // no other thread exists, so none waits
      std::atomic_signal_fence(std::memory_order_seq_cst);
      state_.store(0, std::memory_order_relaxed);
      return;
    }
    if (state_.exchange(0, std::memory_order_release) == 2) [[unlikely]] state_.notify_one();
  }

  /// True while this thread is known to be the process's only one (lock and unlock are plain then);
  /// false without glibc 2.32+.
  [[nodiscard, gnu::always_inline]] static bool single_threaded() noexcept {
#if defined(ACCEL_DETAIL_HAS_SINGLE_THREADED) && !defined(__CUDA_ARCH__)
    return __libc_single_threaded != 0;
#else
    return false;
#endif
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

/// std::unique_lock<AllocatorMutex>, its members forced inline: GCC outlined std::unique_lock::lock()
/// once the single-threaded branch made the mutex's lock() larger (a call and ~15 more stores per
/// alloc+free pair, cachegrind).
class AllocatorLock {
 public:
  [[gnu::always_inline]] explicit AllocatorLock(AllocatorMutex& mutex) noexcept : mutex_(&mutex) { mutex.lock(); }
  [[gnu::always_inline]] ~AllocatorLock() {
    if (owns_) mutex_->unlock();
  }
  AllocatorLock(const AllocatorLock&) = delete;
  AllocatorLock& operator=(const AllocatorLock&) = delete;

  [[gnu::always_inline]] void lock() noexcept {
    mutex_->lock();
    owns_ = true;
  }
  [[gnu::always_inline]] void unlock() noexcept {
    mutex_->unlock();
    owns_ = false;
  }
  [[nodiscard]] bool owns_lock() const noexcept { return owns_; }

 private:
  AllocatorMutex* mutex_;
  bool owns_ = true;
};

}  // namespace accel::detail
