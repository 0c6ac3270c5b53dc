// accel/cpu/ops.hpp — the CPU backend's op builders and typed ops (accel::OpApi). Opt-in: the backend
// (accel/cpu/backend.hpp, accel/accel.hpp) declares the OpApi members in cpu/detail/ops_api.hpp; this
// header, or <accel/op_builders.hpp>, defines what they need.
//
//   accel::cpu::Ops           op_builder_dir / create_op_builder / get_op_builder<Op> / build_extension
//                             / op_names / op_table, as static functions for accel::CpuBackend to inherit
//                             (declared in cpu/detail/ops_api.hpp; cpu::detail::OpsImpl below is the
//                             registry they use)
//   accel::cpu::FusedAdamOp   fused Adam/AdamW; step(stream, tensors, options, step) enqueues the
//                             update on the stream (the kernel runs on the stream's worker with OpenMP
//                             over all cores; bit-identical for any thread count)
//   accel::cpu::TensorOpsOp   fill / cast / scale / l2norm / all_finite enqueued on a stream; *_sync
//                             forms run now and return the value
//
// Every op is OpKind::host (ops/host_compiler.hpp): compiled with the host compiler on first load,
// then loaded from the JIT cache. Ops: fused_adam (FusedAdamBuilder), cpu_adam (CPUAdamBuilder: the
// same kernel under DeepSpeed's CPU name) and tensor_ops (TensorOpsBuilder).
//
// Arguments are checked when a call is made (InvalidArgumentError), not when the task runs; the
// memory the tensors point to must stay valid until the stream reaches the task, as on a GPU.
#pragma once

#include <accel/concepts/ops.hpp>
#include <accel/cpu/detail/ops_api.hpp>
#include <accel/cpu/stream.hpp>
#include <accel/ops/fused_adam.hpp>
#include <accel/ops/host_compiler.hpp>
#include <accel/ops/launch.hpp>
#include <accel/ops/op_builder.hpp>
#include <accel/ops/registry.hpp>
#include <accel/ops/tensor_ops.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace accel::cpu {

/// Fused Adam/AdamW on the CPU backend.
class FusedAdamOp {
 public:
  explicit FusedAdamOp(ops::LoadedOp op) : impl_(std::make_shared<ops::HostFusedAdam>(std::move(op))) {}

  /// OpenMP threads per step (0: all cores). Applies to steps enqueued afterwards.
  void set_num_threads(int n) {
    auto next = std::make_shared<ops::HostFusedAdam>(*impl_);
    next->set_num_threads(n);
    impl_ = std::move(next);
  }
  [[nodiscard]] int num_threads() const noexcept { return impl_->num_threads(); }

  /// Enqueues one step over all tensors on `stream`. `step` counts from 1 (torch's state['step']).
  void step(StreamRef stream, std::span<const ops::AdamTensor> tensors, const ops::AdamOptions& options,
            std::int64_t step, const ops::AdamDtypes& dtypes = {}) const {
    const ops::abi::AdamHParams h = ops::adam_hparams(options, step, dtypes);
    std::vector<ops::abi::AdamTensor> t = ops::adam_tensors(tensors, options, dtypes);
    stream.enqueue([impl = impl_, h, t = std::move(t)] { impl->run(h, t); });
  }
  /// The same on the calling thread's current stream.
  void step(std::span<const ops::AdamTensor> tensors, const ops::AdamOptions& options, std::int64_t step,
            const ops::AdamDtypes& dtypes = {}) const {
    this->step(Streams::current_stream(), tensors, options, step, dtypes);
  }
  /// Runs one step now, on the calling thread. Blocking.
  void step_sync(std::span<const ops::AdamTensor> tensors, const ops::AdamOptions& options, std::int64_t step,
                 const ops::AdamDtypes& dtypes = {}) const {
    impl_->step_sync(tensors, options, step, dtypes);
  }

  [[nodiscard]] const ops::LoadedOp& op() const noexcept { return impl_->op(); }

 private:
  std::shared_ptr<const ops::HostFusedAdam> impl_;
};

/// fill / cast / scale / L2 norm / isfinite on the CPU backend.
class TensorOpsOp {
 public:
  explicit TensorOpsOp(ops::LoadedOp op) : impl_(std::make_shared<ops::HostTensorOps>(std::move(op))) {}

  void set_num_threads(int n) {
    auto next = std::make_shared<ops::HostTensorOps>(*impl_);
    next->set_num_threads(n);
    impl_ = std::move(next);
  }
  [[nodiscard]] int num_threads() const noexcept { return impl_->num_threads(); }

  void fill(StreamRef s, void* dst, Dtype dtype, std::int64_t n, float value) const {
    ops::detail::check_fill(dst, dtype, n);
    s.enqueue([impl = impl_, dst, dtype, n, value] { impl->fill(dst, dtype, n, value); });
  }
  void cast(StreamRef s, void* dst, Dtype dst_dtype, const void* src, Dtype src_dtype, std::int64_t n) const {
    scale(s, dst, dst_dtype, src, src_dtype, n, 1.0f);
  }
  void scale(StreamRef s, void* dst, Dtype dst_dtype, const void* src, Dtype src_dtype, std::int64_t n,
             float factor) const {
    ops::detail::check_scale(dst, dst_dtype, src, src_dtype, n);
    s.enqueue([impl = impl_, dst, dst_dtype, src, src_dtype, n, factor] {
      impl->scale(dst, dst_dtype, src, src_dtype, n, factor);
    });
  }
  /// Writes the total norm to *total and, if given, each tensor's norm to per_tensor[i], in stream order.
  void l2norm(StreamRef s, std::span<const ops::TensorRef> tensors, float* total, float* per_tensor = nullptr) const {
    ops::detail::check_output("l2norm", "total", total);
    s.enqueue([impl = impl_, t = ops::detail::tensor_refs("l2norm", tensors), total, per_tensor] {
      impl->run_l2norm(t, total, per_tensor);
    });
  }
  /// Writes 1 to *flag when every element is finite, else 0, in stream order.
  void all_finite(StreamRef s, std::span<const ops::TensorRef> tensors, int* flag) const {
    ops::detail::check_output("all_finite", "flag", flag);
    s.enqueue([impl = impl_, t = ops::detail::tensor_refs("all_finite", tensors), flag] {
      impl->run_all_finite(t, flag);
    });
  }

  /// Now, on the calling thread.
  [[nodiscard]] float l2norm_sync(std::span<const ops::TensorRef> tensors, float* per_tensor = nullptr) const {
    float total = 0;
    impl_->l2norm(tensors, &total, per_tensor);
    return total;
  }
  [[nodiscard]] bool all_finite_sync(std::span<const ops::TensorRef> tensors) const {
    int flag = 0;
    impl_->all_finite(tensors, &flag);
    return flag != 0;
  }
  /// The host kernels themselves (calls run on the calling thread).
  [[nodiscard]] const ops::HostTensorOps& host() const noexcept { return *impl_; }
  [[nodiscard]] const ops::LoadedOp& op() const noexcept { return impl_->op(); }

 private:
  std::shared_ptr<const ops::HostTensorOps> impl_;
};

namespace detail {

/// The CPU backend's op registry: fused_adam, cpu_adam, tensor_ops, nn_ops — all host ops.
struct OpsImpl {
  [[nodiscard]] static const ops::Registry& registry() {
    static const ops::Registry registry("cpu", {
                                                   {ops::specs::host_fused_adam(), &ops::host_toolchain},
                                                   {ops::specs::host_fused_adam("cpu_adam", "CPUAdamBuilder"),
                                                    &ops::host_toolchain},
                                                   {ops::specs::host_tensor_ops(), &ops::host_toolchain},
                                                   {ops::specs::host_nn_ops(), &ops::host_toolchain},
                                               });
    return registry;
  }
  [[nodiscard]] static ops::OpBuilder create_op_builder(std::string_view name) { return registry().create(name); }
  [[nodiscard]] static std::vector<std::string> op_names() { return registry().names(); }
  [[nodiscard]] static std::vector<ops::OpStatus> op_table() { return ops::op_table(registry()); }

  /// A user's own op: host ops only.
  [[nodiscard]] static ops::OpBuilder create_op_builder_for(const ops::OpSpec& spec) {
    if (spec.kind != ops::OpKind::host) throw ops::detail::spec_kind_error("cpu", spec);
    return ops::OpBuilder(spec, &ops::host_toolchain, "cpu");
  }

  /// entry(args, threads) as a stream task; a copy of the arguments travels with it.
  static void launch_kernel(StreamRef s, const ops::Kernel& k, const ops::LaunchShape& shape, const void* args,
                            std::size_t bytes) {
    if (!k.valid() || k.kind() != ops::OpKind::host) throw ops::detail::launch_kind_error("cpu", k, ops::OpKind::host);
    if (args == nullptr && bytes != 0) {
      throw InvalidArgumentError("cpu: launch_kernel of " + k.describe() + ": args is null but bytes is " +
                                 std::to_string(bytes));
    }
    std::unique_ptr<std::byte[]> copy;
    if (bytes != 0) {
      copy.reset(new std::byte[bytes]);
      std::memcpy(copy.get(), args, bytes);
    }
    s.enqueue(HostLaunch{reinterpret_cast<ops::Kernel::HostFn*>(k.address()), shape.threads, std::move(copy), &k});
  }

 private:
  // The task of one host launch: 32 bytes, stored in the stream task without another allocation.
  struct HostLaunch {
    ops::Kernel::HostFn* fn;
    int threads;
    std::unique_ptr<std::byte[]> args;
    std::shared_ptr<const std::string> name;  // only read when the kernel refuses its arguments

    HostLaunch(ops::Kernel::HostFn* f, int t, std::unique_ptr<std::byte[]> a, const ops::Kernel* k)
        : fn(f), threads(t), args(std::move(a)), name(k->shared_description()) {}
    void operator()() const {
      if (const int rc = fn(args.get(), threads); rc != 0) {
        throw InvalidArgumentError("cpu: " + *name + " refused its arguments (code " + std::to_string(rc) + ")");
      }
    }
  };
};

}  // namespace detail

static_assert(OpApi<Ops>);

}  // namespace accel::cpu
