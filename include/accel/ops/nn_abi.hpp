// accel/ops/nn_abi.hpp — host-side mirrors of the nn_ops kernels' argument structs.
//
// The kernels declare them in kernels/common/accel_nn_abi.h (plain C, read by host compilers, nvcc and
// NVRTC); these are the same layouts for accel's host code (tests/ops checks sizes and offsets). What
// each kernel computes is written there, and in ops/nn_ops.hpp beside the call that launches it.
#pragma once

#include <cstdint>

namespace accel::ops::abi {

struct NnEmbeddingForward {
  void* out;
  const std::int32_t* tokens;
  const void* wte;
  const void* wpe;
  std::int64_t N, T, C, V;
};

struct NnEmbeddingBackward {
  void* dwte;
  void* dwpe;
  const void* dout;
  const std::int32_t* tokens;
  std::int64_t N, T, C, V;
};

struct NnLayerNormForward {
  void* out;
  float* mean;
  float* rstd;
  void* residual_out;
  const void* inp;
  const void* residual;
  const void* weight;
  const void* bias;
  std::int64_t N, C;
  float eps;
  std::int32_t reserved;
};

struct NnLayerNormBackward {
  void* dinp;
  void* dweight;
  void* dbias;
  float* scratch;
  const void* dout;
  const void* inp;
  const void* weight;
  const float* mean;
  const float* rstd;
  std::int64_t N, C;
};

/// Rows per partial sum of LayerNorm's weight and bias gradients (ACCEL_NN_LN_CHUNK).
inline constexpr std::int64_t nn_ln_chunk = 64;
/// Floats of scratch a LayerNorm backward over N rows of C needs.
[[nodiscard]] constexpr std::int64_t nn_layernorm_scratch_floats(std::int64_t N, std::int64_t C) noexcept {
  return (N + nn_ln_chunk - 1) / nn_ln_chunk * 2 * C;
}

struct NnGeluForward {
  void* out;
  const void* inp;
  std::int64_t n;
};

struct NnGeluBackward {
  void* dinp;
  const void* inp;
  const void* dout;
  std::int64_t n;
};

struct NnCrossEntropy {
  void* logits;
  float* losses;
  const std::int32_t* targets;
  std::int64_t N, V, Vp;
  float dloss;
  std::int32_t write_grad;
};

struct NnAdd {
  void* out;
  const void* a;
  const void* b;
  std::int64_t n;
};

struct NnDropout {
  void* out;
  const void* inp;
  const std::uint32_t* bits;
  std::int64_t n;
  std::uint32_t threshold;
  float scale;
};

struct NnClip {
  void* data;
  const float* norm;
  std::int64_t n;
  float max_norm;
  std::int32_t reserved;
};

}  // namespace accel::ops::abi
