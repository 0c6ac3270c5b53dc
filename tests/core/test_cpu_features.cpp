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

TEST_CASE("decode: each register state counts only with every XCR0 bit it needs") {
  using accel::detail::decode_cpu_features;
  const auto with = [](std::uint64_t xcr0) { return decode_cpu_features(all_leaf1, all_leaf7, all_leaf7_1, xcr0); };
  // AVX: SSE (bit 1) and the YMM upper halves (bit 2), both.
  CHECK_FALSE(with(0x4).avx);
  CHECK_FALSE(with(0x2).avx);
  CHECK(with(0x6).avx);
  // AVX-512: opmask (5), ZMM0-15's upper halves (6) and ZMM16-31 (7), all three.
  CHECK(with(0x66).avx2);
  CHECK_FALSE(with(0x66).avx512f);  // no ZMM16-31
  CHECK_FALSE(with(0xC6).avx512f);  // no opmask
  CHECK_FALSE(with(0xA6).avx512f);
  CHECK(with(0xE6).avx512f);
  CHECK_FALSE(with(0xE0).avx512f);  // no YMM state: no AVX, so no AVX-512
  // AMX: XTILECFG (17) and XTILEDATA (18), both.
  CHECK_FALSE(with(0x400E6).amx_tile);
  CHECK_FALSE(with(0x200E6).amx_tile);
  CHECK(with(0x600E6).amx_tile);
  CHECK(with(0x60000).amx_tile);  // tiles need no vector state
  CHECK_FALSE(with(0x60000).avx);
}

TEST_CASE("cpu_model_name's trimming: the brand without its padding of spaces and NULs") {
  // The 48 bytes CPUID gives: the name, then NULs.
  const auto brand = [](const std::string& name) { return name + std::string(48 - name.size(), '\0'); };
  const auto trimmed = [](const std::string& bytes) { return accel::detail::trim_brand(bytes); };
  CHECK(trimmed(brand("       Intel(R) Xeon(R) Platinum 8480+   ")) == "Intel(R) Xeon(R) Platinum 8480+");
  CHECK(trimmed(brand("AMD EPYC 9654 96-Core Processor")) == "AMD EPYC 9654 96-Core Processor");
  CHECK(trimmed(std::string(48, 'x')) == std::string(48, 'x'));  // no NUL at all
  CHECK(trimmed(brand("AMD EPYC") + "junk") == "AMD EPYC");       // nothing after the first NUL
  CHECK(trimmed(brand("      ")).empty());
  CHECK(trimmed(brand("")).empty());
}

namespace {

enum class Reg { eax, ebx, ecx, edx };

/// One CPUID feature bit and the one CpuFeatures flag it means, with the flags that flag requires
/// (decode_cpu_features: "an extension also needs its base"; VEX/EVEX-encoded ones need avx).
struct FeatureBit {
  unsigned leaf;
  unsigned subleaf;
  Reg reg;
  int bit;
  bool accel::CpuFeatures::*flag;
  const char* name;
  std::vector<bool accel::CpuFeatures::*> requires_;
};

using CF = accel::CpuFeatures;
// Bit assignments from the Intel SDM, vol. 2A, CPUID: leaf 1 ECX; leaf 7.0 EBX and EDX; leaf 7.1 EAX.
const std::vector<FeatureBit> feature_bits{
    {1, 0, Reg::ecx, 20, &CF::sse4_2, "sse4_2", {}},
    {1, 0, Reg::ecx, 28, &CF::avx, "avx", {}},
    {1, 0, Reg::ecx, 12, &CF::fma, "fma", {&CF::avx}},
    {1, 0, Reg::ecx, 29, &CF::f16c, "f16c", {&CF::avx}},
    {7, 0, Reg::ebx, 5, &CF::avx2, "avx2", {&CF::avx}},
    {7, 0, Reg::ebx, 16, &CF::avx512f, "avx512f", {&CF::avx, &CF::avx2}},
    {7, 0, Reg::ebx, 30, &CF::avx512bw, "avx512bw", {&CF::avx, &CF::avx2, &CF::avx512f}},
    {7, 0, Reg::ebx, 31, &CF::avx512vl, "avx512vl", {&CF::avx, &CF::avx2, &CF::avx512f}},
    {7, 1, Reg::eax, 5, &CF::avx512_bf16, "avx512_bf16", {&CF::avx, &CF::avx2, &CF::avx512f, &CF::avx512bw}},
    {7, 0, Reg::edx, 23, &CF::avx512_fp16, "avx512_fp16", {&CF::avx, &CF::avx2, &CF::avx512f, &CF::avx512bw}},
    {7, 0, Reg::edx, 24, &CF::amx_tile, "amx_tile", {}},
    {7, 0, Reg::edx, 22, &CF::amx_bf16, "amx_bf16", {&CF::amx_tile}},
    {7, 1, Reg::eax, 21, &CF::amx_fp16, "amx_fp16", {&CF::amx_tile}},
};

/// CPUID leaves 1, 7.0 and 7.1 with the given bits set (and OSXSAVE, so XCR0 counts).
struct Leaves {
  accel::detail::CpuidRegs leaf1{0, 0, bit(27), 0};
  accel::detail::CpuidRegs leaf7{1, 0, 0, 0};
  accel::detail::CpuidRegs leaf7_1{};

  void set(const FeatureBit& fb) {
    accel::detail::CpuidRegs& r = fb.leaf == 1 ? leaf1 : (fb.subleaf == 0 ? leaf7 : leaf7_1);
    unsigned* regs[4] = {&r.eax, &r.ebx, &r.ecx, &r.edx};
    *regs[static_cast<int>(fb.reg)] |= bit(fb.bit);
  }
  [[nodiscard]] accel::CpuFeatures decode() const {
    return accel::detail::decode_cpu_features(leaf1, leaf7, leaf7_1, xcr0_all);
  }
};

const FeatureBit& row_of(bool accel::CpuFeatures::*flag) {
  for (const auto& fb : feature_bits) {
    if (fb.flag == flag) return fb;
  }
  FAIL("no row for a required flag");
  return feature_bits.front();
}

}  // namespace

TEST_CASE("decode: each CPUID bit turns on exactly its own feature") {
  CHECK(feature_bits.size() == 13);  // one row per CpuFeatures flag
  for (const auto& fb : feature_bits) {
    INFO("feature " << std::string(fb.name) << ": CPUID leaf " << fb.leaf << "." << fb.subleaf << " reg "
                    << static_cast<int>(fb.reg) << " bit " << fb.bit);
    // The bit alone: its feature if it needs no base, else nothing at all.
    Leaves alone;
    alone.set(fb);
    accel::CpuFeatures expected_alone;
    if (fb.requires_.empty()) expected_alone.*fb.flag = true;
    CHECK(alone.decode().str() == expected_alone.str());

    // Its bases' bits only: exactly the bases, not the feature.
    Leaves bases;
    accel::CpuFeatures expected_bases;
    for (const auto flag : fb.requires_) {
      bases.set(row_of(flag));
      expected_bases.*flag = true;
    }
    CHECK(bases.decode().str() == expected_bases.str());

    // The bit with every base but one: still only those bases (each base is needed, not just some).
    for (const auto missing : fb.requires_) {
      Leaves without;
      for (const auto flag : fb.requires_) {
        if (flag != missing) without.set(row_of(flag));
      }
      without.set(fb);
      // What the remaining bases still give on their own (avx2 without avx is nothing).
      Leaves bases_only;
      for (const auto flag : fb.requires_) {
        if (flag != missing) bases_only.set(row_of(flag));
      }
      CHECK_FALSE(without.decode().*fb.flag);
      CHECK(without.decode().str() == bases_only.decode().str());
    }

    // Bases plus the bit: exactly the bases and the feature.
    Leaves with = bases;
    with.set(fb);
    accel::CpuFeatures expected = expected_bases;
    expected.*fb.flag = true;
    CHECK(with.decode().str() == expected.str());
    CHECK(with.decode() == expected);
  }
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
