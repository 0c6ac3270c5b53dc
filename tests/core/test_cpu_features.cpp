#include <accel/core/cpu_features.hpp>

#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr unsigned bit(int n) { return 1u << n; }

/// A CPU with everything up to AMX-FP16, as CPUID leaves 1, 7.0 and 7.1 would report it.
constexpr accel::detail::CpuidRegs all_leaf1{0, 0, bit(20) | bit(12) | bit(27) | bit(28) | bit(29), 0};
constexpr accel::detail::CpuidRegs all_leaf7{1, bit(5) | bit(16) | bit(30) | bit(31), 0,
                                             bit(22) | bit(23) | bit(24)};
constexpr accel::detail::CpuidRegs all_leaf7_1{bit(5) | bit(21), 0, 0, 0};
constexpr std::uint64_t xcr0_sse_avx = 0x6;
constexpr std::uint64_t xcr0_avx512 = 0xE6;
constexpr std::uint64_t xcr0_all = 0x600E6;

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

}  // namespace

TEST_CASE("decode: a CPU flag without OS support for its state counts as absent") {
  using accel::detail::decode_cpu_features;
  const auto full = decode_cpu_features(all_leaf1, all_leaf7, all_leaf7_1, xcr0_all);
  CHECK(full.str() ==
        "sse4_2 avx avx2 fma f16c avx512f avx512bw avx512vl avx512_bf16 avx512_fp16 amx_bf16 amx_tile "
        "amx_fp16");

  // The OS saves YMM but not ZMM state: AVX2 usable, AVX-512 not.
  const auto no_zmm = decode_cpu_features(all_leaf1, all_leaf7, all_leaf7_1, xcr0_sse_avx);
  CHECK(no_zmm.avx2);
  CHECK(no_zmm.f16c);
  CHECK_FALSE(no_zmm.avx512f);
  CHECK_FALSE(no_zmm.avx512_bf16);
  CHECK_FALSE(no_zmm.amx_tile);

  // AVX-512 state but no tile state: no AMX.
  const auto no_tiles = decode_cpu_features(all_leaf1, all_leaf7, all_leaf7_1, xcr0_avx512);
  CHECK(no_tiles.avx512_fp16);
  CHECK_FALSE(no_tiles.amx_bf16);

  // OSXSAVE clear: XCR0 is meaningless, nothing VEX/EVEX-encoded is usable; SSE4.2 still is.
  auto leaf1 = all_leaf1;
  leaf1.ecx &= ~bit(27);
  const auto no_xsave = decode_cpu_features(leaf1, all_leaf7, all_leaf7_1, xcr0_all);
  CHECK(no_xsave.sse4_2);
  CHECK_FALSE(no_xsave.avx);
  CHECK_FALSE(no_xsave.avx2);
  CHECK_FALSE(no_xsave.avx512f);

  // An extension without its base (a hypervisor masking AVX-512F) is unusable.
  auto leaf7 = all_leaf7;
  leaf7.ebx &= ~bit(16);
  const auto no_f = decode_cpu_features(all_leaf1, leaf7, all_leaf7_1, xcr0_all);
  CHECK_FALSE(no_f.avx512bw);
  CHECK_FALSE(no_f.avx512_bf16);
  CHECK(no_f.avx2);

  CHECK(decode_cpu_features({}, {}, {}, 0) == accel::CpuFeatures{});
}

TEST_CASE("cpu_features is detected once and is self-consistent") {
  const accel::CpuFeatures& f = accel::cpu_features();
  CHECK(&f == &accel::cpu_features());
  std::vector<const accel::CpuFeatures*> seen(4);
  std::vector<std::thread> threads;
  for (auto& p : seen) threads.emplace_back([&p] { p = &accel::cpu_features(); });
  for (auto& t : threads) t.join();
  for (const auto* p : seen) CHECK(p == &f);

  // Implications that hold on every CPU and OS (each extension needs its base).
  CHECK((!f.avx2 || f.avx));
  CHECK((!f.fma || f.avx));
  CHECK((!f.f16c || f.avx));
  CHECK((!f.avx512f || f.avx2));
  CHECK((!f.avx512bw || f.avx512f));
  CHECK((!f.avx512vl || f.avx512f));
  CHECK((!f.avx512_bf16 || f.avx512f));
  CHECK((!f.avx512_fp16 || f.avx512f));
  CHECK((!f.amx_bf16 || f.amx_tile));
  CHECK((!f.amx_fp16 || f.amx_tile));
  MESSAGE("cpu features: " << f << " (" << accel::cpu_model_name() << ")");

  std::ostringstream os;
  os << f;
  CHECK(os.str() == f.str());
  CHECK((f.str().find("avx2") != std::string::npos) == f.avx2);
}

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
TEST_CASE("cpu_features agrees with the compiler's __builtin_cpu_supports") {
  const accel::CpuFeatures& f = accel::cpu_features();
  CHECK(f.sse4_2 == (__builtin_cpu_supports("sse4.2") != 0));
  CHECK(f.avx == (__builtin_cpu_supports("avx") != 0));
  CHECK(f.avx2 == (__builtin_cpu_supports("avx2") != 0));
  CHECK(f.fma == (__builtin_cpu_supports("fma") != 0));
  CHECK(f.avx512f == (__builtin_cpu_supports("avx512f") != 0));
  CHECK(f.avx512bw == (__builtin_cpu_supports("avx512bw") != 0));
  CHECK(f.avx512vl == (__builtin_cpu_supports("avx512vl") != 0));
#if !defined(__clang__) && __GNUC__ >= 12  // names clang's builtin does not know
  CHECK(f.f16c == (__builtin_cpu_supports("f16c") != 0));
  CHECK(f.avx512_bf16 == (__builtin_cpu_supports("avx512bf16") != 0));
  CHECK(f.avx512_fp16 == (__builtin_cpu_supports("avx512fp16") != 0));
  CHECK(f.amx_tile == (__builtin_cpu_supports("amx-tile") != 0));
  CHECK(f.amx_bf16 == (__builtin_cpu_supports("amx-bf16") != 0));
#endif
}

TEST_CASE("cpu_model_name is CPUID's brand string, as the kernel reports it") {
  const std::string name = accel::cpu_model_name();
  CHECK_FALSE(name.empty());
  CHECK(name == trim(name));
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    CHECK(trim(line.substr(line.find(':') + 1)) == name);
    break;
  }
}
#else
TEST_CASE("cpu_features is all false off x86") {
  CHECK(accel::cpu_features() == accel::CpuFeatures{});
  CHECK(accel::cpu_model_name().empty());
}
#endif
