// accel/cuda/detail/ops_api.hpp — accel::cuda::Ops: the CUDA backend's OpApi members, without the machinery.
//
// The same shape as the CPU side (cpu/detail/ops_api.hpp): accel::CudaBackend inherits these, so every
// translation unit that includes the backend parses this header; it only declares the op builder types.
// The op builders themselves — the registry, the NVRTC and host-compiler toolchains, the JIT cache,
// the typed ops FusedAdamOp and TensorOpsOp — are opt-in: they are defined in <accel/cuda/ops.hpp>,
// which <accel/op_builders.hpp> includes. (The random fills, which cuda::Random needs everywhere, load
// through cuda/detail/random_fill.hpp instead.)
//
// create_op_builder, get_op_builder<Op>, build_extension, op_names and op_table are templates whose
// bodies (and return types) are instantiated only where they are called; a call without
// <accel/op_builders.hpp> is a compile error that says which header to add. op_builder_dir() works
// everywhere.
#pragma once

#include <accel/ops/detail/kernel_dir.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace accel::ops {
class OpBuilder;      // incomplete here? the op builders are opt-in: #include <accel/op_builders.hpp>
struct BuildCommand;  // incomplete here? the op builders are opt-in: #include <accel/op_builders.hpp>
struct OpStatus;      // incomplete here? the op builders are opt-in: #include <accel/op_builders.hpp>
struct OpSpec;
struct LaunchShape;
class Kernel;
template <class Loaded>
class TypedOpBuilder;  // incomplete here? the op builders are opt-in: #include <accel/op_builders.hpp>
class Registry;
class HostFusedAdam;
struct FusedAdam;
struct CpuAdam;
struct TensorOps;
struct RandomFill;
}  // namespace accel::ops

namespace accel::cuda {

class FusedAdamOp;   // <accel/cuda/ops.hpp>
class TensorOpsOp;   // <accel/cuda/ops.hpp>
class RandomFillOp;  // cuda/detail/random_fill.hpp
class StreamRef;     // <accel/cuda/stream.hpp>

/// The typed op each tag loads as on the CUDA backend.
template <class Op>
struct OpFor {
  using type = void;  // no such op on this backend
};
template <>
struct OpFor<ops::FusedAdam> {
  using type = FusedAdamOp;
};
template <>
struct OpFor<ops::CpuAdam> {
  using type = ops::HostFusedAdam;  // ZeRO-Offload's host optimizer, as on the CPU backend
};
template <>
struct OpFor<ops::TensorOps> {
  using type = TensorOpsOp;
};
template <>
struct OpFor<ops::RandomFill> {
  using type = RandomFillOp;
};

namespace detail {

/// The registry behind cuda::Ops, defined in <accel/cuda/ops.hpp>.
struct OpsImpl;

/// Whether <accel/cuda/ops.hpp> has been included (Impl is complete) where an op builder is asked for.
template <class Impl>
inline constexpr bool cuda_ops_defined = requires { sizeof(Impl); };

}  // namespace detail

#define ACCEL_CUDA_OPS_OPT_IN_MESSAGE                                                                              \
  "accel: the op builders are opt-in: #include <accel/op_builders.hpp> (or <accel/cuda/ops.hpp>) before calling " \
  "create_op_builder, get_op_builder, build_extension, op_names, op_table or launch_kernel"

/// accel::OpApi for the CUDA backend; accel::CudaBackend inherits these. Ops: fused_adam, tensor_ops
/// and random_fill (NVRTC), cpu_adam (the host compiler: ZeRO-Offload's CPU optimizer).
struct Ops {
  /// $ACCEL_KERNEL_DIR, else the ACCEL_KERNEL_DIR the CMake target defines (a directory).
  [[nodiscard]] static std::string op_builder_dir() { return ops::detail::kernel_dir_string(); }

  /// The backend's op table (ops/registry.hpp), built on first use.
  template <class Impl = detail::OpsImpl>
  [[nodiscard]] static const ops::detail::after_t<Impl, ops::Registry>& op_registry() {
    static_assert(detail::cuda_ops_defined<Impl>, ACCEL_CUDA_OPS_OPT_IN_MESSAGE);
    return Impl::registry();
  }

  /// A builder for "fused_adam"/"FusedAdamBuilder", ...; an unknown name throws InvalidArgumentError
  /// listing the backend's ops.
  template <class Impl = detail::OpsImpl>
  [[nodiscard]] static ops::detail::after_t<Impl, ops::OpBuilder> create_op_builder(std::string_view name) {
    static_assert(detail::cuda_ops_defined<Impl>, ACCEL_CUDA_OPS_OPT_IN_MESSAGE);
    return Impl::create_op_builder(name);
  }

  /// A builder for a user's own op (ops/launch.hpp): NVRTC for OpKind::cuda, the host compiler for
  /// OpKind::host (a host op runs on the host: call its functions; launch_kernel runs cuda kernels).
  template <class Spec, class Impl = detail::OpsImpl>
    requires std::is_same_v<std::remove_cvref_t<Spec>, ops::OpSpec>
  [[nodiscard]] static ops::detail::after_t<Impl, ops::OpBuilder> create_op_builder(const Spec& spec) {
    static_assert(detail::cuda_ops_defined<Impl>, ACCEL_CUDA_OPS_OPT_IN_MESSAGE);
    return Impl::create_op_builder_for(spec);
  }

  /// Launches a cuda kernel (ops/launch.hpp) on `s` with the argument struct at `args` (`bytes`
  /// bytes; the driver copies it now): cuLaunchKernel(grid, block, shape.shared_bytes). No host
  /// synchronisation; captured by a graph capture on `s`.
  template <class Impl = detail::OpsImpl>
  static void launch_kernel(ops::detail::after_t<Impl, StreamRef> s, const ops::Kernel& kernel,
                            const ops::LaunchShape& shape, const void* args, std::size_t bytes) {
    static_assert(detail::cuda_ops_defined<Impl>, ACCEL_CUDA_OPS_OPT_IN_MESSAGE);
    Impl::launch_kernel(s, kernel, shape, args, bytes);
  }
  /// The same with a trivially copyable argument struct.
  template <class Args, class Impl = detail::OpsImpl>
    requires(std::is_trivially_copyable_v<Args> && !std::is_pointer_v<Args>)
  static void launch_kernel(ops::detail::after_t<Impl, StreamRef> s, const ops::Kernel& kernel,
                            const ops::LaunchShape& shape, const Args& args) {
    static_assert(detail::cuda_ops_defined<Impl>, ACCEL_CUDA_OPS_OPT_IN_MESSAGE);
    Impl::launch_kernel(s, kernel, shape, &args, sizeof(Args));
  }

  /// The builder of op tag Op, whose load() returns the typed op (FusedAdamOp, TensorOpsOp, RandomFillOp,
  /// ops::HostFusedAdam for cpu_adam).
  template <class Op, class Impl = detail::OpsImpl>
  [[nodiscard]] static ops::detail::after_t<Impl, ops::TypedOpBuilder<typename OpFor<Op>::type>> get_op_builder() {
    static_assert(!std::is_void_v<typename OpFor<Op>::type>,
                  "accel::cuda::Ops::get_op_builder<Op>: the CUDA backend has no such op (it offers ops::FusedAdam, "
                  "ops::CpuAdam, ops::TensorOps, ops::RandomFill)");
    static_assert(detail::cuda_ops_defined<Impl>, ACCEL_CUDA_OPS_OPT_IN_MESSAGE);
    return ops::TypedOpBuilder<typename OpFor<Op>::type>(Impl::create_op_builder(Op::name));
  }

  /// The compile create_op_builder(name) would run.
  template <class Impl = detail::OpsImpl>
  [[nodiscard]] static ops::detail::after_t<Impl, ops::BuildCommand> build_extension(std::string_view name) {
    static_assert(detail::cuda_ops_defined<Impl>, ACCEL_CUDA_OPS_OPT_IN_MESSAGE);
    return Impl::create_op_builder(name).build_command();
  }

  /// fused_adam, cpu_adam, tensor_ops, random_fill.
  template <class Impl = detail::OpsImpl>
  [[nodiscard]] static std::vector<std::string> op_names() {
    static_assert(detail::cuda_ops_defined<Impl>, ACCEL_CUDA_OPS_OPT_IN_MESSAGE);
    return Impl::op_names();
  }

  /// DeepSpeed's ds_report rows: is each op compatible here (and why not), is it cached.
  template <class Impl = detail::OpsImpl>
  [[nodiscard]] static ops::detail::after_t<Impl, std::vector<ops::OpStatus>> op_table() {
    static_assert(detail::cuda_ops_defined<Impl>, ACCEL_CUDA_OPS_OPT_IN_MESSAGE);
    return Impl::op_table();
  }
};

}  // namespace accel::cuda

#undef ACCEL_CUDA_OPS_OPT_IN_MESSAGE
