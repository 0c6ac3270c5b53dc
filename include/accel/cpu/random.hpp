// accel/cpu/random.hpp — accel::cpu::Random: RngApi (concepts/rng.hpp) for the CPU backend.
//
// One default accel::Generator per logical device, created at first use and never destroyed (usable
// during static destruction). A fill reserves its offsets when called and enqueues one task on the
// stream that runs accel::rng::fill_* (random/fill.hpp) over [p, p + n): vectorised, on every core
// with OpenMP, and the same numbers whatever the thread count. Inside a graph capture a fill records a
// draw that every replay reserves afresh (cpu/graph.hpp).
#pragma once

#include <accel/concepts/rng.hpp>
#include <accel/core/error.hpp>
#include <accel/cpu/device.hpp>
#include <accel/cpu/stream.hpp>
#include <accel/random/fill.hpp>
#include <accel/random/default_generators.hpp>
#include <accel/random/detail/fill_pointer.hpp>
#include <accel/random/detail/normal_parameters.hpp>
#include <accel/random/generator.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace accel::cpu {

/// accel::RngApi for the CPU backend; accel::CpuBackend inherits these. Use it as accel::cpu::Random:
/// a class template only so that a translation unit compiles the fill kernels it calls (see BasicMemory).
template <class Unused = void>
struct BasicRandom : DefaultGenerators<Devices> {
  static void fill_bits(StreamRef s, std::uint32_t* p, std::size_t n) {
    fill_bits(s, p, n, default_generator(s.device_index()));
  }
  static void fill_bits(StreamRef s, std::uint32_t* p, std::size_t n, Generator& g) {
    rng::detail::check_fill_pointer("cpu", "fill_bits", p, n, sizeof *p);
    enqueue_fill(s, n, g, false, [p, n](std::uint64_t seed, std::uint64_t offset) {
      rng::fill_bits(std::span<std::uint32_t>(p, n), seed, offset);
    });
  }

  static void fill_uniform(StreamRef s, float* p, std::size_t n) {
    fill_uniform(s, p, n, default_generator(s.device_index()));
  }
  static void fill_uniform(StreamRef s, float* p, std::size_t n, Generator& g) {
    rng::detail::check_fill_pointer("cpu", "fill_uniform", p, n, sizeof *p);
    enqueue_fill(s, n, g, false, [p, n](std::uint64_t seed, std::uint64_t offset) {
      rng::fill_uniform(std::span<float>(p, n), seed, offset);
    });
  }
  static void fill_uniform(StreamRef s, double* p, std::size_t n) {
    fill_uniform(s, p, n, default_generator(s.device_index()));
  }
  static void fill_uniform(StreamRef s, double* p, std::size_t n, Generator& g) {
    rng::detail::check_fill_pointer("cpu", "fill_uniform", p, n, sizeof *p);
    enqueue_fill(s, n, g, true, [p, n](std::uint64_t seed, std::uint64_t offset) {
      rng::fill_uniform(std::span<double>(p, n), seed, offset);
    });
  }

  static void fill_normal(StreamRef s, float* p, std::size_t n, float mean, float stddev) {
    fill_normal(s, p, n, mean, stddev, default_generator(s.device_index()));
  }
  static void fill_normal(StreamRef s, float* p, std::size_t n, float mean, float stddev, Generator& g) {
    rng::detail::check_fill_pointer("cpu", "fill_normal", p, n, sizeof *p);
    rng::detail::check_normal_parameters("cpu", mean, stddev);
    enqueue_fill(s, n, g, false, [p, n, mean, stddev](std::uint64_t seed, std::uint64_t offset) {
      rng::fill_normal(std::span<float>(p, n), seed, offset, mean, stddev);
    });
  }
  static void fill_normal(StreamRef s, double* p, std::size_t n, double mean, double stddev) {
    fill_normal(s, p, n, mean, stddev, default_generator(s.device_index()));
  }
  static void fill_normal(StreamRef s, double* p, std::size_t n, double mean, double stddev, Generator& g) {
    rng::detail::check_fill_pointer("cpu", "fill_normal", p, n, sizeof *p);
    rng::detail::check_normal_parameters("cpu", mean, stddev);
    enqueue_fill(s, n, g, true, [p, n, mean, stddev](std::uint64_t seed, std::uint64_t offset) {
      rng::fill_normal(std::span<double>(p, n), seed, offset, mean, stddev);
    });
  }

 private:
  // Eagerly: reserve the offsets now (call order decides the numbers) and run `fill(seed, offset)` on
  // the stream. While s captures a graph: record a draw instead; each replay reserves it afresh and
  // the recorded task reads its position from the replay (torch's graph-safe Philox).
  template <class Fill>
  static void enqueue_fill(StreamRef s, std::size_t n, Generator& g, bool wide, Fill fill) {
    if (n == 0) return;
    detail::StreamState& state = s.state("fill");
    if (state.is_capturing()) {
      if (const auto recording = state.capture()) {
        const std::size_t index = recording->add_draw(g, n, wide);
        s.enqueue([index, fill] {
          const auto position = detail::replay_position(index);
          fill(position.first, position.second);
        });
        return;
      }
    }
    // A stream that refuses the task (after fork()) leaves the generator where it was.
    g.reserve_then(n, wide, [&](std::uint64_t seed, std::uint64_t offset) {
      s.enqueue([seed, offset, fill] { fill(seed, offset); });
    });
  }
};

using Random = BasicRandom<>;

}  // namespace accel::cpu
