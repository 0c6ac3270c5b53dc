// accel/cuda/detail/random_fill.hpp — the "random_fill" op behind cuda::Random (accel/cuda/random.hpp):
// its typed op RandomFillOp, the per-device load, and one launch.
//
// The fills are an NVRTC op like the others (kernels/cuda/random_fill.cu: an AOT cubin, the JIT cache,
// or a compile), but every program that draws random numbers on the GPU needs them, so they are built
// here through the NVRTC toolchain alone (cuda/detail/nvrtc_toolchain.hpp) — not through the opt-in op
// builders of <accel/cuda/ops.hpp> (the host compiler, the op registry, fused Adam, tensor ops).
//
// detail::launch_random_fill launches one fill with an explicit (seed, offset), or reading them from
// device memory; detail::random_fill_op(device) loads the op (a first fill during a capture loads it
// too, in relaxed capture mode).
#pragma once

#include <accel/core/error.hpp>
#include <accel/cuda/detail/cuda_api.hpp>
#include <accel/cuda/detail/module_api.hpp>
#include <accel/cuda/detail/nvrtc_toolchain.hpp>
#include <accel/cuda/device.hpp>
#include <accel/cuda/stream.hpp>
#include <accel/ops/op_builder.hpp>
#include <accel/ops/registry.hpp>
#include <accel/random/detail/fill_pointer.hpp>

#include <cuda.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace accel::cuda {

/// Philox4x32-10 fills (kernels/cuda/random_fill.cu): what accel::rng::fill_* write on the host, on a
/// stream. cuda::Random reserves the generator's offsets and calls launch(); so may code that brings
/// its own (seed, offset), or reads them from device memory (philox_state, for graph capture).
class RandomFillOp {
 public:
  enum class Kind { bits, uniform_float, uniform_double, normal_float, normal_double };
  static constexpr unsigned block_size = 512;

  explicit RandomFillOp(ops::LoadedOp op) {
    k_.op = std::move(op);
    k_.device = k_.op.device();
    k_.sms = detail::sm_count(k_.device);
    for (const Kind kind : {Kind::bits, Kind::uniform_float, Kind::uniform_double, Kind::normal_float,
                            Kind::normal_double}) {
      const auto i = static_cast<std::size_t>(kind);
      kernels_[i] = static_cast<CUfunction>(k_.op.symbol(kernel_name(kind)));
      wave_[i] = detail::resident_blocks(kernels_[i], block_size, k_.sms, 4);
    }
  }

  [[nodiscard]] static const char* kernel_name(Kind kind) noexcept {
    switch (kind) {
      case Kind::bits: return "accel_random_bits";
      case Kind::uniform_float: return "accel_random_uniform_f32";
      case Kind::uniform_double: return "accel_random_uniform_f64";
      case Kind::normal_float: return "accel_random_normal_f32";
      case Kind::normal_double: return "accel_random_normal_f64";
    }
    return "";
  }

  /// Writes n values of `kind` (uint32, float or double by kind) to device memory `out` (aligned to
  /// its element), as accel::rng::fill_*(span(out, n), seed, offset[, mean, stddev]) would. With
  /// philox_state (device memory, 2 x u64) the kernel uses seed = philox_state[0] and offset =
  /// philox_state[1] + intra_offset instead, read when it runs. No host synchronisation; n == 0 does
  /// nothing. mean and stddev are used by the normal kinds (converted to float for normal_float).
  void launch(StreamRef s, Kind kind, void* out, std::size_t n, std::uint64_t seed, std::uint64_t offset,
              const std::uint64_t* philox_state, std::uint64_t intra_offset, double mean, double stddev) const {
    detail::check_stream_device(k_, s, "random_fill");
    if (n == 0) return;
    unsigned long long count = n, seed_arg = seed, offset_arg = offset, intra = intra_offset;
    const void* state = philox_state;
    float mean_f = static_cast<float>(mean), stddev_f = static_cast<float>(stddev);
    void* params_plain[] = {&out, &count, &seed_arg, &offset_arg, &state, &intra};
    void* params_f32[] = {&out, &count, &seed_arg, &offset_arg, &state, &intra, &mean_f, &stddev_f};
    void* params_f64[] = {&out, &count, &seed_arg, &offset_arg, &state, &intra, &mean, &stddev};
    void** params = kind == Kind::normal_float ? params_f32 : kind == Kind::normal_double ? params_f64 : params_plain;
    const bool wide = kind == Kind::uniform_double || kind == Kind::normal_double;
    // Units of one Philox block (16 bytes of output): at most (n + 3) / per_block + 1, whatever the offset.
    const unsigned long long units = (count + 3) / (wide ? 2 : 4) + 1;
    const unsigned long long blocks = (units + block_size - 1) / block_size;
    const auto grid = static_cast<unsigned>(std::min<unsigned long long>(blocks, wave_[static_cast<std::size_t>(kind)]));
    detail::launch(kernels_[static_cast<std::size_t>(kind)], grid, block_size, s, params, kernel_name(kind));
  }

  [[nodiscard]] const ops::LoadedOp& op() const noexcept { return k_.op; }
  [[nodiscard]] int device() const noexcept { return k_.device; }

 private:
  detail::LoadedKernels k_;
  std::array<CUfunction, 5> kernels_{};
  std::array<unsigned, 5> wave_{};  ///< resident_blocks() of each kernel: one wave of a grid-stride loop
};

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
  ops::OpBuilder builder(ops::specs::cuda_random_fill(), &nvrtc_driver_toolchain, "cuda");
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

/// The bytes of one element of a fill of `kind` (the alignment its kernel assumes).
[[nodiscard]] inline std::size_t element_bytes(RandomFillKind kind) noexcept {
  return kind == RandomFillKind::uniform_double || kind == RandomFillKind::normal_double ? 8 : 4;
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
  rng::detail::check_fill_pointer("cuda", "launch_random_fill", out, n, element_bytes(kind));
  if (n == 0) return;
  random_fill_op(s.device_index())
      .launch(s, kind, out, n, seed, offset, device_philox_state, intra_offset, mean, stddev);
}

}  // namespace detail

}  // namespace accel::cuda
