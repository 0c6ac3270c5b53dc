// accel/dispatch/forward/flags.hpp — FlagsApi (concepts/flags.hpp) of BasicAnyBackend<Bs...>.
//
// A flag holds for AnyBackend only if it holds for every alternative, so code that branches on it at
// compile time stays correct whichever backend is chosen at run time; the identity is the active one's.
#pragma once

#include <accel/core/device.hpp>
#include <accel/dispatch/detail/forward.hpp>

#include <string_view>

namespace accel {

template <class... Bs>
struct AnyFlagsApi {
  static constexpr bool is_synchronized_device = (Bs::is_synchronized_device && ...);
  static constexpr bool use_host_timers = (Bs::use_host_timers && ...);
  static constexpr bool resolves_data_dependency = (Bs::resolves_data_dependency && ...);
  static constexpr bool handles_memory_backpressure = (Bs::handles_memory_backpressure && ...);

  [[nodiscard]] DeviceType device_type() const { return detail::on_active(*this, [](auto b) { return b.device_type(); }); }
  [[nodiscard]] std::string_view name() const {
    return detail::on_active(*this, [](auto b) { return std::string_view(b.name()); });
  }
};

}  // namespace accel
