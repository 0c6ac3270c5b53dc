// accel/random/detail/block_fill.hpp — what one Philox block becomes in each fill, and a fill seen as
// a series of blocks: the code the host fills (random/fill.hpp) and the CUDA fill kernels
// (kernels/cuda/random_fill.cu) share, so that both write the same numbers.
//
// Host and device code, NVRTC-compatible (no CUDA or standard header under __CUDACC_RTC__), like
// philox.hpp and distributions.hpp, which it builds on.
//
//   BitsTransform, UniformFloatTransform, UniformDoubleTransform, NormalFloatTransform,
//   NormalDoubleTransform      one block -> 16 bytes of output: 4 values of 32 bits or 2 of 64 bits.
//                              A group of 4 outputs (CurandPhiloxLayout) is blocks_per_group blocks,
//                              their outputs in block order.
//   BlockFill<Transform>       a fill of n outputs at (seed, offset) cut into *units*, one Philox
//                              block each; every unit is independent, so a GPU thread (or a host
//                              loop) computes any unit and writes its in-range outputs.
//
// Normals come from distributions.hpp's box_muller / box_muller_double, whose log/sin/cos
// (portable_math.hpp) give the same bits on the host and the device: every fill writes identical
// buffers on every backend. Bits and uniforms are integer or exactly rounded float arithmetic.
#pragma once

#include <accel/random/distributions.hpp>
#include <accel/random/philox.hpp>

namespace accel::rng::detail {

/// Raw words (curandGenerate).
struct BitsTransform {
  using value_type = u32;
  static constexpr u32 per_block = 4;
  ACCEL_HOST_DEVICE void operator()(U32x4 b, u32* d) const noexcept {
    d[0] = b.x;
    d[1] = b.y;
    d[2] = b.z;
    d[3] = b.w;
  }
};

/// Floats in (0, 1] (curandGenerateUniform).
struct UniformFloatTransform {
  using value_type = float;
  static constexpr u32 per_block = 4;
  ACCEL_HOST_DEVICE void operator()(U32x4 b, float* d) const noexcept {
    d[0] = uniform_float(b.x);
    d[1] = uniform_float(b.y);
    d[2] = uniform_float(b.z);
    d[3] = uniform_float(b.w);
  }
};

/// Doubles in (0, 1], two words each (curandGenerateUniformDouble).
struct UniformDoubleTransform {
  using value_type = double;
  static constexpr u32 per_block = 2;
  ACCEL_HOST_DEVICE void operator()(U32x4 b, double* d) const noexcept {
    d[0] = uniform_double(b.x, b.y);
    d[1] = uniform_double(b.z, b.w);
  }
};

/// Normal floats (curandGenerateNormal): pairs from words (x, y) and (z, w), sin value first.
struct NormalFloatTransform {
  using value_type = float;
  static constexpr u32 per_block = 4;
  float mean = 0.0f, stddev = 1.0f;
  ACCEL_HOST_DEVICE void operator()(U32x4 b, float* d) const noexcept {
    const Float2 p = box_muller(b.x, b.y);
    const Float2 q = box_muller(b.z, b.w);
    d[0] = scale_normal(p.x, mean, stddev);
    d[1] = scale_normal(p.y, mean, stddev);
    d[2] = scale_normal(q.x, mean, stddev);
    d[3] = scale_normal(q.y, mean, stddev);
  }
};

/// Normal doubles (curandGenerateNormalDouble): one pair per block, all four words.
struct NormalDoubleTransform {
  using value_type = double;
  static constexpr u32 per_block = 2;
  double mean = 0.0, stddev = 1.0;
  ACCEL_HOST_DEVICE void operator()(U32x4 b, double* d) const noexcept {
    const Double2 p = box_muller_double(b.x, b.y, b.z, b.w);
    d[0] = scale_normal(p.x, mean, stddev);
    d[1] = scale_normal(p.y, mean, stddev);
  }
};

/// Blocks per group of 4 outputs: 1 for 32-bit outputs, 2 for 64-bit outputs.
template <class Transform>
inline constexpr u32 blocks_per_group = 4 / Transform::per_block;

/// One fill of out[0, n) at (seed, offset), as fill_*(span(out, n), seed, offset) writes it, cut into
/// units of one Philox block. Output j sits at position p = skip() + j of the fill's stream of
/// outputs (skip() = offset % 4); unit u holds positions [u * P, u * P + P), P = per_block, and is
/// block k = u % K of group u / K (K = blocks_per_group). Units [first_unit(), end_unit()) cover
/// the fill; a unit at either end may hold positions outside it, which are not written.
template <class Transform>
class BlockFill {
 public:
  using T = typename Transform::value_type;
  static constexpr u32 P = Transform::per_block;
  static constexpr u32 K = blocks_per_group<Transform>;

  ACCEL_HOST_DEVICE BlockFill(T* out, u64 n, u64 seed, u64 offset, Transform transform) noexcept
      : out_(out), layout_(offset, K), key_(philox_key(seed)), begin_(layout_.skip()), end_(begin_ + n),
        transform_(transform) {}

  [[nodiscard]] ACCEL_HOST_DEVICE u64 first_unit() const noexcept { return begin_ / P; }
  [[nodiscard]] ACCEL_HOST_DEVICE u64 end_unit() const noexcept { return (end_ + P - 1) / P; }
  /// At most this many units for n outputs, whatever the offset (to size a launch before the
  /// offset is known, e.g. when the device reads it).
  [[nodiscard]] ACCEL_HOST_DEVICE static constexpr u64 max_units(u64 n) noexcept { return (n + 3) / P + 1; }

  /// The P values of unit u.
  ACCEL_HOST_DEVICE void compute(u64 u, T* v) const noexcept {
    transform_(philox4x32_10(layout_.counter(u / K, static_cast<u32>(u % K)), key_), v);
  }
  /// True when all of unit u lies inside the fill.
  [[nodiscard]] ACCEL_HOST_DEVICE bool whole(u64 u) const noexcept { return u * P >= begin_ && u * P + P <= end_; }
  /// Where unit u's first value goes (meaningful when whole(u)).
  [[nodiscard]] ACCEL_HOST_DEVICE T* unit_ptr(u64 u) const noexcept { return out_ + (u * P - begin_); }
  /// True when every unit starts at a 16-byte boundary of `out`: whole units may be stored as one
  /// 16-byte vector.
  [[nodiscard]] ACCEL_HOST_DEVICE bool units_aligned() const noexcept {
    return (reinterpret_cast<unsigned long long>(out_) - begin_ * sizeof(T)) % 16 == 0;
  }
  /// Writes the values of unit u that lie inside the fill.
  ACCEL_HOST_DEVICE void store_partial(u64 u, const T* v) const noexcept {
    for (u32 i = 0; i < P; ++i) {
      const u64 p = u * P + i;
      if (p >= begin_ && p < end_) out_[p - begin_] = v[i];
    }
  }

 private:
  T* out_;
  CurandPhiloxLayout layout_;
  U32x2 key_;
  u64 begin_, end_;  // positions of the first output and one past the last
  Transform transform_;
};

}  // namespace accel::rng::detail
