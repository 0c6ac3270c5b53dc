// accel/core/cpu_features.hpp — accel::CpuFeatures: which SIMD and matrix extensions this CPU can run.
//
// Read once with CPUID and cached (cpu_features() is a thread-safe function-local static). A feature
// counts only when the CPU has it AND the OS saves its register state on context switches (XCR0, read
// with XGETBV): an AVX-512 CPU under an OS that leaves ZMM state off reports avx512f == false, since
// running those instructions would fault. This is what the CPU backend's is_bf16_supported() and
// is_fp16_supported() answer from, and what the op builders check before compiling a kernel.
//
// AMX on Linux: XCR0 saying the kernel supports tile state is what amx_* report. A process must still
// ask for tile data with arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) before its first AMX
// instruction; detection does not do that, because detection has no side effects.
//
// Off x86 (or off GCC/Clang) every flag is false and cpu_model_name() is empty.
#pragma once

#include <cstdint>
#include <cstring>
#include <iosfwd>
#include <string>
#include <string_view>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define ACCEL_DETAIL_HAS_CPUID 1
#else
#define ACCEL_DETAIL_HAS_CPUID 0
#endif

namespace accel {

/// x86 extensions usable by this process (CPU support and OS support both present).
struct CpuFeatures {
  bool sse4_2 = false;
  bool avx = false;
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;  ///< float <-> half conversion instructions (VCVTPH2PS, VCVTPS2PH)
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512_bf16 = false;  ///< VCVTNEPS2BF16, VDPBF16PS
  bool avx512_fp16 = false;  ///< native half arithmetic (Sapphire Rapids and later)
  bool amx_bf16 = false;
  bool amx_tile = false;
  bool amx_fp16 = false;

  friend constexpr bool operator==(const CpuFeatures&, const CpuFeatures&) = default;

  /// The names of the features present, space-separated ("sse4_2 avx avx2 ..."), for logs and reports.
  [[nodiscard]] std::string str() const {
    std::string out;
    const auto add = [&out](bool present, const char* flag) {
      if (!present) return;
      if (!out.empty()) out += ' ';
      out += flag;
    };
    add(sse4_2, "sse4_2");
    add(avx, "avx");
    add(avx2, "avx2");
    add(fma, "fma");
    add(f16c, "f16c");
    add(avx512f, "avx512f");
    add(avx512bw, "avx512bw");
    add(avx512vl, "avx512vl");
    add(avx512_bf16, "avx512_bf16");
    add(avx512_fp16, "avx512_fp16");
    add(amx_bf16, "amx_bf16");
    add(amx_tile, "amx_tile");
    add(amx_fp16, "amx_fp16");
    return out;
  }

  // A template over the stream type, so this header needs only <iosfwd>: printing is instantiated
  // where the caller included <ostream>.
  template <class CharT, class Traits>
  friend std::basic_ostream<CharT, Traits>& operator<<(std::basic_ostream<CharT, Traits>& os, const CpuFeatures& v) {
    return os << v.str();
  }
};

namespace detail {

struct CpuidRegs {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

constexpr bool bit(unsigned reg, int n) noexcept { return ((reg >> n) & 1u) != 0; }

/// Usable features from CPUID leaves 1, 7.0 and 7.1 and XCR0. Pure, so tests can feed it any CPU.
/// An extension also needs its base (avx2 needs avx, avx512bw needs avx512f, amx_bf16 needs amx_tile):
/// hypervisors sometimes mask one without the other, and the pair is unusable then.
constexpr CpuFeatures decode_cpu_features(CpuidRegs leaf1, CpuidRegs leaf7, CpuidRegs leaf7_1,
                                          std::uint64_t xcr0) noexcept {
  // XCR0 means nothing unless the OS enabled XSAVE (CPUID.1:ECX[27], OSXSAVE).
  if (!bit(leaf1.ecx, 27)) xcr0 = 0;
  const bool os_avx = (xcr0 & 0x6) == 0x6;                 // SSE (bit 1) and YMM upper halves (bit 2)
  const bool os_avx512 = (xcr0 & 0xE0) == 0xE0;  // opmask, ZMM0-15 upper, ZMM16-31 (5-7); avx2 brings os_avx
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;         // XTILECFG (17), XTILEDATA (18)

  CpuFeatures f;
  f.sse4_2 = bit(leaf1.ecx, 20);
  f.avx = os_avx && bit(leaf1.ecx, 28);
  f.fma = f.avx && bit(leaf1.ecx, 12);
  f.f16c = f.avx && bit(leaf1.ecx, 29);  // VEX-encoded: needs the AVX state too
  f.avx2 = f.avx && bit(leaf7.ebx, 5);
  f.avx512f = os_avx512 && f.avx2 && bit(leaf7.ebx, 16);
  f.avx512bw = f.avx512f && bit(leaf7.ebx, 30);
  f.avx512vl = f.avx512f && bit(leaf7.ebx, 31);
  f.avx512_bf16 = f.avx512bw && bit(leaf7_1.eax, 5);
  f.avx512_fp16 = f.avx512bw && bit(leaf7.edx, 23);
  f.amx_tile = os_amx && bit(leaf7.edx, 24);
  f.amx_bf16 = f.amx_tile && bit(leaf7.edx, 22);
  f.amx_fp16 = f.amx_tile && bit(leaf7_1.eax, 21);
  return f;
}

/// CPUID 0x80000002-4's brand string (48 bytes, NUL-padded; some CPUs pad it with spaces in front or
/// behind) up to its first NUL, without the spaces around it; empty when it holds nothing else.
inline std::string trim_brand(std::string_view brand) {
  brand = brand.substr(0, brand.find('\0'));
  const auto first = brand.find_first_not_of(' ');
  if (first == std::string_view::npos) return {};
  return std::string(brand.substr(first, brand.find_last_not_of(' ') - first + 1));
}

#if ACCEL_DETAIL_HAS_CPUID
/// CPUID leaf/subleaf; all zero when the leaf is beyond what the CPU reports.
inline CpuidRegs cpuid(unsigned leaf, unsigned subleaf = 0) {
  CpuidRegs r;
  if (static_cast<unsigned>(__get_cpuid_max(leaf & 0x80000000u, nullptr)) < leaf) return r;
  __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
  return r;
}

/// XCR0: the register state the OS enables. Inline asm, so no -mxsave is needed to build.
inline std::uint64_t read_xcr0() {
  unsigned eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<std::uint64_t>(edx) << 32) | eax;
}

inline CpuFeatures detect_cpu_features() {
  const CpuidRegs leaf1 = cpuid(1);
  const CpuidRegs leaf7 = cpuid(7, 0);
  const CpuidRegs leaf7_1 = leaf7.eax >= 1 ? cpuid(7, 1) : CpuidRegs{};
  // XGETBV itself faults unless the OS enabled XSAVE.
  const std::uint64_t xcr0 = bit(leaf1.ecx, 27) ? read_xcr0() : 0;
  return decode_cpu_features(leaf1, leaf7, leaf7_1, xcr0);
}
#else
inline CpuFeatures detect_cpu_features() { return {}; }
#endif

}  // namespace detail

/// The features of the CPU this process runs on, detected on first call and cached.
[[nodiscard]] inline const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detail::detect_cpu_features();
  return features;
}

/// The CPU's brand string ("Intel(R) Xeon(R) Platinum 8480+"), trimmed; empty where CPUID has none.
[[nodiscard]] inline std::string cpu_model_name() {
#if ACCEL_DETAIL_HAS_CPUID
  if (static_cast<unsigned>(__get_cpuid_max(0x80000000u, nullptr)) < 0x80000004u) return {};
  char brand[48] = {};
  for (unsigned i = 0; i < 3; ++i) {
    const detail::CpuidRegs r = detail::cpuid(0x80000002u + i);
    const unsigned regs[4] = {r.eax, r.ebx, r.ecx, r.edx};
    std::memcpy(brand + 16 * i, regs, sizeof regs);
  }
  return detail::trim_brand(std::string_view(brand, sizeof brand));
#else
  return {};
#endif
}

}  // namespace accel

#undef ACCEL_DETAIL_HAS_CPUID
