// accel/algo/thrust_allocator.hpp — accel::algo::ThrustAllocator<B>: Thrust's temporary storage from
// backend B's caching allocator, in stream order.
//
// A Thrust-compatible allocator (value_type char) for `thrust::cuda::par_nosync(alloc).on(stream)` or
// `thrust::omp::par(alloc)`: allocate(n) is B::raw_alloc(n, stream) and deallocate(p, n) is
// B::raw_delete(p). The caching allocator reuses a freed block only for work enqueued later on the same
// stream (or, after record_stream, once the other streams caught up), so Thrust may free its
// temporaries as soon as it has enqueued the kernels that use them: no cudaMalloc, no cudaFree, no
// synchronization. Temporaries count in B's memory statistics like any allocation.
// accel's algorithms use it; nvcc users can pass it to any other Thrust algorithm:
//   accel::algo::ThrustAllocator<accel::CudaBackend> alloc(stream);
//   thrust::unique(thrust::cuda::par_nosync(alloc).on(stream.get()), first, last);
// allocate throws OutOfMemoryError like raw_alloc; deallocate never throws.
#pragma once

#include <cstddef>

namespace accel::algo {

template <class B>
class ThrustAllocator {
 public:
  using value_type = char;
  using backend_type = B;
  using StreamRef = typename B::StreamRef;

  explicit ThrustAllocator(StreamRef stream) noexcept : stream_(stream) {}

  [[nodiscard]] char* allocate(std::ptrdiff_t bytes) {
    return static_cast<char*>(B{}.raw_alloc(static_cast<std::size_t>(bytes), stream_));
  }
  void deallocate(char* p, std::size_t /*bytes*/) noexcept {
    try {
      B{}.raw_delete(p);
    } catch (...) {  // cannot happen for memory from allocate; Thrust frees in destructors
    }
  }

  [[nodiscard]] StreamRef stream() const noexcept { return stream_; }

  friend bool operator==(const ThrustAllocator& a, const ThrustAllocator& b) noexcept {
    return a.stream_ == b.stream_;
  }

 private:
  StreamRef stream_;
};

}  // namespace accel::algo
