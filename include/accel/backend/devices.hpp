// accel/backend/devices.hpp — accel::DeviceNames<Devices, Type>: the part of DeviceApi
// (concepts/device.hpp) that only names and checks devices, one definition for every backend.
//
// A backend's Devices derives from DeviceNames<Devices, DeviceType::...> and defines what differs:
// device_count(), current_device(), set_device(i) and, when a backend can be unavailable with a
// reason, `[[noreturn]] static void throw_unavailable()` (check_device throws it when there is no
// device at all). This gives check_device, device_name(), device_name(i), device(i) and
// current_device_name().
#pragma once

#include <accel/core/device.hpp>
#include <accel/core/error.hpp>

#include <string>

namespace accel {

template <class Devices, DeviceType Type>
struct DeviceNames {
  /// Throws InvalidArgumentError unless 0 <= index < device_count() ("cuda:3 does not exist
  /// (device_count() == 1)"); with no device at all, Devices::throw_unavailable() where it exists.
  static void check_device(int index) {
    const int count = Devices::device_count();
    if (index >= 0 && index < count) [[likely]] return;
    if constexpr (requires { Devices::throw_unavailable(); }) {
      if (count == 0) Devices::throw_unavailable();
    }
    throw InvalidArgumentError(std::string(to_string(Type)) + ":" + std::to_string(index) +
                               " does not exist (device_count() == " + std::to_string(count) + ")");
  }

  /// "cuda" for the backend, "cuda:i" for device i.
  [[nodiscard]] static std::string device_name() { return std::string(to_string(Type)); }
  [[nodiscard]] static std::string device_name(int index) {
    check_device(index);
    return std::string(to_string(Type)) + ":" + std::to_string(index);
  }

  [[nodiscard]] static Device device(int index) {
    check_device(index);
    return Device(Type, index);
  }

  /// "cuda:<current>".
  [[nodiscard]] static std::string current_device_name() {
    return std::string(to_string(Type)) + ":" + std::to_string(Devices::current_device());
  }
};

}  // namespace accel
