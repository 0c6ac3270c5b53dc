// accel/concepts/ops.hpp — OpApi: DeepSpeed's op builders, on every backend.
//
// For `const B b` and a run-time name n ("fused_adam", or DeepSpeed's class name "FusedAdamBuilder"):
//   b.op_builder_dir() -> std::filesystem::path   where the kernel sources live: $ACCEL_KERNEL_DIR, else
//                                                 the ACCEL_KERNEL_DIR the CMake target defines
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
// A builder's is_compatible(), build_command(), load() and is_cached() are described in
// ops/op_builder.hpp; every backend offers fused_adam, cpu_adam and tensor_ops.
#pragma once

#include <concepts>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

// Declared only: a generic engine that names the concept does not pay for the op machinery; the
// backends include ops/op_builder.hpp and ops/registry.hpp themselves.
namespace accel::ops {
class OpBuilder;
struct BuildCommand;
struct OpStatus;
struct FusedAdam;
struct TensorOps;
}  // namespace accel::ops

namespace accel {

template <class B>
concept OpApi = requires(const B b, std::string_view name) {
  { b.op_builder_dir() } -> std::same_as<std::filesystem::path>;
  { b.create_op_builder(name) } -> std::same_as<ops::OpBuilder>;
  { b.template get_op_builder<ops::FusedAdam>() } -> std::derived_from<ops::OpBuilder>;
  { b.template get_op_builder<ops::TensorOps>() } -> std::derived_from<ops::OpBuilder>;
  { b.build_extension(name) } -> std::same_as<ops::BuildCommand>;
  { b.op_names() } -> std::same_as<std::vector<std::string>>;
  { b.op_table() } -> std::same_as<std::vector<ops::OpStatus>>;
};

}  // namespace accel
