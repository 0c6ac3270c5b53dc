// Device strings ("cuda:1"): parse never crashes; what it accepts prints back to the same text.
#include "fuzz_main.hpp"

#include <accel/core/device.hpp>

#include <cstdlib>

void accel_fuzz_one(std::string_view text) {
  try {
    const accel::Device device = accel::Device::parse(text);
    if (accel::Device::parse(device.str()) != device) std::abort();
  } catch (const accel::InvalidArgumentError&) {
  }
}
