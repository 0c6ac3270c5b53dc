// accel/cpu/env.hpp — what launchers need to know about the CPU backend.
#pragma once

#include <accel/concepts/env.hpp>
#include <accel/detail/comm_engine.hpp>
#include <accel/detail/visible_devices.hpp>

#include <concepts>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace accel::cpu {

struct Environment {
  /// The library the CPU backend's collectives use: MPI.
  [[nodiscard]] static constexpr std::string_view communication_backend_name() noexcept { return "mpi"; }
  /// The MPI library's version ("Open MPI v4.1.4 (MPI 3.1)"), or "unavailable: <why>" (a build without
  /// MPI, a program without accel/comm).
  [[nodiscard]] static std::string communication_backend_version() {
    return accel::detail::comm_engine_version(accel::detail::CommEngine::mpi);
  }

  /// Prefixes a multi-node launcher forwards: accel's own settings, OpenMP threading, Open MPI tuning.
  [[nodiscard]] static std::vector<std::string> export_envs() { return {"ACCEL_", "OMP_", "OMPI_MCA_"}; }

  /// The variable that selects which logical CPU devices a process sees (cpu/device.hpp).
  [[nodiscard]] static std::vector<std::string> visible_devices_envs() { return {"ACCEL_CPU_VISIBLE_DEVICES"}; }

  template <class Map = EnvMap>  // a template only to compile the map insertion where it is called
    requires std::same_as<Map, EnvMap>
  static void set_visible_devices_envs(Map& env, std::span<const int> ids) {
    accel::detail::set_visible_devices(env, visible_devices_envs(), ids);
  }

  /// The CPU runtime needs no initialisation, so the callback runs now, on the calling thread, and
  /// its exception reaches the caller (as lazy_call does on an initialised CUDA runtime). Any
  /// callable: an empty one (a null function pointer, an empty std::function) is ignored.
  template <std::invocable Callback>
  static void lazy_call(Callback&& callback) {
    if constexpr (std::is_constructible_v<bool, Callback&>) {
      if (!static_cast<bool>(callback)) return;
    }
    callback();
  }
};

}  // namespace accel::cpu
