// ACCEL_BACKEND values (dispatch/detail/selection.hpp, what get_accelerator() runs on the variable).
// The parser is select_backend<Bs...>; it is fuzzed over two stand-in backends — "cuda", unavailable,
// and "cpu", available — so that both error paths are reachable on any machine and the target does
// not depend on a backend's headers. Whatever the text: an empty value picks the first available
// backend; a listed name picks it or is a BackendUnavailableError saying why; anything else is an
// InvalidArgumentError that quotes ACCEL_BACKEND and lists the valid names. Nothing else escapes.
#include "fuzz_main.hpp"

#include <accel/dispatch/detail/selection.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

struct StandInCuda {
  static constexpr std::string_view name() noexcept { return "cuda"; }
  accel::Availability availability() const { return {false, "no driver (stand-in)"}; }
};
struct StandInCpu {
  static constexpr std::string_view name() noexcept { return "cpu"; }
  accel::Availability availability() const { return {true, {}}; }
};

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_backend_env: invariant broken: %s\n", what);
  std::abort();
}

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

}  // namespace

void accel_fuzz_one(std::string_view text) {
  const std::string value(text.substr(0, text.find('\0')));  // an environment value ends at a NUL
  try {
    const auto selection = accel::select_backend<StandInCuda, StandInCpu>(value.c_str());
    if (selection.name != "cpu" || selection.index != 1) fail("selected something other than cpu");
    if (selection.from_environment != !value.empty()) fail("from_environment is wrong");
    if (!value.empty() && value != "cpu") fail("accepted a name that is not cpu");
    if (selection.probes.size() != 2) fail("not every backend was probed");
  } catch (const accel::BackendUnavailableError& e) {
    if (value != "cuda") fail("unavailable error for a name other than cuda");
    if (!contains(e.what(), "ACCEL_BACKEND") || !contains(e.what(), "no driver")) fail("unavailable error says too little");
  } catch (const accel::InvalidArgumentError& e) {
    if (value.empty() || value == "cpu" || value == "cuda") fail("a valid name was rejected");
    if (!contains(e.what(), "ACCEL_BACKEND") || !contains(e.what(), "cuda, cpu")) fail("unknown-name error says too little");
  }
}
