// accel/algo/detail/cuda_launch.cuh — accel's algorithms on CudaBackend: Thrust and CUB kernels on the
// stream, in translation units compiled by nvcc.
//
// Every call runs `thrust::cuda::par_nosync(alloc).on(stream)` with ThrustAllocator<CudaBackend>: the
// kernels are enqueued on the stream, temporaries come from the device's caching allocator and are
// freed in stream order, and nothing waits for the device. The stream's device is made current for
// the call. (reduce uses CUB directly: see cuda_reduce.cuh.) CUDA errors Thrust reports
// (thrust::system_error) are rethrown as accel's CUDA errors (OutOfMemoryError, BackendUnavailableError,
// CudaError), naming the algorithm and the device.
#pragma once

#if !defined(__CUDACC__)
#error "accel/algo's CUDA path launches Thrust/CUB kernels: include it only from a translation unit \
compiled by nvcc (a .cu file). Host-compiled code can call accel::algo with CpuBackend."
#endif

#include <accel/algo/detail/arguments.hpp>
#include <accel/algo/detail/launcher.hpp>
#include <accel/algo/detail/thrust_config.hpp>
#include <accel/algo/thrust_allocator.hpp>
#include <accel/core/source_location.hpp>
#include <accel/cuda/backend.hpp>

#include <thrust/system/cuda/error.h>
#include <thrust/system/cuda/execution_policy.h>
#include <thrust/system_error.h>

#include <string>
#include <utility>

namespace accel::algo::detail {

/// Throws accel's CUDA error for a failed call made by `algorithm` on `stream`.
inline void cuda_check(cudaError_t status, const char* call, const char* algorithm, cuda::StreamRef stream,
                       source_location where = source_location::current()) {
  if (status != cudaSuccess) [[unlikely]] {
    cuda::detail::throw_error(status, call, where, call_name<CudaBackend>(algorithm, stream));
  }
}

template <>
struct Launcher<CudaBackend> {
  template <class Fn>
  static void run(const char* algorithm, cuda::StreamRef stream, Fn&& fn) {
    const cuda::Devices::DeviceGuard guard(stream.device_index());
    ThrustAllocator<CudaBackend> alloc(stream);
    try {
      auto policy = thrust::cuda::par_nosync(alloc).on(stream.get());
      fn(policy);
    } catch (const thrust::system_error& e) {
      rethrow(algorithm, stream, e);
    }
  }

 private:
  [[noreturn, gnu::cold]] static void rethrow(const char* algorithm, cuda::StreamRef stream,
                                              const thrust::system_error& e) {
    const std::string context = call_name<CudaBackend>(algorithm, stream);
    if (e.code().category() == thrust::cuda_category()) {
      cuda::detail::throw_error(static_cast<cudaError_t>(e.code().value()), std::string("Thrust (") + e.what() + ")",
                                source_location::current(), context);
    }
    throw Error(Errc::runtime_failure, context + ": Thrust failed: " + e.what());
  }
};

}  // namespace accel::algo::detail
