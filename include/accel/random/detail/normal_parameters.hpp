// accel/random/detail/normal_parameters.hpp — the check of fill_normal's mean and stddev, shared by
// the backends: torch's normal_ refuses a negative std; a NaN or infinite one (or mean) would fill the
// buffer with NaN or infinities just as silently, so it is refused too — before the generator moves.
#pragma once

#include <accel/core/error.hpp>
#include <accel/detail/format_number.hpp>

#include <cmath>
#include <string>

namespace accel::rng::detail {

inline void check_normal_parameters(const char* backend, double mean, double stddev) {
  if (!std::isfinite(mean)) {
    throw InvalidArgumentError(std::string(backend) + " fill_normal: mean = " + accel::detail::format_number(mean) +
                               " must be finite");
  }
  if (!(std::isfinite(stddev) && stddev >= 0)) {
    throw InvalidArgumentError(std::string(backend) + " fill_normal: stddev = " +
                               accel::detail::format_number(stddev) + " must be finite and >= 0");
  }
}

}  // namespace accel::rng::detail
