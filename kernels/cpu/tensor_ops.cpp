// tensor_ops.cpp — fill, copy/cast (float32/float16/bfloat16), scale, multi-tensor L2 norm and
// isfinite for the CPU, built by accel's "tensor_ops" op builder. All split their elements statically
// over OpenMP threads (cpu_common.h); the L2 norm sums squares in double over fixed 8192-element chunks
// and adds the chunk sums in order, so every result is bit-identical for any thread count.
#include "cpu_common.h"

#include <vector>

namespace {

using namespace accel_kernels;

constexpr long long block = 2048;
constexpr long long chunk = 8192;

bool float_dtype(int d) { return d == ACCEL_DTYPE_F32 || d == ACCEL_DTYPE_F16 || d == ACCEL_DTYPE_BF16; }

// dst[i] = src[i] * scale (scale == 1: a plain cast/copy), over [begin, end).
void scale_range(void* dst, int ddt, const void* src, int sdt, float scale, long long begin, long long end) {
  if (ddt == sdt && scale == 1.0f) {
    if (dst != src) {
      std::memcpy(static_cast<char*>(dst) + begin * dtype_size(ddt), static_cast<const char*>(src) + begin * dtype_size(sdt),
                  static_cast<std::size_t>((end - begin) * dtype_size(ddt)));
    }
    return;
  }
  if (ddt == ACCEL_DTYPE_F32 && sdt == ACCEL_DTYPE_F32) {
    float* d = static_cast<float*>(dst);
    const float* s = static_cast<const float*>(src);
#pragma omp simd
    for (long long i = begin; i < end; ++i) d[i] = s[i] * scale;
    return;
  }
  alignas(64) float buf[block];
  for (long long off = begin; off < end; off += block) {
    const long long n = end - off < block ? end - off : block;
    to_float(buf, static_cast<const char*>(src) + off * dtype_size(sdt), sdt, n);
    if (scale != 1.0f) {
#pragma omp simd
      for (long long i = 0; i < n; ++i) buf[i] *= scale;
    }
    from_float(static_cast<char*>(dst) + off * dtype_size(ddt), ddt, buf, n);
  }
}

}  // namespace

// Each returns 0, or -1 for an unsupported dtype.

ACCEL_EXPORT int accel_fill(void* dst, int dtype, long long n, float value, int num_threads) {
  if (!float_dtype(dtype)) return -1;
  std::uint32_t pattern = 0;
  if (dtype == ACCEL_DTYPE_F32) pattern = float_to_bits(value);
  if (dtype == ACCEL_DTYPE_F16) pattern = float_to_half(value);
  if (dtype == ACCEL_DTYPE_BF16) pattern = float_to_bf16(value);
#pragma omp parallel num_threads(thread_count(num_threads))
  {
    long long begin, end;
    static_range(n, omp_get_thread_num(), omp_get_num_threads(), &begin, &end);
    if (dtype == ACCEL_DTYPE_F32) {
      auto* d = static_cast<std::uint32_t*>(dst);
      for (long long i = begin; i < end; ++i) d[i] = pattern;
    } else {
      auto* d = static_cast<std::uint16_t*>(dst);
      const auto p16 = static_cast<std::uint16_t>(pattern);
      for (long long i = begin; i < end; ++i) d[i] = p16;
    }
  }
  return 0;
}

ACCEL_EXPORT int accel_scale(void* dst, int dst_dtype, const void* src, int src_dtype, long long n, float scale,
                             int num_threads) {
  if (!float_dtype(dst_dtype) || !float_dtype(src_dtype)) return -1;
#pragma omp parallel num_threads(thread_count(num_threads))
  {
    long long begin, end;
    static_range(n, omp_get_thread_num(), omp_get_num_threads(), &begin, &end);
    if (begin < end) scale_range(dst, dst_dtype, src, src_dtype, scale, begin, end);
  }
  return 0;
}

ACCEL_EXPORT int accel_cast(void* dst, int dst_dtype, const void* src, int src_dtype, long long n, int num_threads) {
  return accel_scale(dst, dst_dtype, src, src_dtype, n, 1.0f, num_threads);
}

// total_norm = sqrt(sum of squares of all elements); per_tensor[i] (if not null) each tensor's norm.
ACCEL_EXPORT int accel_l2norm(const accel_tensor_ref* tensors, long long count, float* total_norm, float* per_tensor,
                              int num_threads) {
  std::vector<long long> first_chunk(static_cast<std::size_t>(count) + 1, 0);
  for (long long i = 0; i < count; ++i) {
    if (!float_dtype(tensors[i].dtype)) return -1;
    const long long n = tensors[i].numel > 0 ? tensors[i].numel : 0;
    first_chunk[static_cast<std::size_t>(i) + 1] = first_chunk[static_cast<std::size_t>(i)] + (n + chunk - 1) / chunk;
  }
  const long long chunks = first_chunk.back();
  std::vector<double> sums(static_cast<std::size_t>(chunks), 0.0);
#pragma omp parallel num_threads(thread_count(num_threads))
  {
    const int T = omp_get_num_threads();
    const int t = omp_get_thread_num();
    const long long c0 = chunks * t / T, c1 = chunks * (t + 1) / T;
    long long ti = 0;
    alignas(64) float buf[chunk];
    for (long long c = c0; c < c1; ++c) {
      while (first_chunk[static_cast<std::size_t>(ti) + 1] <= c) ++ti;
      const accel_tensor_ref& r = tensors[ti];
      const long long off = (c - first_chunk[static_cast<std::size_t>(ti)]) * chunk;
      const long long n = r.numel - off < chunk ? r.numel - off : chunk;
      const float* x = reinterpret_cast<const float*>(static_cast<const char*>(r.data) + off * dtype_size(r.dtype));
      if (r.dtype != ACCEL_DTYPE_F32) {
        to_float(buf, x, r.dtype, n);
        x = buf;
      }
      double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      long long i = 0;
      for (; i + 8 <= n; i += 8) {
        for (int j = 0; j < 8; ++j) {
          const double d = x[i + j];
          acc[j] = fma(d, d, acc[j]);
        }
      }
      for (; i < n; ++i) {
        const double d = x[i];
        acc[0] = fma(d, d, acc[0]);
      }
      sums[static_cast<std::size_t>(c)] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
  }
  double total = 0;
  for (long long i = 0; i < count; ++i) {
    double s = 0;
    for (long long c = first_chunk[static_cast<std::size_t>(i)]; c < first_chunk[static_cast<std::size_t>(i) + 1]; ++c) {
      s += sums[static_cast<std::size_t>(c)];
    }
    if (per_tensor != nullptr) per_tensor[i] = static_cast<float>(sqrt(s));
    total += s;
  }
  *total_norm = static_cast<float>(sqrt(total));
  return 0;
}

// *all_finite = 1 when no element of any tensor is inf or NaN, else 0.
ACCEL_EXPORT int accel_isfinite(const accel_tensor_ref* tensors, long long count, int* all_finite, int num_threads) {
  long long total = 0;
  for (long long i = 0; i < count; ++i) {
    if (!float_dtype(tensors[i].dtype)) return -1;
    total += tensors[i].numel > 0 ? tensors[i].numel : 0;
  }
  int bad = 0;
#pragma omp parallel num_threads(thread_count(num_threads)) reduction(| : bad)
  {
    long long begin, end;
    static_range(total, omp_get_thread_num(), omp_get_num_threads(), &begin, &end);
    long long base = 0;
    for (long long i = 0; i < count && base < end; ++i) {
      const accel_tensor_ref& r = tensors[i];
      const long long n = r.numel > 0 ? r.numel : 0;
      const long long lo = begin > base ? begin - base : 0;
      const long long hi = end < base + n ? end - base : n;
      int local = 0;
      if (r.dtype == ACCEL_DTYPE_F32) {
        const auto* x = static_cast<const std::uint32_t*>(r.data);
        for (long long k = lo; k < hi; ++k) local |= (x[k] & 0x7F800000u) == 0x7F800000u;
      } else {
        const auto* x = static_cast<const std::uint16_t*>(r.data);
        const std::uint16_t mask = r.dtype == ACCEL_DTYPE_F16 ? 0x7C00u : 0x7F80u;
        for (long long k = lo; k < hi; ++k) local |= (x[k] & mask) == mask;
      }
      bad |= local;
      base += n;
    }
  }
  *all_finite = bad ? 0 : 1;
  return 0;
}
