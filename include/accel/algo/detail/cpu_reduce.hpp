// accel/algo/detail/cpu_reduce.hpp — reduce on CpuBackend: blocks folded with independent accumulators.
//
// Thrust's OpenMP reduce folds each thread's interval in one dependent chain (one op per element, each
// waiting for the last), which on two cores is slower than a sequential std::reduce. Here the input is
// cut into blocks of `block` elements; thrust::transform on the same OpenMP policy folds each block with
// four independent accumulators (a chain of length n/4), and the task then folds the per-block results
// into init. The requirements on op and T are Thrust's: each block is seeded with its first element
// converted to T, then op(T, element) and op(T, T). The per-block results live in a buffer from the
// stream's caching allocator (T trivially copyable; otherwise Thrust's reduce is used as is).
#pragma once

#include <accel/algo/detail/cpu_launch.hpp>
#include <accel/memory/buffer.hpp>

#include <thrust/iterator/counting_iterator.h>
#include <thrust/reduce.h>
#include <thrust/transform.h>

#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <utility>

namespace accel::algo::detail {

template <class B>
struct Reducer;

/// op-fold of p[0, m), m >= 1, seeded with p[0], with four independent accumulators.
template <class T, class E, class Op>
T fold_block(const E* p, std::size_t m, const Op& op) {
  if (m < 8) {
    T acc = p[0];
    for (std::size_t i = 1; i < m; ++i) acc = op(acc, p[i]);
    return acc;
  }
  T a0 = p[0];
  T a1 = p[1];
  T a2 = p[2];
  T a3 = p[3];
  std::size_t i = 4;
  for (; i + 4 <= m; i += 4) {
    a0 = op(a0, p[i]);
    a1 = op(a1, p[i + 1]);
    a2 = op(a2, p[i + 2]);
    a3 = op(a3, p[i + 3]);
  }
  T acc = op(op(a0, a1), op(a2, a3));
  for (; i < m; ++i) acc = op(acc, p[i]);
  return acc;
}

template <class T, class E, class Op>
struct BlockFolder {
  const E* in;
  std::size_t n;
  std::size_t block;
  Op op;
  T operator()(std::size_t b) const {
    const std::size_t first = b * block;
    return fold_block<T>(in + first, std::min(block, n - first), op);
  }
};

template <>
struct Reducer<CpuBackend> {
  static constexpr std::size_t block = std::size_t{1} << 15;

  template <class E, class U, class Init, class Op>
  static void reduce(const char* algorithm, cpu::StreamRef stream, const E* in, std::size_t n, U* out, Init init,
                     Op op) {
    Launcher<CpuBackend>::run(algorithm, stream,
                              [stream, in, n, out, init = std::move(init), op = std::move(op)](auto& policy) {
                                *out = fold(policy, stream, in, n, init, op);
                              });
  }

 private:
  template <class Policy, class E, class T, class Op>
  static T fold(Policy& policy, cpu::StreamRef stream, const E* in, std::size_t n, T init, const Op& op) {
    if (n == 0) return init;
    if constexpr (!std::is_trivially_copyable_v<T>) {
      return thrust::reduce(policy, in, in + n, std::move(init), op);
    } else {
      const std::size_t blocks = (n + block - 1) / block;
      if (blocks == 1) return op(init, fold_block<T>(in, n, op));
      Buffer<T, CpuBackend> partial(blocks, stream);
      const thrust::counting_iterator<std::size_t> first(0);
      thrust::transform(policy, first, first + blocks, partial.data(), BlockFolder<T, E, Op>{in, n, block, op});
      T acc = std::move(init);
      for (std::size_t b = 0; b < blocks; ++b) acc = op(acc, partial.data()[b]);
      return acc;
    }
  }
};

}  // namespace accel::algo::detail
