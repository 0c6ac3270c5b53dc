// The backends every conformance suite runs over, and the run-time skip for unavailable ones.
#pragma once

#include <accel/accel.hpp>

#include <doctest/doctest.h>

#include <cstring>
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

/// Whether two vectors hold the same bytes: the same bit patterns, NaNs and signed zeros included.
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}
