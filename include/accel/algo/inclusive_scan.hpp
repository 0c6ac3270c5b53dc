// accel/algo/inclusive_scan.hpp — accel::algo::inclusive_scan(stream, in, out[, op]):
// out[i] = in[0] op in[1] op ... op in[i] (op defaults to +), in `stream` order.
//
// `out` holds at least in.size() elements and may be `in` itself (in place); any other overlap, or a
// too small `out`, is an InvalidArgumentError. `op` must be associative (the order of applications is
// unspecified, as with std::inclusive_scan); floating-point sums may differ in the last bits from a
// sequential loop. On CudaBackend `op` runs on the device.
#pragma once

#include <accel/algo/detail/arguments.hpp>
#include <accel/algo/detail/backends.hpp>

#include <thrust/scan.h>

#include <cuda/std/functional>

#include <concepts>
#include <utility>

namespace accel::algo {

template <detail::Range In, detail::OutputRange Out, class BinaryOp = ::cuda::std::plus<>>
  requires std::same_as<detail::backend_t<In>, detail::backend_t<Out>>
void inclusive_scan(detail::stream_t<Out> stream, In&& in, Out&& out, BinaryOp op = {}) {
  using B = detail::backend_t<Out>;
  const auto i = detail::span_on("inclusive_scan", stream, "in", in);
  const auto o = detail::span_on("inclusive_scan", stream, "out", out);
  detail::require_capacity<B>("inclusive_scan", stream, "out", o.size(), "in", i.size());
  detail::require_elementwise<B>("inclusive_scan", stream, "out", o.data(), "in", i.data(), i.size());
  if (i.empty()) return;
  detail::Launcher<B>::run("inclusive_scan", stream,
                           [in = i.data(), n = i.size(), out = o.data(), op = std::move(op)](auto& policy) {
                             thrust::inclusive_scan(policy, in, in + n, out, op);
                           });
}

}  // namespace accel::algo
