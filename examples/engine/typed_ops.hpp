// typed_ops.hpp — the engine's fused AdamW and tensor ops (fill, cast, L2 norm): the backend's typed
// ops from b.get_op_builder<Op>().load().
//
// On a concrete backend these are its own types (cpu::FusedAdamOp, cuda::FusedAdamOp, ...). Through
// AnyBackend, get_op_builder returns the untyped builder (dispatch/any_backend.hpp: "for the typed op,
// enter the concrete backend with accel::visit"), so the AnyBackend form below holds the active
// backend's typed ops in a variant and forwards each call to the alternative the stream belongs to —
// what lets Engine<AnyBackend> run the same code as Engine<CpuBackend>.
#pragma once

#include <accel/accel.hpp>
#include <accel/ops.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <variant>

namespace engine {

template <class B>
class TypedOps {
 public:
  using StreamRef = typename B::StreamRef;

  explicit TypedOps(B b)
      : adam_(b.template get_op_builder<accel::ops::FusedAdam>().load()),
        tensor_(b.template get_op_builder<accel::ops::TensorOps>().load()) {}

  /// Host ops: OpenMP threads (CUDA ops take their launch shapes from the device instead).
  void set_num_threads(int n) {
    if constexpr (requires { adam_.set_num_threads(n); }) adam_.set_num_threads(n);
    if constexpr (requires { tensor_.set_num_threads(n); }) tensor_.set_num_threads(n);
  }
  void adam(StreamRef s, std::span<const accel::ops::AdamTensor> t, const accel::ops::AdamOptions& o, std::int64_t step,
            const accel::ops::AdamDtypes& d) const {
    adam_.step(s, t, o, step, d);
  }
  void fill(StreamRef s, void* p, accel::Dtype d, std::int64_t n, float v) const { tensor_.fill(s, p, d, n, v); }
  void cast(StreamRef s, void* dst, accel::Dtype dd, const void* src, accel::Dtype sd, std::int64_t n) const {
    tensor_.cast(s, dst, dd, src, sd, n);
  }
  void scale(StreamRef s, void* dst, accel::Dtype dd, const void* src, accel::Dtype sd, std::int64_t n, float f) const {
    tensor_.scale(s, dst, dd, src, sd, n, f);
  }
  void l2norm(StreamRef s, std::span<const accel::ops::TensorRef> t, float* total, float* per_tensor = nullptr) const {
    tensor_.l2norm(s, t, total, per_tensor);
  }

 private:
  decltype(std::declval<B>().template get_op_builder<accel::ops::FusedAdam>().load()) adam_;
  decltype(std::declval<B>().template get_op_builder<accel::ops::TensorOps>().load()) tensor_;
};

template <class... Bs>
class TypedOps<accel::BasicAnyBackend<Bs...>> {
  using Any = accel::BasicAnyBackend<Bs...>;

 public:
  using StreamRef = typename Any::StreamRef;

  explicit TypedOps(Any b)
      : ops_(accel::visit(b, [](auto concrete) -> std::variant<TypedOps<Bs>...> {
          return std::variant<TypedOps<Bs>...>(std::in_place_type<TypedOps<decltype(concrete)>>, concrete);
        })) {}

  void set_num_threads(int n) {
    std::visit([&](auto& o) { o.set_num_threads(n); }, ops_);
  }
  void adam(StreamRef s, std::span<const accel::ops::AdamTensor> t, const accel::ops::AdamOptions& o, std::int64_t step,
            const accel::ops::AdamDtypes& d) const {
    on(s, [&](const auto& ops, auto ref) { ops.adam(ref, t, o, step, d); });
  }
  void fill(StreamRef s, void* p, accel::Dtype d, std::int64_t n, float v) const {
    on(s, [&](const auto& ops, auto ref) { ops.fill(ref, p, d, n, v); });
  }
  void cast(StreamRef s, void* dst, accel::Dtype dd, const void* src, accel::Dtype sd, std::int64_t n) const {
    on(s, [&](const auto& ops, auto ref) { ops.cast(ref, dst, dd, src, sd, n); });
  }
  void scale(StreamRef s, void* dst, accel::Dtype dd, const void* src, accel::Dtype sd, std::int64_t n, float f) const {
    on(s, [&](const auto& ops, auto ref) { ops.scale(ref, dst, dd, src, sd, n, f); });
  }
  void l2norm(StreamRef s, std::span<const accel::ops::TensorRef> t, float* total, float* per_tensor = nullptr) const {
    on(s, [&](const auto& ops, auto ref) { ops.l2norm(ref, t, total, per_tensor); });
  }

 private:
  // The ops and the stream must be of the same backend (the Trainer's stream is the backend's); the
  // alternatives are matched by position, as AnyBackend matches them (two backends may share types).
  template <class F>
  void on(StreamRef s, F&& f) const {
    accel::detail::visit_indexed(ops_, [&](auto i, const auto& ops) { f(ops, std::get<i()>(s.variant())); });
  }

  std::variant<TypedOps<Bs>...> ops_;
};

}  // namespace engine
