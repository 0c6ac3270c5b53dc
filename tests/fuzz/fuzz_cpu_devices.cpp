// ACCEL_CPU_DEVICE_COUNT and ACCEL_CPU_VISIBLE_DEVICES (cpu/device.hpp): the input is
// "<count>\n<visible>" (no newline: ACCEL_CPU_VISIBLE_DEVICES unset). Whatever the text, parsing
// never crashes and either throws InvalidArgumentError naming the variable or gives a count in
// range; the availability read from them agrees with the parsers and names the variable when it says no.
#include "fuzz_main.hpp"

#include <accel/cpu/device.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_cpu_devices: invariant broken: %s\n", what);
  std::abort();
}

bool names(const accel::Error& e, const char* variable) { return std::string(e.what()).find(variable) != std::string::npos; }

}  // namespace

void accel_fuzz_one(std::string_view text) {
  text = text.substr(0, text.find('\0'));  // an environment value ends at the first NUL
  const std::size_t newline = text.find('\n');
  const std::string count_text(text.substr(0, newline));
  ::setenv("ACCEL_CPU_DEVICE_COUNT", count_text.c_str(), 1);
  if (newline == std::string_view::npos) {
    ::unsetenv("ACCEL_CPU_VISIBLE_DEVICES");
  } else {
    ::setenv("ACCEL_CPU_VISIBLE_DEVICES", std::string(text.substr(newline + 1)).c_str(), 1);
  }

  int exposed = -1;
  try {
    exposed = accel::cpu::detail::parse_positive_env("ACCEL_CPU_DEVICE_COUNT", 1);
    if (exposed < 1 || exposed > 4096) fail("device count out of [1, 4096]");
  } catch (const accel::InvalidArgumentError& e) {
    if (!names(e, "ACCEL_CPU_DEVICE_COUNT")) fail("count error does not name ACCEL_CPU_DEVICE_COUNT");
  }

  int visible = -1;
  if (exposed > 0) {
    try {
      visible = accel::cpu::detail::count_visible(exposed);
      // A subset of the exposed devices: never more than were exposed.
      if (visible < 0 || visible > exposed) fail("visible count out of [0, exposed]");
    } catch (const accel::InvalidArgumentError& e) {
      if (!names(e, "ACCEL_CPU_VISIBLE_DEVICES")) fail("visible error does not name ACCEL_CPU_VISIBLE_DEVICES");
    }
  }

  const accel::Availability a = accel::cpu::detail::read_device_env().availability;
  if (a.available != (visible > 0)) fail("availability() disagrees with the parsers");
  if (!a.available && a.reason.find("ACCEL_CPU_") == std::string::npos) fail("reason names no variable");
}
