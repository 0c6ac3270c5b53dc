// accel/algo/detail/cuda_reduce.cuh — reduce on CudaBackend: cub::DeviceReduce::Reduce, whose result
// stays in device memory. (thrust::reduce returns the value to the host and synchronizes to do so.)
#pragma once

#include <accel/algo/detail/cuda_launch.cuh>

#include <cub/device/device_reduce.cuh>

#include <algorithm>
#include <cstddef>

namespace accel::algo::detail {

template <class B>
struct Reducer;

template <>
struct Reducer<CudaBackend> {
  template <class T, class U, class Init, class Op>
  static void reduce(const char* algorithm, cuda::StreamRef stream, const T* in, std::size_t n, U* out, Init init,
                     Op op) {
    const cuda::Devices::DeviceGuard guard(stream.device_index());
    std::size_t temp_bytes = 0;
    cuda_check(cub::DeviceReduce::Reduce(nullptr, temp_bytes, in, out, n, op, init, stream.get()),
               "cub::DeviceReduce::Reduce (temporary storage size)", algorithm, stream);
    temp_bytes = std::max<std::size_t>(temp_bytes, 1);  // a null pointer would ask for the size again
    ThrustAllocator<CudaBackend> alloc(stream);
    char* temp = alloc.allocate(static_cast<std::ptrdiff_t>(temp_bytes));
    const cudaError_t status = cub::DeviceReduce::Reduce(temp, temp_bytes, in, out, n, op, init, stream.get());
    alloc.deallocate(temp, temp_bytes);  // stream-ordered: reused only by work enqueued after the kernels
    cuda_check(status, "cub::DeviceReduce::Reduce", algorithm, stream);
  }
};

}  // namespace accel::algo::detail
