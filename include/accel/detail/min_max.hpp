// accel/detail/min_max.hpp — std::min and std::max for the headers on the default include path.
//
// <algorithm> is a twelfth of what including <accel/accel.hpp> costs g++ 12 in C++20 (it brings the
// ranges algorithms), and those headers need nothing else from it. Scalars only: by value.
#pragma once

namespace accel::detail {

template <class T>
[[nodiscard]] constexpr T min_of(T a, T b) noexcept {
  return b < a ? b : a;
}

template <class T>
[[nodiscard]] constexpr T max_of(T a, T b) noexcept {
  return a < b ? b : a;
}

}  // namespace accel::detail
