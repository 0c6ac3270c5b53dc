// accel/concepts/device.hpp — DeviceApi: enumerating and selecting devices.
//
// Contract, for `const B b` and device index `i`:
//   b.device_count() -> int            devices visible to this process; never throws; 0 when unavailable
//   b.is_available() -> bool           built, driver present, >= 1 device; never throws, no side effects
//   b.availability() -> Availability   the same, with the reason when unavailable ("no CUDA driver")
//   b.device_name() / b.device_name(i) -> std::string   "cuda" / "cuda:i"
//   b.device(i) -> accel::Device
//   b.set_device(i)                    makes i the calling thread's current device
//   b.current_device() -> int          the calling thread's current device
//   b.current_device_name() -> std::string   "cuda:<current>"
//   b.synchronize() / b.synchronize(i) blocks until all work on every stream of the device is done;
//                                      rethrows the first failure of a task on one of those streams
//   B::DeviceGuard{i}                  makes i current; its destructor restores the previous device
//                                      (torch.accelerator.device_index)
// torch.accelerator's names (backend/devices.hpp supplies them from the ones above):
//   b.current_accelerator(check_available = false) -> std::optional<Device>   "cuda" without an index;
//                                      nullopt when check_available and the backend is unavailable
//   b.current_device_index() -> int    current_device()
//   b.set_device_index(i)              set_device(i); a negative i does nothing
// Any index outside [0, device_count()) throws InvalidArgumentError naming it:
// "cpu:3 does not exist (device_count() == 1)".
#pragma once

#include <accel/core/device.hpp>

#include <concepts>
#include <optional>
#include <string>

namespace accel {

/// Whether a backend can be used here and, when it cannot, why.
struct Availability {
  bool available = false;
  std::string reason;  ///< empty when available
  explicit operator bool() const noexcept { return available; }
};

template <class B>
concept DeviceApi = requires(const B b, int i) {
  { b.device_count() } -> std::same_as<int>;
  { b.is_available() } -> std::same_as<bool>;
  { b.availability() } -> std::same_as<Availability>;
  { b.device_name() } -> std::same_as<std::string>;
  { b.device_name(i) } -> std::same_as<std::string>;
  { b.device(i) } -> std::same_as<Device>;
  b.set_device(i);
  { b.current_device() } -> std::same_as<int>;
  { b.current_device_name() } -> std::same_as<std::string>;
  b.synchronize();
  b.synchronize(i);
  typename B::DeviceGuard;
  requires std::constructible_from<typename B::DeviceGuard, int>;
  requires !std::copyable<typename B::DeviceGuard>;
  // torch.accelerator's names: accel::DeviceNames<Devices, DeviceType> (backend/devices.hpp) has them.
  { b.current_device_index() } -> std::same_as<int>;  // derive Devices from accel::DeviceNames, or add it
  b.set_device_index(i);                               // derive Devices from accel::DeviceNames, or add it
  { b.current_accelerator() } -> std::same_as<std::optional<Device>>;  // derive Devices from accel::DeviceNames
  { b.current_accelerator(true) } -> std::same_as<std::optional<Device>>;
};

}  // namespace accel
