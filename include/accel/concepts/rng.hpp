// accel/concepts/rng.hpp — RngApi: per-device Philox generators and random fills on streams.
//
// Every device has one default accel::Generator (random/generator.hpp): state (seed, offset), seed
// torch's 67280421310721 until set. The same (seed, offset) gives the same numbers on every backend,
// equal to cuRAND's host CURAND_RNG_PSEUDO_PHILOX4_32_10 generator (random/fill.hpp).
// For `const B b`, device index i (optional, default: the current device; out of range:
// InvalidArgumentError), StreamRef s, a Generator g:
//   b.manual_seed(seed)               seeds the current device's default generator (offset 0)
//   b.manual_seed_all(seed)           seeds every device's default generator
//   b.seed() -> std::uint64_t         seeds the current device's generator non-deterministically
//   b.initial_seed() -> std::uint64_t the current device's generator's seed
//   b.get_rng_state() / (i) -> std::array<std::byte, 16>   seed then offset, little-endian
//   b.set_rng_state(state) / (state, i)  state: std::span<const std::byte>; a blob that is not 16
//                                     bytes or an offset not a multiple of 4: InvalidArgumentError,
//                                     nothing changes
//   b.default_generator(i) -> Generator&  lives for the whole process
//   b.fill_bits(s, std::uint32_t* p, n [, g])          raw 32-bit words (curandGenerate)
//   b.fill_uniform(s, float* p, n [, g])  / double*    uniforms in (0, 1] (curandGenerateUniform[Double])
//   b.fill_normal(s, float* p, n, mean, stddev [, g]) / double*   normals (Box–Muller)
// p points to n elements of s's device memory (Buffer::data()); n may be 0. Without g a fill uses
// the default generator of s's device. A fill reserves its offsets from the generator when it is
// called (Generator::reserve for 32-bit outputs, reserve_wide for doubles), then runs on s: the order
// of the calls decides the numbers, whatever the timing of the streams. It returns at once.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>

namespace accel {

class Generator;  // random/generator.hpp, which every backend includes

template <class B>
concept RngApi = requires(const B b, int dev, std::uint64_t seed, std::span<const std::byte> state,
                          typename B::StreamRef s, std::size_t n, float* pf, double* pd, std::uint32_t* pu,
                          float mf, double md, Generator& g) {
  b.manual_seed(seed);
  b.manual_seed_all(seed);
  { b.seed() } -> std::same_as<std::uint64_t>;
  { b.initial_seed() } -> std::same_as<std::uint64_t>;
  { b.get_rng_state() } -> std::same_as<std::array<std::byte, 16>>;
  { b.get_rng_state(dev) } -> std::same_as<std::array<std::byte, 16>>;
  b.set_rng_state(state);
  b.set_rng_state(state, dev);
  { b.default_generator(dev) } -> std::same_as<Generator&>;
  b.fill_bits(s, pu, n);
  b.fill_bits(s, pu, n, g);
  b.fill_uniform(s, pf, n);
  b.fill_uniform(s, pf, n, g);
  b.fill_uniform(s, pd, n);
  b.fill_uniform(s, pd, n, g);
  b.fill_normal(s, pf, n, mf, mf);
  b.fill_normal(s, pf, n, mf, mf, g);
  b.fill_normal(s, pd, n, md, md);
  b.fill_normal(s, pd, n, md, md, g);
};

}  // namespace accel
