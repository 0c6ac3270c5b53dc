// The CUDA nn_ops kernels (kernels/cuda/nn_ops.cu) run on the CPU, their own source compiled as host C++
// (tests/support/cuda_host.hpp: a block's threads as fibers, warp shuffles and barriers as the hardware
// resolves them), called through NnKernels — accel's launch shapes and argument checks — against the CPU
// kernels: the cases the GPU runs check (nn_ops_device_match.hpp), on every commit, without a GPU. What
// this cannot check (timing, the memory model, the device's own math functions) the GPU runs do.
#include "nn_ops_device_match.hpp"

#include <accel/ops/launch.hpp>
#include <accel/ops/op_builder.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstring>
#include <list>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "../support/cuda_host.hpp"
#define ACCEL_CUDA_ON_HOST 1
#include "nn_ops.cu"

namespace {

using accel::ops::LaunchShape;
using accel::ops::NnKernels;

// An emulated kernel: the launch's shape, its argument bytes and their size.
using EntryFn = void(const LaunchShape&, const void* args, std::size_t bytes);

unsigned long long& launches() {
  static unsigned long long n = 0;
  return n;
}

template <auto Entry, class Args>
void run_entry(const LaunchShape& s, const void* args, std::size_t bytes) {
  REQUIRE(bytes == sizeof(Args));  // NnKernels' argument struct is the kernel's, byte for byte
  REQUIRE(s.shared_bytes == 0);    // nn_ops declares its shared memory statically
  Args a;
  std::memcpy(&a, args, sizeof a);
  ++launches();
  cuda_host::launch(cuda_host::Dim{s.grid[0], s.grid[1], s.grid[2]}, cuda_host::Dim{s.block[0], s.block[1], s.block[2]},
                    [&a] { Entry(a); });
}

#define ACCEL_EMULATED(name, args)                                              \
  {"accel_nn_" #name "_f32", &run_entry<&accel_nn_##name##_f32, args>},         \
      {"accel_nn_" #name "_bf16", &run_entry<&accel_nn_##name##_bf16, args>}, { \
    "accel_nn_" #name "_f16", &run_entry<&accel_nn_##name##_f16, args>          \
  }

const std::map<std::string, EntryFn*, std::less<>>& entries() {
  static const std::map<std::string, EntryFn*, std::less<>> table = {
      ACCEL_EMULATED(embedding_forward, accel_nn_embedding_forward_args),
      ACCEL_EMULATED(embedding_backward, accel_nn_embedding_backward_args),
      ACCEL_EMULATED(layernorm_forward, accel_nn_layernorm_forward_args),
      ACCEL_EMULATED(layernorm_backward, accel_nn_layernorm_backward_args),
      ACCEL_EMULATED(layernorm_backward_reduce, accel_nn_layernorm_backward_args),
      ACCEL_EMULATED(gelu_forward, accel_nn_gelu_forward_args),
      ACCEL_EMULATED(gelu_backward, accel_nn_gelu_backward_args),
      ACCEL_EMULATED(cross_entropy, accel_nn_cross_entropy_args),
      ACCEL_EMULATED(add, accel_nn_add_args),
      ACCEL_EMULATED(dropout, accel_nn_dropout_args),
      ACCEL_EMULATED(clip, accel_nn_clip_args),
  };
  return table;
}

void* lookup(void*, const char* name) {
  const auto it = entries().find(std::string_view(name));
  return it == entries().end() ? nullptr : reinterpret_cast<void*>(it->second);
}

// The backend NnKernels launches on: a cuda op whose kernels run on the calling thread.
class EmulatedCuda {
 public:
  struct StreamRef {};
  [[nodiscard]] static std::string_view name() { return "cuda (nn_ops.cu on the CPU)"; }
  template <class Args>
  void launch_kernel(StreamRef, const accel::ops::Kernel& k, const LaunchShape& shape, const Args& a) const {
    REQUIRE(k.kind() == accel::ops::OpKind::cuda);
    reinterpret_cast<EntryFn*>(k.address())(shape, &a, sizeof a);
  }
};

// nn_ops_device_match.hpp's device side: host memory, 256-byte aligned as CUDA's allocations are, filled
// with 0xFF bytes (NaN) where nothing was copied.
class EmulatedDevice {
 public:
  using Backend = EmulatedCuda;
  [[nodiscard]] NnKernels<Backend> kernels(accel::Dtype dt) const {
    static int module = 0;  // the op's "handle": the kernels are in this executable
    accel::ops::LoadedOp op("nn_ops", accel::ops::OpKind::cuda, accel::ops::LoadSource::compiled,
                            "kernels/cuda/nn_ops.cu (compiled for the CPU)", std::shared_ptr<void>(&module, [](void*) {}),
                            lookup, 0.0);
    return NnKernels<Backend>(Backend{}, op, dt);
  }
  [[nodiscard]] Backend::StreamRef stream() { return {}; }
  template <class T>
  T* up(const std::vector<T>& h, long long offset) {
    const std::size_t bytes = (h.size() + static_cast<std::size_t>(offset)) * sizeof(T);
    auto& block = keep_.emplace_back(static_cast<std::byte*>(::operator new(bytes, std::align_val_t{256})));
    std::memset(block.get(), 0xFF, bytes);
    T* p = reinterpret_cast<T*>(block.get()) + offset;
    std::memcpy(p, h.data(), h.size() * sizeof(T));
    return p;
  }
  template <class T>
  std::vector<T> down(const T* p, std::size_t n) {
    return std::vector<T>(p, p + n);
  }

 private:
  struct AlignedDelete {
    void operator()(std::byte* p) const { ::operator delete(p, std::align_val_t{256}); }
  };
  std::list<std::unique_ptr<std::byte, AlignedDelete>> keep_;
};

}  // namespace

TEST_CASE("nn_ops.cu on the CPU: the CUDA kernels against the CPU kernels, float32, bfloat16 and float16") {
  EmulatedDevice dev;
  const unsigned long long before = launches();
  // The GPU case's shapes (test_nn_ops.cpp) with fewer rows.
  nn_match::matches_cpu_every_path(dev, false);
  CHECK(launches() - before == nn_match::every_path_launches);  // every call ran its kernels here
}
