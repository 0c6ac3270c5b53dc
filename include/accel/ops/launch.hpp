// accel/ops/launch.hpp — launching a loaded op's kernel on a stream, the same call on every backend.
//
//   ops::LaunchShape  CUDA's grid, block and dynamic shared memory, and the threads a host kernel uses
//   ops::Kernel       one entry point of a loaded op, resolved once (the op stays loaded while it lives)
//   b.launch_kernel(s, kernel, shape, args)   accel::OpApi, every backend (and AnyBackend)
//
// A kernel takes one trivially copyable struct of arguments, the same bytes on every backend: declare
// it in a plain C header that the op's host and CUDA sources both include (as accel's kernels share
// kernels/common/accel_ops_abi.h). What a backend runs:
//   host op (OpKind::host)  the exported  extern "C" int entry(const void* args, int num_threads),
//                           called in stream order (on a created stream's worker) with a copy of the
//                           arguments taken at the launch; num_threads is shape.threads (0: the
//                           kernel's choice, e.g. all cores). A non-zero return means the kernel
//                           refused its arguments: the stream reports it as a task failure
//                           (accel::TaskError at the next synchronize), naming the kernel and code.
//   cuda op (OpKind::cuda)  the  extern "C" __global__ void entry(const Args args)  kernel, launched
//                           with cuLaunchKernel(grid, block, shared_bytes) on the stream; the driver
//                           copies the arguments at the launch, so the caller's struct may go at once.
// The CPU backend launches host kernels, the CUDA backend cuda kernels; another kind is an
// InvalidArgumentError naming the kernel. Launches are stream work like any other: they are recorded
// by a graph capture and run again by each replay, with the arguments of the capture.
//
// A user's own op is an ops::OpSpec (sources under a kernel directory of its own) given to
// b.create_op_builder(spec), which picks the backend's toolchain for spec.kind:
//
//   accel::ops::OpSpec spec{.name = "my_op", .kind = accel::ops::OpKind::host,
//                           .sources = {"my_op.cpp"}, .entry_points = {"my_kernel"}};
//   auto op = b.create_op_builder(spec).set_kernel_dir(dir).load();
//   accel::ops::Kernel k(op, "my_kernel");
//   b.launch_kernel(stream, k, accel::ops::LaunchShape::linear(n, 256), MyArgs{x, y, n});
#pragma once

#include <accel/core/error.hpp>
#include <accel/ops/op_builder.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace accel::ops {

/// Where a kernel runs: CUDA's grid and block (and dynamic shared memory), a host kernel's threads.
/// Each backend reads its own fields and ignores the others.
struct LaunchShape {
  std::uint32_t grid[3] = {1, 1, 1};
  std::uint32_t block[3] = {1, 1, 1};
  std::uint32_t shared_bytes = 0;
  int threads = 0;  ///< host kernels: OpenMP threads (0: the kernel's default)

  /// A one-dimensional grid of `block`-thread blocks covering n items (at least one block).
  /// InvalidArgumentError for block 0, and for more blocks than a grid dimension holds (2^31 - 1, CUDA's
  /// limit in x): a truncated count would leave items uncovered without a word.
  [[nodiscard]] static constexpr LaunchShape linear(std::int64_t n, std::uint32_t block, int threads = 0) {
    if (block == 0) throw InvalidArgumentError("LaunchShape::linear: block must be > 0");
    LaunchShape s;
    const std::int64_t blocks = n <= 0 ? 1 : n / block + (n % block != 0 ? 1 : 0);  // no n + block - 1 overflow
    if (blocks > 2147483647) {
      throw InvalidArgumentError("LaunchShape::linear: " + std::to_string(n) + " items in blocks of " +
                                 std::to_string(block) + " need " + std::to_string(blocks) +
                                 " blocks, more than a grid holds (2^31 - 1)");
    }
    s.grid[0] = static_cast<std::uint32_t>(blocks);
    s.block[0] = block;
    s.threads = threads;
    return s;
  }
  /// `grid` blocks of `block` threads.
  [[nodiscard]] static constexpr LaunchShape blocks(std::uint32_t grid, std::uint32_t block,
                                                    std::uint32_t shared_bytes = 0, int threads = 0) noexcept {
    LaunchShape s;
    s.grid[0] = grid;
    s.block[0] = block;
    s.shared_bytes = shared_bytes;
    s.threads = threads;
    return s;
  }
};

/// One entry point of a loaded op (a host function or a CUDA kernel), resolved once.
class Kernel {
 public:
  /// The signature of a host kernel (OpKind::host).
  using HostFn = int(const void* args, int num_threads);

  Kernel() = default;
  /// Resolves `entry` in `op`; InvalidArgumentError when the op does not export it.
  Kernel(LoadedOp op, std::string_view entry)
      : op_(std::move(op)),
        entry_(entry),
        address_(op_.symbol(entry)),
        description_(std::make_shared<const std::string>("op '" + op_.name() + "' kernel '" + entry_ + "'")) {}

  [[nodiscard]] bool valid() const noexcept { return address_ != nullptr; }
  /// The entry point's name.
  [[nodiscard]] const std::string& name() const noexcept { return entry_; }
  [[nodiscard]] OpKind kind() const noexcept { return op_.kind(); }
  /// The host function (OpKind::host) or the CUfunction (OpKind::cuda).
  [[nodiscard]] void* address() const noexcept { return address_; }
  /// The op it belongs to (kept loaded while this Kernel lives).
  [[nodiscard]] const LoadedOp& op() const noexcept { return op_; }
  /// The device a cuda kernel's module is loaded on; -1 for host kernels.
  [[nodiscard]] int device() const noexcept { return op_.device(); }
  /// "op 'nn_ops' kernel 'accel_gelu_forward'", for messages.
  [[nodiscard]] std::string describe() const { return description_ ? *description_ : std::string("empty kernel"); }
  /// describe(), shared: what a launch keeps to name the kernel in a later error.
  [[nodiscard]] const std::shared_ptr<const std::string>& shared_description() const noexcept { return description_; }

 private:
  LoadedOp op_;
  std::string entry_;
  void* address_ = nullptr;
  std::shared_ptr<const std::string> description_;
};

namespace detail {

/// The error for a launch whose kernel the backend cannot run.
[[nodiscard]] inline InvalidArgumentError launch_kind_error(std::string_view backend, const Kernel& k,
                                                            OpKind runs) {
  if (!k.valid()) {
    return InvalidArgumentError(std::string(backend) + ": launch_kernel of an empty ops::Kernel");
  }
  return InvalidArgumentError(std::string(backend) + ": " + k.describe() + " is a " + std::string(to_string(k.kind())) +
                              " kernel; the " + std::string(backend) + " backend launches " +
                              std::string(to_string(runs)) + " kernels");
}

/// The error for an op spec of a kind the backend does not build.
[[nodiscard]] inline InvalidArgumentError spec_kind_error(std::string_view backend, const OpSpec& spec) {
  return InvalidArgumentError(std::string(backend) + ": op '" + spec.name + "' is a " +
                              std::string(to_string(spec.kind)) + " op, which the " + std::string(backend) +
                              " backend does not build");
}

}  // namespace detail
}  // namespace accel::ops
