// accel/cpu/detail/ops_api.hpp — accel::cpu::Ops: the CPU backend's OpApi members, without the machinery.
//
// accel::CpuBackend inherits these, so every translation unit that includes the backend parses this
// header; it only declares the op builder types (no <filesystem>, no ops/op_builder.hpp). The op
// builders themselves — the types, the registry, the host-compiler toolchain, the JIT cache, the typed
// ops FusedAdamOp and TensorOpsOp — are opt-in: they are defined in <accel/cpu/ops.hpp>, which
// <accel/op_builders.hpp> includes.
//
// create_op_builder, get_op_builder<Op>, build_extension, op_names and op_table are templates whose
// bodies (and return types) are instantiated only where they are called: a program that never builds
// an op pays for none of it, and a call without <accel/op_builders.hpp> is a compile error that says which
// header to add. op_builder_dir() needs nothing more and works everywhere.
#pragma once

#include <accel/ops/detail/kernel_dir.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace accel::ops {
class OpBuilder;     // incomplete here? the op builders are opt-in: #include <accel/op_builders.hpp>
struct BuildCommand;  // incomplete here? the op builders are opt-in: #include <accel/op_builders.hpp>
struct OpStatus;      // incomplete here? the op builders are opt-in: #include <accel/op_builders.hpp>
struct OpSpec;
struct LaunchShape;
class Kernel;
template <class Loaded>
class TypedOpBuilder;  // incomplete here? the op builders are opt-in: #include <accel/op_builders.hpp>
class Registry;
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

/// Whether <accel/cpu/ops.hpp> has been included (Impl is complete) where an op builder is asked for.
template <class Impl>
inline constexpr bool ops_defined = requires { sizeof(Impl); };

}  // namespace detail

#define ACCEL_CPU_OPS_OPT_IN_MESSAGE                                                                     \
  "accel: the op builders are opt-in: #include <accel/op_builders.hpp> (or <accel/cpu/ops.hpp>) before calling " \
  "create_op_builder, get_op_builder, build_extension, op_names, op_table or launch_kernel"

/// accel::OpApi for the CPU backend; accel::CpuBackend inherits these. Ops: fused_adam
/// (FusedAdamBuilder), cpu_adam (CPUAdamBuilder: the same kernel under DeepSpeed's CPU name) and
/// tensor_ops (TensorOpsBuilder), all OpKind::host.
struct Ops {
  /// $ACCEL_KERNEL_DIR, else the ACCEL_KERNEL_DIR the CMake target defines (a directory).
  [[nodiscard]] static std::string op_builder_dir() { return ops::detail::kernel_dir_string(); }

  /// The backend's op table (ops/registry.hpp), built on first use.
  template <class Impl = detail::OpsImpl>
  [[nodiscard]] static const ops::detail::after_t<Impl, ops::Registry>& op_registry() {
    static_assert(detail::ops_defined<Impl>, ACCEL_CPU_OPS_OPT_IN_MESSAGE);
    return Impl::registry();
  }

  /// A builder for "fused_adam"/"FusedAdamBuilder", ...; an unknown name throws InvalidArgumentError
  /// listing the backend's ops.
  template <class Impl = detail::OpsImpl>
  [[nodiscard]] static ops::detail::after_t<Impl, ops::OpBuilder> create_op_builder(std::string_view name) {
    static_assert(detail::ops_defined<Impl>, ACCEL_CPU_OPS_OPT_IN_MESSAGE);
    return Impl::create_op_builder(name);
  }

  /// A builder for a user's own op (ops/launch.hpp): spec.kind must be OpKind::host, built with the
  /// host compiler; another kind throws InvalidArgumentError.
  template <class Spec, class Impl = detail::OpsImpl>
    requires std::is_same_v<std::remove_cvref_t<Spec>, ops::OpSpec>
  [[nodiscard]] static ops::detail::after_t<Impl, ops::OpBuilder> create_op_builder(const Spec& spec) {
    static_assert(detail::ops_defined<Impl>, ACCEL_CPU_OPS_OPT_IN_MESSAGE);
    return Impl::create_op_builder_for(spec);
  }

  /// Runs a host kernel (ops/launch.hpp) in `s`'s order with a copy of `bytes` bytes at `args`:
  /// entry(args, shape.threads) on the stream's worker (inline on the default stream).
  template <class Impl = detail::OpsImpl>
  static void launch_kernel(ops::detail::after_t<Impl, StreamRef> s, const ops::Kernel& kernel,
                            const ops::LaunchShape& shape, const void* args, std::size_t bytes) {
    static_assert(detail::ops_defined<Impl>, ACCEL_CPU_OPS_OPT_IN_MESSAGE);
    Impl::launch_kernel(s, kernel, shape, args, bytes);
  }
  /// The same with a trivially copyable argument struct.
  template <class Args, class Impl = detail::OpsImpl>
    requires(std::is_trivially_copyable_v<Args> && !std::is_pointer_v<Args>)
  static void launch_kernel(ops::detail::after_t<Impl, StreamRef> s, const ops::Kernel& kernel,
                            const ops::LaunchShape& shape, const Args& args) {
    static_assert(detail::ops_defined<Impl>, ACCEL_CPU_OPS_OPT_IN_MESSAGE);
    Impl::launch_kernel(s, kernel, shape, &args, sizeof(Args));
  }

  /// The builder of op tag Op, whose load() returns the typed op (FusedAdamOp, TensorOpsOp).
  template <class Op, class Impl = detail::OpsImpl>
  [[nodiscard]] static ops::detail::after_t<Impl, ops::TypedOpBuilder<typename OpFor<Op>::type>> get_op_builder() {
    static_assert(!std::is_void_v<typename OpFor<Op>::type>,
                  "accel::cpu::Ops::get_op_builder<Op>: the CPU backend has no such op (it offers ops::FusedAdam, "
                  "ops::CpuAdam, ops::TensorOps)");
    static_assert(detail::ops_defined<Impl>, ACCEL_CPU_OPS_OPT_IN_MESSAGE);
    return ops::TypedOpBuilder<typename OpFor<Op>::type>(Impl::create_op_builder(Op::name));
  }

  /// The compile create_op_builder(name) would run.
  template <class Impl = detail::OpsImpl>
  [[nodiscard]] static ops::detail::after_t<Impl, ops::BuildCommand> build_extension(std::string_view name) {
    static_assert(detail::ops_defined<Impl>, ACCEL_CPU_OPS_OPT_IN_MESSAGE);
    return Impl::create_op_builder(name).build_command();
  }

  /// fused_adam, cpu_adam, tensor_ops.
  template <class Impl = detail::OpsImpl>
  [[nodiscard]] static std::vector<std::string> op_names() {
    static_assert(detail::ops_defined<Impl>, ACCEL_CPU_OPS_OPT_IN_MESSAGE);
    return Impl::op_names();
  }

  /// DeepSpeed's ds_report rows: is each op compatible here (and why not), is it cached.
  template <class Impl = detail::OpsImpl>
  [[nodiscard]] static ops::detail::after_t<Impl, std::vector<ops::OpStatus>> op_table() {
    static_assert(detail::ops_defined<Impl>, ACCEL_CPU_OPS_OPT_IN_MESSAGE);
    return Impl::op_table();
  }
};

}  // namespace accel::cpu

#undef ACCEL_CPU_OPS_OPT_IN_MESSAGE
