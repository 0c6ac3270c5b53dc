// accel/profile/scoped_range.hpp — RAII range: pushed on construction, popped on destruction.
#pragma once

#include <accel/profile/ranges.hpp>

#include <string>
#include <string_view>

namespace accel::profile {

/// `ScopedRange r{"forward"};` — the range closes when `r` leaves scope, even on an exception.
class ScopedRange {
 public:
  explicit ScopedRange(std::string_view message, std::string_view domain = {}) : domain_(domain) {
    range_push(message, domain_);
  }
  ScopedRange(const ScopedRange&) = delete;
  ScopedRange& operator=(const ScopedRange&) = delete;
  ~ScopedRange() {
    try {
      range_pop(domain_);
    } catch (...) {  // destructors never throw; an unbalanced pop inside the scope already failed loudly
    }
  }

 private:
  std::string domain_;
};

}  // namespace accel::profile
