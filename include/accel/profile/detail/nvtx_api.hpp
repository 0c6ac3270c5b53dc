// accel/profile/detail/nvtx_api.hpp — the NVTX calls of accel's profile ranges, loaded at run time
// from NVTX built as a library (the CUDA toolkit's libnvtx3interop.so.1) when a profiler is attached.
//
// NVTX3 is header-only: every translation unit that includes <nvtx3/nvToolsExt.h> compiles its whole
// implementation, some 70 functions (0.45 s of g++ and 0.5 s of nvcc in each translation unit that
// includes accel, measured on 2026-11-27). Its calls do nothing until a tool names its injection
// library in NVTX_INJECTION64_PATH, as Nsight Systems does. So this header declares the one structure
// accel passes (NVTX's nvtxEventAttributes_v2, whose layout has not changed since NVTX 2; the tests
// compare it with NVTX's own header) and, the first time a range opens in a process where
// NVTX_INJECTION64_PATH or ACCEL_NVTX_LIBRARY is set, loads $ACCEL_NVTX_LIBRARY, else
// libnvtx3interop.so.1 (from the loader's path, $CUDA_HOME, $CUDA_PATH or /usr/local/cuda), and calls
// it from then on. Without a tool nothing is loaded and nothing is called, as NVTX itself does.
// A tool attached but no library found: one line on stderr says that accel's ranges will not reach it,
// and how to name the library.
#pragma once

#include <accel/detail/dynamic_library.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace accel::profile::detail {

/// NVTX's nvtxEventAttributes_v2 (nvToolsExt.h), field for field.
struct NvtxEventAttributes {
  std::uint16_t version = 3;  // NVTX_VERSION
  std::uint16_t size = sizeof(NvtxEventAttributes);  // NVTX_EVENT_ATTRIB_STRUCT_SIZE
  std::uint32_t category = 0;
  std::int32_t color_type = 0;
  std::uint32_t color = 0;
  std::int32_t payload_type = 0;
  std::int32_t reserved0 = 0;
  std::uint64_t payload = 0;  // a union of 8 bytes in NVTX
  std::int32_t message_type = 1;  // NVTX_MESSAGE_TYPE_ASCII
  const char* message = nullptr;  // a union of pointers in NVTX
};

/// NVTX's functions accel calls; `loaded` false when none are (no tool attached, or no library).
struct NvtxApi {
  bool loaded = false;
  std::string library;  // the candidate that loaded
  int (*range_push_a)(const char*) = nullptr;
  int (*range_pop)() = nullptr;
  void* (*domain_create_a)(const char*) = nullptr;
  int (*domain_range_push_ex)(void*, const NvtxEventAttributes*) = nullptr;
  int (*domain_range_pop)(void*) = nullptr;
};

/// Whether accel should load NVTX's library: a tool is attached (NVTX_INJECTION64_PATH, which NVTX
/// itself reads), or ACCEL_NVTX_LIBRARY names a library.
[[nodiscard]] inline bool nvtx_wanted() {
  for (const char* var : {"NVTX_INJECTION64_PATH", "ACCEL_NVTX_LIBRARY"}) {
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') return true;
  }
  return false;
}

/// Where NVTX's library is looked for, in order (accel::detail::toolkit_library_candidates).
[[nodiscard]] inline std::vector<std::string> nvtx_library_candidates() {
  return accel::detail::toolkit_library_candidates("ACCEL_NVTX_LIBRARY", "libnvtx3interop", "libnvtx3interop.so.1");
}

/// NVTX's functions from the first of `candidates` that loads and has them all; otherwise a table
/// that is not loaded, and one line on stderr saying why.
[[nodiscard]] inline NvtxApi load_nvtx(const std::vector<std::string>& candidates) {
  NvtxApi api;
  // Never closed once used: ranges may open and close in static destructors.
  auto* library =
      new accel::detail::DynamicLibrary(accel::detail::DynamicLibrary::try_open(candidates.begin(), candidates.end()));
  accel::detail::SymbolTable table(*library);
  table.require(api.range_push_a, "nvtxRangePushA")
      .require(api.range_pop, "nvtxRangePop")
      .require(api.domain_create_a, "nvtxDomainCreateA")
      .require(api.domain_range_push_ex, "nvtxDomainRangePushEx")
      .require(api.domain_range_pop, "nvtxDomainRangePop");
  if (!table.complete()) {
    std::fprintf(stderr,
                 "accel: a profiler is attached (NVTX_INJECTION64_PATH) or ACCEL_NVTX_LIBRARY is set, but NVTX's "
                 "library cannot be used (%s); accel's profile ranges will not reach the profiler. Set "
                 "ACCEL_NVTX_LIBRARY to the CUDA toolkit's libnvtx3interop.so.1\n",
                 table.error().c_str());
    delete library;
    return NvtxApi{};
  }
  api.loaded = true;
  api.library = library->name();
  return api;
}

/// The process's NVTX functions, loaded on the first call when nvtx_wanted() (thread-safe).
[[nodiscard]] inline const NvtxApi& nvtx() {
  // Never destroyed, as the library. (Written as assignments: nvcc 13's device front end aborts on
  // `new NvtxApi(condition ? load_nvtx(...) : NvtxApi{})`.)
  static const NvtxApi* const api = [] {
    auto* loaded = new NvtxApi();
    if (nvtx_wanted()) *loaded = load_nvtx(nvtx_library_candidates());
    return loaded;
  }();
  return *api;
}

}  // namespace accel::profile::detail
