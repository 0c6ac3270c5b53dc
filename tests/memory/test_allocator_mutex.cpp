// The caching allocator's lock (memory/detail/allocator_mutex.hpp). Its own program: the first case
// needs a process in which no thread has been started yet, which a shared test binary cannot promise.
#include <accel/memory/detail/allocator_mutex.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

using accel::detail::AllocatorLock;
using accel::detail::AllocatorMutex;

// Runs first (doctest orders by file, then line): nothing has started a thread in this process yet.
TEST_CASE("AllocatorMutex: plain while single-threaded; a thread started while it is held waits for unlock") {
#if defined(ACCEL_DETAIL_HAS_SINGLE_THREADED)
  REQUIRE(AllocatorMutex::single_threaded());  // glibc 2.32+: the plain path is the one under test
#else
  CHECK_FALSE(AllocatorMutex::single_threaded());  // no way to know: always the atomic path
#endif
  AllocatorMutex m;
  m.lock();
  CHECK_FALSE(m.try_lock());  // the plain lock is visible to the atomic path
  m.unlock();
  REQUIRE(m.try_lock());  // and the plain unlock too
  m.unlock();

  // Held on the plain path when a second thread starts: that thread must wait, and the unlock (now on
  // the atomic path) must wake it.
  m.lock();
  std::atomic<int> stage{0};
  int shared = 0;  // written under the lock by both threads: TSan checks the ordering
  std::thread t([&] {
    stage.store(1);
    m.lock();
    stage.store(2);
    shared += 10;
    m.unlock();
  });
  CHECK_FALSE(AllocatorMutex::single_threaded());  // glibc's flag fell when the thread started
  while (stage.load() == 0) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(stage.load() == 1);  // still waiting: it did not take a held lock
  shared += 1;
  m.unlock();
  t.join();
  CHECK(stage.load() == 2);
  m.lock();
  CHECK(shared == 11);
  m.unlock();
}

TEST_CASE("AllocatorMutex: threads incrementing under the lock lose no update") {
  AllocatorMutex m;
  long counter = 0;
  constexpr int threads = 4;
  constexpr int per_thread = 20000;
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&] {
      for (int k = 0; k < per_thread; ++k) {
        AllocatorLock lock(m);
        ++counter;
      }
    });
  }
  for (auto& th : pool) th.join();
  CHECK(counter == long{threads} * per_thread);
}

TEST_CASE("AllocatorLock: holds from construction, unlock and lock again, releases only what it holds") {
  AllocatorMutex m;
  {
    AllocatorLock lock(m);
    CHECK(lock.owns_lock());
    CHECK_FALSE(m.try_lock());
    lock.unlock();
    CHECK_FALSE(lock.owns_lock());
    REQUIRE(m.try_lock());  // really released
    m.unlock();
    lock.lock();
    CHECK(lock.owns_lock());
    CHECK_FALSE(m.try_lock());
  }
  REQUIRE(m.try_lock());  // the destructor released it
  m.unlock();
  {
    AllocatorLock lock(m);
    lock.unlock();
    REQUIRE(m.try_lock());  // someone else holds it now; the destructor must leave it alone
  }
  CHECK_FALSE(m.try_lock());
  m.unlock();
}
