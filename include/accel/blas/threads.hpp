// accel/blas/threads.hpp — the CPU BLAS's threads: accel::blas::set_num_threads / num_threads.
//
// The CPU BLAS (oneDNN's sgemm) runs on OpenMP threads. OpenMP keeps the thread count per calling
// thread, and a GEMM enqueued on a CPU stream runs on that stream's worker thread, so the count set
// here is stored process-wide and applied by each GEMM task in the thread that runs it (also for the
// CPU ops that run there after it: they share the worker's OpenMP team). The GPT engine's
// `--threads N` sets this and the CPU ops' thread count together.
#pragma once

#include <accel/blas/detail/openmp.hpp>
#include <accel/core/error.hpp>

#include <string>

namespace accel::blas {

/// Every later CPU GEMM runs on `n` threads (n >= 1; InvalidArgumentError otherwise). It does not
/// change GEMMs already running. NotSupportedError when the process has no OpenMP runtime (a CPU BLAS
/// built without threads).
inline void set_num_threads(int n) {
  if (n < 1) throw InvalidArgumentError("accel::blas::set_num_threads: n = " + std::to_string(n) + " (it must be >= 1)");
  if (!detail::openmp().loaded()) {
    throw NotSupportedError("accel::blas::set_num_threads: the CPU BLAS has no OpenMP runtime in this process (" +
                            detail::openmp().error + ")");
  }
  detail::requested_threads().store(n, std::memory_order_relaxed);
}

/// The threads the next CPU GEMM uses: the count set by set_num_threads, else OpenMP's default for
/// this thread (OMP_NUM_THREADS, else the number of cores); 1 without an OpenMP runtime.
[[nodiscard]] inline int num_threads() noexcept {
  if (const int n = detail::requested_threads().load(std::memory_order_relaxed); n > 0) return n;
  return detail::openmp().loaded() ? detail::openmp().get_max_threads() : 1;
}

}  // namespace accel::blas
