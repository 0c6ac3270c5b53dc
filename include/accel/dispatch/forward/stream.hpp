// accel/dispatch/forward/stream.hpp — StreamApi (concepts/stream.hpp) of BasicAnyBackend<Bs...>.
//
// Streams are wrapped by the active backend's position, not their type (two backends may share one);
// a stream argument must belong to the active backend.
#pragma once

#include <accel/dispatch/any_stream.hpp>
#include <accel/dispatch/detail/forward.hpp>

#include <utility>

namespace accel {

template <class... Bs>
struct AnyStreamApi {
  [[nodiscard]] AnyStreamRef<Bs...> current_stream() const {
    return detail::on_active_indexed(
        *this, [](auto i, auto b) { return AnyStreamRef<Bs...>(std::in_place_index<i()>, b.current_stream()); });
  }
  [[nodiscard]] AnyStreamRef<Bs...> current_stream(int dev) const {
    return detail::on_active_indexed(
        *this, [&](auto i, auto b) { return AnyStreamRef<Bs...>(std::in_place_index<i()>, b.current_stream(dev)); });
  }
  [[nodiscard]] AnyStreamRef<Bs...> default_stream() const {
    return detail::on_active_indexed(
        *this, [](auto i, auto b) { return AnyStreamRef<Bs...>(std::in_place_index<i()>, b.default_stream()); });
  }
  [[nodiscard]] AnyStreamRef<Bs...> default_stream(int dev) const {
    return detail::on_active_indexed(
        *this, [&](auto i, auto b) { return AnyStreamRef<Bs...>(std::in_place_index<i()>, b.default_stream(dev)); });
  }
  void set_stream(const AnyStreamRef<Bs...>& s) const {
    detail::on_stream(*this, s, [](auto b, auto ref) { b.set_stream(ref); });
  }
  [[nodiscard]] AnyStreamGuard<Bs...> stream(const AnyStreamRef<Bs...>& s) const { return AnyStreamGuard<Bs...>(s); }
  /// A new stream on the active backend (its current device).
  [[nodiscard]] AnyStream<Bs...> create_stream() const { return AnyStream<Bs...>(detail::any_of(*this).index()); }
};

}  // namespace accel
