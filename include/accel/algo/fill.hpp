// accel/algo/fill.hpp — accel::algo::fill(stream, out, value): every element of `out` becomes `value`,
// in `stream` order.
//
// `out` is a Buffer<T, B> or a DeviceSpan<T, B>; `stream` is B's stream (asynchronous: read the result
// after synchronizing the stream or waiting on an event recorded after the call). B = CpuBackend: any
// compiler; B = CudaBackend: translation units compiled by nvcc (see algo/algo.hpp).
#pragma once

#include <accel/algo/detail/arguments.hpp>
#include <accel/algo/detail/backends.hpp>

#include <thrust/fill.h>

namespace accel::algo {

template <detail::OutputRange Out>
void fill(detail::stream_t<Out> stream, Out&& out, const detail::value_t<Out>& value) {
  using B = detail::backend_t<Out>;
  const auto o = detail::span_on("fill", stream, "out", out);
  if (o.empty()) return;
  detail::Launcher<B>::run("fill", stream, [p = o.data(), n = o.size(), value](auto& policy) {
    thrust::fill_n(policy, p, n, value);
  });
}

}  // namespace accel::algo
