// accel/dispatch/select.hpp — accel::get_accelerator(): DeepSpeed's get_accelerator(), chosen once.
#pragma once

#include <accel/dispatch/any_backend.hpp>
#include <accel/dispatch/detail/selection.hpp>

#include <string>
#include <type_traits>
#include <variant>

namespace accel {

// These three are templates (with a default argument nobody passes) only so that their bodies — the
// selection, the variant construction, the probes — are compiled in the translation units that call
// them, not in every one that includes the umbrella. Call them as plain functions.

/// The process's backend: ACCEL_BACKEND=cpu|cuda when set (errors are never a silent fallback), else
/// the first available one in priority order (CUDA, then CPU); or what set_accelerator() chose.
template <class Any = AnyBackend>
[[nodiscard]] Any get_accelerator() {
  return Any{};
}

/// Overrides the selection for the rest of the process (DeepSpeed's set_accelerator).
template <class Any = AnyBackend>
void set_accelerator(std::type_identity_t<Any> backend) {
  if (!backend.is_available()) {
    throw BackendUnavailableError("set_accelerator(" + std::string(backend.name()) +
                                  "): unavailable: " + backend.availability().reason);
  }
  detail::with_index<std::variant_size_v<typename Any::variant_type>>(backend.index(), [](auto i) {
    enabled_backends_t<detail::SelectionState>::override_index().store(int(i()), std::memory_order_release);
  });
}

/// Why get_accelerator() chose what it chose (the environment, or each backend's probe), for reports.
template <class State = enabled_backends_t<detail::SelectionState>>
[[nodiscard]] const BackendSelection& accelerator_selection() {
  return State::selection();
}

}  // namespace accel
