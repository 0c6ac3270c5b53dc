// accel/comm/comm_config.hpp — accel::comm::CommConfig: accel/comm's environment, read and checked at
// once. A communicator reads ACCEL_COMM_TIMEOUT, ACCEL_COMM_TRACE_SIZE and ACCEL_COMM_CHECK when it is
// created, init() reads ACCEL_COMM_LOG; a program that checks its input before it starts work (a trainer
// before it loads data) calls CommConfig::from_env() first, so that a typo there is reported with its
// other bad input rather than minutes later, when the first communicator is made.
//
//   const auto config = accel::comm::CommConfig::from_env();   // InvalidArgumentError naming the variable
#pragma once

#include <accel/comm/detail/config.hpp>

#include <chrono>
#include <cstddef>

namespace accel::comm {

struct CommConfig {
  using LogMode = detail::LogMode;  ///< off, rank0 ("1"), all

  std::chrono::nanoseconds timeout = detail::default_timeout;  ///< ACCEL_COMM_TIMEOUT: every operation's
  std::size_t trace_size = 256;                                ///< ACCEL_COMM_TRACE_SIZE: the flight recorder's operations
  LogMode log = LogMode::off;                                  ///< ACCEL_COMM_LOG: the summary at exit
  bool check = false;  ///< ACCEL_COMM_CHECK: the ranks compare each collective's arguments first

  /// The four variables as accel/comm reads them; a malformed value is the InvalidArgumentError the
  /// communicator (or init) would throw, naming the variable and what it accepts.
  [[nodiscard]] static CommConfig from_env() {
    CommConfig c;
    c.timeout = detail::timeout_from_env();
    c.trace_size = detail::trace_size_from_env();
    c.log = detail::log_mode_from_env();
    c.check = detail::check_from_env();
    return c;
  }
};

}  // namespace accel::comm
