// accel/dispatch/selection.hpp — choosing a backend: accel::select_backend and what it answers
// (BackendSelection, BackendProbe); get_accelerator() runs it once per process (per backend list).
//
// ACCEL_BACKEND=<name>, or DeepSpeed's DS_ACCELERATOR=<name>, when set: an unknown name is an
// InvalidArgumentError listing the valid ones; a known but unavailable backend is a
// BackendUnavailableError saying why — never a silent fallback. Both set to different names is an
// InvalidArgumentError naming both (the same name twice is fine). An empty value counts as unset.
// Otherwise the first available backend in priority order. Probing calls availability(), which for
// every backend is side-effect free (CUDA: the driver is asked, no context is created).
//
// The once-per-process state is dispatch/detail/selection_state.hpp.
#pragma once

#include <accel/concepts/device.hpp>
#include <accel/core/error.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace accel {

/// One backend's probe result.
struct BackendProbe {
  std::string name;
  Availability availability;
};

/// Which backend was selected, and why.
struct BackendSelection {
  std::size_t index = 0;          ///< position in the backend list
  std::string name;               ///< "cuda", "cpu"
  bool from_environment = false;  ///< chosen by ACCEL_BACKEND or DS_ACCELERATOR
  std::string reason;             ///< one line: why this one
  std::vector<BackendProbe> probes;
};

/// Selects among Bs... as get_accelerator() does: `requested` is ACCEL_BACKEND's value and
/// `ds_requested` DS_ACCELERATOR's (nullptr or empty: unset).
template <class... Bs>
BackendSelection select_backend(const char* requested, const char* ds_requested) {
  BackendSelection selection;
  (selection.probes.push_back({std::string(Bs::name()), Bs{}.availability()}), ...);
  std::string valid;
  for (const auto& probe : selection.probes) valid += (valid.empty() ? "" : ", ") + probe.name;

  const bool accel_set = requested != nullptr && *requested != '\0';
  const bool ds_set = ds_requested != nullptr && *ds_requested != '\0';
  if (accel_set && ds_set && std::string_view(requested) != std::string_view(ds_requested)) {
    throw InvalidArgumentError("ACCEL_BACKEND='" + std::string(requested) + "' and DS_ACCELERATOR='" +
                               std::string(ds_requested) +
                               "' name different backends: unset one, or set both to the same name (valid: " + valid +
                               ")");
  }
  if (accel_set || ds_set) {
    // ACCEL_BACKEND names the variable in messages when both are set (to the same name).
    const std::string variable = accel_set ? "ACCEL_BACKEND" : "DS_ACCELERATOR";
    const std::string_view name(accel_set ? requested : ds_requested);
    for (std::size_t i = 0; i < selection.probes.size(); ++i) {
      const auto& probe = selection.probes[i];
      if (probe.name != name) continue;
      if (!probe.availability.available) {
        throw BackendUnavailableError(variable + "=" + probe.name + " but " + probe.name +
                                      " is unavailable: " + probe.availability.reason);
      }
      selection.index = i;
      selection.name = probe.name;
      selection.from_environment = true;
      selection.reason = variable + "=" + probe.name + (accel_set && ds_set ? " (and DS_ACCELERATOR)" : "");
      return selection;
    }
    throw InvalidArgumentError(variable + "='" + std::string(name) + "' is not a backend of this build (valid: " +
                               valid + ")");
  }
  std::string why_not;
  for (std::size_t i = 0; i < selection.probes.size(); ++i) {
    const auto& probe = selection.probes[i];
    if (probe.availability.available) {
      selection.index = i;
      selection.name = probe.name;
      selection.reason = "first available in priority order (" + valid + ")" +
                         (why_not.empty() ? "" : "; skipped " + why_not);
      return selection;
    }
    why_not += (why_not.empty() ? "" : "; ") + probe.name + ": " + probe.availability.reason;
  }
  throw BackendUnavailableError("no backend is available (" + why_not + ")");
}

/// The same with DS_ACCELERATOR unset.
template <class... Bs>
BackendSelection select_backend(const char* requested) {
  return select_backend<Bs...>(requested, nullptr);
}

}  // namespace accel
