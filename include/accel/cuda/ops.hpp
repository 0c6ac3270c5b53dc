// accel/cuda/ops.hpp — the CUDA backend's op builders and typed ops (accel::OpApi).
//
//   accel::cuda::Ops            op_builder_dir / create_op_builder / get_op_builder<Op> / build_extension
//                               / op_names / op_table, static, for accel::CudaBackend to inherit
//   accel::cuda::FusedAdamOp    fused Adam/AdamW: step(stream, tensors, options, step) launches one kernel
//                               per 256 tensors on the stream (no host synchronisation, graph-capturable)
//   accel::cuda::TensorOpsOp    fill / cast / scale / l2norm / all_finite launched on a stream
//   accel::cuda::RandomFillOp   the Philox fill kernels behind cuda::Random (accel/cuda/random.hpp)
//
// Ops: fused_adam, tensor_ops and random_fill are OpKind::cuda: NVRTC compiles kernels/cuda/*.cu to a
// cubin for the device's compute capability (or OpBuilder::set_arch()), cached on disk (ops/nvrtc.hpp),
// and the cubin is loaded with the driver API (cuModuleLoadData) into the device's primary context. An
// ahead-of-time cubin <aot dir>/<name>.sm_XY.cubin (nvcc -cubin -arch=sm_XY) is used when present.
// random_fill's kernel includes accel's random headers (ops/registry.hpp says where from). cpu_adam is the
// host CPU Adam (ZeRO-Offload's optimizer), the same op as on the CPU backend; it loads as
// accel::ops::HostFusedAdam and runs on the calling thread.
//
// The driver (libcuda.so.1) is opened with dlopen, as the rest of the backend does, so programs start
// on machines without one; NVRTC likewise. Without a device, is_compatible() says so, build_command()
// describes an sm_80 build (or set_arch()'s), and load() throws BackendUnavailableError; compiling for an
// explicit architecture (ops::nvrtc_build(builder.set_arch(90), 90)) still works.
#pragma once

#include <accel/concepts/ops.hpp>
#include <accel/core/error.hpp>
#include <accel/cuda/detail/cuda_api.hpp>
#include <accel/cuda/device.hpp>
#include <accel/cuda/dtype.hpp>
#include <accel/cuda/error.hpp>
#include <accel/cuda/memory.hpp>
#include <accel/cuda/stream.hpp>
#include <accel/ops/abi.hpp>
#include <accel/ops/fused_adam.hpp>
#include <accel/ops/host_compiler.hpp>
#include <accel/ops/nvrtc.hpp>
#include <accel/ops/op_builder.hpp>
#include <accel/ops/registry.hpp>
#include <accel/ops/tensor_ops.hpp>

#include <cuda.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace accel::cuda {

namespace detail {

/// The driver entry points for modules and launches (dlopen'ed; null members when unavailable).
struct ModuleApi {
  bool loaded = false;
  std::string error;
  CUresult (*module_load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*module_unload)(CUmodule) = nullptr;
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            CUstream, void**, void**) = nullptr;
  CUresult (*memset_d32_async)(CUdeviceptr, unsigned, std::size_t, CUstream) = nullptr;
  CUresult (*get_error_string)(CUresult, const char**) = nullptr;
  CUresult (*occupancy_max_active_blocks)(int*, CUfunction, int, std::size_t) = nullptr;  // optional

  [[nodiscard]] std::string describe(CUresult r) const {
    const char* s = nullptr;
    if (get_error_string != nullptr) (void)get_error_string(r, &s);
    return s != nullptr ? std::string(s) : "CUresult " + std::to_string(static_cast<int>(r));
  }
};

template <class F>
void module_symbol(void* lib, const char* name, F& out) {
  out = reinterpret_cast<F>(::dlsym(lib, name));
}

inline const ModuleApi& module_api() {
  static const ModuleApi* const api = [] {
    auto* a = new ModuleApi;
    ::dlerror();
    void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* why = ::dlerror();
      a->error = std::string("libcuda.so.1 cannot be loaded: ") + (why != nullptr ? why : "unknown");
      return a;
    }
    module_symbol(lib, "cuModuleLoadData", a->module_load_data);
    module_symbol(lib, "cuModuleUnload", a->module_unload);
    module_symbol(lib, "cuModuleGetFunction", a->module_get_function);
    module_symbol(lib, "cuLaunchKernel", a->launch_kernel);
    module_symbol(lib, "cuMemsetD32Async", a->memset_d32_async);
    module_symbol(lib, "cuGetErrorString", a->get_error_string);
    module_symbol(lib, "cuOccupancyMaxActiveBlocksPerMultiprocessor", a->occupancy_max_active_blocks);
    if (a->module_load_data == nullptr || a->module_get_function == nullptr || a->launch_kernel == nullptr ||
        a->memset_d32_async == nullptr) {
      a->error = "libcuda.so.1 lacks cuModuleLoadData/cuModuleGetFunction/cuLaunchKernel";
      return a;
    }
    a->loaded = true;
    return a;
  }();
  return *api;
}

inline void check_cu(CUresult r, const std::string& what) {
  if (r != CUDA_SUCCESS) {
    const Errc code = r == CUDA_ERROR_OUT_OF_MEMORY ? Errc::out_of_memory : Errc::runtime_failure;
    throw Error(code, what + ": " + module_api().describe(r), static_cast<std::int64_t>(r));
  }
}

/// Whether cuModuleLoadData's failure says the image itself is unusable (rather than the device or
/// context: out of memory, a lost context), so that a cached one should be evicted and rebuilt.
inline bool is_image_error(CUresult r) noexcept {
  switch (r) {
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_INVALID_SOURCE:
    case CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND:
    case CUDA_ERROR_SHARED_OBJECT_INIT_FAILED:
      return true;
    default:
      return false;
  }
}

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
  if (!b.aot_dir().empty()) {
    const std::filesystem::path aot = b.aot_dir() / (b.name() + ".sm_" + std::to_string(arch) + ".cubin");
    if (ops::detail::read_file(aot, cubin) && !cubin.empty()) {
      path = aot;
      source = ops::LoadSource::aot;
      ops::detail::jit_log(b.name() + ": AOT build " + aot.string());
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

inline int sm_count(int device) {
  int n = 0;
  ACCEL_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
  return n;
}

/// Where a cuda op runs: its module's device, its functions.
struct LoadedKernels {
  ops::LoadedOp op;
  int device = 0;
  int sms = 1;
};

/// How many blocks of `block` threads of f the device runs at once (one wave of a grid-stride kernel);
/// `per_sm_if_unknown` per multiprocessor when the driver cannot say.
inline unsigned resident_blocks(CUfunction f, unsigned block, int sms, int per_sm_if_unknown) {
  int per_sm = 0;
  const ModuleApi& api = module_api();
  if (api.occupancy_max_active_blocks == nullptr ||
      api.occupancy_max_active_blocks(&per_sm, f, static_cast<int>(block), 0) != CUDA_SUCCESS || per_sm < 1) {
    per_sm = per_sm_if_unknown;
  }
  return static_cast<unsigned>(sms) * static_cast<unsigned>(per_sm);
}

inline void launch(CUfunction f, unsigned grid, unsigned block, StreamRef s, void** params, const char* what) {
  check_cu(module_api().launch_kernel(f, grid, 1, 1, block, 1, 1, 0, reinterpret_cast<CUstream>(s.get()), params,
                                      nullptr),
           std::string("cuLaunchKernel(") + what + ")");
}

inline void check_stream_device(const LoadedKernels& k, StreamRef s, const char* op) {
  if (s.device_index() != k.device) {
    throw InvalidArgumentError(std::string(op) + ": the op was loaded on cuda:" + std::to_string(k.device) +
                               ", the stream is on cuda:" + std::to_string(s.device_index()));
  }
}

}  // namespace detail

/// The CUDA toolchain: NVRTC for the device's architecture, driver-API module loading.
inline constexpr ops::Toolchain nvrtc_driver_toolchain{"nvrtc",
                                                       detail::cuda_is_compatible,
                                                       detail::cuda_build_command,
                                                       detail::cuda_load,
                                                       "cubin",
                                                       ops::detail::entry_is_cached<ops::OpBuilder>};

/// Multi-tensor fused Adam/AdamW on a CUDA device.
class FusedAdamOp {
 public:
  static constexpr long long chunk_size = 16384;
  static constexpr unsigned block_size = 512;

  explicit FusedAdamOp(ops::LoadedOp op) {
    k_.op = std::move(op);
    k_.device = k_.op.device();
    k_.sms = detail::sm_count(k_.device);
    for (const Dtype p : {Dtype::float32, Dtype::bfloat16}) {
      for (const Dtype g : {Dtype::float32, Dtype::float16, Dtype::bfloat16}) {
        for (int c = 0; c < 3; ++c) {
          if (p == Dtype::bfloat16 && c != 0) continue;
          const std::optional<Dtype> copy = c == 0 ? std::nullopt : std::optional<Dtype>(c == 1 ? Dtype::float16 : Dtype::bfloat16);
          const std::size_t i = index(p, g, copy);
          kernels_[i] = static_cast<CUfunction>(k_.op.symbol(kernel_name(p, g, copy)));
          // One wave: a larger grid-stride grid leaves a partial second wave (bf16: 2 of 3 blocks per SM
          // idle for its length), a smaller one leaves multiprocessors short of loads in flight.
          wave_[i] = detail::resident_blocks(kernels_[i], block_size, k_.sms, 2);
        }
      }
    }
  }

  /// "accel_fused_adam_pf32_gbf16_cbf16": the kernel of a dtype combination.
  [[nodiscard]] static std::string kernel_name(Dtype p, Dtype g, std::optional<Dtype> copy) {
    const auto name = [](Dtype d) -> std::string {
      return d == Dtype::float32 ? "f32" : d == Dtype::float16 ? "f16" : "bf16";
    };
    return "accel_fused_adam_p" + name(p) + "_g" + name(g) + "_c" + (copy ? name(*copy) : std::string("none"));
  }

  /// Launches one step over all tensors on `stream` (no host synchronisation). `step` counts from 1.
  void step(StreamRef stream, std::span<const ops::AdamTensor> tensors, const ops::AdamOptions& options,
            std::int64_t step, const ops::AdamDtypes& dtypes = {}) const {
    detail::check_stream_device(k_, stream, "fused_adam");
    const ops::abi::AdamHParams h = ops::adam_hparams(options, step, dtypes);
    const std::vector<ops::abi::AdamTensor> t = ops::adam_tensors(tensors, options, dtypes);
    const std::size_t kernel_index = index(dtypes.param, dtypes.grad, dtypes.model_copy);
    CUfunction f = kernels_[kernel_index];
    const long long wave = wave_[kernel_index];
    const char* kernel = "accel_fused_adam";
    auto launch = std::make_unique<ops::abi::AdamLaunch>();
    launch->h = h;
    launch->chunk_size = chunk_size;
    std::size_t i = 0;
    while (i < t.size()) {
      int n = 0;
      long long chunks = 0;
      for (; i < t.size() && n < ops::abi::mt_max_tensors; ++i) {
        if (t[i].numel == 0) continue;
        launch->chunk_start[n] = chunks;
        launch->t[n] = t[i];
        chunks += (t[i].numel + chunk_size - 1) / chunk_size;
        ++n;
      }
      if (n == 0) break;
      launch->chunk_start[n] = chunks;
      launch->num_tensors = n;
      const auto grid = static_cast<unsigned>(std::min<long long>(chunks, wave));
      void* params[] = {launch.get()};
      detail::launch(f, grid, block_size, stream, params, kernel);
    }
  }
  void step(std::span<const ops::AdamTensor> tensors, const ops::AdamOptions& options, std::int64_t step,
            const ops::AdamDtypes& dtypes = {}) const {
    this->step(Streams::current_stream(), tensors, options, step, dtypes);
  }

  [[nodiscard]] const ops::LoadedOp& op() const noexcept { return k_.op; }
  [[nodiscard]] int device() const noexcept { return k_.device; }

 private:
  static std::size_t index(Dtype p, Dtype g, std::optional<Dtype> copy) noexcept {
    const std::size_t pi = p == Dtype::bfloat16 ? 1 : 0;
    const auto gi = static_cast<std::size_t>(ops::abi::code(g));  // 0, 1, 2
    const std::size_t ci = !copy ? 0 : *copy == Dtype::float16 ? 1 : 2;
    return pi * 9 + gi * 3 + ci;
  }

  detail::LoadedKernels k_;
  std::array<CUfunction, 18> kernels_{};  ///< resolved once (adam_hparams() rejects the combinations left null)
  std::array<unsigned, 18> wave_{};        ///< resident_blocks() of each kernel
};

/// fill / cast / scale / L2 norm / isfinite on a CUDA device. Pointers are device pointers.
class TensorOpsOp {
 public:
  static constexpr long long chunk_size = 16384;

  explicit TensorOpsOp(ops::LoadedOp op) {
    k_.op = std::move(op);
    k_.device = k_.op.device();
    k_.sms = detail::sm_count(k_.device);
  }

  void fill(StreamRef s, void* dst, Dtype dtype, std::int64_t n, float value) const {
    ops::detail::check_float_dtype("fill", dtype);
    detail::check_stream_device(k_, s, "tensor_ops fill");
    if (n == 0) return;
    int code = ops::abi::code(dtype);
    long long count = n;
    void* params[] = {&dst, &code, &count, &value};
    detail::launch(fn("accel_fill"), grid_for(n), 256, s, params, "accel_fill");
  }
  void cast(StreamRef s, void* dst, Dtype dst_dtype, const void* src, Dtype src_dtype, std::int64_t n) const {
    scale(s, dst, dst_dtype, src, src_dtype, n, 1.0f);
  }
  void scale(StreamRef s, void* dst, Dtype dst_dtype, const void* src, Dtype src_dtype, std::int64_t n,
             float factor) const {
    ops::detail::check_float_dtype("scale", dst_dtype);
    ops::detail::check_float_dtype("scale", src_dtype);
    detail::check_stream_device(k_, s, "tensor_ops scale");
    if (n == 0) return;
    int dc = ops::abi::code(dst_dtype), sc = ops::abi::code(src_dtype);
    long long count = n;
    void* params[] = {&dst, &dc, &src, &sc, &count, &factor};
    detail::launch(fn("accel_scale"), grid_for(n), 256, s, params, "accel_scale");
  }
  /// *total (device float) = the L2 norm of all tensors; per_tensor (device, optional) each tensor's.
  void l2norm(StreamRef s, std::span<const ops::TensorRef> tensors, float* total, float* per_tensor = nullptr) const {
    detail::check_stream_device(k_, s, "tensor_ops l2norm");
    const std::vector<ops::abi::TensorRef> refs = ops::detail::tensor_refs("l2norm", tensors);
    long long all_chunks = 0;
    for (const auto& r : refs) all_chunks += (r.numel + chunk_size - 1) / chunk_size;
    // Workspace: [0] the running sum of squares across launches, then one double per chunk.
    auto* work = static_cast<double*>(Memory::raw_alloc(sizeof(double) * static_cast<std::size_t>(all_chunks + 1), s));
    try {
      auto list = std::make_unique<ops::abi::TensorList>();
      list->chunk_size = chunk_size;
      std::size_t i = 0;
      int launches = 0;
      while (i < refs.size() || launches == 0) {
        const std::size_t first = i;
        long long chunks = 0;
        int n = 0;
        for (; i < refs.size() && n < ops::abi::mt_max_tensors; ++i, ++n) {
          list->chunk_start[n] = chunks;
          list->t[n] = refs[i];
          chunks += (refs[i].numel + chunk_size - 1) / chunk_size;
        }
        list->chunk_start[n] = chunks;
        list->num_tensors = n;
        double* partials = work + 1;
        if (chunks > 0) {
          void* p1[] = {list.get(), &partials};
          detail::launch(fn("accel_l2norm_partial"),
                         static_cast<unsigned>(std::min<long long>(chunks, static_cast<long long>(k_.sms) * 8)), 256, s,
                         p1, "accel_l2norm_partial");
        }
        float* per = per_tensor != nullptr ? per_tensor + first : nullptr;
        int accumulate = launches > 0 ? 1 : 0;
        void* p2[] = {list.get(), &partials, &total, &per, &accumulate};
        detail::launch(fn("accel_l2norm_finalize"), 1, 256, s, p2, "accel_l2norm_finalize");
        ++launches;
      }
    } catch (...) {
      Memory::raw_delete(work);
      throw;
    }
    Memory::raw_delete(work);  // stream-ordered: reused only after this stream's work above
  }
  /// *flag (device int) = 1 when every element is finite, else 0.
  void all_finite(StreamRef s, std::span<const ops::TensorRef> tensors, int* flag) const {
    detail::check_stream_device(k_, s, "tensor_ops all_finite");
    const std::vector<ops::abi::TensorRef> refs = ops::detail::tensor_refs("all_finite", tensors);
    detail::check_cu(detail::module_api().memset_d32_async(reinterpret_cast<CUdeviceptr>(flag), 1, 1,
                                                           reinterpret_cast<CUstream>(s.get())),
                     "cuMemsetD32Async");
    auto list = std::make_unique<ops::abi::TensorList>();
    list->chunk_size = chunk_size;
    std::size_t i = 0;
    while (i < refs.size()) {
      long long chunks = 0;
      int n = 0;
      for (; i < refs.size() && n < ops::abi::mt_max_tensors; ++i, ++n) {
        list->chunk_start[n] = chunks;
        list->t[n] = refs[i];
        chunks += (refs[i].numel + chunk_size - 1) / chunk_size;
      }
      list->chunk_start[n] = chunks;
      list->num_tensors = n;
      if (chunks == 0) continue;
      void* params[] = {list.get(), &flag};
      detail::launch(fn("accel_isfinite"),
                     static_cast<unsigned>(std::min<long long>(chunks, static_cast<long long>(k_.sms) * 8)), 256, s,
                     params, "accel_isfinite");
    }
  }

  [[nodiscard]] const ops::LoadedOp& op() const noexcept { return k_.op; }
  [[nodiscard]] int device() const noexcept { return k_.device; }

 private:
  [[nodiscard]] CUfunction fn(const char* name) const { return static_cast<CUfunction>(k_.op.symbol(name)); }
  [[nodiscard]] unsigned grid_for(std::int64_t n) const {
    return static_cast<unsigned>(std::max<long long>(1, std::min<long long>((n + 255) / 256, static_cast<long long>(k_.sms) * 8)));
  }
  detail::LoadedKernels k_;
};

/// Philox4x32-10 fills (kernels/cuda/random_fill.cu): what accel::rng::fill_* write on the host, on a
/// stream. cuda::Random reserves the generator's offsets and calls launch(); so may code that brings
/// its own (seed, offset), or reads them from device memory (philox_state, for graph capture).
class RandomFillOp {
 public:
  enum class Kind { bits, uniform_float, uniform_double, normal_float, normal_double };
  static constexpr unsigned block_size = 512;

  explicit RandomFillOp(ops::LoadedOp op) {
    k_.op = std::move(op);
    k_.device = k_.op.device();
    k_.sms = detail::sm_count(k_.device);
    for (const Kind kind : {Kind::bits, Kind::uniform_float, Kind::uniform_double, Kind::normal_float,
                            Kind::normal_double}) {
      const auto i = static_cast<std::size_t>(kind);
      kernels_[i] = static_cast<CUfunction>(k_.op.symbol(kernel_name(kind)));
      wave_[i] = detail::resident_blocks(kernels_[i], block_size, k_.sms, 4);
    }
  }

  [[nodiscard]] static const char* kernel_name(Kind kind) noexcept {
    switch (kind) {
      case Kind::bits: return "accel_random_bits";
      case Kind::uniform_float: return "accel_random_uniform_f32";
      case Kind::uniform_double: return "accel_random_uniform_f64";
      case Kind::normal_float: return "accel_random_normal_f32";
      case Kind::normal_double: return "accel_random_normal_f64";
    }
    return "";
  }

  /// Writes n values of `kind` (uint32, float or double by kind) to device memory `out` (aligned to
  /// its element), as accel::rng::fill_*(span(out, n), seed, offset[, mean, stddev]) would. With
  /// philox_state (device memory, 2 x u64) the kernel uses seed = philox_state[0] and offset =
  /// philox_state[1] + intra_offset instead, read when it runs. No host synchronisation; n == 0 does
  /// nothing. mean and stddev are used by the normal kinds (converted to float for normal_float).
  void launch(StreamRef s, Kind kind, void* out, std::size_t n, std::uint64_t seed, std::uint64_t offset,
              const std::uint64_t* philox_state, std::uint64_t intra_offset, double mean, double stddev) const {
    detail::check_stream_device(k_, s, "random_fill");
    if (n == 0) return;
    unsigned long long count = n, seed_arg = seed, offset_arg = offset, intra = intra_offset;
    const void* state = philox_state;
    float mean_f = static_cast<float>(mean), stddev_f = static_cast<float>(stddev);
    void* params_plain[] = {&out, &count, &seed_arg, &offset_arg, &state, &intra};
    void* params_f32[] = {&out, &count, &seed_arg, &offset_arg, &state, &intra, &mean_f, &stddev_f};
    void* params_f64[] = {&out, &count, &seed_arg, &offset_arg, &state, &intra, &mean, &stddev};
    void** params = kind == Kind::normal_float ? params_f32 : kind == Kind::normal_double ? params_f64 : params_plain;
    const bool wide = kind == Kind::uniform_double || kind == Kind::normal_double;
    // Units of one Philox block (16 bytes of output): at most (n + 3) / per_block + 1, whatever the offset.
    const unsigned long long units = (count + 3) / (wide ? 2 : 4) + 1;
    const unsigned long long blocks = (units + block_size - 1) / block_size;
    const auto grid = static_cast<unsigned>(std::min<unsigned long long>(blocks, wave_[static_cast<std::size_t>(kind)]));
    detail::launch(kernels_[static_cast<std::size_t>(kind)], grid, block_size, s, params, kernel_name(kind));
  }

  [[nodiscard]] const ops::LoadedOp& op() const noexcept { return k_.op; }
  [[nodiscard]] int device() const noexcept { return k_.device; }

 private:
  detail::LoadedKernels k_;
  std::array<CUfunction, 5> kernels_{};
  std::array<unsigned, 5> wave_{};  ///< resident_blocks() of each kernel: one wave of a grid-stride loop
};

/// The typed op each tag loads as on the CUDA backend.
template <class Op>
struct OpFor;
template <>
struct OpFor<ops::FusedAdam> {
  using type = FusedAdamOp;
};
template <>
struct OpFor<ops::CpuAdam> {
  using type = ops::HostFusedAdam;
};
template <>
struct OpFor<ops::TensorOps> {
  using type = TensorOpsOp;
};
template <>
struct OpFor<ops::RandomFill> {
  using type = RandomFillOp;
};

/// accel::OpApi for the CUDA backend; accel::CudaBackend inherits these.
struct Ops {
  [[nodiscard]] static std::string op_builder_dir() { return ops::detail::kernel_dir_string(); }

  /// fused_adam, tensor_ops and random_fill (NVRTC), cpu_adam (host compiler).
  [[nodiscard]] static const ops::Registry& op_registry() {
    static const ops::Registry registry("cuda", {
                                                    {ops::specs::cuda_fused_adam(), &nvrtc_driver_toolchain},
                                                    {ops::specs::host_fused_adam("cpu_adam", "CPUAdamBuilder"),
                                                     &ops::host_toolchain},
                                                    {ops::specs::cuda_tensor_ops(), &nvrtc_driver_toolchain},
                                                    {ops::specs::cuda_random_fill(), &nvrtc_driver_toolchain},
                                                });
    return registry;
  }

  [[nodiscard]] static ops::OpBuilder create_op_builder(std::string_view name) { return op_registry().create(name); }

  template <class Op>
  [[nodiscard]] static auto get_op_builder() {
    static_assert(requires { typename OpFor<Op>::type; },
                  "accel::cuda::Ops::get_op_builder<Op>: the CUDA backend has no such op (it offers ops::FusedAdam, "
                  "ops::CpuAdam, ops::TensorOps, ops::RandomFill)");
    return ops::TypedOpBuilder<typename OpFor<Op>::type>(op_registry().create(Op::name));
  }

  [[nodiscard]] static ops::BuildCommand build_extension(std::string_view name) {
    return create_op_builder(name).build_command();
  }

  [[nodiscard]] static std::vector<std::string> op_names() { return op_registry().names(); }

  [[nodiscard]] static std::vector<ops::OpStatus> op_table() { return ops::op_table(op_registry()); }
};

}  // namespace accel::cuda
