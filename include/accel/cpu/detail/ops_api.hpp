// accel/cpu/detail/ops_api.hpp — accel::cpu::Ops: the CPU backend's OpApi members, without the machinery.
//
// accel::CpuBackend inherits these; they are backend/op_builder_api.hpp's, over what differs here: the
// typed op each tag loads as, and the two compile errors' wording. The op builders themselves — the
// types, the registry, the host-compiler toolchain, the JIT cache, the typed ops FusedAdamOp and
// TensorOpsOp — are opt-in: they are defined in <accel/cpu/ops.hpp> (cpu::detail::OpsImpl), which
// <accel/op_builders.hpp> includes; a call without it is a compile error that says which header to add.
// op_builder_dir() needs nothing more and works everywhere. Ops: fused_adam (FusedAdamBuilder),
// cpu_adam (CPUAdamBuilder: the same kernel under DeepSpeed's CPU name) and tensor_ops
// (TensorOpsBuilder), all OpKind::host; a user's own op must be OpKind::host (the host compiler), and
// launch_kernel runs its entry on the stream's worker (inline on the default stream).
#pragma once

#include <accel/backend/op_builder_api.hpp>

#include <type_traits>

namespace accel::ops {
struct FusedAdam;
struct CpuAdam;
struct TensorOps;
}  // namespace accel::ops

namespace accel::cpu {

class StreamRef;    // <accel/cpu/stream.hpp>
class FusedAdamOp;  // <accel/cpu/ops.hpp>
class TensorOpsOp;  // <accel/cpu/ops.hpp>

/// The typed op each tag loads as on the CPU backend.
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
  using type = FusedAdamOp;
};
template <>
struct OpFor<ops::TensorOps> {
  using type = TensorOpsOp;
};

namespace detail {

/// The registry and the typed ops behind cpu::Ops, defined in <accel/cpu/ops.hpp>.
struct OpsImpl;

/// What OpBuilderApi takes from the CPU backend (backend/op_builder_api.hpp).
struct OpsTraits {
  using Impl = OpsImpl;
  using StreamRef = cpu::StreamRef;
  template <class Op>
  using op_for = typename OpFor<Op>::type;

  template <class I>
  struct RequireOps {
    static_assert(accel::detail::ops_impl_defined<I>,
                  "accel: the op builders are opt-in: #include <accel/op_builders.hpp> (or <accel/cpu/ops.hpp>) "
                  "before calling create_op_builder, get_op_builder, build_extension, op_names, op_table or "
                  "launch_kernel");
  };
  template <class Op>
  struct RequireOp {
    static_assert(!std::is_void_v<op_for<Op>>,
                  "accel::cpu::Ops::get_op_builder<Op>: the CPU backend has no such op (it offers ops::FusedAdam, "
                  "ops::CpuAdam, ops::TensorOps)");
  };
};

}  // namespace detail

/// accel::OpApi for the CPU backend; accel::CpuBackend inherits these.
using Ops = OpBuilderApi<detail::OpsTraits>;

}  // namespace accel::cpu
