// Dtype names: parse never crashes; an accepted name's canonical name parses to the same dtype.
#include "fuzz_main.hpp"

#include <accel/core/dtype.hpp>

#include <cstdlib>

void accel_fuzz_one(std::string_view text) {
  try {
    const accel::Dtype dtype = accel::parse_dtype(text);
    if (accel::parse_dtype(accel::name(dtype)) != dtype) std::abort();
  } catch (const accel::InvalidArgumentError&) {
  }
}
