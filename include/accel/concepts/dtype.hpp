// accel/concepts/dtype.hpp — DtypeApi: which element types the device computes in.
//
//   b.is_fp16_supported() -> bool, b.is_bf16_supported() -> bool
//   b.supported_dtypes() -> std::vector<Dtype>   always contains float32; from the hardware, not hard-coded
//   b.is_triton_supported() -> bool              DeepSpeed's answer: Triton kernels run on the (current)
//                                                device — CUDA compute capability >= 8; false on the CPU
// DeepSpeed's amp() is not here: it returned a device's torch.*.amp module and DeepSpeed removed it
// (#7879, torch.amp instead); the autocast dtype a caller picks follows is_bf16/is_fp16_supported().
#pragma once

#include <accel/core/dtype.hpp>

#include <concepts>
#include <vector>

namespace accel {

template <class B>
concept DtypeApi = requires(const B b) {
  { b.is_fp16_supported() } -> std::same_as<bool>;
  { b.is_bf16_supported() } -> std::same_as<bool>;
  { b.supported_dtypes() } -> std::same_as<std::vector<Dtype>>;
  { b.is_triton_supported() } -> std::same_as<bool>;  // DeepSpeed's: add it (false where Triton does not run)
};

}  // namespace accel
