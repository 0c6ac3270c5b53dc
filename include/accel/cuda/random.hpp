// accel/cuda/random.hpp — accel::cuda::Random: RngApi (concepts/rng.hpp) for the CUDA backend.
//
// One default accel::Generator per visible device, created at first use and never destroyed. The
// generators and the state functions need no GPU context (only the device-count check, which creates
// none). Fills reserve their offsets when called, exactly as the CPU backend's do (reserve_position
// for 32-bit outputs, reserve_wide_position for doubles), so both backends hand out the same (seed,
// offset) for the same calls, and launch the "random_fill" op's kernel (kernels/cuda/random_fill.cu,
// loaded through cuda/detail/random_fill.hpp: an AOT cubin, the JIT cache, or an NVRTC compile) on the stream.
// The GPU writes what accel::rng::fill_* write on the host: raw bits and uniforms bit for bit,
// normals up to the last-bit differences of CUDA's and the C library's log/sin/cos (see
// random/detail/block_fill.hpp). Pointers are device memory aligned to their element, of any length
// and any further alignment.
//
// A fill checks before it touches the generator: a null pointer with n > 0 is InvalidArgumentError,
// n == 0 does nothing, no device is BackendUnavailableError, and the op is loaded (the first fill on a
// device may compile it: NVRTC's errors, or its absence, throw here); a launch that still fails gives
// its reservation back (Generator::reserve_then) — so a fill that throws has not moved the generator.
//
// Inside a graph capture on the stream (cuda/graph.hpp) a fill reserves nothing: it records a draw, and
// its kernel reads (seed, offset) from the draw's slot in device memory, which every replay reserves
// afresh and writes before launching the graph — so each replay draws new numbers, as in torch.
// Including this header in a build without CUDA (no ACCEL_HAS_CUDA) is a compile-time #error.
#pragma once

#include <accel/concepts/rng.hpp>
#include <accel/core/error.hpp>
#include <accel/cuda/detail/cuda_api.hpp>
#include <accel/cuda/device.hpp>
#include <accel/cuda/graph.hpp>
#include <accel/cuda/detail/random_fill.hpp>
#include <accel/cuda/stream.hpp>
#include <accel/random/default_generators.hpp>
#include <accel/random/detail/normal_parameters.hpp>
#include <accel/random/generator.hpp>

#include <cstddef>
#include <cstdint>

namespace accel::cuda {

namespace detail {

/// A fill through generator g: checks and loads first; then, while s captures a graph, records a draw
/// whose (seed, offset) the kernel reads from device memory at each replay, else reserves now (wide:
/// for doubles) and launches with that position.
inline void generator_fill(StreamRef s, RandomFillKind kind, void* out, std::size_t n, Generator& g, bool wide,
                           const char* what, double mean = 0.0, double stddev = 1.0) {
  rng::detail::check_fill_pointer("cuda", what, out, n, element_bytes(kind));
  if (kind == RandomFillKind::normal_float || kind == RandomFillKind::normal_double) {
    rng::detail::check_normal_parameters("cuda", mean, stddev);
  }
  if (n == 0) return;
  const RandomFillOp& op = random_fill_op(s.device_index());
  if (const std::uint64_t* slot = capture_random_draw(s, g, n, wide)) {
    op.launch(s, kind, out, n, 0, 0, slot, 0, mean, stddev);
    return;
  }
  // A launch that fails (say, on the legacy stream while another captures) leaves the generator as it was.
  g.reserve_then(n, wide, [&](std::uint64_t seed, std::uint64_t offset) {
    op.launch(s, kind, out, n, seed, offset, nullptr, 0, mean, stddev);
  });
}

}  // namespace detail

/// accel::RngApi for the CUDA backend; accel::CudaBackend inherits these.
struct Random : DefaultGenerators<Devices> {
  static void fill_bits(StreamRef s, std::uint32_t* p, std::size_t n) {
    fill_bits(s, p, n, default_generator(s.device_index()));
  }
  static void fill_bits(StreamRef s, std::uint32_t* p, std::size_t n, Generator& g) {
    detail::generator_fill(s, detail::RandomFillKind::bits, p, n, g, false, "fill_bits");
  }

  static void fill_uniform(StreamRef s, float* p, std::size_t n) {
    fill_uniform(s, p, n, default_generator(s.device_index()));
  }
  static void fill_uniform(StreamRef s, float* p, std::size_t n, Generator& g) {
    detail::generator_fill(s, detail::RandomFillKind::uniform_float, p, n, g, false, "fill_uniform");
  }
  static void fill_uniform(StreamRef s, double* p, std::size_t n) {
    fill_uniform(s, p, n, default_generator(s.device_index()));
  }
  static void fill_uniform(StreamRef s, double* p, std::size_t n, Generator& g) {
    detail::generator_fill(s, detail::RandomFillKind::uniform_double, p, n, g, true, "fill_uniform");
  }

  static void fill_normal(StreamRef s, float* p, std::size_t n, float mean, float stddev) {
    fill_normal(s, p, n, mean, stddev, default_generator(s.device_index()));
  }
  static void fill_normal(StreamRef s, float* p, std::size_t n, float mean, float stddev, Generator& g) {
    detail::generator_fill(s, detail::RandomFillKind::normal_float, p, n, g, false, "fill_normal", mean, stddev);
  }
  static void fill_normal(StreamRef s, double* p, std::size_t n, double mean, double stddev) {
    fill_normal(s, p, n, mean, stddev, default_generator(s.device_index()));
  }
  static void fill_normal(StreamRef s, double* p, std::size_t n, double mean, double stddev, Generator& g) {
    detail::generator_fill(s, detail::RandomFillKind::normal_double, p, n, g, true, "fill_normal", mean, stddev);
  }
};

}  // namespace accel::cuda
