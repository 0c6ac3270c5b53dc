// accel/cuda/ops.hpp — the CUDA backend's op builders and typed ops (accel::OpApi).
//
//   accel::cuda::Ops            op_builder_dir / create_op_builder / get_op_builder<Op> / build_extension
//                               / op_names / op_table (declared in cuda/detail/ops_api.hpp, which
//                               accel::CudaBackend inherits; what they run is defined here: opt-in)
//   accel::cuda::FusedAdamOp    fused Adam/AdamW: step(stream, tensors, options, step) launches one kernel
//                               per 256 tensors on the stream (no host synchronisation, graph-capturable)
//   accel::cuda::TensorOpsOp    fill / cast / scale / l2norm / all_finite launched on a stream
//   accel::cuda::RandomFillOp   the Philox fill kernels behind cuda::Random (cuda/detail/random_fill.hpp)
//
// Ops: fused_adam, tensor_ops and random_fill are OpKind::cuda: NVRTC compiles kernels/cuda/*.cu to a
// cubin for the device's compute capability (or OpBuilder::set_arch()), cached on disk (ops/nvrtc.hpp),
// and the cubin is loaded with the driver API (cuModuleLoadData) into the device's primary context. An
// ahead-of-time cubin <aot dir>/<name>.sm_XY.cubin (nvcc -cubin -arch=sm_XY) is used when present.
// random_fill's kernel includes accel's random headers (ops/registry.hpp says where from). cpu_adam is the
// host CPU Adam (ZeRO-Offload's optimizer), the same op as on the CPU backend; it loads as
// accel::ops::HostFusedAdam and runs on the calling thread.
//
// The toolchain (cuda/detail/nvrtc_toolchain.hpp) opens the driver and NVRTC at run time, so programs
// start on machines without them. Without a device, is_compatible() says so, build_command() describes
// an sm_80 build (or set_arch()'s), and load() throws BackendUnavailableError; compiling for an explicit
// architecture (ops::nvrtc_build(builder.set_arch(90), 90)) still works.
#pragma once

#include <accel/concepts/ops.hpp>
#include <accel/core/error.hpp>
#include <accel/cuda/detail/cuda_api.hpp>
#include <accel/cuda/detail/module_api.hpp>
#include <accel/cuda/detail/nvrtc_toolchain.hpp>
#include <accel/cuda/detail/ops_api.hpp>
#include <accel/cuda/detail/random_fill.hpp>
#include <accel/cuda/memory.hpp>
#include <accel/cuda/stream.hpp>
#include <accel/ops/abi.hpp>
#include <accel/ops/fused_adam.hpp>
#include <accel/ops/host_compiler.hpp>
#include <accel/ops/launch.hpp>
#include <accel/ops/op_builder.hpp>
#include <accel/ops/registry.hpp>
#include <accel/ops/tensor_ops.hpp>

#include <cuda.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>
namespace accel::cuda {

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
    ops::detail::check_fill(dst, dtype, n);
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
    ops::detail::check_scale(dst, dst_dtype, src, src_dtype, n);
    detail::check_stream_device(k_, s, "tensor_ops scale");
    if (n == 0) return;
    int dc = ops::abi::code(dst_dtype), sc = ops::abi::code(src_dtype);
    long long count = n;
    void* params[] = {&dst, &dc, &src, &sc, &count, &factor};
    detail::launch(fn("accel_scale"), grid_for(n), 256, s, params, "accel_scale");
  }
  /// *total (device float) = the L2 norm of all tensors; per_tensor (device, optional) each tensor's.
  void l2norm(StreamRef s, std::span<const ops::TensorRef> tensors, float* total, float* per_tensor = nullptr) const {
    ops::detail::check_output("l2norm", "total", total);
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
    ops::detail::check_output("all_finite", "flag", flag);
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

namespace detail {

/// The CUDA backend's op registry: fused_adam, tensor_ops, random_fill and nn_ops (NVRTC), cpu_adam (host compiler).
struct OpsImpl {
  [[nodiscard]] static const ops::Registry& registry() {
    static const ops::Registry registry("cuda", {
                                                    {ops::specs::cuda_fused_adam(), &nvrtc_driver_toolchain},
                                                    {ops::specs::host_fused_adam("cpu_adam", "CPUAdamBuilder"),
                                                     &ops::host_toolchain},
                                                    {ops::specs::cuda_tensor_ops(), &nvrtc_driver_toolchain},
                                                    {ops::specs::cuda_random_fill(), &nvrtc_driver_toolchain},
                                                    {ops::specs::cuda_nn_ops(), &nvrtc_driver_toolchain},
                                                });
    return registry;
  }
  [[nodiscard]] static ops::OpBuilder create_op_builder(std::string_view name) { return registry().create(name); }
  [[nodiscard]] static std::vector<std::string> op_names() { return registry().names(); }
  [[nodiscard]] static std::vector<ops::OpStatus> op_table() { return ops::op_table(registry()); }

  /// A user's own op: NVRTC for OpKind::cuda, the host compiler for OpKind::host.
  [[nodiscard]] static ops::OpBuilder create_op_builder_for(const ops::OpSpec& spec) {
    return ops::OpBuilder(spec, spec.kind == ops::OpKind::cuda ? &nvrtc_driver_toolchain : &ops::host_toolchain, "cuda");
  }

  /// cuLaunchKernel of a cuda kernel on s (the driver copies the arguments at the call).
  static void launch_kernel(StreamRef s, const ops::Kernel& k, const ops::LaunchShape& shape, const void* args,
                            std::size_t bytes) {
    if (!k.valid() || k.kind() != ops::OpKind::cuda) throw ops::detail::launch_kind_error("cuda", k, ops::OpKind::cuda);
    if (args == nullptr && bytes != 0) {
      throw InvalidArgumentError("cuda: launch_kernel of " + k.describe() + ": args is null but bytes is " +
                                 std::to_string(bytes));
    }
    if (s.device_index() != k.device()) {
      throw InvalidArgumentError("cuda: " + k.describe() + " was loaded on cuda:" + std::to_string(k.device()) +
                                 ", the stream is on cuda:" + std::to_string(s.device_index()));
    }
    void* params[] = {const_cast<void*>(args)};
    check_cu(module_api().launch_kernel(static_cast<CUfunction>(k.address()), shape.grid[0], shape.grid[1], shape.grid[2],
                                        shape.block[0], shape.block[1], shape.block[2], shape.shared_bytes,
                                        reinterpret_cast<CUstream>(s.get()), bytes != 0 ? params : nullptr, nullptr),
             "cuLaunchKernel(" + k.describe() + ")");
  }
};

}  // namespace detail

static_assert(OpApi<Ops>);

}  // namespace accel::cuda
