// accel/dispatch/forward/device.hpp — DeviceApi (concepts/device.hpp) of BasicAnyBackend<Bs...>: each
// call goes to the active backend.
#pragma once

#include <accel/concepts/device.hpp>
#include <accel/core/device.hpp>
#include <accel/dispatch/detail/forward.hpp>

#include <optional>
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

  // torch.accelerator's names
  [[nodiscard]] std::optional<Device> current_accelerator(bool check_available = false) const {
    return detail::on_active(*this, [&](auto b) { return b.current_accelerator(check_available); });
  }
  [[nodiscard]] int current_device_index() const {
    return detail::on_active(*this, [](auto b) { return b.current_device_index(); });
  }
  void set_device_index(int i) const { detail::on_active(*this, [&](auto b) { b.set_device_index(i); }); }
  [[deprecated("use current_device_index()")]] [[nodiscard]] int current_device_idx() const {
    return current_device_index();
  }
  [[deprecated("use set_device_index(index)")]] void set_device_idx(int i) const { set_device_index(i); }
};

}  // namespace accel
