// accel/cuda/backend.hpp — accel::CudaBackend: the same contract as CpuBackend, on NVIDIA GPUs.
//
// Host code over the CUDA runtime API (compiles with the host compiler; no device code): each area
// lives in its own header and the backend is their composition — empty bases, static functions, no
// state, no vtable. Detection (device_count, is_available) creates no CUDA context and keeps the
// process safe to fork; everything else initialises the runtime lazily, on first use of a device.
// Including this header in a build without CUDA (no ACCEL_HAS_CUDA) is a compile-time #error.
#pragma once

#include <accel/backend/profiling.hpp>
#include <accel/concepts/accelerator.hpp>
#include <accel/cuda/detail/cuda_api.hpp>
#include <accel/cuda/detail/ops_api.hpp>
#include <accel/cuda/device.hpp>
#include <accel/cuda/dtype.hpp>
#include <accel/cuda/env.hpp>
#include <accel/cuda/error.hpp>
#include <accel/cuda/event.hpp>
#include <accel/cuda/graph.hpp>
#include <accel/cuda/memory.hpp>
#include <accel/cuda/random.hpp>
#include <accel/cuda/stream.hpp>

#include <string_view>

namespace accel {

struct CudaBackend : cuda::Devices, cuda::Streams, cuda::Memory, cuda::Dtypes, Profiling, cuda::Environment,
                     cuda::Ops, cuda::Random, cuda::Graphs {
  [[nodiscard]] static constexpr DeviceType device_type() noexcept { return DeviceType::cuda; }
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "cuda"; }

  // DeepSpeed's CUDA accelerator: kernels run asynchronously on streams, are timed with events, are
  // ordered explicitly across streams, and the allocator does not stall the host when memory is full.
  static constexpr bool is_synchronized_device = false;
  static constexpr bool use_host_timers = false;
  static constexpr bool resolves_data_dependency = false;
  static constexpr bool handles_memory_backpressure = false;

  using Stream = cuda::Stream;
  using StreamRef = cuda::StreamRef;
  using Event = cuda::Event;
  using StreamGuard = cuda::StreamGuard;
  using Graph = cuda::Graph;
  using GraphCapture = cuda::GraphCapture;
  using DeviceGuard = cuda::Devices::DeviceGuard;
};

static_assert(Accelerator<CudaBackend>, "CudaBackend must satisfy accel::Accelerator");

/// The CUDA backend as a value: `Engine<CudaBackend> e{accel::cuda_backend};`.
inline constexpr CudaBackend cuda_backend{};

}  // namespace accel
