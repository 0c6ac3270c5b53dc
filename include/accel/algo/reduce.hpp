// accel/algo/reduce.hpp — accel::algo::reduce and reduce_sync: init op in[0] op in[1] op ... (op
// defaults to +), like std::reduce.
//
// A reduction's value lives on the device until someone waits for it, as torch's `x.sum()` is a device
// tensor until `.item()`. So reduce has two asynchronous forms and one blocking form:
//   reduce(stream, in, out[, init[, op]])   writes the result to out[0] in `stream` order (out: a
//                                           Buffer or DeviceSpan of B with at least one element, not
//                                           overlapping `in`); returns at once
//   reduce(stream, in[, init[, op]])        the same into a new one-element Buffer<T, B> allocated on
//                                           `stream`, returned at once (torch's `x.sum()`)
//   reduce_sync(stream, in[, init[, op]])   BLOCKS: enqueues the reduction, copies the result to the
//                                           host, synchronizes `stream` (like `.item()`: it waits for
//                                           everything enqueued on the stream before it, and rethrows
//                                           a pending task failure of the stream as TaskError)
// The result type T is the type of `init` (default: the element type, value-initialised), as in
// std::reduce: reduce(stream, bytes, std::int64_t{0}) sums uint8 elements without overflow. `op` must
// be associative and commutative (the grouping is unspecified; floating-point sums may differ in the
// last bits from a sequential loop). An empty range gives `init`. On CudaBackend `op` runs on the device
// (cub::DeviceReduce: a __host__ __device__ functor or a cuda::std functional).
#pragma once

#include <accel/algo/detail/arguments.hpp>
#include <accel/algo/detail/backends.hpp>
#include <accel/memory/buffer.hpp>

#include <thrust/reduce.h>

#include <cuda/std/functional>

#include <concepts>
#include <cstddef>
#include <type_traits>
#include <utility>

#include <accel/algo/detail/cpu_reduce.hpp>
#if defined(__CUDACC__) && defined(ACCEL_HAS_CUDA)
#include <accel/algo/detail/cuda_reduce.cuh>
#endif

namespace accel::algo {

namespace detail {

/// Any other backend: Thrust's reduce inside the backend's launcher. (CpuBackend: cpu_reduce.hpp;
/// CudaBackend: cuda_reduce.cuh.)
template <class B>
struct Reducer {
  template <class T, class U, class Init, class Op>
  static void reduce(const char* algorithm, typename B::StreamRef stream, const T* in, std::size_t n, U* out,
                     Init init, Op op) {
    Launcher<B>::run(algorithm, stream, [in, n, out, init = std::move(init), op = std::move(op)](auto& policy) {
      *out = thrust::reduce(policy, in, in + n, init, op);
    });
  }
};

}  // namespace detail

/// Asynchronous: out[0] = the reduction of `in`, in `stream` order.
template <detail::Range In, detail::OutputRange Out, class T = detail::value_t<In>,
          class BinaryOp = ::cuda::std::plus<>>
  requires std::same_as<detail::backend_t<In>, detail::backend_t<Out>>
void reduce(detail::stream_t<In> stream, In&& in, Out&& out, T init = T{}, BinaryOp op = {}) {
  using B = detail::backend_t<In>;
  const auto i = detail::span_on("reduce", stream, "in", in);
  const auto o = detail::span_on("reduce", stream, "out", out);
  if (o.empty()) [[unlikely]] {
    detail::invalid<B>("reduce", stream, "out is empty: the result needs 1 element");
  }
  detail::require_no_overlap<B>("reduce", stream, "out", o.data(), sizeof(*o.data()), 1, "in", i.data(),
                                sizeof(*i.data()), i.size(), false);
  detail::Reducer<B>::reduce("reduce", stream, i.data(), i.size(), o.data(), std::move(init), std::move(op));
}

/// Asynchronous: a new one-element Buffer<T, B> (allocated on `stream`) that will hold the reduction
/// of `in` once `stream` has run the work.
template <detail::Range In, class T = detail::value_t<In>, class BinaryOp = ::cuda::std::plus<>>
  requires(!detail::Range<T>)
[[nodiscard]] Buffer<T, detail::backend_t<In>> reduce(detail::stream_t<In> stream, In&& in, T init = T{},
                                                      BinaryOp op = {}) {
  Buffer<T, detail::backend_t<In>> result(1, stream);
  algo::reduce(stream, std::forward<In>(in), result, std::move(init), std::move(op));
  return result;
}

/// Blocking: the reduction of `in`, after synchronizing `stream` (see the top of this header).
template <detail::Range In, class T = detail::value_t<In>, class BinaryOp = ::cuda::std::plus<>>
  requires(!detail::Range<T>)
[[nodiscard]] T reduce_sync(detail::stream_t<In> stream, In&& in, T init = T{}, BinaryOp op = {}) {
  static_assert(std::is_trivially_copyable_v<T> && std::is_default_constructible_v<T>,
                "accel::algo::reduce_sync: the result type must be trivially copyable and default constructible");
  using B = detail::backend_t<In>;
  Buffer<T, B> result(1, stream);
  algo::reduce(stream, std::forward<In>(in), result, std::move(init), std::move(op));
  T value{};
  B{}.copy_async(stream, &value, result.data(), sizeof(T));
  stream.synchronize();
  return value;
}

}  // namespace accel::algo
