// accel/cpu/random.hpp — accel::cpu::Random: RngApi (concepts/rng.hpp) for the CPU backend.
//
// One default accel::Generator per logical device, created at first use and never destroyed (usable
// during static destruction). A fill reserves its offsets when called and enqueues one task on the
// stream that runs accel::rng::fill_* (random/fill.hpp) over [p, p + n): vectorised, on every core
// with OpenMP, and the same numbers whatever the thread count.
#pragma once

#include <accel/concepts/rng.hpp>
#include <accel/core/error.hpp>
#include <accel/cpu/device.hpp>
#include <accel/cpu/stream.hpp>
#include <accel/random/fill.hpp>
#include <accel/random/default_generators.hpp>
#include <accel/random/generator.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace accel::cpu {

namespace detail {


inline void check_fill_pointer(const void* p, std::size_t n, const char* what) {
  if (p == nullptr && n != 0) {
    throw InvalidArgumentError(std::string("cpu ") + what + ": null pointer for " + std::to_string(n) + " elements");
  }
}

}  // namespace detail

/// accel::RngApi for the CPU backend; accel::CpuBackend inherits these.
struct Random : DefaultGenerators<Devices> {
  static void fill_bits(StreamRef s, std::uint32_t* p, std::size_t n) {
    fill_bits(s, p, n, default_generator(s.device_index()));
  }
  static void fill_bits(StreamRef s, std::uint32_t* p, std::size_t n, Generator& g) {
    detail::check_fill_pointer(p, n, "fill_bits");
    if (n == 0) return;
    const auto position = g.reserve_position(n);  // no structured binding: clang 14 cannot capture one
    const std::uint64_t seed = position.first, offset = position.second;
    s.enqueue([p, n, seed, offset] { rng::fill_bits(std::span<std::uint32_t>(p, n), seed, offset); });
  }

  static void fill_uniform(StreamRef s, float* p, std::size_t n) {
    fill_uniform(s, p, n, default_generator(s.device_index()));
  }
  static void fill_uniform(StreamRef s, float* p, std::size_t n, Generator& g) {
    detail::check_fill_pointer(p, n, "fill_uniform");
    if (n == 0) return;
    const auto position = g.reserve_position(n);  // no structured binding: clang 14 cannot capture one
    const std::uint64_t seed = position.first, offset = position.second;
    s.enqueue([p, n, seed, offset] { rng::fill_uniform(std::span<float>(p, n), seed, offset); });
  }
  static void fill_uniform(StreamRef s, double* p, std::size_t n) {
    fill_uniform(s, p, n, default_generator(s.device_index()));
  }
  static void fill_uniform(StreamRef s, double* p, std::size_t n, Generator& g) {
    detail::check_fill_pointer(p, n, "fill_uniform");
    if (n == 0) return;
    const auto position = g.reserve_wide_position(n);  // no structured binding: clang 14 cannot capture one
    const std::uint64_t seed = position.first, offset = position.second;
    s.enqueue([p, n, seed, offset] { rng::fill_uniform(std::span<double>(p, n), seed, offset); });
  }

  static void fill_normal(StreamRef s, float* p, std::size_t n, float mean, float stddev) {
    fill_normal(s, p, n, mean, stddev, default_generator(s.device_index()));
  }
  static void fill_normal(StreamRef s, float* p, std::size_t n, float mean, float stddev, Generator& g) {
    detail::check_fill_pointer(p, n, "fill_normal");
    if (n == 0) return;
    const auto position = g.reserve_position(n);  // no structured binding: clang 14 cannot capture one
    const std::uint64_t seed = position.first, offset = position.second;
    s.enqueue([p, n, seed, offset, mean, stddev] {
      rng::fill_normal(std::span<float>(p, n), seed, offset, mean, stddev);
    });
  }
  static void fill_normal(StreamRef s, double* p, std::size_t n, double mean, double stddev) {
    fill_normal(s, p, n, mean, stddev, default_generator(s.device_index()));
  }
  static void fill_normal(StreamRef s, double* p, std::size_t n, double mean, double stddev, Generator& g) {
    detail::check_fill_pointer(p, n, "fill_normal");
    if (n == 0) return;
    const auto position = g.reserve_wide_position(n);  // no structured binding: clang 14 cannot capture one
    const std::uint64_t seed = position.first, offset = position.second;
    s.enqueue([p, n, seed, offset, mean, stddev] {
      rng::fill_normal(std::span<double>(p, n), seed, offset, mean, stddev);
    });
  }
};

}  // namespace accel::cpu
