// accel/blas/detail/cpu_bfloat_choice.hpp — which kernel multiplies bfloat16 on the CPU: oneDNN's bf16
// matmul (cpu_matmul.hpp), or the widened product (cpu_half.hpp: operands widened to float, sgemm, C
// rounded once). Both accumulate in float and round C once.
//
// Measured (benchmarks/RESULTS.md, "The Xeon again"): on a Zen 4, oneDNN 2.6's bf16 matmul runs at ~2x
// its sgemm (VDPBF16PS), and on AMX it is faster still; on an Intel Xeon whose AMX is hidden (Emerald
// Rapids in a VM: AVX512-BF16 without AMX) the same matmul ran at 0.43-0.65x of sgemm at the GPT engine's
// single products, and the widened product at 1.2-1.65x the matmul (one thread; 0.9-1.5x on two). On
// batches of small matrices (attention's products) the matmul stayed ahead there (1.3-1.7x): the
// conversions are a larger share of a small product. So by default (`auto`) a single bfloat16 product
// is widened on an Intel CPU without AMX, and everything else goes to the matmul where oneDNN has one
// (no AVX-512: always widened, cpu_gemm.hpp). The rule reads the CPU, not a timing, so a run's bits do
// not depend on how busy the machine was when it started.
//
// ACCEL_CPU_BLAS_BF16 chooses (read once): `auto`, `onednn` (the matmul for every product; a GEMM throws
// NotSupportedError where oneDNN has none), `widened` (every product); another value makes every
// bfloat16 GEMM throw InvalidArgumentError.
#pragma once

#include <accel/blas/detail/arguments.hpp>
#include <accel/core/bfloat16.hpp>
#include <accel/core/cpu_features.hpp>

#include <oneapi/dnnl/dnnl.h>

#include <atomic>
#include <cstdlib>
#include <string_view>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif

namespace accel::blas::detail {

/// Which kernel multiplies bfloat16 on the CPU (`invalid`: ACCEL_CPU_BLAS_BF16 named none).
enum class BfloatGemm { automatic, onednn, widened, invalid };

/// ACCEL_CPU_BLAS_BF16's value as a choice: unset, empty or "auto", "onednn", "widened"; anything else is
/// `invalid`, which every bfloat16 GEMM then reports (a typo must not quietly pick the default).
[[nodiscard]] inline BfloatGemm parse_bfloat_gemm(std::string_view v) noexcept {
  if (v.empty() || v == "auto") return BfloatGemm::automatic;
  if (v == "onednn") return BfloatGemm::onednn;
  if (v == "widened") return BfloatGemm::widened;
  return BfloatGemm::invalid;
}

/// The choice, from ACCEL_CPU_BLAS_BF16 on first use; tests may change it.
inline std::atomic<BfloatGemm>& bfloat_gemm_choice() noexcept {
  static std::atomic<BfloatGemm> choice{[] {
    const char* env = std::getenv("ACCEL_CPU_BLAS_BF16");
    return parse_bfloat_gemm(env != nullptr ? env : "");
  }()};
  return choice;
}

/// Whether the CPU's vendor is Intel (CPUID leaf 0), read once.
[[nodiscard]] inline bool intel_cpu() noexcept {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  static const bool intel = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(0, &a, &b, &c, &d) == 0) return false;
    return b == 0x756e6547u && d == 0x49656e69u && c == 0x6c65746eu;  // "Genu" "ineI" "ntel"
  }();
  return intel;
#else
  return false;
#endif
}

/// Whether oneDNN runs bf16 products on AMX tiles in this process (the CPU has them and the OS allows them).
[[nodiscard]] inline bool onednn_has_amx() noexcept {
  static const bool amx = [] {
    const unsigned isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
    const unsigned wanted = static_cast<unsigned>(dnnl_cpu_isa_avx512_core_amx);
    return (isa & wanted) == wanted;
  }();
  return amx;
}

/// Under `auto`: whether this product is widened rather than given to oneDNN's matmul (see the top).
[[nodiscard]] inline bool widen_by_default(const GemmArgs<bfloat16>& g) noexcept {
  return g.batch == 1 && intel_cpu() && !onednn_has_amx();
}

}  // namespace accel::blas::detail
