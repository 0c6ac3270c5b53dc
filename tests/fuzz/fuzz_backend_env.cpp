// ACCEL_BACKEND values: selection either picks the named backend or throws a typed error.
#include "fuzz_main.hpp"

#include <accel/dispatch/select.hpp>

#include <cstdlib>
#include <string>

void accel_fuzz_one(std::string_view text) {
  const std::string value(text.substr(0, text.find('\0')));
  try {
    const auto selection = accel::select_backend<accel::CpuBackend>(value.c_str());
    if (!value.empty() && selection.name != value) std::abort();
  } catch (const accel::InvalidArgumentError&) {
  } catch (const accel::BackendUnavailableError&) {
  }
}
