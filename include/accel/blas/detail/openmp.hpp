// accel/blas/detail/openmp.hpp — the OpenMP runtime the CPU BLAS runs on, found in the process.
//
// Looked up by name among the process's symbols rather than declared from <omp.h> or compiled with
// -fopenmp: the header is not on every compiler's path (clang without libomp-dev, nvcc), a GEMM must run
// the same way in every translation unit (one definition, whatever its flags), and the BLAS has already
// loaded the runtime. The parallel region is entered through GOMP_parallel, the entry point of GCC's
// OpenMP ABI that `#pragma omp parallel` compiles to (LLVM's libomp provides it too).
#pragma once

#include <accel/detail/dynamic_library.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <type_traits>
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

/// Below this many elements in all, a pass over rows stays on the calling thread: waking a team costs
/// microseconds, about what one thread converts 2^15 elements in.
inline constexpr std::int64_t min_shared_elements = std::int64_t{1} << 15;

/// Runs each(first, last) over contiguous shares of the rows [0, rows), one share per thread of an OpenMP
/// team of up to `threads` (the caller one of them), and returns when all are done; on the calling thread
/// alone, each(0, rows), where threads is 1, there is no runtime, or the rows hold fewer than
/// min_shared_elements elements. `each` must not throw (it runs inside the runtime).
template <class Each>
void for_row_shares(int threads, std::int64_t rows, std::int64_t elements_per_row, Each&& each) noexcept {
  const OpenMpApi& omp = openmp();
  if (threads <= 1 || rows < 2 || !omp.loaded() || rows * elements_per_row < min_shared_elements) {
    each(std::int64_t{0}, rows);
    return;
  }
  struct Work {
    std::remove_reference_t<Each>* each;
    std::int64_t rows;
  } work{&each, rows};
  omp.parallel(
      [](void* data) noexcept {
        auto& w = *static_cast<Work*>(data);
        const OpenMpApi& team = openmp();
        const std::int64_t t = team.get_thread_num(), n = team.get_num_threads();
        (*w.each)(t * w.rows / n, (t + 1) * w.rows / n);
      },
      &work, static_cast<unsigned>(std::min<std::int64_t>(threads, rows)), 0);
}

}  // namespace accel::blas::detail
