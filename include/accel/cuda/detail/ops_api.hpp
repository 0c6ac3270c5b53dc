// accel/cuda/detail/ops_api.hpp — accel::cuda::Ops: the CUDA backend's OpApi members, without the machinery.
//
// The same shape as the CPU side (cpu/detail/ops_api.hpp): accel::CudaBackend inherits these; they are
// backend/op_builder_api.hpp's, over what differs here: the typed op each tag loads as, and the two
// compile errors' wording. The op builders themselves — the registry, the NVRTC and host-compiler
// toolchains, the JIT cache, the typed ops FusedAdamOp and TensorOpsOp — are opt-in: they are defined in
// <accel/cuda/ops.hpp> (cuda::detail::OpsImpl), which <accel/op_builders.hpp> includes; a call without
// it is a compile error that says which header to add. (The random fills, which cuda::Random needs
// everywhere, load through cuda/detail/random_fill.hpp instead.) Ops: fused_adam, tensor_ops and
// random_fill (NVRTC), cpu_adam (the host compiler: ZeRO-Offload's CPU optimizer). A user's own op:
// NVRTC for OpKind::cuda, the host compiler for OpKind::host (a host op runs on the host: call its
// functions; launch_kernel runs cuda kernels, cuLaunchKernel with no host synchronisation).
#pragma once

#include <accel/backend/op_builder_api.hpp>

#include <type_traits>

namespace accel::ops {
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

/// What OpBuilderApi takes from the CUDA backend (backend/op_builder_api.hpp).
struct OpsTraits {
  using Impl = OpsImpl;
  using StreamRef = cuda::StreamRef;
  template <class Op>
  using op_for = typename OpFor<Op>::type;

  template <class I>
  struct RequireOps {
    static_assert(accel::detail::ops_impl_defined<I>,
                  "accel: the op builders are opt-in: #include <accel/op_builders.hpp> (or <accel/cuda/ops.hpp>) "
                  "before calling create_op_builder, get_op_builder, build_extension, op_names, op_table or "
                  "launch_kernel");
  };
  template <class Op>
  struct RequireOp {
    static_assert(!std::is_void_v<op_for<Op>>,
                  "accel::cuda::Ops::get_op_builder<Op>: the CUDA backend has no such op (it offers ops::FusedAdam, "
                  "ops::CpuAdam, ops::TensorOps, ops::RandomFill)");
  };
};

}  // namespace detail

/// accel::OpApi for the CUDA backend; accel::CudaBackend inherits these.
using Ops = OpBuilderApi<detail::OpsTraits>;

}  // namespace accel::cuda
