// accel/core/capture_mode.hpp — accel::CaptureMode: which calls a graph capture forbids (CUDA's
// cudaStreamCaptureMode; torch's capture_error_mode "global" / "thread_local" / "relaxed").
//
// Synchronizing or querying the capturing stream itself is always an error. Beyond that:
//   global      a device synchronize from any thread while the capture runs is an error (the default)
//   per_thread  only from the thread that began the capture
//   relaxed     device synchronizes are allowed
// An error invalidates the capture: GraphCapture::end() reports it and the graph stays empty.
#pragma once

#include <cstdint>
#include <string_view>

namespace accel {

enum class CaptureMode : std::uint8_t { global, per_thread, relaxed };

[[nodiscard]] constexpr std::string_view to_string(CaptureMode mode) noexcept {
  switch (mode) {
    case CaptureMode::global: return "global";
    case CaptureMode::per_thread: return "per_thread";
    case CaptureMode::relaxed: return "relaxed";
  }
  return "unknown";
}

}  // namespace accel
