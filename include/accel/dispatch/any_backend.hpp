// accel/dispatch/any_backend.hpp — accel::AnyBackend: the backend chosen at run time.
//
// BasicAnyBackend<Bs...> is a std::variant of backend policies with the same member API as a backend,
// forwarding each call to the active one, so `Engine<AnyBackend>` compiles and runs (dispatching per
// call). For the hot path, enter static code once with accel::visit (dispatch/visit.hpp).
// `AnyBackend{}` is the process's selected backend (get_accelerator()); `AnyBackend{CpuBackend{}}`
// a given one; `AnyBackend{BackendIndex{i}}` the i-th of the list. A user's own backend joins with
// `BasicAnyBackend<MyBackend, CpuBackend>` or `enabled_backends_t<BasicAnyBackend, MyBackend>` — also
// one that reuses another backend's stream, event or graph types (dispatch/any_stream.hpp chooses
// alternatives by position).
//
// The forwarding is written once per concept, in dispatch/forward/<area>.hpp beside concepts/<area>.hpp:
// a call added to a concept is forwarded in the header of the same name.
#pragma once

#include <accel/concepts/accelerator.hpp>
#include <accel/dispatch/any_graph.hpp>
#include <accel/dispatch/any_stream.hpp>
#include <accel/dispatch/backend_list.hpp>
#include <accel/dispatch/detail/selection_state.hpp>
#include <accel/dispatch/detail/visit_indexed.hpp>
#include <accel/dispatch/forward/device.hpp>
#include <accel/dispatch/forward/dtype.hpp>
#include <accel/dispatch/forward/env.hpp>
#include <accel/dispatch/forward/flags.hpp>
#include <accel/dispatch/forward/graph.hpp>
#include <accel/dispatch/forward/memory.hpp>
#include <accel/dispatch/forward/ops.hpp>
#include <accel/dispatch/forward/profile.hpp>
#include <accel/dispatch/forward/rng.hpp>
#include <accel/dispatch/forward/stream.hpp>

#include <concepts>
#include <cstddef>
#include <variant>

namespace accel {

/// Which backend of a list, by position: `AnyBackend{BackendIndex{1}}`.
struct BackendIndex {
  std::size_t value = 0;
};

template <class... Bs>
class BasicAnyBackend : public AnyFlagsApi<Bs...>,
                        public AnyDeviceApi<Bs...>,
                        public AnyStreamApi<Bs...>,
                        public AnyMemoryApi<Bs...>,
                        public AnyDtypeApi<Bs...>,
                        public AnyProfileApi<Bs...>,
                        public AnyEnvApi<Bs...>,
                        public AnyOpApi<Bs...>,
                        public AnyRngApi<Bs...>,
                        public AnyGraphApi<Bs...> {
  static_assert(sizeof...(Bs) > 0, "BasicAnyBackend needs at least one backend");

 public:
  using variant_type = std::variant<Bs...>;
  using Stream = AnyStream<Bs...>;
  using StreamRef = AnyStreamRef<Bs...>;
  using Event = AnyEvent<Bs...>;
  using StreamGuard = AnyStreamGuard<Bs...>;
  using DeviceGuard = AnyDeviceGuard<Bs...>;
  using Graph = AnyGraph<Bs...>;
  using GraphCapture = AnyGraphCapture<Bs...>;

  /// The selected backend (ACCEL_BACKEND, else the first available in priority order).
  BasicAnyBackend() : BasicAnyBackend(BackendIndex{detail::selected_backend_index<Bs...>()}) {}
  template <class B>
    requires(std::same_as<B, Bs> || ...)
  BasicAnyBackend(B backend) noexcept : backend_(backend) {}  // NOLINT(google-explicit-constructor)
  /// Backend number `index.value` in Bs...
  explicit BasicAnyBackend(BackendIndex index) {
    detail::with_index<sizeof...(Bs)>(detail::checked_backend_index<Bs...>("AnyBackend", index.value),
                                      [&](auto i) { backend_.template emplace<i()>(); });
  }
  [[deprecated("use BasicAnyBackend(BackendIndex{index})")]] BasicAnyBackend(std::size_t index, int /*tag*/)
      : BasicAnyBackend(BackendIndex{index}) {}

  [[nodiscard]] std::size_t index() const noexcept { return backend_.index(); }
  template <class B>
  [[nodiscard]] bool holds() const noexcept {
    return std::holds_alternative<B>(backend_);
  }
  [[nodiscard]] const variant_type& variant() const noexcept { return backend_; }

  friend bool operator==(const BasicAnyBackend& a, const BasicAnyBackend& b) noexcept { return a.index() == b.index(); }

 private:
  variant_type backend_;
};

/// The enabled backends of this build, chosen at run time.
using AnyBackend = enabled_backends_t<BasicAnyBackend>;

}  // namespace accel
