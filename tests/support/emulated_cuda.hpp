// emulated_cuda.hpp — a backend for accel's op launchers (NnKernels, the engine's GptKernels: any code
// written against b.launch_kernel and b.create_op_builder) whose cuda ops are CUDA kernels' own source
// compiled into the test and run on the CPU by cuda_host.hpp. A test registers each op's entry points
// (cuda_host::register_op) with the argument struct each kernel takes; a launch then runs the kernel
// with the grid, block and dynamic shared memory the launcher chose, so the launchers' shapes, argument
// structs and scratch sizes are checked along with the kernels.
//
// Include it after every other header (cuda_host.hpp defines CUDA's keywords as macros), then the
// kernels' source.
#pragma once

#include <accel/core/device.hpp>
#include <accel/core/error.hpp>
#include <accel/ops/launch.hpp>
#include <accel/ops/op_builder.hpp>

#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "cuda_host.hpp"

namespace cuda_host {

/// An emulated kernel: the launch's shape, its argument bytes and their size.
using EntryFn = void(const accel::ops::LaunchShape&, const void* args, std::size_t bytes);
using EntryTable = std::map<std::string, EntryFn*, std::less<>>;

/// Launches run so far (every kernel of every op).
inline unsigned long long& launches() {
  static unsigned long long n = 0;
  return n;
}

/// Entry runs `Entry(args)` on every thread of the launch's grid; the launcher's argument struct must be
/// the kernel's, byte for byte (as cuLaunchKernel copies it).
template <auto Entry, class Args>
void run_entry(const accel::ops::LaunchShape& s, const void* args, std::size_t bytes) {
  if (bytes != sizeof(Args)) fail("a launch whose argument struct is not the kernel's size");
  Args a;
  std::memcpy(&a, args, sizeof a);
  ++launches();
  launch(Dim{s.grid[0], s.grid[1], s.grid[2]}, Dim{s.block[0], s.block[1], s.block[2]}, [&a] { Entry(a); },
         s.shared_bytes);
}

/// The ops a test compiled in: op name -> its entry points.
inline std::map<std::string, const EntryTable*, std::less<>>& ops() {
  static std::map<std::string, const EntryTable*, std::less<>> table;
  return table;
}
inline void register_op(const std::string& name, const EntryTable& entries) { ops()[name] = &entries; }

inline void* lookup(void* handle, const char* name) {
  const auto& table = *static_cast<const EntryTable*>(handle);
  const auto it = table.find(std::string_view(name));
  return it == table.end() ? nullptr : reinterpret_cast<void*>(it->second);
}

/// A loaded cuda op whose kernels are the registered entry points of `name`.
inline accel::ops::LoadedOp loaded_op(const std::string& name) {
  const auto it = ops().find(name);
  if (it == ops().end()) throw accel::InvalidArgumentError("emulated CUDA: no op '" + name + "' was registered");
  return accel::ops::LoadedOp(name, accel::ops::OpKind::cuda, accel::ops::LoadSource::compiled,
                              name + " (CUDA source compiled for the CPU)",
                              std::shared_ptr<void>(const_cast<EntryTable*>(it->second), [](void*) {}), lookup, 0.0);
}

/// The backend: a CUDA device whose kernels run on the calling thread, at once.
class EmulatedCuda {
 public:
  struct StreamRef {
    void synchronize() const {}
  };
  [[nodiscard]] static std::string_view name() { return "cuda (emulated on the CPU)"; }
  [[nodiscard]] static accel::DeviceType device_type() { return accel::DeviceType::cuda; }

  /// What b.create_op_builder(spec) gives: load() checks that the spec names only kernels the test
  /// compiled in, as NVRTC's load fails on an entry point the source lacks.
  class Builder {
   public:
    explicit Builder(accel::ops::OpSpec spec) : spec_(std::move(spec)) {}
    Builder& set_kernel_dir(const std::string&) { return *this; }
    [[nodiscard]] accel::ops::LoadedOp load() const {
      if (spec_.kind != accel::ops::OpKind::cuda) throw accel::InvalidArgumentError("emulated CUDA: op '" + spec_.name + "' is not a cuda op");
      accel::ops::LoadedOp op = loaded_op(spec_.name);
      for (const std::string& e : spec_.entry_points) (void)op.symbol(e);  // InvalidArgumentError naming it
      return op;
    }

   private:
    accel::ops::OpSpec spec_;
  };
  [[nodiscard]] Builder create_op_builder(const accel::ops::OpSpec& spec) const { return Builder(spec); }

  template <class Args>
  void launch_kernel(StreamRef, const accel::ops::Kernel& k, const accel::ops::LaunchShape& shape, const Args& a) const {
    if (k.kind() != accel::ops::OpKind::cuda) throw accel::InvalidArgumentError("emulated CUDA: " + k.describe() + " is not a cuda kernel");
    reinterpret_cast<EntryFn*>(k.address())(shape, &a, sizeof a);
  }
};

}  // namespace cuda_host
