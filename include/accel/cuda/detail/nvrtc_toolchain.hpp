// accel/cuda/detail/nvrtc_toolchain.hpp — the CUDA backend's op toolchain: NVRTC for the device's
// architecture (ops/nvrtc.hpp, through the JIT cache), the cubin loaded into the device's primary
// context with the driver API (cuda/detail/module_api.hpp).
//
// What every CUDA op's builder runs: the random fills behind cuda::Random (cuda/detail/random_fill.hpp)
// and the opt-in ops of <accel/cuda/ops.hpp>. Without a device, is_compatible() says so, build_command()
// describes an sm_80 build (or set_arch()'s), and load() throws BackendUnavailableError.
//
// An AOT cubin (<aot dir>/<op>.sm_XY.cubin) is used only when ops::cubin_problem() finds it well-formed,
// its ABI tag is this accel's (ops::cubin_abi_problem) and the driver loads it; otherwise load() logs
// why (ACCEL_JIT_VERBOSE) and compiles with NVRTC.
// is_cached() is true for such a cubin too.
#pragma once

#include <accel/core/error.hpp>
#include <accel/cuda/detail/cuda_api.hpp>
#include <accel/cuda/detail/module_api.hpp>
#include <accel/cuda/device.hpp>
#include <accel/cuda/dtype.hpp>
#include <accel/cuda/error.hpp>
#include <accel/ops/jit_cache.hpp>
#include <accel/ops/nvrtc.hpp>
#include <accel/ops/op_builder.hpp>

#include <cuda.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace accel::cuda {

namespace detail {

/// The device a builder loads on: its own, else the current one; -1 without a device.
inline int builder_device(const ops::OpBuilder& b) {
  if (Devices::device_count() == 0) return -1;
  return b.device() >= 0 ? b.device() : Devices::current_device();
}

/// The architecture a builder compiles for (set_arch(), else the device's), 0 when neither exists.
inline int builder_arch(const ops::OpBuilder& b) {
  if (b.arch() != 0) return b.arch();
  const int dev = builder_device(b);
  return dev < 0 ? 0 : Dtypes::compute_capability(dev).sm();
}

inline ops::Compatibility cuda_is_compatible(const ops::OpBuilder& b) {
  const int dev = builder_device(b);
  const int arch = builder_arch(b);
  ops::Compatibility c = ops::detail::nvrtc_arch_check(b, arch != 0 ? arch : 80);
  if (dev < 0) {
    c.fail("no CUDA device (" + (Devices::driver_version() == 0 ? std::string("no driver") : "device_count() == 0") +
           "): the op can be compiled for an explicit architecture (set_arch) but not loaded");
  } else if (const int sm = Dtypes::compute_capability(dev).sm(); sm < b.spec().min_compute_capability) {
    c.fail("cuda:" + std::to_string(dev) + " has compute capability " + std::to_string(sm / 10) + "." +
           std::to_string(sm % 10) + ", the op needs " + std::to_string(b.spec().min_compute_capability / 10) + "." +
           std::to_string(b.spec().min_compute_capability % 10));
  }
  if (!module_api().loaded && dev >= 0) c.fail(module_api().error);
  return c;
}

inline ops::BuildCommand cuda_build_command(const ops::OpBuilder& b) {
  const int arch = builder_arch(b);
  return ops::nvrtc_build_command(b, arch != 0 ? arch : 80);
}

inline void* cuda_lookup(void* handle, const char* name) {
  CUfunction f = nullptr;
  if (module_api().module_get_function(&f, static_cast<CUmodule>(handle), name) != CUDA_SUCCESS) return nullptr;
  return f;
}

/// The op's AOT cubin for sm_`arch` (<aot dir>/<op>.sm_XY.cubin) when present and a well-formed cubin
/// (ops::cubin_problem) built for this accel's kernel ABI (ops::cubin_abi_problem: its tag, the device
/// variable accel_ops_abi_version, is ops::abi_version; accel's own ops must carry one); else empty, and
/// `problem` (when the file exists) says why it is skipped, so load() compiles with NVRTC instead of
/// launching kernels that read the arguments with another layout.
inline std::string aot_cubin(const ops::OpBuilder& b, int arch, std::filesystem::path& path, std::string& problem) {
  if (b.aot_dir().empty()) return {};
  path = b.aot_dir() / (b.name() + ".sm_" + std::to_string(arch) + ".cubin");
  std::string cubin;
  if (!ops::detail::read_file(path, cubin)) return {};
  problem = ops::cubin_problem(cubin);
  if (problem.empty()) problem = ops::cubin_abi_problem(cubin, ops::uses_ops_abi(b.spec()));
  return problem.empty() ? cubin : std::string();
}

/// Toolchain::is_cached: a well-formed AOT cubin, else a valid cache entry (what load() would take).
inline bool cuda_is_cached(const ops::OpBuilder& b) {
  const int arch = builder_arch(b);
  std::filesystem::path aot;
  std::string problem;
  if (!aot_cubin(b, arch != 0 ? arch : 80, aot, problem).empty()) return true;
  return ops::detail::entry_is_cached(b);
}

inline ops::LoadedOp cuda_load(const ops::OpBuilder& b) {
  const auto start = std::chrono::steady_clock::now();
  const int dev = builder_device(b);
  if (dev < 0) {
    throw BackendUnavailableError("cuda op '" + b.name() + "' cannot be loaded: no CUDA device");
  }
  const ModuleApi& api = module_api();
  if (!api.loaded) throw BackendUnavailableError("cuda op '" + b.name() + "' cannot be loaded: " + api.error);
  const int arch = builder_arch(b);
  const std::string who = "cuda op '" + b.name() + "'";
  std::string cubin;
  std::filesystem::path path;
  ops::LoadSource source = ops::LoadSource::cache_hit;
  {
    std::filesystem::path aot;
    std::string problem;
    cubin = aot_cubin(b, arch, aot, problem);
    if (!cubin.empty()) {
      path = aot;
      source = ops::LoadSource::aot;
      ops::detail::jit_log(b.name() + ": AOT build " + aot.string());
    } else if (!problem.empty()) {
      ops::detail::jit_log(b.name() + ": ignoring AOT build " + aot.string() + ": " + problem);
    }
  }
  Devices::DeviceGuard guard(dev);
  ACCEL_CUDA_CHECK(cudaFree(nullptr));  // the device's primary context, current on this thread
  // A freshly compiled cubin is loaded here once before it is committed to the cache: one that the
  // driver refuses as an image commits nothing. Other failures (out of memory, a lost context) are not
  // the cubin's fault and are thrown as they are.
  const auto module_check = [&](std::string_view image) -> std::string {
    const std::string copy(image);
    CUmodule m = nullptr;
    const CUresult r = api.module_load_data(&m, copy.data());
    if (r == CUDA_SUCCESS) {
      if (api.module_unload != nullptr) (void)api.module_unload(m);
      return {};
    }
    if (is_image_error(r)) return "cuModuleLoadData on cuda:" + std::to_string(dev) + ": " + api.describe(r);
    check_cu(r, who + ": cuModuleLoadData of the new cubin");
    return {};
  };
  ops::CacheEntry entry;
  if (path.empty()) {
    entry = ops::nvrtc_build(b, arch, module_check);
    path = entry.path;
    cubin = std::move(entry.payload);
    source = entry.compiled ? ops::LoadSource::compiled : ops::LoadSource::cache_hit;
  }
  CUmodule module = nullptr;
  CUresult loaded = api.module_load_data(&module, cubin.data());
  if (loaded != CUDA_SUCCESS && source == ops::LoadSource::aot && is_image_error(loaded)) {
    // An AOT cubin the driver refuses (another toolkit, a damaged install): compile it instead.
    ops::detail::jit_log(b.name() + ": ignoring AOT build " + path.string() + ": the driver refuses it (" +
                         api.describe(loaded) + "); compiling with NVRTC");
    entry = ops::nvrtc_build(b, arch, module_check);
    path = entry.path;
    cubin = std::move(entry.payload);
    source = entry.compiled ? ops::LoadSource::compiled : ops::LoadSource::cache_hit;
    loaded = api.module_load_data(&module, cubin.data());
  }
  if (loaded != CUDA_SUCCESS && source == ops::LoadSource::cache_hit && is_image_error(loaded)) {
    // A committed cubin the driver refuses: evict it and compile once more (the new one is loaded
    // before it is committed).
    const std::string what = who + ": the cache entry " + path.string() + " cannot be loaded (" + api.describe(loaded) + ")";
    ops::detail::jit_log(what + ": evicting it and rebuilding");
    ops::JitCache cache(b.cache_dir());
    (void)cache.evict(b.name(), ops::nvrtc_build_command(b, arch).key, "cubin", entry);
    try {
      entry = ops::nvrtc_build(b, arch, module_check);
    } catch (const CompileError& e) {
      throw CompileError(what + "; it was evicted, and rebuilding it failed: " + e.what(), e.command(), e.log());
    }
    cubin = std::move(entry.payload);
    source = entry.compiled ? ops::LoadSource::compiled : ops::LoadSource::cache_hit;
    loaded = api.module_load_data(&module, cubin.data());
    if (loaded != CUDA_SUCCESS) {
      throw Error(Errc::runtime_failure,
                  what + "; it was evicted and rebuilt once, and the rebuilt cubin cannot be loaded either: " +
                      api.describe(loaded),
                  static_cast<std::int64_t>(loaded));
    }
  }
  check_cu(loaded, who + ": cuModuleLoadData(" + path.string() + ")");
  std::shared_ptr<void> handle(module, [](void* m) {
    if (module_api().module_unload != nullptr) (void)module_api().module_unload(static_cast<CUmodule>(m));
  });
  const double seconds = ops::detail::seconds_since(start);
  ops::detail::jit_log(b.name() + ": loaded " + path.string() + " on cuda:" + std::to_string(dev) + " (" +
                       std::to_string(seconds * 1e3) + " ms)");
  return ops::LoadedOp(b.name(), ops::OpKind::cuda, source, path, std::move(handle), cuda_lookup, seconds, dev);
}

}  // namespace detail

/// The CUDA toolchain: NVRTC for the device's architecture, driver-API module loading.
inline constexpr ops::Toolchain nvrtc_driver_toolchain{"nvrtc",
                                                       detail::cuda_is_compatible,
                                                       detail::cuda_build_command,
                                                       detail::cuda_load,
                                                       "cubin",
                                                       detail::cuda_is_cached};

}  // namespace accel::cuda
