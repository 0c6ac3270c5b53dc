// accel/dispatch/forward/env.hpp — EnvApi (concepts/env.hpp) of BasicAnyBackend<Bs...>.
#pragma once

#include <accel/core/env_map.hpp>
#include <accel/dispatch/detail/forward.hpp>

#include <concepts>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace accel {

template <class... Bs>
struct AnyEnvApi {
  [[nodiscard]] std::string_view communication_backend_name() const {
    return detail::on_active(*this, [](auto b) { return std::string_view(b.communication_backend_name()); });
  }
  [[nodiscard]] std::string communication_backend_version() const {
    return detail::on_active(*this, [](auto b) { return std::string(b.communication_backend_version()); });
  }
  [[nodiscard]] std::vector<std::string> export_envs() const {
    return detail::on_active(*this, [](auto b) { return b.export_envs(); });
  }
  [[nodiscard]] std::vector<std::string> visible_devices_envs() const {
    return detail::on_active(*this, [](auto b) { return b.visible_devices_envs(); });
  }
  void set_visible_devices_envs(EnvMap& env, std::span<const int> ids) const {
    detail::on_active(*this, [&](auto b) { b.set_visible_devices_envs(env, ids); });
  }
  template <std::invocable Callback>
  void lazy_call(Callback&& fn) const {
    detail::on_active(*this, [&](auto b) { b.lazy_call(std::forward<Callback>(fn)); });
  }
};

}  // namespace accel
