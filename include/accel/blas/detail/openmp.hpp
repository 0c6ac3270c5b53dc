// accel/blas/detail/openmp.hpp — the OpenMP runtime the CPU BLAS runs on, found in the process.
//
// Looked up by name among the process's symbols rather than declared from <omp.h> or compiled with
// -fopenmp: the header is not on every compiler's path (clang without libomp-dev, nvcc), a GEMM must run
// the same way in every translation unit (one definition, whatever its flags), and the BLAS has already
// loaded the runtime. The parallel region is entered through GOMP_parallel, the entry point of GCC's
// OpenMP ABI that `#pragma omp parallel` compiles to (LLVM's libomp provides it too).
#pragma once

#include <accel/detail/dynamic_library.hpp>

#include <atomic>
#include <string>
#include <utility>

namespace accel::blas::detail {

struct OpenMpApi {
  int (*get_max_threads)() = nullptr;
  void (*set_num_threads)(int) = nullptr;
  int (*get_thread_num)() = nullptr;
  int (*get_num_threads)() = nullptr;
  /// Runs fn(data) on `threads` threads (the caller is one of them) and returns when all are done.
  void (*parallel)(void (*fn)(void*), void* data, unsigned threads, unsigned flags) = nullptr;
  std::string error;  ///< why the runtime was not found
  [[nodiscard]] bool loaded() const noexcept { return parallel != nullptr; }
};

/// Process-wide, looked up once, never unloaded.
inline const OpenMpApi& openmp() noexcept {
  static const OpenMpApi* const api = [] {
    auto* a = new OpenMpApi;
    accel::detail::DynamicLibrary process = accel::detail::DynamicLibrary::process();
    accel::detail::SymbolTable table(process);
    table.require(a->get_max_threads, "omp_get_max_threads")
        .require(a->set_num_threads, "omp_set_num_threads")
        .require(a->get_thread_num, "omp_get_thread_num")
        .require(a->get_num_threads, "omp_get_num_threads")
        .require(a->parallel, "GOMP_parallel");
    if (!table.complete()) {
      std::string why = table.error();
      *a = OpenMpApi{};
      a->error = std::move(why);
    }
    (void)process.release();  // dlopen(nullptr) is the process itself: nothing to close
    return a;
  }();
  return *api;
}

/// The count set by blas::set_num_threads; 0 while none was set (the OpenMP default applies).
inline std::atomic<int>& requested_threads() noexcept {
  static std::atomic<int> threads{0};
  return threads;
}

/// Makes the calling thread's OpenMP thread count the one set by blas::set_num_threads (when one was),
/// and returns the count that applies to it (1 without an OpenMP runtime).
inline int apply_requested_threads() noexcept {
  const OpenMpApi& omp = openmp();
  if (!omp.loaded()) return 1;
  const int want = requested_threads().load(std::memory_order_relaxed);
  const int have = omp.get_max_threads();
  if (want <= 0 || want == have) return have;
  omp.set_num_threads(want);
  return want;
}

}  // namespace accel::blas::detail
