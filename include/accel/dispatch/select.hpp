// accel/dispatch/select.hpp — accel::get_accelerator(): DeepSpeed's get_accelerator(), chosen once.
#pragma once

#include <accel/dispatch/any_backend.hpp>
#include <accel/dispatch/detail/selection.hpp>

namespace accel {

/// The process's backend: ACCEL_BACKEND=cpu|cuda when set (errors are never a silent fallback), else
/// the first available one in priority order (CUDA, then CPU); or what set_accelerator() chose.
[[nodiscard]] inline AnyBackend get_accelerator() { return AnyBackend{}; }

/// Overrides the selection for the rest of the process (DeepSpeed's set_accelerator).
inline void set_accelerator(AnyBackend backend) {
  if (!backend.is_available()) {
    throw BackendUnavailableError("set_accelerator(" + std::string(backend.name()) +
                                  "): unavailable: " + backend.availability().reason);
  }
  detail::with_index<std::variant_size_v<AnyBackend::variant_type>>(backend.index(), [](auto i) {
    enabled_backends_t<detail::SelectionState>::override_index().store(int(i()), std::memory_order_release);
  });
}

/// Why get_accelerator() chose what it chose (the environment, or each backend's probe), for reports.
[[nodiscard]] inline const BackendSelection& accelerator_selection() {
  return enabled_backends_t<detail::SelectionState>::selection();
}

}  // namespace accel
