// accel/cpu/dtype.hpp — which dtypes the host computes in, from its real instruction set.
//
// Criteria (CPUID, with OS support for the register state, see core/cpu_features.hpp):
//   float16  — F16C (hardware half<->float conversion) or AVX-512 FP16 / AMX-FP16 (native arithmetic)
//   bfloat16 — AVX-512 BF16 / AMX-BF16 (native dot products) or AVX-512 BW+VL (oneDNN's bf16 path)
// DeepSpeed's CPU accelerator hard-codes bf16 = True and can return None for fp16; these are answers.
// is_triton_supported() is false, as there.
#pragma once

#include <accel/core/cpu_features.hpp>
#include <accel/core/dtype.hpp>

#include <vector>

namespace accel::cpu {

struct Dtypes {
  [[nodiscard]] static bool is_fp16_supported() noexcept {
    const auto& f = cpu_features();
    return f.f16c || f.avx512_fp16 || f.amx_fp16;
  }

  [[nodiscard]] static bool is_bf16_supported() noexcept {
    const auto& f = cpu_features();
    return f.avx512_bf16 || f.amx_bf16 || (f.avx512bw && f.avx512vl);
  }

  /// False, as DeepSpeed's CPU accelerator answers: its Triton kernels are written for GPUs.
  [[nodiscard]] static constexpr bool is_triton_supported() noexcept { return false; }

  /// Every integer and IEEE type, plus float16/bfloat16 when the instruction set has them.
  /// The float8 types are storage-only on CPUs and are not listed.
  [[nodiscard]] static std::vector<Dtype> supported_dtypes() {
    std::vector<Dtype> dtypes{Dtype::float32, Dtype::float64, Dtype::int8,  Dtype::uint8,
                              Dtype::int32,   Dtype::int64,   Dtype::boolean};
    if (is_fp16_supported()) dtypes.push_back(Dtype::float16);
    if (is_bf16_supported()) dtypes.push_back(Dtype::bfloat16);
    return dtypes;
  }
};

}  // namespace accel::cpu
