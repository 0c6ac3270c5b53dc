// accel/concepts/accelerator.hpp — accel::Accelerator: everything a backend policy type provides.
//
// The conjunction of one small concept per area; each area's contract is written in its header.
// An area that lands later joins the conjunction the day it lands, and every backend satisfies it
// from then on. Optional capabilities have their own concepts (e.g. accel::Collectives).
#pragma once

#include <accel/concepts/device.hpp>
#include <accel/concepts/dtype.hpp>
#include <accel/concepts/env.hpp>
#include <accel/concepts/flags.hpp>
#include <accel/concepts/graph.hpp>
#include <accel/concepts/memory.hpp>
#include <accel/concepts/ops.hpp>
#include <accel/concepts/profile.hpp>
#include <accel/concepts/rng.hpp>
#include <accel/concepts/stream.hpp>

namespace accel {

template <class B>
concept Accelerator = FlagsApi<B> && DeviceApi<B> && StreamApi<B> && MemoryApi<B> && DtypeApi<B> &&
                      ProfileApi<B> && EnvApi<B> && OpApi<B> && RngApi<B> && GraphApi<B>;

}  // namespace accel
