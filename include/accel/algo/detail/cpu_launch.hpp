// accel/algo/detail/cpu_launch.hpp — accel's algorithms on CpuBackend: Thrust's OpenMP system, run as
// one task on the CPU stream.
//
// The task is enqueued like every other CPU stream operation, so it runs after the work enqueued before
// it and before the work enqueued after it; on a device's default stream (inline) it runs in the
// calling thread before the call returns. Inside the task, thrust::omp::par spreads the work over the
// OpenMP threads (OMP_NUM_THREADS; every core by default); the temporaries Thrust allocates through the
// policy come from the stream's device allocator (ThrustAllocator). Thrust's OpenMP sort sorts each
// thread's chunk with thrust::seq, whose scratch memory is Thrust's own (malloc); its merges use the
// policy's. Several streams running algorithms at once each have their own OpenMP team: on a machine
// with few cores, give each OMP_NUM_THREADS / omp_set_num_threads accordingly. Built without OpenMP
// (no -fopenmp: a TSan build, an nvcc translation unit without -Xcompiler -fopenmp) the same task runs
// Thrust's sequential CPP system; `cpu_parallel` says which. An exception thrown by the task (an
// allocation failure) is reported by the stream's next synchronize() as TaskError; an exception thrown
// by a user's operator inside an OpenMP parallel region terminates the process, as OpenMP does.
#pragma once

#include <accel/algo/detail/launcher.hpp>
#include <accel/algo/detail/thrust_config.hpp>
#include <accel/algo/thrust_allocator.hpp>
#include <accel/cpu/backend.hpp>

#if defined(_OPENMP)
#include <thrust/system/omp/execution_policy.h>
#else
#include <thrust/system/cpp/execution_policy.h>
#endif

#include <utility>

namespace accel::algo {

/// True when CpuBackend's algorithms run on OpenMP threads in this translation unit (compiled with
/// OpenMP); false when they run sequentially (Thrust's CPP system).
#if defined(_OPENMP)
inline constexpr bool cpu_parallel = true;
#else
inline constexpr bool cpu_parallel = false;
#endif

namespace detail {

template <>
struct Launcher<CpuBackend> {
  template <class Fn>
  static void run(const char* /*algorithm*/, cpu::StreamRef stream, Fn&& fn) {
    stream.enqueue([stream, fn = std::forward<Fn>(fn)]() mutable {
      ThrustAllocator<CpuBackend> alloc(stream);
#if defined(_OPENMP)
      auto policy = thrust::omp::par(alloc);
#else
      auto policy = thrust::cpp::par(alloc);
#endif
      fn(policy);
    });
  }
};

}  // namespace detail
}  // namespace accel::algo
