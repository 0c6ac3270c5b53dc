// random/detail/block_fill.hpp on the host: the per-block transforms and the unit indexing that the
// CUDA fill kernels (kernels/cuda/random_fill.cu) run, driven here by a loop that does what the
// kernel's threads do (compute a unit; one 16-byte store when whole and aligned, else value by
// value), must write exactly what accel::rng::fill_* write, for awkward lengths, offsets and
// alignments, and nothing outside the output.
#include <accel/random/detail/block_fill.hpp>
#include <accel/random/fill.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace {

using namespace accel::rng;
using namespace accel::rng::detail;

struct Paths {
  std::size_t vector_stores = 0, value_stores = 0;
};

// The kernel's loop, one "thread" after another.
template <class Transform>
void emulate_kernel(typename Transform::value_type* out, std::size_t n, std::uint64_t seed, std::uint64_t offset,
                    Transform t, Paths& paths) {
  using T = typename Transform::value_type;
  const BlockFill<Transform> f(out, n, seed, offset, t);
  REQUIRE(f.end_unit() - f.first_unit() <= BlockFill<Transform>::max_units(n));
  const bool vector = f.units_aligned();
  bool vectors_aligned = true;
  for (std::uint64_t u = f.first_unit(); u < f.end_unit(); ++u) {
    T v[Transform::per_block];
    f.compute(u, v);
    if (vector && f.whole(u)) {
      vectors_aligned = vectors_aligned && reinterpret_cast<std::uintptr_t>(f.unit_ptr(u)) % 16 == 0;
      std::memcpy(f.unit_ptr(u), v, 16);
      ++paths.vector_stores;
    } else {
      f.store_partial(u, v);
      ++paths.value_stores;
    }
  }
  CHECK(vectors_aligned);  // where the kernel stores a float4 / uint4 / double2
}

// A fill into a 16-byte-aligned array at element `shift`, with sentinels around it.
template <class Transform, class Reference>
void check_one(std::size_t n, std::uint64_t seed, std::uint64_t offset, std::size_t shift, Transform t,
               Reference reference, Paths& paths) {
  using T = typename Transform::value_type;
  CAPTURE(n);
  CAPTURE(offset);
  CAPTURE(shift);
  const std::size_t pad = 8;
  std::vector<T> storage(n + 2 * pad + 16);
  T* base = storage.data();
  while (reinterpret_cast<std::uintptr_t>(base) % 16 != 0) ++base;
  std::vector<unsigned char> sentinel(sizeof(T), 0xA5);
  for (std::size_t i = 0; i < n + 2 * pad; ++i) std::memcpy(base + i, sentinel.data(), sizeof(T));
  T* out = base + pad + shift;
  emulate_kernel(out, n, seed, offset, t, paths);

  std::vector<T> want(n);
  reference(std::span<T>(want), seed, offset);
  CHECK(std::memcmp(out, want.data(), n * sizeof(T)) == 0);
  bool untouched = true;
  for (T* p = base; p < out; ++p) untouched = untouched && std::memcmp(p, sentinel.data(), sizeof(T)) == 0;
  for (T* p = out + n; p < base + n + 2 * pad; ++p) {
    untouched = untouched && std::memcmp(p, sentinel.data(), sizeof(T)) == 0;
  }
  CHECK(untouched);
}

template <class Transform, class Reference>
void check_all(Transform t, Reference reference) {
  constexpr std::size_t P = Transform::per_block;
  // Lengths around the group size and a run that crosses cuRAND's 65536 subsequences.
  const std::vector<std::size_t> lengths{1, 2, 3, 4, 5, 7, 8, 9, 15, 17, 63, 64, 65, 1001, 4 * 65536 / P + 7};
  // Offsets: every phase in a block, around the subsequence wrap, and far ones.
  const std::vector<std::uint64_t> offsets{0,
                                           1,
                                           2,
                                           3,
                                           4,
                                           7,
                                           4 * 65535,
                                           4 * 65535 + 3,
                                           4 * 65536,
                                           4 * 65536 + 2,
                                           4 * 65536 * 3 + 1,
                                           (std::uint64_t{1} << 40) + 3,
                                           0xFFFFFFFFFFFF0000ULL};
  Paths paths;
  for (const std::size_t n : lengths) {
    for (const std::uint64_t offset : offsets) {
      if (n > 4096 && offset % 4 == 1) continue;  // keep the long ones few
      for (std::size_t shift = 0; shift < P; ++shift) {
        check_one(n, 0x0123456789ABCDEFULL + n, offset, shift, t, reference, paths);
      }
    }
  }
  CHECK(paths.vector_stores > 0);  // both store paths ran
  CHECK(paths.value_stores > 0);
}

}  // namespace

TEST_CASE("block_fill: the CUDA kernels' per-unit code writes what rng::fill_bits writes") {
  check_all(BitsTransform{},
            [](std::span<std::uint32_t> o, std::uint64_t s, std::uint64_t off) { fill_bits(o, s, off); });
}

TEST_CASE("block_fill: ... rng::fill_uniform (float and double)") {
  check_all(UniformFloatTransform{},
            [](std::span<float> o, std::uint64_t s, std::uint64_t off) { fill_uniform(o, s, off); });
  check_all(UniformDoubleTransform{},
            [](std::span<double> o, std::uint64_t s, std::uint64_t off) { fill_uniform(o, s, off); });
}

TEST_CASE("block_fill: ... rng::fill_normal (float and double, with mean and stddev)") {
  check_all(NormalFloatTransform{1.5f, 0.25f},
            [](std::span<float> o, std::uint64_t s, std::uint64_t off) { fill_normal(o, s, off, 1.5f, 0.25f); });
  check_all(NormalDoubleTransform{-2.0, 3.0},
            [](std::span<double> o, std::uint64_t s, std::uint64_t off) { fill_normal(o, s, off, -2.0, 3.0); });
}

TEST_CASE("block_fill: units and alignment") {
  alignas(16) float buf[16] = {};
  // offset 0, aligned output: units start at 16-byte boundaries.
  CHECK(BlockFill<UniformFloatTransform>(buf, 10, 1, 0, {}).units_aligned());
  // Output one float in: aligned again only when the offset skips one value too.
  CHECK_FALSE(BlockFill<UniformFloatTransform>(buf + 1, 10, 1, 0, {}).units_aligned());
  CHECK(BlockFill<UniformFloatTransform>(buf + 1, 10, 1, 1, {}).units_aligned());
  const BlockFill<UniformFloatTransform> f(buf, 9, 1, 6, {});  // positions [2, 11): units 0, 1, 2
  CHECK(f.first_unit() == 0);
  CHECK(f.end_unit() == 3);
  CHECK_FALSE(f.whole(0));
  CHECK(f.whole(1));
  CHECK_FALSE(f.whole(2));
  alignas(16) double d[8] = {};
  const BlockFill<UniformDoubleTransform> g(d, 5, 1, 3, {});  // positions [3, 8): units 1, 2, 3
  CHECK(g.first_unit() == 1);
  CHECK(g.end_unit() == 4);
  CHECK(g.unit_ptr(2) == d + 1);
  CHECK(BlockFill<UniformDoubleTransform>::max_units(5) >= 3);
}
