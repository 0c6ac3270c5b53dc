// accel/concepts/flags.hpp — FlagsApi: a backend's identity and DeepSpeed's four scheduling flags.
//
// Contract (all compile-time, usable in `if constexpr`):
//   B::device_type                  static constexpr accel::DeviceType (cpu, cuda, ...)
//   B::name                         static constexpr std::string_view ("cpu", "cuda"); the device-string prefix
//   B::is_synchronized_device       the device runs synchronously with the host: no streams needed
//   B::use_host_timers              time with the host clock instead of device events
//   B::resolves_data_dependency     the device orders work across streams itself
//   B::handles_memory_backpressure  the device stalls the host when memory is full
// B must be an empty, trivially copyable policy type: it carries no state of its own.
#pragma once

#include <accel/core/device.hpp>

#include <concepts>
#include <string_view>
#include <type_traits>

namespace accel {

namespace detail {
template <bool> struct constant_bool {};
}  // namespace detail

template <class B>
concept FlagsApi =
    std::is_empty_v<B> && std::is_trivially_copyable_v<B> && std::default_initializable<B> &&
    requires {
      { B::device_type } -> std::convertible_to<DeviceType>;
      { B::name } -> std::convertible_to<std::string_view>;
      // Each flag must be a constant expression of type bool.
      typename detail::constant_bool<B::is_synchronized_device>;
      typename detail::constant_bool<B::use_host_timers>;
      typename detail::constant_bool<B::resolves_data_dependency>;
      typename detail::constant_bool<B::handles_memory_backpressure>;
      requires std::same_as<std::remove_cv_t<decltype(B::is_synchronized_device)>, bool>;
      requires std::same_as<std::remove_cv_t<decltype(B::use_host_timers)>, bool>;
      requires std::same_as<std::remove_cv_t<decltype(B::resolves_data_dependency)>, bool>;
      requires std::same_as<std::remove_cv_t<decltype(B::handles_memory_backpressure)>, bool>;
    };

}  // namespace accel
