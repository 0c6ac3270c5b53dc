// accel/algo/for_each.hpp — accel::algo::for_each_n(stream, data, n, f): calls f(data[i]) for i < n, in
// `stream` order, in no particular order among the elements (concurrently).
//
// f receives a reference to the element (T& for a writable range, const T& for a read-only one) and
// may modify it; its result is ignored. n larger than data.size() is an InvalidArgumentError. On
// CudaBackend `f` runs on the device (a __host__ __device__ functor or an __device__ lambda).
#pragma once

#include <accel/algo/detail/arguments.hpp>
#include <accel/algo/detail/backends.hpp>

#include <thrust/for_each.h>

#include <cstddef>
#include <string>
#include <utility>

namespace accel::algo {

template <detail::Range Data, class Function>
void for_each_n(detail::stream_t<Data> stream, Data&& data, std::size_t n, Function f) {
  using B = detail::backend_t<Data>;
  const auto d = detail::span_on("for_each_n", stream, "data", data);
  if (n > d.size()) [[unlikely]] {
    detail::invalid<B>("for_each_n", stream,
                       "n = " + std::to_string(n) + " but data holds " + detail::elements(d.size()));
  }
  if (n == 0) return;
  detail::Launcher<B>::run("for_each_n", stream, [p = d.data(), n, f = std::move(f)](auto& policy) {
    thrust::for_each_n(policy, p, n, f);
  });
}

}  // namespace accel::algo
