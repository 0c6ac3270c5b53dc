// accel/comm/detail/mpi_types.hpp — accel's element types and reduce ops as MPI datatypes and ops.
//
// MPI has no half or bfloat16: each is a user-defined datatype (two bytes, contiguous), and sum, prod,
// min and max over them are user-defined MPI ops that compute in float and round back each step — so
// MPI still does the reduction (its algorithms, its order), as NCCL does in its own kernels. avg is
// MPI_SUM followed by a division by the rank count on each receiving rank (MPI has no average).
// Created once, after MPI is initialised; they live until MPI_Finalize frees them.
#pragma once

#if defined(ACCEL_HAS_MPI)

#include <accel/core/bfloat16.hpp>
#include <accel/core/dtype.hpp>
#include <accel/core/half.hpp>
#include <accel/core/reduce_op.hpp>
#include <accel/detail/small_float_vectors.hpp>

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <type_traits>

namespace accel::comm::detail {

struct MpiTypes {
  MPI_Datatype half = MPI_DATATYPE_NULL;
  MPI_Datatype bfloat16 = MPI_DATATYPE_NULL;
  MPI_Op ops[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};  // sum, prod, min, max on the two
};

template <class T, ReduceOp Op>
void reduce_small_floats(const void* in, void* inout, int len) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < len; ++i) {
    const float x = static_cast<float>(a[i]);
    const float y = static_cast<float>(b[i]);
    float r;
    if constexpr (Op == ReduceOp::sum) {
      r = x + y;
    } else if constexpr (Op == ReduceOp::prod) {
      r = x * y;
    } else if constexpr (Op == ReduceOp::min) {
      r = y < x ? y : x;  // NaN in inout stays (as the predefined ops do, the order of NaNs is unspecified)
    } else {
      r = y > x ? y : x;
    }
    b[i] = T(r);
  }
}

/// reduce_small_floats<bfloat16 or half, sum> four elements at a time (detail/small_float_vectors.hpp):
/// the same float addition and the same rounding back, so the same bits (which NaN a NaN + NaN keeps is
/// unspecified, in either loop). The scalar loop took ~6 ns an element, 20x a float add, and a bf16
/// gradient reduce-scatter spent most of its time in it (benchmarks/RESULTS.md).
namespace small_sum = accel::detail::small_float;

/// `inout[i] = in[i] + inout[i]` over T's bit patterns: blocks of four through Widen/Narrow, the tail by
/// the scalar loop.
template <class T, small_sum::f32x4 (*Widen)(const std::uint16_t*), void (*Narrow)(small_sum::f32x4, std::uint16_t*)>
void sum_four_at_a_time(const void* in, void* inout, int len) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  int i = 0;
  for (; i + 4 <= len; i += 4) Narrow(Widen(a + i) + Widen(b + i), b + i);
  reduce_small_floats<T, ReduceOp::sum>(a + i, b + i, len - i);
}

inline void sum_bfloat16(const void* in, void* inout, int len) {
  sum_four_at_a_time<accel::bfloat16, small_sum::widen_bf16, small_sum::narrow_bf16>(in, inout, len);
}

inline void sum_half(const void* in, void* inout, int len) {
  sum_four_at_a_time<accel::half, small_sum::widen_half, small_sum::narrow_half>(in, inout, len);
}

inline MpiTypes& mpi_types_storage() noexcept {
  static MpiTypes types;
  return types;
}

template <ReduceOp Op>
void mpi_small_float_op(void* in, void* inout, int* len, MPI_Datatype* type) {
  const MpiTypes& t = mpi_types_storage();
  if (*type == t.half) {
    if constexpr (Op == ReduceOp::sum) {
      sum_half(in, inout, *len);
    } else {
      reduce_small_floats<accel::half, Op>(in, inout, *len);
    }
  } else if (*type == t.bfloat16) {
    if constexpr (Op == ReduceOp::sum) {
      sum_bfloat16(in, inout, *len);
    } else {
      reduce_small_floats<accel::bfloat16, Op>(in, inout, *len);
    }
  }
}

/// The datatypes and ops, created on first use (MPI must be initialised).
inline const MpiTypes& mpi_types() {
  static std::once_flag once;
  std::call_once(once, [] {
    MpiTypes& t = mpi_types_storage();
    MPI_Type_contiguous(2, MPI_BYTE, &t.half);
    MPI_Type_set_name(t.half, const_cast<char*>("accel::half"));
    MPI_Type_commit(&t.half);
    MPI_Type_contiguous(2, MPI_BYTE, &t.bfloat16);
    MPI_Type_set_name(t.bfloat16, const_cast<char*>("accel::bfloat16"));
    MPI_Type_commit(&t.bfloat16);
    MPI_Op_create(&mpi_small_float_op<ReduceOp::sum>, 1, &t.ops[0]);
    MPI_Op_create(&mpi_small_float_op<ReduceOp::prod>, 1, &t.ops[1]);
    MPI_Op_create(&mpi_small_float_op<ReduceOp::min>, 1, &t.ops[2]);
    MPI_Op_create(&mpi_small_float_op<ReduceOp::max>, 1, &t.ops[3]);
  });
  return mpi_types_storage();
}

[[nodiscard]] inline MPI_Datatype mpi_datatype(Dtype d) {
  switch (d) {
    case Dtype::float32: return MPI_FLOAT;
    case Dtype::float64: return MPI_DOUBLE;
    case Dtype::int8: return MPI_INT8_T;
    case Dtype::uint8: return MPI_UINT8_T;
    case Dtype::int32: return MPI_INT32_T;
    case Dtype::int64: return MPI_INT64_T;
    case Dtype::float16: return mpi_types().half;
    case Dtype::bfloat16: return mpi_types().bfloat16;
    default: return MPI_DATATYPE_NULL;  // refused before (arguments.hpp)
  }
}

/// The MPI op that computes `op` on `d` (avg: MPI_SUM, divided afterwards).
[[nodiscard]] inline MPI_Op mpi_op(ReduceOp op, Dtype d) {
  const int index = op == ReduceOp::avg ? 0 : static_cast<int>(op);
  if (d == Dtype::float16 || d == Dtype::bfloat16) return mpi_types().ops[index];
  switch (index) {
    case 1: return MPI_PROD;
    case 2: return MPI_MIN;
    case 3: return MPI_MAX;
    default: return MPI_SUM;
  }
}

/// out[i] /= n in T's arithmetic (ReduceOp::avg after MPI_SUM); integers truncate toward zero.
template <class T>
void divide_by(void* data, std::size_t count, int n) {
  T* p = static_cast<T*>(data);
  if constexpr (std::is_same_v<T, accel::half> || std::is_same_v<T, accel::bfloat16>) {
    for (std::size_t i = 0; i < count; ++i) p[i] = T(static_cast<float>(p[i]) / static_cast<float>(n));
  } else {
    for (std::size_t i = 0; i < count; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(n));
  }
}

inline void divide_by(Dtype d, void* data, std::size_t count, int n) {
  switch (d) {
    case Dtype::float32: return divide_by<float>(data, count, n);
    case Dtype::float64: return divide_by<double>(data, count, n);
    case Dtype::float16: return divide_by<accel::half>(data, count, n);
    case Dtype::bfloat16: return divide_by<accel::bfloat16>(data, count, n);
    case Dtype::int8: return divide_by<std::int8_t>(data, count, n);
    case Dtype::uint8: return divide_by<std::uint8_t>(data, count, n);
    case Dtype::int32: return divide_by<std::int32_t>(data, count, n);
    case Dtype::int64: return divide_by<std::int64_t>(data, count, n);
    default: return;
  }
}

}  // namespace accel::comm::detail

#endif  // ACCEL_HAS_MPI
