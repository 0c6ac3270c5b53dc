// accel/memory/stats.hpp — moved: accel::MemoryStats and accel::MemoryInfo are value types of the
// core, in <accel/core/memory_stats.hpp> (the concepts name them). Kept so that old includes compile.
#pragma once

#include <accel/core/memory_stats.hpp>
