// accel/backend/profiling.hpp — accel::Profiling: ProfileApi (concepts/profile.hpp), one definition for
// every backend.
//
// Ranges belong to the profiler, not to a device: NVTX where it is built in (through NVTX's library,
// loaded when a profiler attaches; Nsight Systems shows them on the CPU timeline, above the CUDA work),
// else a per-thread depth count (profile/ranges.hpp).
#pragma once

#include <accel/profile/ranges.hpp>

#include <string_view>

namespace accel {

struct Profiling {
  static int range_push(std::string_view message) { return profile::range_push(message); }
  static int range_push(std::string_view message, std::string_view domain) {
    return profile::range_push(message, domain);
  }
  static int range_pop() { return profile::range_pop(); }
  static int range_pop(std::string_view domain) { return profile::range_pop(domain); }
};

}  // namespace accel
