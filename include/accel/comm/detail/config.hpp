// accel/comm/detail/config.hpp — the environment variables of accel/comm, read when a communicator is
// created (so a test may set them before) and checked strictly: a malformed value is an
// InvalidArgumentError naming the variable, never a silent default.
//
//   ACCEL_COMM_TIMEOUT      timeout of every operation: seconds ("600", "1.5") or with a unit
//                           ("500ms", "90s", "10m"); default 10 minutes, as torch and DeepSpeed
//   ACCEL_COMM_TRACE_SIZE   operations kept by each communicator's flight recorder; default 256, 0: off
//   ACCEL_COMM_LOG          1: a per-operation summary (count, sizes, latency, algbw/busbw) on stderr at
//                           exit, from rank 0; "all": from every rank; 0 or unset: none
//   ACCEL_COMM_CHECK        1: before each collective the ranks compare what they pass (operation, count,
//                           dtype, reduce op, root) and fail together, naming what differs, instead of
//                           reducing garbage (MPI; one extra small all_reduce per collective, as torch's
//                           TORCH_DISTRIBUTED_DEBUG=DETAIL); 0 or unset: off
#pragma once

#include <accel/core/error.hpp>

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <string>
#include <string_view>

namespace accel::comm::detail {

inline constexpr std::chrono::nanoseconds default_timeout = std::chrono::minutes(10);

/// "600", "1.5", "500ms", "90s", "10m" -> a duration; anything else (negative, zero, garbage, no number)
/// is an InvalidArgumentError quoting `variable` and the text.
[[nodiscard]] inline std::chrono::nanoseconds parse_timeout(std::string_view text, std::string_view variable) {
  const auto fail = [&]() -> std::chrono::nanoseconds {
    throw InvalidArgumentError(std::string(variable) + "='" + std::string(text) +
                               "' is not a timeout: use seconds (\"600\", \"1.5\") or a number with ms, s or m "
                               "(\"500ms\", \"90s\", \"10m\"), greater than 0");
  };
  std::string number(text);
  double scale = 1e9;  // seconds
  if (number.ends_with("ms")) {
    scale = 1e6;
    number.resize(number.size() - 2);
  } else if (number.ends_with("s")) {
    number.resize(number.size() - 1);
  } else if (number.ends_with("m")) {
    scale = 60e9;
    number.resize(number.size() - 1);
  }
  // Digits and dots only (no sign, exponent, "nan" or "inf"), all of them read by strtod.
  if (number.find_first_not_of("0123456789.") != std::string::npos) return fail();
  char* end = nullptr;
  const double value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size()) return fail();
  const double ns = value * scale;
  if (ns > 1e18 || ns < 1) return fail();  // beyond ~31 years, or below a nanosecond (zero, or no number)
  return std::chrono::nanoseconds(static_cast<std::int64_t>(ns));
}

/// ACCEL_COMM_TIMEOUT, or 10 minutes.
[[nodiscard]] inline std::chrono::nanoseconds timeout_from_env() {
  const char* value = std::getenv("ACCEL_COMM_TIMEOUT");
  if (value == nullptr || *value == '\0') return default_timeout;
  return parse_timeout(value, "ACCEL_COMM_TIMEOUT");
}

/// ACCEL_COMM_TRACE_SIZE, or 256.
[[nodiscard]] inline std::size_t trace_size_from_env() {
  const char* value = std::getenv("ACCEL_COMM_TRACE_SIZE");
  if (value == nullptr || *value == '\0') return 256;
  const std::string_view text(value);
  if (text.size() > 9 || text.find_first_not_of("0123456789") != std::string_view::npos) {
    throw InvalidArgumentError("ACCEL_COMM_TRACE_SIZE='" + std::string(text) +
                               "' is not a number of operations (0 to 999999999; 0 switches the flight recorder off)");
  }
  return static_cast<std::size_t>(std::stoul(std::string(text)));
}

enum class LogMode { off, rank0, all };

/// ACCEL_COMM_LOG: unset, "" or "0" off; "1" rank 0; "all" every rank.
[[nodiscard]] inline LogMode log_mode_from_env() {
  const char* value = std::getenv("ACCEL_COMM_LOG");
  if (value == nullptr) return LogMode::off;
  const std::string_view text(value);
  if (text.empty() || text == "0") return LogMode::off;
  if (text == "1") return LogMode::rank0;
  if (text == "all") return LogMode::all;
  throw InvalidArgumentError("ACCEL_COMM_LOG='" + std::string(text) +
                             "' is not valid: use 1 (summary from rank 0 at exit), all (from every rank) or 0");
}

/// ACCEL_COMM_CHECK: unset, "" or "0" off; "1" on.
[[nodiscard]] inline bool check_from_env() {
  const char* value = std::getenv("ACCEL_COMM_CHECK");
  if (value == nullptr || *value == '\0' || std::string_view(value) == "0") return false;
  if (std::string_view(value) == "1") return true;
  throw InvalidArgumentError("ACCEL_COMM_CHECK='" + std::string(value) + "' is not valid: use 1 (compare every "
                             "collective's arguments across the ranks first) or 0");
}

}  // namespace accel::comm::detail
