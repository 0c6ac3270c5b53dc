// accel/dispatch/forward/device.hpp — DeviceApi (concepts/device.hpp) of BasicAnyBackend<Bs...>: each
// call goes to the active backend.
#pragma once

#include <accel/concepts/device.hpp>
#include <accel/core/device.hpp>
#include <accel/dispatch/detail/forward.hpp>

#include <string>

namespace accel {

template <class... Bs>
struct AnyDeviceApi {
  [[nodiscard]] int device_count() const { return detail::on_active(*this, [](auto b) { return b.device_count(); }); }
  [[nodiscard]] bool is_available() const { return detail::on_active(*this, [](auto b) { return b.is_available(); }); }
  [[nodiscard]] Availability availability() const {
    return detail::on_active(*this, [](auto b) { return b.availability(); });
  }
  [[nodiscard]] std::string device_name() const {
    return detail::on_active(*this, [](auto b) { return b.device_name(); });
  }
  [[nodiscard]] std::string device_name(int i) const {
    return detail::on_active(*this, [&](auto b) { return b.device_name(i); });
  }
  [[nodiscard]] Device device(int i) const { return detail::on_active(*this, [&](auto b) { return b.device(i); }); }
  void set_device(int i) const { detail::on_active(*this, [&](auto b) { b.set_device(i); }); }
  [[nodiscard]] int current_device() const { return detail::on_active(*this, [](auto b) { return b.current_device(); }); }
  [[nodiscard]] std::string current_device_name() const {
    return detail::on_active(*this, [](auto b) { return b.current_device_name(); });
  }
  void synchronize() const { detail::on_active(*this, [](auto b) { b.synchronize(); }); }
  void synchronize(int i) const { detail::on_active(*this, [&](auto b) { b.synchronize(i); }); }
};

}  // namespace accel
