// accel/cpu/profile.hpp — deprecated: the profiler ranges are the same on every backend,
// accel::Profiling (backend/profiling.hpp), which accel::CpuBackend inherits.
#pragma once

#include <accel/backend/profiling.hpp>

namespace accel::cpu {

using Profiling [[deprecated("the ranges are shared by every backend: use accel::Profiling")]] = accel::Profiling;

}  // namespace accel::cpu
