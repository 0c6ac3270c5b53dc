// accel/cpu/profile.hpp — the CPU backend's profiler ranges (NVTX3 when built in; see profile/ranges.hpp).
#pragma once

#include <accel/profile/ranges.hpp>

#include <string_view>

namespace accel::cpu {

struct Profiling {
  static int range_push(std::string_view message) { return profile::range_push(message); }
  static int range_push(std::string_view message, std::string_view domain) {
    return profile::range_push(message, domain);
  }
  static int range_pop() { return profile::range_pop(); }
  static int range_pop(std::string_view domain) { return profile::range_pop(domain); }
};

}  // namespace accel::cpu
