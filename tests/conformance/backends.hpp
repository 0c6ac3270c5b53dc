// The backends every conformance suite runs over, and the run-time skip for unavailable ones.
#pragma once

#include <accel/accel.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <tuple>
#include <vector>

// Every enabled backend, then AnyBackend: the run-time dispatcher must keep the same contract.
using ConformanceBackends = accel::enabled_backends_t<std::tuple, accel::AnyBackend>;

/// Returns from the test case, saying why, when backend B cannot run here (e.g. CUDA without a GPU).
#define ACCEL_SKIP_UNLESS_AVAILABLE(B)                                                           \
  do {                                                                                           \
    const accel::Availability availability_ = B{}.availability();                                \
    if (!availability_.available) {                                                              \
      MESSAGE("SKIPPED on " << B{}.name() << ": " << availability_.reason);                         \
      return;                                                                                    \
    }                                                                                            \
  } while (false)

/// Holds a stream's queue until released; releases in its destructor too, so a failed CHECK_THROWS or
/// REQUIRE cannot leave a task spinning that the stream's destructor would wait for. The flag is shared
/// with the task, so it outlives the Gate whichever is destroyed first.
struct Gate {
  std::shared_ptr<std::atomic<bool>> flag = std::make_shared<std::atomic<bool>>(false);
  void hold(auto& stream) {
    stream.enqueue([flag = flag] {
      while (!flag->load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
    });
  }
  void open() { *flag = true; }
  Gate() = default;
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  ~Gate() { open(); }
};

/// Whether two vectors hold the same bytes: the same bit patterns, NaNs and signed zeros included.
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}
