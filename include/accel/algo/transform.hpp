// accel/algo/transform.hpp — accel::algo::transform: out[i] = op(in[i]) or out[i] = op(in1[i], in2[i]),
// in `stream` order.
//
//   transform(stream, in, out, op)          unary; out holds at least in.size() elements
//   transform(stream, in1, in2, out, op)    binary; in1 and in2 have the same size
// Ranges are Buffer<T, B> or DeviceSpan<T, B> of one backend B; element types may differ (a cast is
// a transform). `out` may be `in` itself (the same address and element size); any other overlap is an
// InvalidArgumentError, as are a too small `out` and mismatched inputs. On CudaBackend `op` runs on the
// device: a __host__ __device__ functor, a cuda::std functional, or an __device__ lambda
// (nvcc --extended-lambda). Only the first in.size() elements of `out` are written.
#pragma once

#include <accel/algo/detail/arguments.hpp>
#include <accel/algo/detail/backends.hpp>

#include <thrust/transform.h>

#include <concepts>
#include <utility>

namespace accel::algo {

template <detail::Range In, detail::OutputRange Out, class UnaryOp>
  requires std::same_as<detail::backend_t<In>, detail::backend_t<Out>>
void transform(detail::stream_t<Out> stream, In&& in, Out&& out, UnaryOp op) {
  using B = detail::backend_t<Out>;
  const auto i = detail::span_on("transform", stream, "in", in);
  const auto o = detail::span_on("transform", stream, "out", out);
  detail::require_capacity<B>("transform", stream, "out", o.size(), "in", i.size());
  detail::require_elementwise<B>("transform", stream, "out", o.data(), "in", i.data(), i.size());
  if (i.empty()) return;
  detail::Launcher<B>::run("transform", stream,
                           [in = i.data(), n = i.size(), out = o.data(), op = std::move(op)](auto& policy) {
                             thrust::transform(policy, in, in + n, out, op);
                           });
}

template <detail::Range In1, detail::Range In2, detail::OutputRange Out, class BinaryOp>
  requires std::same_as<detail::backend_t<In1>, detail::backend_t<Out>> &&
           std::same_as<detail::backend_t<In2>, detail::backend_t<Out>>
void transform(detail::stream_t<Out> stream, In1&& in1, In2&& in2, Out&& out, BinaryOp op) {
  using B = detail::backend_t<Out>;
  const auto a = detail::span_on("transform", stream, "in1", in1);
  const auto b = detail::span_on("transform", stream, "in2", in2);
  const auto o = detail::span_on("transform", stream, "out", out);
  detail::require_same_size<B>("transform", stream, "in1", a.size(), "in2", b.size());
  detail::require_capacity<B>("transform", stream, "out", o.size(), "in1", a.size());
  detail::require_elementwise<B>("transform", stream, "out", o.data(), "in1", a.data(), a.size());
  detail::require_elementwise<B>("transform", stream, "out", o.data(), "in2", b.data(), b.size());
  if (a.empty()) return;
  detail::Launcher<B>::run(
      "transform", stream,
      [in1 = a.data(), in2 = b.data(), n = a.size(), out = o.data(), op = std::move(op)](auto& policy) {
        thrust::transform(policy, in1, in1 + n, in2, out, op);
      });
}

}  // namespace accel::algo
