// The CUDA nn_ops kernels (kernels/cuda/nn_ops.cu) run on the CPU, their own source compiled as host C++
// (tests/support/cuda_host.hpp: a block's threads as fibers, warp shuffles and barriers as the hardware
// resolves them), called through NnKernels — accel's launch shapes and argument checks — against the CPU
// kernels: the cases the GPU runs check (nn_ops_device_match.hpp), on every commit, without a GPU. What
// this cannot check (timing, the memory model, the device's own math functions) the GPU runs do.
#include "nn_ops_device_match.hpp"

#include <doctest/doctest.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "../support/emulated_cuda.hpp"
#define ACCEL_CUDA_ON_HOST 1
#include "nn_ops.cu"

namespace {

using accel::ops::NnKernels;
using cuda_host::EmulatedCuda;
using cuda_host::run_entry;

#define ACCEL_EMULATED(name, args)                                              \
  {"accel_nn_" #name "_f32", &run_entry<&accel_nn_##name##_f32, args>},         \
      {"accel_nn_" #name "_bf16", &run_entry<&accel_nn_##name##_bf16, args>}, { \
    "accel_nn_" #name "_f16", &run_entry<&accel_nn_##name##_f16, args>          \
  }

const cuda_host::EntryTable& nn_ops_entries() {
  static const cuda_host::EntryTable table = {
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

// nn_ops_device_match.hpp's device side: host memory as a GPU's (cuda_host::Arena).
class EmulatedDevice {
 public:
  using Backend = EmulatedCuda;
  [[nodiscard]] NnKernels<Backend> kernels(accel::Dtype dt) const {
    cuda_host::register_op("nn_ops", nn_ops_entries());
    return NnKernels<Backend>(Backend{}, cuda_host::loaded_op("nn_ops"), dt);
  }
  [[nodiscard]] Backend::StreamRef stream() { return {}; }
  template <class T>
  T* up(const std::vector<T>& h, long long offset) {
    T* p = static_cast<T*>(arena_.take(h.size() * sizeof(T), static_cast<std::size_t>(offset) * sizeof(T)));
    std::memcpy(p, h.data(), h.size() * sizeof(T));
    return p;
  }
  template <class T>
  std::vector<T> down(const T* p, std::size_t n) {
    return std::vector<T>(p, p + n);
  }

 private:
  cuda_host::Arena arena_;
};

}  // namespace

TEST_CASE("nn_ops.cu on the CPU: the CUDA kernels against the CPU kernels, float32, bfloat16 and float16") {
  EmulatedDevice dev;
  const unsigned long long before = cuda_host::launches();
  // The GPU case's shapes (test_nn_ops.cpp) with fewer rows.
  nn_match::matches_cpu_every_path(dev, false);
  CHECK(cuda_host::launches() - before == nn_match::every_path_launches);  // every call ran its kernels here
}

TEST_CASE("nn_ops.cu on the CPU: GELU at float's range ends — x or 0, GELU' 1 or 0, NaN kept — float32, bfloat16, float16") {
  EmulatedDevice dev;
  nn_match::gelu_range_ends<float>(dev);
  nn_match::gelu_range_ends<accel::bfloat16>(dev);
  nn_match::gelu_range_ends<accel::half>(dev);
}
