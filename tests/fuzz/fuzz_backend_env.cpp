// ACCEL_BACKEND and DS_ACCELERATOR values (dispatch/selection.hpp, what get_accelerator() runs
// on the variables). An input is ACCEL_BACKEND's value, then optionally a NUL and DS_ACCELERATOR's
// (an environment value ends at a NUL; no NUL: DS_ACCELERATOR unset). The parser is
// select_backend<Bs...>; it is fuzzed over two stand-in backends — "cuda", unavailable, and "cpu",
// available — so that every error path is reachable on any machine and the target does not depend on
// a backend's headers. Whatever the text: both variables set (non-empty) to different values is an
// InvalidArgumentError naming both and listing the valid names; else the one set (or the common
// value) picks its backend, or is a BackendUnavailableError saying why, or an InvalidArgumentError
// that quotes that variable and lists the valid names; neither set picks the first available
// backend. Nothing else escapes.
#include "fuzz_main.hpp"

#include <accel/dispatch/selection.hpp>

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
  const std::size_t nul = text.find('\0');
  const std::string accel_value(text.substr(0, nul));
  const bool ds_given = nul != std::string_view::npos;
  const std::string ds_value(ds_given ? text.substr(nul + 1, text.find('\0', nul + 1) - (nul + 1)) : std::string_view());
  const bool accel_set = !accel_value.empty();
  const bool ds_set = ds_given && !ds_value.empty();
  const bool conflict = accel_set && ds_set && accel_value != ds_value;
  const std::string& chosen = accel_set ? accel_value : ds_value;  // what selects, when not a conflict
  const char* variable = accel_set ? "ACCEL_BACKEND" : "DS_ACCELERATOR";
  try {
    const auto selection =
        accel::select_backend<StandInCuda, StandInCpu>(accel_value.c_str(), ds_given ? ds_value.c_str() : nullptr);
    if (conflict) fail("two different names were accepted");
    if (selection.name != "cpu" || selection.index != 1) fail("selected something other than cpu");
    if (selection.from_environment != (accel_set || ds_set)) fail("from_environment is wrong");
    if ((accel_set || ds_set) && chosen != "cpu") fail("accepted a name that is not cpu");
    if ((accel_set || ds_set) && !contains(selection.reason, variable)) fail("the reason does not name the variable");
    if (selection.probes.size() != 2) fail("not every backend was probed");
  } catch (const accel::BackendUnavailableError& e) {
    if (conflict || chosen != "cuda") fail("unavailable error for a name other than cuda");
    if (!contains(e.what(), variable) || !contains(e.what(), "no driver")) fail("unavailable error says too little");
  } catch (const accel::InvalidArgumentError& e) {
    if (conflict) {
      if (!contains(e.what(), "ACCEL_BACKEND='" + accel_value + "'") ||
          !contains(e.what(), "DS_ACCELERATOR='" + ds_value + "'") || !contains(e.what(), "cuda, cpu")) {
        fail("conflict error does not name both variables and the valid names");
      }
      return;
    }
    if (!(accel_set || ds_set) || chosen == "cpu" || chosen == "cuda") fail("a valid name was rejected");
    if (!contains(e.what(), std::string(variable) + "='") || !contains(e.what(), "cuda, cpu")) {
      fail("unknown-name error says too little");
    }
  }
}
