// accel/cpu/backend.hpp — accel::CpuBackend: the embedded default, and a faithful double of a GPU.
//
// Streams are real queues (worker threads), events really time, the caching allocator really counts,
// so code tested on CpuBackend behaves the same on CudaBackend. Each area lives in its own header;
// the backend is their composition — empty bases, static functions, no state, no vtable.
#pragma once

#include <accel/backend/profiling.hpp>
#include <accel/concepts/accelerator.hpp>
#include <accel/cpu/device.hpp>
#include <accel/cpu/dtype.hpp>
#include <accel/cpu/env.hpp>
#include <accel/cpu/event.hpp>
#include <accel/cpu/graph.hpp>
#include <accel/cpu/memory.hpp>
#include <accel/cpu/detail/ops_api.hpp>
#include <accel/cpu/random.hpp>
#include <accel/cpu/stream.hpp>

#include <string_view>

namespace accel {

struct CpuBackend : cpu::Devices, cpu::Streams, cpu::Memory, cpu::Dtypes, Profiling, cpu::Environment, cpu::Ops,
                    cpu::Random, cpu::Graphs {
  [[nodiscard]] static constexpr DeviceType device_type() noexcept { return DeviceType::cpu; }
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "cpu"; }

  // The scheduling flags describe this backend as it is, not DeepSpeed's CPU accelerator (all True
  // there): created streams run asynchronously on worker threads, so callers must order work with
  // events, time it with events, and cannot count on the allocator stalling when memory is full.
  static constexpr bool is_synchronized_device = false;
  static constexpr bool use_host_timers = false;
  static constexpr bool resolves_data_dependency = false;
  static constexpr bool handles_memory_backpressure = false;

  using Stream = cpu::Stream;
  using StreamRef = cpu::StreamRef;
  using Event = cpu::Event;
  using StreamGuard = cpu::StreamGuard;
  using Graph = cpu::Graph;
  using GraphCapture = cpu::GraphCapture;
  using DeviceGuard = cpu::Devices::DeviceGuard;
};

static_assert(Accelerator<CpuBackend>, "CpuBackend must satisfy accel::Accelerator");

/// The CPU backend as a value: `Engine<CpuBackend> e{accel::cpu_backend};`.
inline constexpr CpuBackend cpu_backend{};

}  // namespace accel
