// accel/accel.hpp — the umbrella header: the core, every backend enabled in this build, runtime
// selection, buffers and profiling ranges.
//
// Opt-in, for the translation units that use them (each costs compile time the others should not pay):
//   <accel/op_builders.hpp>  the op builders: create_op_builder(...).load(), op_table(), the JIT cache
//   <accel/algo/algo.hpp>    Thrust/CUB algorithms over buffers (needs CCCL)
// benchmarks/compile/compile_cost.sh measures what including this header costs.
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
