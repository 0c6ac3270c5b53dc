// accel/dispatch/select.hpp — accel::get_accelerator(): DeepSpeed's get_accelerator(), chosen once per
// backend list.
#pragma once

#include <accel/dispatch/any_backend.hpp>
#include <accel/dispatch/detail/selection_state.hpp>

#include <string>
#include <type_traits>

namespace accel {

namespace detail {

// The selection state of an AnyBackend's own list (dispatch/detail/selection_state.hpp).
template <class Any>
struct selection_state_of;
template <class... Bs>
struct selection_state_of<BasicAnyBackend<Bs...>> {
  using type = SelectionState<Bs...>;
};

}  // namespace detail

// These three are templates (with a default argument nobody passes for the built-in list) only so
// that their bodies — the selection, the variant construction, the probes — are compiled in the
// translation units that call them, not in every one that includes the umbrella. Call them as plain
// functions; a user's own list passes its type: accel::set_accelerator<MyAny>(MyAny{MyBackend{}}).

/// The process's backend: ACCEL_BACKEND (or DS_ACCELERATOR) = cpu|cuda when set (errors are never a
/// silent fallback), else the first available one in priority order (CUDA, then CPU); or what
/// set_accelerator() chose.
template <class Any = AnyBackend>
[[nodiscard]] Any get_accelerator() {
  return Any{};
}

/// Overrides the selection of Any's backend list for the rest of the process (DeepSpeed's
/// set_accelerator). Other lists, the built-in one included, keep their own selection.
template <class Any = AnyBackend>
void set_accelerator(std::type_identity_t<Any> backend) {
  if (!backend.is_available()) {
    throw BackendUnavailableError("set_accelerator(" + std::string(backend.name()) +
                                  "): unavailable: " + backend.availability().reason);
  }
  detail::selection_state_of<Any>::type::override_index().store(static_cast<int>(backend.index()),
                                                                 std::memory_order_release);
}

/// Why get_accelerator<Any>() chose what it chose (the environment, or each backend's probe), for
/// reports. (What the environment and the probes chose: set_accelerator() does not change it.)
template <class Any = AnyBackend>
[[nodiscard]] const BackendSelection& accelerator_selection() {
  return detail::selection_state_of<Any>::type::selection();
}

}  // namespace accel
