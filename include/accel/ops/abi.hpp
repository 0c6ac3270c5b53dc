// accel/ops/abi.hpp — the binary interface between accel's host code and its compiled kernels.
//
// The kernels declare the same structs in kernels/common/accel_ops_abi.h (plain C, NVRTC- and
// nvcc-compatible, no includes); these are their host-side mirrors. Both carry abi_version: every
// host kernel library exports `int accel_ops_abi_version(void)`, every CUDA module taking these structs holds
// the device variable `accel_ops_abi_version` (kernels/cuda/cuda_common.cuh; read from the cubin's
// symbols by ops::cubin_abi_version), and load() refuses an ahead-of-time build whose version differs
// or, for a cubin, is missing (the JIT cache cannot mismatch: the header bytes are in its key).
// tests/ops checks that both declarations have the same layout.
//
// Dtype codes are accel::Dtype's values (float32 = 0, float16 = 1, bfloat16 = 2); -1 means "none".
#pragma once

#include <accel/core/dtype.hpp>

#include <cstdint>

namespace accel::ops {

inline constexpr int abi_version = 1;

namespace abi {

/// Dtype code of "no tensor" (an absent model copy).
inline constexpr int no_dtype = -1;

[[nodiscard]] constexpr int code(Dtype d) noexcept { return static_cast<int>(d); }

/// One step's hyper-parameters, with the bias corrections already computed on the host in double.
struct AdamHParams {
  float lr;
  float beta1;
  float beta2;
  float eps;
  float weight_decay;
  float step_size;        ///< lr / (1 - beta1^step), or lr without bias correction
  float inv_bc2_sqrt;     ///< 1 / sqrt(1 - beta2^step), or 1 without bias correction
  float decay_factor;     ///< AdamW: 1 - lr * weight_decay; Adam: 1
  std::int32_t adamw;     ///< 1: decoupled weight decay (AdamW); 0: L2 (grad += wd * p)
  std::int32_t amsgrad;   ///< 1: keep max_exp_avg_sq and use it in the denominator
  std::int32_t param_dtype;       ///< float32 or bfloat16; exp_avg/exp_avg_sq/max_exp_avg_sq use it too
  std::int32_t grad_dtype;        ///< float32, float16 or bfloat16
  std::int32_t model_copy_dtype;  ///< float16, bfloat16 or no_dtype
  std::int32_t maximize;          ///< 1: ascend (torch's maximize=True)
  float one_minus_beta1;          ///< 1 - beta1, rounded from double (1.0f - 0.999f is off by 1.3e-5)
  float one_minus_beta2;          ///< 1 - beta2, likewise
};

/// One tensor of a multi-tensor Adam step. Pointers to absent tensors are null.
struct AdamTensor {
  void* param;
  const void* grad;
  void* exp_avg;
  void* exp_avg_sq;
  void* max_exp_avg_sq;  ///< AMSGrad only
  void* model_copy;      ///< written with the updated param, rounded to model_copy_dtype
  std::int64_t numel;
  std::int64_t reserved;
};

/// A tensor for the reductions (L2 norm, isfinite).
struct TensorRef {
  const void* data;
  std::int64_t numel;
  std::int32_t dtype;
  std::int32_t reserved;
};

/// Most tensors one CUDA multi-tensor launch carries (the list travels in the kernel parameters).
inline constexpr int mt_max_tensors = 256;

/// The CUDA fused Adam kernel's parameter: tensor i owns chunks [chunk_start[i], chunk_start[i+1]).
struct AdamLaunch {
  AdamHParams h;
  std::int32_t num_tensors;
  std::int32_t reserved;
  std::int64_t chunk_size;
  std::int64_t chunk_start[mt_max_tensors + 1];
  AdamTensor t[mt_max_tensors];
};

/// The CUDA reductions' parameter (same chunking as AdamLaunch).
struct TensorList {
  std::int32_t num_tensors;
  std::int32_t reserved;
  std::int64_t chunk_size;
  std::int64_t chunk_start[mt_max_tensors + 1];
  TensorRef t[mt_max_tensors];
};

static_assert(sizeof(AdamHParams) == 64);
static_assert(sizeof(AdamLaunch) <= 32764, "CUDA kernel parameters are limited to 32764 bytes");
static_assert(sizeof(TensorList) <= 32764, "CUDA kernel parameters are limited to 32764 bytes");
static_assert(sizeof(AdamTensor) == 64);
static_assert(sizeof(TensorRef) == 24);

}  // namespace abi
}  // namespace accel::ops
