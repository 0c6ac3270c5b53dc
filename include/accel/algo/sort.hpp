// accel/algo/sort.hpp — accel::algo::sort(stream, data[, comp]): sorts `data` in place, in `stream`
// order.
//
//   sort(stream, data)         ascending (operator<): a radix sort for arithmetic types (CUB on CUDA;
//                              per-thread radix sorts merged on CPU)
//   sort(stream, data, comp)   by a strict weak ordering `comp` (a merge sort unless comp is
//                              thrust::less<T> / thrust::greater<T>); on CudaBackend `comp` runs on the
//                              device (a __host__ __device__ functor, cuda::std::greater<>, ...)
// Neither is stable. Temporaries come from the backend's caching allocator.
#pragma once

#include <accel/algo/detail/arguments.hpp>
#include <accel/algo/detail/backends.hpp>

#include <thrust/functional.h>
#include <thrust/sort.h>
#include <thrust/transform.h>

#include <cstddef>
#include <type_traits>
#include <utility>

namespace accel::algo {

namespace detail {

// CCCL 3.0 radix-sorts `int` keys on the host systems (CPP, OMP) in the order of their unsigned bit
// patterns: RadixEncoder<int> returns a sign-extended unsigned long (NVIDIA/cccl#4919, fixed in 3.1 by
// NVIDIA/cccl#4921). Affected: thrust::sort of int with no comparator, thrust::less<int> or
// thrust::greater<int>. Until the fix, CpuBackend sorts such keys as unsigned ints with the sign bit
// flipped (an order-preserving bijection; two extra element-wise passes), which is exact on every CCCL.
template <class B, class T>
inline constexpr bool host_int_radix_workaround =
#if THRUST_VERSION < 300100
    std::is_same_v<B, CpuBackend> && std::is_same_v<T, int>;
#else
    false;
#endif

struct FlipSignBit {
  constexpr unsigned int operator()(unsigned int x) const noexcept { return x ^ 0x80000000u; }
};

/// Sorts [p, p + n) with Thrust's primitive-sort comparator `UnsignedCompare` applied to the sign-flipped
/// bit patterns of int keys (see host_int_radix_workaround).
template <class UnsignedCompare, class Policy>
void sort_ints_as_unsigned(Policy& policy, int* p, std::size_t n) {
  auto* u = reinterpret_cast<unsigned int*>(p);  // int may be accessed as unsigned int ([basic.lval])
  thrust::transform(policy, u, u + n, u, FlipSignBit{});
  thrust::sort(policy, u, u + n, UnsignedCompare{});
  thrust::transform(policy, u, u + n, u, FlipSignBit{});
}

}  // namespace detail

template <detail::OutputRange Data>
void sort(detail::stream_t<Data> stream, Data&& data) {
  using B = detail::backend_t<Data>;
  using T = detail::value_t<Data>;
  const auto d = detail::span_on("sort", stream, "data", data);
  if (d.size() < 2) return;
  detail::Launcher<B>::run("sort", stream, [p = d.data(), n = d.size()](auto& policy) {
    if constexpr (detail::host_int_radix_workaround<B, T>) {
      detail::sort_ints_as_unsigned<thrust::less<unsigned int>>(policy, p, n);
    } else {
      thrust::sort(policy, p, p + n);
    }
  });
}

template <detail::OutputRange Data, class Compare>
void sort(detail::stream_t<Data> stream, Data&& data, Compare comp) {
  using B = detail::backend_t<Data>;
  using T = detail::value_t<Data>;
  const auto d = detail::span_on("sort", stream, "data", data);
  if (d.size() < 2) return;
  detail::Launcher<B>::run("sort", stream, [p = d.data(), n = d.size(), comp = std::move(comp)](auto& policy) {
    if constexpr (detail::host_int_radix_workaround<B, T> && std::is_same_v<Compare, thrust::less<int>>) {
      detail::sort_ints_as_unsigned<thrust::less<unsigned int>>(policy, p, n);
    } else if constexpr (detail::host_int_radix_workaround<B, T> && std::is_same_v<Compare, thrust::greater<int>>) {
      detail::sort_ints_as_unsigned<thrust::greater<unsigned int>>(policy, p, n);
    } else {
      thrust::sort(policy, p, p + n, comp);
    }
  });
}

}  // namespace accel::algo
