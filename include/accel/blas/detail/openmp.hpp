// accel/blas/detail/openmp.hpp — the OpenMP runtime the CPU BLAS runs on, found in the process.
//
// Looked up by name among the process's symbols rather than declared from <omp.h>: that header is not on
// every compiler's path (clang without libomp-dev), and the BLAS already loaded the runtime, whichever
// it is (libgomp, or libomp standing in for it).
#pragma once

#include <accel/detail/dynamic_library.hpp>

#include <atomic>
#include <string>

namespace accel::blas::detail {

struct OpenMpApi {
  int (*get_max_threads)() = nullptr;
  void (*set_num_threads)(int) = nullptr;
  std::string error;  ///< why the runtime was not found
  [[nodiscard]] bool loaded() const noexcept { return get_max_threads != nullptr && set_num_threads != nullptr; }
};

/// Process-wide, looked up once, never unloaded.
inline const OpenMpApi& openmp() noexcept {
  static const OpenMpApi* const api = [] {
    auto* a = new OpenMpApi;
    accel::detail::DynamicLibrary process = accel::detail::DynamicLibrary::process();
    accel::detail::SymbolTable table(process);
    table.require(a->get_max_threads, "omp_get_max_threads").require(a->set_num_threads, "omp_set_num_threads");
    if (!table.complete()) {
      a->get_max_threads = nullptr;
      a->set_num_threads = nullptr;
      a->error = "omp_get_max_threads/omp_set_num_threads not found";
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
