// ACCEL_ALLOC_CONF: parse never crashes; a bad text is an InvalidArgumentError.
#include "fuzz_main.hpp"

#include <accel/memory/allocator_config.hpp>

void accel_fuzz_one(std::string_view text) {
  try {
    const auto config = accel::AllocatorConfig::parse(text);
    (void)config;
  } catch (const accel::InvalidArgumentError&) {
  }
}
