// accel/cuda/dtype.hpp — which dtypes a CUDA device computes in, from its compute capability.
//
//   float16  — compute capability >= 7.0 (tensor cores with fp16 accumulate, as DeepSpeed expects)
//   bfloat16 — >= 8.0 (Ampere)
//   float8_e4m3 / float8_e5m2 — >= 8.9 (Ada, Hopper)
//   is_triton_supported()      — >= 8.0, DeepSpeed's rule
// float32, float64 and the integer types and bool are always listed. The answers are for the current
// device unless a device is given. The capability is read with cudaDeviceGetAttribute (no context is
// created) and cached per device. When CUDA is unavailable the is_*_supported() answers are false
// (no device computes in anything) and supported_dtypes() throws BackendUnavailableError.
#pragma once

#include <accel/core/dtype.hpp>
#include <accel/cuda/detail/cuda_api.hpp>
#include <accel/cuda/device.hpp>
#include <accel/cuda/error.hpp>

#include <atomic>
#include <compare>
#include <cstddef>
#include <vector>

namespace accel::cuda {

/// A compute capability, e.g. {8, 9} for sm_89.
struct ComputeCapability {
  int major = 0;
  int minor = 0;
  friend constexpr auto operator<=>(const ComputeCapability&, const ComputeCapability&) = default;
  /// 89 for {8, 9}: the number in sm_89.
  [[nodiscard]] constexpr int sm() const noexcept { return major * 10 + minor; }
};

struct Dtypes {
  /// The compute capability of `device` (cached after the first query).
  [[nodiscard]] static ComputeCapability compute_capability(int device) {
    Devices::check_device(device);
    static std::atomic<int>* const cache = new std::atomic<int>[static_cast<std::size_t>(Devices::device_count())]();
    if (const int sm = cache[device].load(std::memory_order_relaxed); sm != 0) return {sm / 10, sm % 10};
    ComputeCapability cc;
    ACCEL_CUDA_CHECK(cudaDeviceGetAttribute(&cc.major, cudaDevAttrComputeCapabilityMajor, device));
    ACCEL_CUDA_CHECK(cudaDeviceGetAttribute(&cc.minor, cudaDevAttrComputeCapabilityMinor, device));
    cache[device].store(cc.sm(), std::memory_order_relaxed);
    return cc;
  }
  [[nodiscard]] static ComputeCapability compute_capability() { return compute_capability(Devices::current_device()); }

  [[nodiscard]] static bool is_fp16_supported() noexcept { return current_at_least({7, 0}); }
  [[nodiscard]] static bool is_bf16_supported() noexcept { return current_at_least({8, 0}); }
  [[nodiscard]] static bool is_fp8_supported() noexcept { return current_at_least({8, 9}); }
  /// DeepSpeed's answer: the current device's compute capability is at least 8.0 (Triton's kernels
  /// there need Ampere); false without a device.
  [[nodiscard]] static bool is_triton_supported() noexcept { return current_at_least({8, 0}); }
  [[nodiscard]] static bool is_fp16_supported(int device) { return compute_capability(device) >= ComputeCapability{7, 0}; }
  [[nodiscard]] static bool is_bf16_supported(int device) { return compute_capability(device) >= ComputeCapability{8, 0}; }
  [[nodiscard]] static bool is_fp8_supported(int device) { return compute_capability(device) >= ComputeCapability{8, 9}; }

  /// The dtypes the current device (or `device`) computes in.
  [[nodiscard]] static std::vector<Dtype> supported_dtypes() { return supported_dtypes(Devices::current_device()); }
  [[nodiscard]] static std::vector<Dtype> supported_dtypes(int device) {
    const ComputeCapability cc = compute_capability(device);
    std::vector<Dtype> dtypes{Dtype::float32, Dtype::float64, Dtype::int8,  Dtype::uint8,
                              Dtype::int32,   Dtype::int64,   Dtype::boolean};
    if (cc >= ComputeCapability{7, 0}) dtypes.push_back(Dtype::float16);
    if (cc >= ComputeCapability{8, 0}) dtypes.push_back(Dtype::bfloat16);
    if (cc >= ComputeCapability{8, 9}) {
      dtypes.push_back(Dtype::float8_e4m3);
      dtypes.push_back(Dtype::float8_e5m2);
    }
    return dtypes;
  }

 private:
  static bool current_at_least(ComputeCapability needed) noexcept {
    if (!Devices::is_available()) return false;
    try {
      return compute_capability(Devices::current_device()) >= needed;
    } catch (...) {  // a failing query answers "no", as for an absent device
      return false;
    }
  }
};

}  // namespace accel::cuda
