// accel/dispatch/detail/selection.hpp — choosing a backend once per process (per backend list).
//
// ACCEL_BACKEND=<name> when set: an unknown name is an InvalidArgumentError listing the valid ones;
// a known but unavailable backend is a BackendUnavailableError saying why — never a silent fallback.
// Otherwise the first available backend in priority order. Probing calls availability(), which for
// every backend is side-effect free (CUDA: the driver is asked, no context is created).
#pragma once

#include <accel/concepts/device.hpp>
#include <accel/core/error.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
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
  bool from_environment = false;  ///< chosen by ACCEL_BACKEND
  std::string reason;             ///< one line: why this one
  std::vector<BackendProbe> probes;
};

/// Selects among Bs... as get_accelerator() does; `requested` is ACCEL_BACKEND's value (nullptr: unset).
template <class... Bs>
BackendSelection select_backend(const char* requested) {
  BackendSelection selection;
  (selection.probes.push_back({std::string(Bs::name()), Bs{}.availability()}), ...);
  std::string valid;
  for (const auto& probe : selection.probes) valid += (valid.empty() ? "" : ", ") + probe.name;

  if (requested != nullptr && *requested != '\0') {
    const std::string_view name(requested);
    for (std::size_t i = 0; i < selection.probes.size(); ++i) {
      const auto& probe = selection.probes[i];
      if (probe.name != name) continue;
      if (!probe.availability.available) {
        throw BackendUnavailableError("ACCEL_BACKEND=" + probe.name + " but " + probe.name +
                                      " is unavailable: " + probe.availability.reason);
      }
      selection.index = i;
      selection.name = probe.name;
      selection.from_environment = true;
      selection.reason = "ACCEL_BACKEND=" + probe.name;
      return selection;
    }
    throw InvalidArgumentError("ACCEL_BACKEND='" + std::string(name) +
                               "' is not a backend of this build (valid: " + valid + ")");
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

namespace detail {

template <class... Bs>
struct SelectionState {
  // -1: no override; else the index set by set_accelerator().
  static std::atomic<int>& override_index() {
    static std::atomic<int> index{-1};
    return index;
  }
  // Computed once, thread-safely; if it throws, the next call tries again.
  static const BackendSelection& selection() {
    static const BackendSelection selected = [] {
      BackendSelection s = select_backend<Bs...>(std::getenv("ACCEL_BACKEND"));
      if (const char* level = std::getenv("ACCEL_LOG_LEVEL"); level != nullptr && std::string_view(level) == "debug") {
        std::fprintf(stderr, "accel: selected backend %s (%s)\n", std::string(s.name).c_str(),
                     std::string(s.reason).c_str());
      }
      return s;
    }();
    return selected;
  }
};

template <class... Bs>
std::size_t selected_backend_index() {
  const int overridden = SelectionState<Bs...>::override_index().load(std::memory_order_acquire);
  if (overridden >= 0) return static_cast<std::size_t>(overridden);
  return SelectionState<Bs...>::selection().index;
}

}  // namespace detail
}  // namespace accel
