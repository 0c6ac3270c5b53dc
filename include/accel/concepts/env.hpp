// accel/concepts/env.hpp — EnvApi: what launchers and runtimes need to know about a backend.
//
//   b.communication_backend_name() -> std::string_view   "nccl", "mpi"
//   b.communication_backend_version() -> std::string     "NCCL 2.28.9 (libnccl.so.2)", or "unavailable: <why>"
//   b.export_envs() -> std::vector<std::string>          env-var name prefixes a launcher forwards
//   b.visible_devices_envs() -> std::vector<std::string> env vars that select visible devices
//   b.set_visible_devices_envs(env, ids)   writes "0,1,3" into each of those vars of `env`
//   b.lazy_call(fn)                        runs fn once the backend's runtime is initialised (now, if it is)
#pragma once

#include <accel/core/env_map.hpp>

#include <concepts>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace accel {

template <class B>
concept EnvApi = requires(const B b, EnvMap& env, std::span<const int> ids, void (*fn)()) {
  { b.communication_backend_name() } -> std::convertible_to<std::string_view>;
  { b.communication_backend_version() } -> std::convertible_to<std::string>;
  { b.export_envs() } -> std::same_as<std::vector<std::string>>;
  { b.visible_devices_envs() } -> std::same_as<std::vector<std::string>>;
  b.set_visible_devices_envs(env, ids);
  b.lazy_call(fn);  // any callable; a function pointer stands for them here
};

}  // namespace accel
