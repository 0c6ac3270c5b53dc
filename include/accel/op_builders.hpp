// accel/op_builders.hpp — the op builders of every enabled backend (DeepSpeed's op_builder): opt-in.
//
// Every backend declares the OpApi members (op_builder_dir, create_op_builder, get_op_builder<Op>,
// build_extension, op_names, op_table, launch_kernel) and accel/accel.hpp gives them all, but what they run — the op
// registries, the host-compiler and NVRTC toolchains, the on-disk JIT cache, SHA-256 keys, process
// spawning, the typed ops (FusedAdamOp, TensorOpsOp) — is defined here, so that a translation unit
// that builds no op does not compile it. Include this header where ops are built or reported:
//
//   #include <accel/accel.hpp>
//   #include <accel/op_builders.hpp>
//   auto adam = accel::CpuBackend::get_op_builder<accel::ops::FusedAdam>().load();
//   std::puts(accel::ops::format_op_table(accel::get_accelerator().op_table()).c_str());
//
// Without it, such a call is a compile error that names this header. (Its former name, <accel/ops.hpp>,
// forwards here: beside the folder ops/ — the machinery one floor below the backends — it read as part of it.)
#pragma once

#include <accel/cpu/ops.hpp>
#include <accel/ops/fused_adam.hpp>
#include <accel/ops/host_compiler.hpp>
#include <accel/ops/jit_cache.hpp>
#include <accel/ops/launch.hpp>
#include <accel/ops/nn_ops.hpp>
#include <accel/ops/op_builder.hpp>
#include <accel/ops/registry.hpp>
#include <accel/ops/tensor_ops.hpp>
#if defined(ACCEL_HAS_CUDA)
#include <accel/cuda/ops.hpp>
#include <accel/ops/nvrtc.hpp>
#endif
