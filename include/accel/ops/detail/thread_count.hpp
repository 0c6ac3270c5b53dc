// accel/ops/detail/thread_count.hpp — the check of the host ops' set_num_threads(n): 0 means every
// core (OpenMP's default), a positive count that many threads; a negative one is refused (it was
// quietly taken as 0), as accel::blas::set_num_threads refuses n < 1.
#pragma once

#include <accel/core/error.hpp>

#include <string>

namespace accel::ops::detail {

[[nodiscard]] inline int checked_thread_count(const char* op, int n) {
  if (n < 0) {
    throw InvalidArgumentError(std::string(op) + "::set_num_threads: n = " + std::to_string(n) +
                               " (it must be >= 0; 0: every core)");
  }
  return n;
}

}  // namespace accel::ops::detail
