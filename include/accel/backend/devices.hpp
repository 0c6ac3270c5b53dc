// accel/backend/devices.hpp — accel::DeviceNames<Devices, Type>: the part of DeviceApi
// (concepts/device.hpp) that only names and checks devices, one definition for every backend.
//
// A backend's Devices derives from DeviceNames<Devices, DeviceType::...> and defines what differs:
// device_count(), current_device(), set_device(i) and, when a backend can be unavailable with a
// reason, `[[noreturn]] static void throw_unavailable()` (check_device throws it when there is no
// device at all). This gives check_device, device_name(), device_name(i), device(i),
// current_device_name(), and torch.accelerator's names: current_accelerator(), current_device_index(),
// set_device_index(i) (and their deprecated spellings current_device_idx, set_device_idx).
#pragma once

#include <accel/core/device.hpp>
#include <accel/core/error.hpp>

#include <optional>
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

  // ---- torch.accelerator's names ----------------------------------------------------------------

  /// The backend's device without an index ("cuda"), as torch.accelerator.current_accelerator()
  /// answers; with check_available, std::nullopt when the backend is not available here. Never
  /// creates a context (is_available() does not).
  [[nodiscard]] static std::optional<Device> current_accelerator(bool check_available = false) {
    if (check_available && !Devices::is_available()) return std::nullopt;
    return Device(Type);
  }

  /// The calling thread's current device: current_device() under torch.accelerator's name.
  [[nodiscard]] static int current_device_index() { return Devices::current_device(); }

  /// Makes `index` the calling thread's current device, as set_device() does; a negative index does
  /// nothing (torch.accelerator.set_device_index returns early on one).
  static void set_device_index(int index) {
    if (index < 0) return;
    Devices::set_device(index);
  }

  /// torch 2.6's names, deprecated there since 2.7.
  [[deprecated("use current_device_index()")]] [[nodiscard]] static int current_device_idx() {
    return current_device_index();
  }
  [[deprecated("use set_device_index(index)")]] static void set_device_idx(int index) { set_device_index(index); }
};

}  // namespace accel
