// accel/cuda/env.hpp — what launchers need to know about the CUDA backend.
//
// lazy_call(fn) defers fn until this process's CUDA runtime is initialised by accel — the first
// set_device(), DeviceGuard, stream, event or allocation on a device — and runs it there, once, in
// queue order, even when several threads initialise at once (torch.cuda._lazy_call). Once
// initialised, lazy_call runs fn at once. A callback that throws makes the initialising call throw
// TaskError, and the next initialisation runs it again (accel/detail/lazy_init.hpp). Initialisation
// by raw CUDA calls that bypass accel is not noticed. If CUDA never initialises, fn never runs.
// parse_visible_devices() reads CUDA_VISIBLE_DEVICES in all its forms (ordinals, GPU-<uuid>,
// MIG-<uuid>); see cuda/detail/visible_devices.hpp.
#pragma once

#include <accel/concepts/env.hpp>
#include <accel/detail/comm_engine.hpp>
#include <accel/cuda/detail/visible_devices.hpp>
#include <accel/cuda/device.hpp>
#include <accel/detail/visible_devices.hpp>

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace accel::cuda {

struct Environment {
  /// The library the CUDA backend's collectives use: NCCL, as DeepSpeed's CUDA accelerator.
  [[nodiscard]] static constexpr std::string_view communication_backend_name() noexcept { return "nccl"; }
  /// NCCL's version ("NCCL 2.28.9 (libnccl.so.2)"), or "unavailable: <why>" (a build without NCCL, no
  /// libnccl, a program without accel/comm).
  [[nodiscard]] static std::string communication_backend_version() {
    return accel::detail::comm_engine_version(accel::detail::CommEngine::nccl);
  }

  /// Prefixes a multi-node launcher forwards (DeepSpeed's CUDA accelerator: NCCL and CUDA).
  [[nodiscard]] static std::vector<std::string> export_envs() { return {"NCCL", "CUDA"}; }

  /// The variable that selects which GPUs a process sees.
  [[nodiscard]] static std::vector<std::string> visible_devices_envs() { return {"CUDA_VISIBLE_DEVICES"}; }

  /// Writes "0,1,3" into CUDA_VISIBLE_DEVICES of `env`.
  static void set_visible_devices_envs(EnvMap& env, std::span<const int> ids) {
    accel::detail::set_visible_devices(env, visible_devices_envs(), ids);
  }

  /// Runs `callback` once accel has initialised the CUDA runtime in this process (now, if it has).
  static void lazy_call(std::function<void()> callback) { detail::lazy_init().call(std::move(callback)); }

  /// Whether accel has initialised the CUDA runtime in this process and every lazy_call callback
  /// queued before ran (lazy_call then runs at once).
  [[nodiscard]] static bool is_initialized() noexcept { return detail::lazy_init().initialized(); }
};

}  // namespace accel::cuda
