// accel/cuda/profile.hpp — the CUDA backend's profiler ranges: NVTX3, with domains
// (see profile/ranges.hpp). Nsight Systems shows them on the CPU timeline above the CUDA work.
#pragma once

#include <accel/profile/ranges.hpp>

#include <string_view>

namespace accel::cuda {

struct Profiling {
  static int range_push(std::string_view message) { return profile::range_push(message); }
  static int range_push(std::string_view message, std::string_view domain) {
    return profile::range_push(message, domain);
  }
  static int range_pop() { return profile::range_pop(); }
  static int range_pop(std::string_view domain) { return profile::range_pop(domain); }
};

}  // namespace accel::cuda
