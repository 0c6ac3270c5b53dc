// accel/accel.hpp — the umbrella header: every part enabled in this build.
#pragma once

#include <accel/concepts/accelerator.hpp>
#include <accel/core/device.hpp>
#include <accel/core/dtype.hpp>
#include <accel/core/error.hpp>
#include <accel/cpu/backend.hpp>
#if defined(ACCEL_HAS_CUDA)
#include <accel/cuda/backend.hpp>
#endif
#include <accel/dispatch/any_backend.hpp>
#include <accel/dispatch/backend_list.hpp>
#include <accel/dispatch/select.hpp>
#include <accel/dispatch/visit.hpp>
#include <accel/memory/buffer.hpp>
#include <accel/profile/ranges.hpp>
#include <accel/profile/scoped_range.hpp>
