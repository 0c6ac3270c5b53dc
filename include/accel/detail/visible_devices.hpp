// accel/detail/visible_devices.hpp — writing "visible devices" variables for a launcher (shared by backends).
#pragma once

#include <accel/core/env_map.hpp>
#include <accel/core/error.hpp>

#include <concepts>
#include <span>
#include <string>
#include <vector>

namespace accel::detail {

/// Writes "0,1,3" into each variable of `names` in `env` (DeepSpeed's set_visible_devices_envs).
// A template only so that the map insertion is compiled where a launcher calls it, not in every
// translation unit that includes a backend.
template <class Map = EnvMap>
  requires std::same_as<Map, EnvMap>
void set_visible_devices(Map& env, const std::vector<std::string>& names, std::span<const int> ids) {
  std::string joined;
  for (const int id : ids) {
    if (id < 0) throw InvalidArgumentError("visible device id " + std::to_string(id) + " is negative");
    if (!joined.empty()) joined += ',';
    joined += std::to_string(id);
  }
  for (const auto& name : names) env.insert_or_assign(name, joined);
}

}  // namespace accel::detail
