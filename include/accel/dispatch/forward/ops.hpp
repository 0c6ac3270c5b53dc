// accel/dispatch/forward/ops.hpp — OpApi (concepts/ops.hpp) of BasicAnyBackend<Bs...>.
//
// Opt-in like the backends' own (cpu/detail/ops_api.hpp): these compile where <accel/op_builders.hpp>
// is included (it defines the ops:: types); elsewhere a call is a compile error naming that header.
// op_type<T> is T, named dependently so that it need be complete only where a call instantiates it.
#pragma once

#include <accel/dispatch/any_stream.hpp>
#include <accel/dispatch/detail/forward.hpp>
#include <accel/ops/detail/kernel_dir.hpp>

#include <concepts>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace accel {

namespace ops {
class OpBuilder;
struct BuildCommand;
struct OpStatus;
struct OpSpec;
struct LaunchShape;
class Kernel;
}  // namespace ops

template <class... Bs>
struct AnyOpApi {
  template <class T>
  using op_type = ops::detail::after_t<AnyOpApi, T>;

  [[nodiscard]] std::string op_builder_dir() const {
    return detail::on_active(*this, [](auto b) { return b.op_builder_dir(); });
  }
  [[nodiscard]] op_type<ops::OpBuilder> create_op_builder(std::string_view name) const {
    return detail::on_active(*this, [&](auto b) { return b.create_op_builder(name); });
  }
  /// The active backend's builder for Op, as the common ops::OpBuilder (its load() gives an ops::LoadedOp);
  /// for the typed op, enter the concrete backend with accel::visit.
  template <class Op>
  [[nodiscard]] op_type<ops::OpBuilder> get_op_builder() const {
    return detail::on_active(*this, [](auto b) -> op_type<ops::OpBuilder> { return b.template get_op_builder<Op>(); });
  }
  [[nodiscard]] op_type<ops::BuildCommand> build_extension(std::string_view name) const {
    return detail::on_active(*this, [&](auto b) { return b.build_extension(name); });
  }
  [[nodiscard]] std::vector<std::string> op_names() const {
    return detail::on_active(*this, [](auto b) { return b.op_names(); });
  }
  [[nodiscard]] op_type<std::vector<ops::OpStatus>> op_table() const {
    return detail::on_active(*this, [](auto b) { return b.op_table(); });
  }
  /// A user's own op, built by the active backend's toolchain for spec.kind.
  template <class Spec>
    requires std::same_as<std::remove_cvref_t<Spec>, ops::OpSpec>
  [[nodiscard]] op_type<ops::OpBuilder> create_op_builder(const Spec& spec) const {
    return detail::on_active(*this, [&](auto b) -> op_type<ops::OpBuilder> { return b.create_op_builder(spec); });
  }
  // Launches go to the stream's backend, like memory and fills.
  template <class Kernel = ops::Kernel>
  void launch_kernel(const AnyStreamRef<Bs...>& s, const Kernel& kernel, const op_type<ops::LaunchShape>& shape,
                     const void* args, std::size_t bytes) const {
    detail::on_stream_backend(*this, s, [&](auto b, auto ref) { b.launch_kernel(ref, kernel, shape, args, bytes); });
  }
  template <class Args, class Kernel = ops::Kernel>
    requires(std::is_trivially_copyable_v<Args> && !std::is_pointer_v<Args>)
  void launch_kernel(const AnyStreamRef<Bs...>& s, const Kernel& kernel, const op_type<ops::LaunchShape>& shape,
                     const Args& args) const {
    detail::on_stream_backend(*this, s,
                              [&](auto b, auto ref) { b.launch_kernel(ref, kernel, shape, &args, sizeof(Args)); });
  }
};

}  // namespace accel
