// accel/detail/format_number.hpp — a number in an error message as its user would write it.
//
// std::to_string prints fixed six decimals: a fraction of 1e-09 reads 0.000000 and a bound of 1e+30
// reads 1000000000000000019884624838656.000000. %g gives 1e-09, 0.25, 1e+30.
#pragma once

#include <cstdio>
#include <string>

namespace accel::detail {

[[nodiscard]] inline std::string format_number(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", x);
  return text;
}

}  // namespace accel::detail
