// accel/detail/describe_exception.hpp — what() of a stored exception, for messages (a failed stream
// task, a lazy_call callback that threw), whichever backend reports it.
#pragma once

#include <exception>
#include <string>

namespace accel::detail {

/// e.what() of the exception `error` holds, or a phrase saying it is not a std::exception.
[[nodiscard]] inline std::string describe_exception(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception not derived from std::exception";
  }
}

}  // namespace accel::detail
