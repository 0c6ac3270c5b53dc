// accel/cuda/random.hpp — accel::cuda::Random: RngApi (concepts/rng.hpp) for the CUDA backend.
//
// One default accel::Generator per visible device, created at first use and never destroyed. The
// generators and the state functions need no GPU context (only the device-count check, which creates
// none). Fills reserve their offsets when called, exactly as the CPU backend's do (reserve_position
// for 32-bit outputs, reserve_wide_position for doubles), so both backends hand out the same (seed,
// offset) for the same calls, and launch the "random_fill" op's kernel (kernels/cuda/random_fill.cu,
// loaded through accel/cuda/ops.hpp: an AOT cubin, the JIT cache, or an NVRTC compile) on the stream.
// The GPU writes what accel::rng::fill_* write on the host: raw bits and uniforms bit for bit,
// normals up to the last-bit differences of CUDA's and the C library's log/sin/cos (see
// random/detail/block_fill.hpp). Pointers are device memory aligned to their element, of any length
// and any further alignment.
//
// A fill checks before it touches the generator: a null pointer with n > 0 is InvalidArgumentError,
// n == 0 does nothing, no device is BackendUnavailableError, and the op is loaded (the first fill on a
// device may compile it: NVRTC's errors, or its absence, throw here) — so a fill that throws has not
// moved the generator.
//
// Inside a graph capture on the stream (cuda/graph.hpp) a fill reserves nothing: it records a draw, and
// its kernel reads (seed, offset) from the draw's slot in device memory, which every replay reserves
// afresh and writes before launching the graph — so each replay draws new numbers, as in torch.
// detail::launch_random_fill launches one fill with an explicit (seed, offset), or reading them from
// device memory; detail::random_fill_op(device) loads the op (a first fill during a capture loads it
// too, in relaxed capture mode).
// Including this header in a build without CUDA (no ACCEL_HAS_CUDA) is a compile-time #error.
#pragma once

#include <accel/concepts/rng.hpp>
#include <accel/core/error.hpp>
#include <accel/cuda/detail/cuda_api.hpp>
#include <accel/cuda/device.hpp>
#include <accel/cuda/graph.hpp>
#include <accel/cuda/ops.hpp>
#include <accel/cuda/stream.hpp>
#include <accel/random/default_generators.hpp>
#include <accel/random/generator.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace accel::cuda {

namespace detail {

/// What a fill writes: bits (uint32), uniform_float / normal_float (float), uniform_double /
/// normal_double (double).
using RandomFillKind = RandomFillOp::Kind;

/// The random_fill op loaded on `device`: loaded (and compiled, on a JIT cache miss) by the first
/// call for that device, then shared; thread-safe, never unloaded. Throws BackendUnavailableError
/// without a device (or without NVRTC and an AOT cubin), CompileError if the kernel does not compile;
/// a failed load is retried by the next call. The load runs in relaxed capture mode, so a first fill
/// inside a graph capture does not break the capture (loading a module is no stream work).
inline const RandomFillOp& random_fill_op(int device) {
  Devices::check_device(device);
  struct Slots {
    std::mutex mutex;
    std::unique_ptr<std::atomic<const RandomFillOp*>[]> ops;
  };
  static Slots* const slots = [] {
    auto* s = new Slots;  // leaked: fills from static destructors still find their op
    s->ops.reset(new std::atomic<const RandomFillOp*>[static_cast<std::size_t>(Devices::device_count())]);
    for (int i = 0; i < Devices::device_count(); ++i) s->ops[i].store(nullptr, std::memory_order_relaxed);
    return s;
  }();
  std::atomic<const RandomFillOp*>& slot = slots->ops[device];
  if (const RandomFillOp* op = slot.load(std::memory_order_acquire)) [[likely]] return *op;
  const std::lock_guard lock(slots->mutex);
  if (const RandomFillOp* op = slot.load(std::memory_order_relaxed)) return *op;
  auto builder = Ops::get_op_builder<ops::RandomFill>();
  builder.set_device(device);
  struct RelaxedCapture {  // as cuda::DeviceMemory does for a graph pool's cudaMalloc
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    RelaxedCapture() { (void)cudaThreadExchangeStreamCaptureMode(&mode); }
    ~RelaxedCapture() { (void)cudaThreadExchangeStreamCaptureMode(&mode); }
    RelaxedCapture(const RelaxedCapture&) = delete;
    RelaxedCapture& operator=(const RelaxedCapture&) = delete;
  };
  const auto* op = [&] {
    const RelaxedCapture relaxed;
    return new RandomFillOp(builder.load());  // leaked, as above
  }();
  slot.store(op, std::memory_order_release);
  return *op;
}

inline void check_fill_pointer(const void* p, std::size_t n, const char* what) {
  if (p == nullptr && n != 0) {
    throw InvalidArgumentError(std::string("cuda ") + what + ": null pointer for " + std::to_string(n) + " elements");
  }
}

/// Launches one fill of n values of `kind` into device memory `out` on stream s, as
/// accel::rng::fill_*(span(out, n), seed, offset[, mean, stddev]) writes them; touches no generator.
/// With device_philox_state (device memory holding {seed, offset}, nullable) the kernel reads seed =
/// device_philox_state[0] and offset = device_philox_state[1] + intra_offset when it runs, and `seed`
/// and `offset` are ignored: a captured graph then draws what the host writes there before each
/// replay (torch's graph-safe Philox). mean/stddev matter for the normal kinds only. Null `out` with
/// n > 0: InvalidArgumentError; n == 0: nothing; no device: BackendUnavailableError. Asynchronous.
inline void launch_random_fill(StreamRef s, RandomFillKind kind, void* out, std::size_t n, std::uint64_t seed,
                               std::uint64_t offset, const std::uint64_t* device_philox_state,
                               std::uint64_t intra_offset, double mean = 0.0, double stddev = 1.0) {
  check_fill_pointer(out, n, "launch_random_fill");
  if (n == 0) return;
  random_fill_op(s.device_index())
      .launch(s, kind, out, n, seed, offset, device_philox_state, intra_offset, mean, stddev);
}

/// A fill through generator g: checks and loads first; then, while s captures a graph, records a draw
/// whose (seed, offset) the kernel reads from device memory at each replay, else reserves now (wide:
/// for doubles) and launches with that position.
inline void generator_fill(StreamRef s, RandomFillKind kind, void* out, std::size_t n, Generator& g, bool wide,
                           const char* what, double mean = 0.0, double stddev = 1.0) {
  check_fill_pointer(out, n, what);
  if (n == 0) return;
  const RandomFillOp& op = random_fill_op(s.device_index());
  if (const std::uint64_t* slot = capture_random_draw(s, g, n, wide)) {
    op.launch(s, kind, out, n, 0, 0, slot, 0, mean, stddev);
    return;
  }
  const auto [seed, offset] = wide ? g.reserve_wide_position(n) : g.reserve_position(n);
  op.launch(s, kind, out, n, seed, offset, nullptr, 0, mean, stddev);
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
