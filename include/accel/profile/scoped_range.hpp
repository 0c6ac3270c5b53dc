// accel/profile/scoped_range.hpp — RAII range: pushed on construction, popped on destruction.
#pragma once

#include <accel/profile/ranges.hpp>

#include <string>
#include <string_view>

namespace accel::profile {

/// `ScopedRange r{"forward"};` — the range closes when `r` leaves scope, even on an exception.
///
/// It pops only its own range: the destructor pops when the domain's depth on this thread is still the
/// depth its push made. A range_pop inside the scope that closed it already (or a range_push left open
/// there) changes the depth, and the destructor then pops nothing — popping would close a range that is
/// not its own, the enclosing one after a manual pop.
class ScopedRange {
 public:
  explicit ScopedRange(std::string_view message, std::string_view domain = {})
      : domain_(domain), depth_(range_push(message, domain_)) {}
  ScopedRange(const ScopedRange&) = delete;
  ScopedRange& operator=(const ScopedRange&) = delete;
  ~ScopedRange() {
    try {
      if (range_depth(domain_) == depth_) range_pop(domain_);  // else not ours to pop (see above)
    } catch (...) {  // destructors never throw
    }
  }

 private:
  std::string domain_;
  int depth_;  // the domain's depth with this range open
};

}  // namespace accel::profile
