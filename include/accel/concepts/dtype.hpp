// accel/concepts/dtype.hpp — DtypeApi: which element types the device computes in.
//
//   b.is_fp16_supported() -> bool, b.is_bf16_supported() -> bool
//   b.supported_dtypes() -> std::vector<Dtype>   always contains float32; from the hardware, not hard-coded
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
};

}  // namespace accel
