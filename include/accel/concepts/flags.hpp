// accel/concepts/flags.hpp — FlagsApi: a backend's identity and DeepSpeed's four scheduling flags.
//
// Contract (all compile-time, usable in `if constexpr`):
//   b.device_type() -> DeviceType   cpu, cuda, ... (static constexpr on a concrete backend)
//   b.name() -> std::string_view    "cpu", "cuda": the device-string prefix (static constexpr likewise)
//   B::is_synchronized_device       the device runs synchronously with the host: no streams needed
//   B::use_host_timers              time with the host clock instead of device events
//   B::resolves_data_dependency     the device orders work across streams itself
//   B::handles_memory_backpressure  the device stalls the host when memory is full
// B is a trivially copyable value type. A concrete backend is empty (it carries no state);
// accel::AnyBackend carries only which backend it is, and answers name()/device_type() at run time.
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
    std::is_trivially_copyable_v<B> && std::default_initializable<B> &&
    requires(const B b) {
      { b.device_type() } -> std::same_as<DeviceType>;
      { b.name() } -> std::convertible_to<std::string_view>;
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
