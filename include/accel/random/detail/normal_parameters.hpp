// accel/random/detail/normal_parameters.hpp — the check of fill_normal's mean and stddev, shared by
// the backends: torch's normal_ refuses a negative std; a NaN or infinite one (or mean) would fill the
// buffer with NaN or infinities just as silently, so it is refused too — before the generator moves.
#pragma once

#include <accel/core/error.hpp>

#include <cmath>
#include <cstdio>
#include <string>

namespace accel::rng::detail {

inline void check_normal_parameters(const char* backend, double mean, double stddev) {
  char text[160];
  if (!std::isfinite(mean)) {
    std::snprintf(text, sizeof text, "%s fill_normal: mean = %g must be finite", backend, mean);
    throw InvalidArgumentError(text);
  }
  if (!(std::isfinite(stddev) && stddev >= 0)) {
    std::snprintf(text, sizeof text, "%s fill_normal: stddev = %g must be finite and >= 0", backend, stddev);
    throw InvalidArgumentError(text);
  }
}

}  // namespace accel::rng::detail
