// accel/cuda/random.hpp — accel::cuda::Random: RngApi (concepts/rng.hpp) for the CUDA backend.
//
// One default accel::Generator per visible device, created at first use and never destroyed. The
// generators and the state functions need no GPU context (only the device-count check, which creates
// none). Fills reserve their offsets exactly as the CPU backend's do, so both backends hand out the
// same (seed, offset) for the same calls.
//
// PENDING: the GPU fill kernels (Philox from random/philox.hpp compiled with NVRTC through the op
// machinery in accel/ops) are not written yet: every fill with n > 0 throws NotSupportedError
// before touching the generator, so the generator's state is unchanged.
// Including this header in a build without CUDA (no ACCEL_HAS_CUDA) is a compile-time #error.
#pragma once

#include <accel/concepts/rng.hpp>
#include <accel/core/error.hpp>
#include <accel/cuda/detail/cuda_api.hpp>
#include <accel/cuda/device.hpp>
#include <accel/cuda/stream.hpp>
#include <accel/random/default_generators.hpp>
#include <accel/random/generator.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace accel::cuda {

namespace detail {


inline void check_fill(StreamRef s, const void* p, std::size_t n, const char* what) {
  if (p == nullptr && n != 0) {
    throw InvalidArgumentError(std::string("cuda ") + what + ": null pointer for " + std::to_string(n) + " elements");
  }
  if (n == 0) return;
  Devices::check_device(s.device_index());
  throw NotSupportedError(std::string("cuda ") + what +
                          ": GPU fills pending (the Philox fill kernels are not implemented yet)");
}

}  // namespace detail

/// accel::RngApi for the CUDA backend; accel::CudaBackend inherits these.
struct Random : DefaultGenerators<Devices> {
  static void fill_bits(StreamRef s, std::uint32_t* p, std::size_t n) {
    fill_bits(s, p, n, default_generator(s.device_index()));
  }
  static void fill_bits(StreamRef s, std::uint32_t* p, std::size_t n, Generator& g) {
    detail::check_fill(s, p, n, "fill_bits");
    (void)g;
  }

  static void fill_uniform(StreamRef s, float* p, std::size_t n) {
    fill_uniform(s, p, n, default_generator(s.device_index()));
  }
  static void fill_uniform(StreamRef s, float* p, std::size_t n, Generator& g) {
    detail::check_fill(s, p, n, "fill_uniform");
    (void)g;
  }
  static void fill_uniform(StreamRef s, double* p, std::size_t n) {
    fill_uniform(s, p, n, default_generator(s.device_index()));
  }
  static void fill_uniform(StreamRef s, double* p, std::size_t n, Generator& g) {
    detail::check_fill(s, p, n, "fill_uniform");
    (void)g;
  }

  static void fill_normal(StreamRef s, float* p, std::size_t n, float mean, float stddev) {
    fill_normal(s, p, n, mean, stddev, default_generator(s.device_index()));
  }
  static void fill_normal(StreamRef s, float* p, std::size_t n, float mean, float stddev, Generator& g) {
    detail::check_fill(s, p, n, "fill_normal");
    (void)mean, (void)stddev, (void)g;
  }
  static void fill_normal(StreamRef s, double* p, std::size_t n, double mean, double stddev) {
    fill_normal(s, p, n, mean, stddev, default_generator(s.device_index()));
  }
  static void fill_normal(StreamRef s, double* p, std::size_t n, double mean, double stddev, Generator& g) {
    detail::check_fill(s, p, n, "fill_normal");
    (void)mean, (void)stddev, (void)g;
  }
};

}  // namespace accel::cuda
