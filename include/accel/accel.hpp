// accel/accel.hpp — the umbrella header: every part enabled in this build.
#pragma once

#include <accel/concepts/accelerator.hpp>
#include <accel/core/device.hpp>
#include <accel/core/dtype.hpp>
#include <accel/core/error.hpp>
#include <accel/cpu/backend.hpp>
#include <accel/memory/buffer.hpp>
#include <accel/profile/ranges.hpp>
#include <accel/profile/scoped_range.hpp>
