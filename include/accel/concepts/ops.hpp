// accel/concepts/ops.hpp — OpApi: DeepSpeed's op builders, on every backend.
//
// For `const B b` and a run-time name n ("fused_adam", or DeepSpeed's class name "FusedAdamBuilder"):
//   b.op_builder_dir() -> std::string             the directory the kernel sources live in: $ACCEL_KERNEL_DIR,
//                                                 else the ACCEL_KERNEL_DIR the CMake target defines
//                                                 (DeepSpeed's op_builder_dir() is a string too)
//   b.create_op_builder(n) -> ops::OpBuilder      a builder for op n; an unknown name throws
//                                                 InvalidArgumentError listing the backend's ops (never a
//                                                 null builder, never a builder that fails at load())
//   b.template get_op_builder<Op>()               the builder of op tag Op (ops::FusedAdam, ops::CpuAdam,
//                                                 ops::TensorOps), chosen at compile time; an
//                                                 ops::TypedOpBuilder whose load() returns the backend's
//                                                 typed op (B's FusedAdamOp, TensorOpsOp); an op the
//                                                 backend lacks is a compile error
//   b.build_extension(n) -> ops::BuildCommand     the compile the builder would run (command line or
//                                                 NVRTC options, architecture, cache key and entry)
//   b.op_names() -> std::vector<std::string>      the backend's ops, in table order
//   b.op_table() -> std::vector<ops::OpStatus>    ds_report's table: compatible (with reasons), cached
//   b.create_op_builder(spec) -> ops::OpBuilder   a builder for a user's own op (an ops::OpSpec), with the
//                                                 backend's toolchain for spec.kind; a kind the backend
//                                                 does not build throws InvalidArgumentError
//   b.launch_kernel(s, kernel, shape, args, bytes)   runs one entry point of a loaded op (ops::Kernel)
//                                                 on stream s with `bytes` bytes of arguments (copied at
//                                                 the call); b.launch_kernel(s, kernel, shape, args_struct)
//                                                 the same for a trivially copyable struct (ops/launch.hpp)
// A builder's is_compatible(), build_command(), load() and is_cached() are described in
// ops/op_builder.hpp; every backend offers fused_adam, cpu_adam and tensor_ops.
#pragma once

#include <concepts>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

// Declared only: a generic engine that names the concept does not pay for the op machinery (nor for
// <filesystem>); the op builders are opt-in (<accel/op_builders.hpp>). The requirements below name the
// result types through decltype, which does not need them complete.
namespace accel::ops {
class OpBuilder;     // incomplete here? the op builders are opt-in: #include <accel/op_builders.hpp>
struct BuildCommand;  // incomplete here? the op builders are opt-in: #include <accel/op_builders.hpp>
struct OpStatus;      // incomplete here? the op builders are opt-in: #include <accel/op_builders.hpp>
struct OpSpec;
struct LaunchShape;
class Kernel;
struct FusedAdam;
struct TensorOps;
}  // namespace accel::ops

namespace accel {

namespace detail {
// launch_kernel takes the backend's StreamRef: checked where B has stream types (a backend; the
// backends' Ops parts are also checked on their own, before they are combined with their streams).
template <class B>
concept LaunchesOnItsStreams =
    !requires { typename B::StreamRef; } ||
    requires(const B b, typename B::StreamRef s, const ops::Kernel& kernel, const ops::LaunchShape& shape,
             const void* args, std::size_t bytes) { b.launch_kernel(s, kernel, shape, args, bytes); };
}  // namespace detail

template <class B>
concept OpApi = requires(const B b, std::string_view name) {
  { b.op_builder_dir() } -> std::same_as<std::string>;
  requires std::same_as<decltype(b.create_op_builder(name)), ops::OpBuilder>;
  // The typed builder derives from ops::OpBuilder (checked where <accel/op_builders.hpp> defines them).
  typename std::type_identity<decltype(b.template get_op_builder<ops::FusedAdam>())>;
  typename std::type_identity<decltype(b.template get_op_builder<ops::TensorOps>())>;
  requires std::same_as<decltype(b.build_extension(name)), ops::BuildCommand>;
  { b.op_names() } -> std::same_as<std::vector<std::string>>;
  requires std::same_as<decltype(b.op_table()), std::vector<ops::OpStatus>>;
} && requires(const B b, const ops::OpSpec& spec) {
  requires std::same_as<decltype(b.create_op_builder(spec)), ops::OpBuilder>;
} && detail::LaunchesOnItsStreams<B>;

}  // namespace accel
