// accel/backend/op_builder_api.hpp — accel::OpBuilderApi<Traits>: OpApi (concepts/ops.hpp) without the
// machinery, one definition for every backend.
//
// A backend inherits it (through its Ops: `using Ops = accel::OpBuilderApi<detail::OpsTraits>;` in
// <backend>/detail/ops_api.hpp), so every translation unit that includes a backend parses this header;
// it only declares the op builder types (no <filesystem>, no ops/op_builder.hpp). The op builders
// themselves are opt-in: the backend's <backend>/ops.hpp, which <accel/op_builders.hpp> includes,
// defines its `detail::OpsImpl` (registry(), create_op_builder(name), create_op_builder_for(spec),
// launch_kernel(s, kernel, shape, args, bytes), op_names(), op_table()).
//
// Every member but op_builder_dir() is a template over Impl (the backend's OpsImpl, incomplete until
// that header is included): bodies and return types are instantiated only where they are called, so a
// program that never builds an op pays for none of it, and a call without the header is a compile error
// that names it. What differs per backend comes from Traits:
//   using Impl = <backend>::detail::OpsImpl;           declared only
//   using StreamRef = <backend>::StreamRef;            what launch_kernel takes (may be incomplete here)
//   template <class Op> using op_for = ...;            the typed op tag Op loads as (void: none)
//   template <class I> struct RequireOps;             static_assert(accel::detail::ops_impl_defined<I>,
//                                                      "<the opt-in message, naming the headers>")
//   template <class Op> struct RequireOp;             static_assert(op_for<Op> is not void,
//                                                      "<the backend has no such op; it offers ...>")
// (the messages stay in the backend's own header: a static_assert message is a string literal; each
// member names its check's class first, so that its message is the first diagnostic). No
// member alias here: the backend derives from several facades, and a StreamRef of ours would clash.
#pragma once

#include <accel/concepts/ops.hpp>  // declares the op builder types (OpBuilder, BuildCommand, OpStatus, ...)
#include <accel/ops/detail/kernel_dir.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace accel::ops {
template <class Loaded>
class TypedOpBuilder;  // incomplete here? the op builders are opt-in: #include <accel/op_builders.hpp>
class Registry;
}  // namespace accel::ops

namespace accel {

namespace detail {
/// Whether a backend's OpsImpl is defined (its ops header included) where an op builder is asked for.
template <class Impl>
inline constexpr bool ops_impl_defined = requires { sizeof(Impl); };
}  // namespace detail

template <class Traits>
struct OpBuilderApi {
  /// $ACCEL_KERNEL_DIR, else the ACCEL_KERNEL_DIR the CMake target defines (a directory).
  [[nodiscard]] static std::string op_builder_dir() { return ops::detail::kernel_dir_string(); }

  /// The backend's op table (ops/registry.hpp), built on first use.
  template <class Impl = typename Traits::Impl>
  [[nodiscard]] static const ops::detail::after_t<Impl, ops::Registry>& op_registry() {
    (void)sizeof(typename Traits::template RequireOps<Impl>);
    return Impl::registry();
  }

  /// A builder for "fused_adam"/"FusedAdamBuilder", ...; an unknown name throws InvalidArgumentError
  /// listing the backend's ops.
  template <class Impl = typename Traits::Impl>
  [[nodiscard]] static ops::detail::after_t<Impl, ops::OpBuilder> create_op_builder(std::string_view name) {
    (void)sizeof(typename Traits::template RequireOps<Impl>);
    return Impl::create_op_builder(name);
  }

  /// A builder for a user's own op (ops/launch.hpp), with the backend's toolchain for spec.kind; a kind
  /// the backend does not build throws InvalidArgumentError.
  template <class Spec, class Impl = typename Traits::Impl>
    requires std::is_same_v<std::remove_cvref_t<Spec>, ops::OpSpec>
  [[nodiscard]] static ops::detail::after_t<Impl, ops::OpBuilder> create_op_builder(const Spec& spec) {
    (void)sizeof(typename Traits::template RequireOps<Impl>);
    return Impl::create_op_builder_for(spec);
  }

  /// Runs one entry point of a loaded op (ops/launch.hpp) in `s`'s order with the `bytes` bytes at
  /// `args` (copied at the call): CPU, entry(args, shape.threads) on the stream's worker; CUDA,
  /// cuLaunchKernel on the stream (captured by a graph capture on it).
  template <class Impl = typename Traits::Impl>
  static void launch_kernel(ops::detail::after_t<Impl, typename Traits::StreamRef> s, const ops::Kernel& kernel,
                            const ops::LaunchShape& shape, const void* args, std::size_t bytes) {
    (void)sizeof(typename Traits::template RequireOps<Impl>);
    Impl::launch_kernel(s, kernel, shape, args, bytes);
  }
  /// The same with a trivially copyable argument struct.
  template <class Args, class Impl = typename Traits::Impl>
    requires(std::is_trivially_copyable_v<Args> && !std::is_pointer_v<Args>)
  static void launch_kernel(ops::detail::after_t<Impl, typename Traits::StreamRef> s, const ops::Kernel& kernel,
                            const ops::LaunchShape& shape, const Args& args) {
    (void)sizeof(typename Traits::template RequireOps<Impl>);
    Impl::launch_kernel(s, kernel, shape, &args, sizeof(Args));
  }

  /// The builder of op tag Op, whose load() returns the backend's typed op (Traits::op_for<Op>).
  template <class Op, class Impl = typename Traits::Impl>
  [[nodiscard]] static ops::detail::after_t<Impl, ops::TypedOpBuilder<typename Traits::template op_for<Op>>>
  get_op_builder() {
    (void)sizeof(typename Traits::template RequireOp<Op>);
    (void)sizeof(typename Traits::template RequireOps<Impl>);
    return ops::TypedOpBuilder<typename Traits::template op_for<Op>>(Impl::create_op_builder(Op::name));
  }

  /// The compile create_op_builder(name) would run.
  template <class Impl = typename Traits::Impl>
  [[nodiscard]] static ops::detail::after_t<Impl, ops::BuildCommand> build_extension(std::string_view name) {
    (void)sizeof(typename Traits::template RequireOps<Impl>);
    return Impl::create_op_builder(name).build_command();
  }

  /// The backend's ops, in table order.
  template <class Impl = typename Traits::Impl>
  [[nodiscard]] static std::vector<std::string> op_names() {
    (void)sizeof(typename Traits::template RequireOps<Impl>);
    return Impl::op_names();
  }

  /// DeepSpeed's ds_report rows: is each op compatible here (and why not), is it cached.
  template <class Impl = typename Traits::Impl>
  [[nodiscard]] static ops::detail::after_t<Impl, std::vector<ops::OpStatus>> op_table() {
    (void)sizeof(typename Traits::template RequireOps<Impl>);
    return Impl::op_table();
  }
};

}  // namespace accel
