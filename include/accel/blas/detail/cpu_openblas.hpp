// accel/blas/detail/cpu_openblas.hpp — OpenBLAS for one kind of float32 product on CPUs without AVX-512:
// C = alpha A^T B + beta C ('T','N', one matrix), the weight gradients of a linear layer.
//
// Why: at the GPT engine's weight-gradient shapes (dW = dY^T X, K = the tokens) oneDNN 2.6's AVX2 sgemm
// runs at 61-65 % of a Zen 3 core's FMA peak and OpenBLAS 0.3.21 at 85-89 %; in the engine (tiny, one
// thread) a layer's four weight gradients went from about 4.35 to 3.45 ms (benchmarks/RESULTS.md, "The CPU
// attention on AVX2 vectors, and the weight gradients on OpenBLAS"). Every other product, and every product on a CPU with
// AVX-512 (where oneDNN reaches 98 % of the peak at the same shapes), stays on oneDNN.
//
// OpenBLAS is loaded at run time, and only its OpenMP build (Debian's libopenblas0-openmp): that build
// runs on the process's OpenMP runtime with the calling thread's thread count (blas::num_threads()), as
// oneDNN does; the pthread build would start a pool of its own beside the stream's OpenMP team. Without
// it, oneDNN multiplies these too.
//
// ACCEL_CPU_BLAS_TN chooses (read once): `auto` (the default: OpenBLAS where the CPU lacks AVX-512F and
// the library loads), `onednn`, or `openblas` (on any CPU; a GEMM then throws BackendUnavailableError
// when the library does not load); another value makes every float32 GEMM throw InvalidArgumentError.
// ACCEL_OPENBLAS names the library file instead of Debian's path.
#pragma once

#include <accel/blas/detail/arguments.hpp>
#include <accel/blas/detail/openmp.hpp>
#include <accel/core/error.hpp>
#include <accel/detail/dynamic_library.hpp>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>

namespace accel::blas::detail {

/// Which BLAS multiplies float32 'T','N' products on the CPU (`invalid`: ACCEL_CPU_BLAS_TN named none).
enum class TransposedABlas { automatic, onednn, openblas, invalid };

/// ACCEL_CPU_BLAS_TN's value as a choice: unset, empty or "auto", "onednn", "openblas"; anything else is
/// `invalid`, which every float32 GEMM then reports (a typo must not quietly pick the default).
[[nodiscard]] inline TransposedABlas parse_transposed_a_blas(std::string_view v) noexcept {
  if (v.empty() || v == "auto") return TransposedABlas::automatic;
  if (v == "onednn") return TransposedABlas::onednn;
  if (v == "openblas") return TransposedABlas::openblas;
  return TransposedABlas::invalid;
}

struct OpenBlasApi {
  // cblas_sgemm(order, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc), 32-bit integers
  void (*sgemm)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int) = nullptr;
  int (*get_parallel)() = nullptr;  ///< 0 sequential, 1 pthreads, 2 OpenMP
  char* (*get_config)() = nullptr;  ///< "OpenBLAS 0.3.21 NO_AFFINITY Zen MAX_THREADS=64"
  std::string error;                ///< why it is not loaded
  [[nodiscard]] bool loaded() const noexcept { return sgemm != nullptr; }
};

/// The OpenMP build of OpenBLAS, loaded on first use; process-wide, never unloaded.
inline const OpenBlasApi& openblas() noexcept {
  static const OpenBlasApi* const api = [] {
    auto* a = new OpenBlasApi;
    const char* path = std::getenv("ACCEL_OPENBLAS");
    accel::detail::DynamicLibrary lib =
        path != nullptr && *path != '\0'
            ? accel::detail::DynamicLibrary::try_open({std::string_view(path)})
            : accel::detail::DynamicLibrary::try_open({"/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0",
                                                       "/usr/lib/aarch64-linux-gnu/openblas-openmp/libopenblas.so.0"});
    accel::detail::SymbolTable table(lib);
    table.require(a->sgemm, "cblas_sgemm").require(a->get_parallel, "openblas_get_parallel").optional(a->get_config, "openblas_get_config");
    if (!table.complete()) {
      const std::string why = table.error();
      *a = OpenBlasApi{};
      a->error = why + " (Debian: apt-get install libopenblas0-openmp)";
    } else if (a->get_parallel() != 2) {
      const std::string name = lib.name();
      *a = OpenBlasApi{};
      a->error = name + " is not OpenBLAS's OpenMP build (openblas_get_parallel() != 2; Debian: libopenblas0-openmp)";
    } else {
      (void)lib.release();  // kept loaded for the rest of the process
    }
    return a;
  }();
  return *api;
}

/// "OpenBLAS 0.3.21" (the first two words of openblas_get_config()), or "" when it is not loaded.
[[nodiscard]] inline std::string openblas_name() {
  const OpenBlasApi& api = openblas();
  if (!api.loaded()) return {};
  if (api.get_config == nullptr) return "OpenBLAS";
  const std::string config = api.get_config();
  const auto first = config.find(' ');
  return first == std::string::npos ? config : config.substr(0, config.find(' ', first + 1));
}

/// The choice, from ACCEL_CPU_BLAS_TN on first use; tests may change it.
inline std::atomic<TransposedABlas>& transposed_a_blas() noexcept {
  static std::atomic<TransposedABlas> choice{[] {
    const char* env = std::getenv("ACCEL_CPU_BLAS_TN");
    return parse_transposed_a_blas(env != nullptr ? env : "");
  }()};
  return choice;
}

/// Whether this CPU has AVX-512F (oneDNN's fast path for every shape).
[[nodiscard]] inline bool cpu_has_avx512f() noexcept {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  return __builtin_cpu_supports("avx512f");
#else
  return true;  // measured only on x86-64: elsewhere oneDNN keeps every product
#endif
}

/// Whether float32 'T','N' products go to OpenBLAS in this process (the choice, the CPU, the library).
[[nodiscard]] inline bool openblas_takes_transposed_a() noexcept {
  const TransposedABlas choice = transposed_a_blas().load(std::memory_order_relaxed);
  if (choice == TransposedABlas::onednn || choice == TransposedABlas::invalid ||
      (choice == TransposedABlas::automatic && cpu_has_avx512f()))
    return false;
  return openblas().loaded();
}

/// OpenBLAS for this product, or nullptr for oneDNN. Decided at the call (not in the task), so that a
/// required but missing OpenBLAS is the caller's error.
[[nodiscard]] inline const OpenBlasApi* openblas_for(const Call& call, const GemmArgs<float>& g) {
  if (transposed_a_blas().load(std::memory_order_relaxed) == TransposedABlas::invalid) {
    const char* env = std::getenv("ACCEL_CPU_BLAS_TN");
    throw InvalidArgumentError(call.str() + ": ACCEL_CPU_BLAS_TN=" + std::string(env != nullptr ? env : "") +
                               " is not one of auto, onednn, openblas");
  }
  if (g.ta != Trans::yes || g.tb != Trans::no || g.batch != 1 || g.k == 0) return nullptr;
  for (const std::int64_t v : {g.m, g.n, g.k, g.lda, g.ldb, g.ldc}) {
    if (v > INT_MAX) return nullptr;  // cblas's 32-bit integers
  }
  if (openblas_takes_transposed_a()) return &openblas();
  if (transposed_a_blas().load(std::memory_order_relaxed) == TransposedABlas::openblas) {
    const OpenBlasApi& api = openblas();
    throw BackendUnavailableError(call.str() + ": ACCEL_CPU_BLAS_TN=openblas, but OpenBLAS's OpenMP build did not load: " +
                                  api.error);
  }
  return nullptr;
}

/// One cblas_sgemm call for the whole of `g` ('T','N'), with the calling thread's OpenMP thread count.
inline void openblas_sgemm(const OpenBlasApi& api, const GemmArgs<float>& g) noexcept {
  constexpr int row_major = 101, trans = 112, no_trans = 111;  // CBLAS_ORDER, CBLAS_TRANSPOSE
  api.sgemm(row_major, trans, no_trans, static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k), g.alpha,
            g.a, static_cast<int>(g.lda), g.b, static_cast<int>(g.ldb), g.beta, g.c, static_cast<int>(g.ldc));
}

// OpenBLAS's results depend on its thread count (oneDNN's do not, and the engine's --deterministic runs
// promise the same bits on any count). So C is cut into blocks fixed by the shape alone — 128 rows
// (m >= n) or 128 columns — and each block is one single-threaded call, whichever thread runs it: the
// blocks are spread over the stream's OpenMP team, inside which OpenBLAS's OpenMP build runs each call
// on its caller alone. On one thread this costs the re-packing of the shared operand per block (the
// engine's weight gradients: 1-4 blocks).
inline constexpr std::int64_t openblas_block_size = 128;

struct OpenBlasBlocks {
  const OpenBlasApi* api;
  const GemmArgs<float>* g;
  bool by_rows;
  std::int64_t count;
};

inline void run_openblas_block(const OpenBlasBlocks& w, std::int64_t i) noexcept {
  GemmArgs<float> b = *w.g;
  const std::int64_t first = i * openblas_block_size;
  if (w.by_rows) {  // rows of C: columns of A (stored k x m for 'T')
    b.m = std::min(openblas_block_size, b.m - first);
    b.a += first;
    b.c += first * b.ldc;
  } else {
    b.n = std::min(openblas_block_size, b.n - first);
    b.b += first;
    b.c += first;
  }
  openblas_sgemm(*w.api, b);
}

inline void openblas_blocks_share(void* data) noexcept {
  const auto& w = *static_cast<const OpenBlasBlocks*>(data);
  const OpenMpApi& omp = openmp();
  for (std::int64_t i = omp.get_thread_num(); i < w.count; i += omp.get_num_threads()) run_openblas_block(w, i);
}

/// Runs in the task, on the stream's thread, with blas::num_threads() threads.
inline void openblas_sgemm_blocks(const OpenBlasApi& api, const GemmArgs<float>& g) noexcept {
  const int threads = apply_requested_threads();
  const bool by_rows = g.m >= g.n;
  const OpenBlasBlocks w{&api, &g, by_rows, ((by_rows ? g.m : g.n) + openblas_block_size - 1) / openblas_block_size};
  if (threads <= 1) {  // the thread's count is 1: OpenBLAS runs each call on it alone
    for (std::int64_t i = 0; i < w.count; ++i) run_openblas_block(w, i);
    return;
  }
  openmp().parallel(&openblas_blocks_share, const_cast<OpenBlasBlocks*>(&w), static_cast<unsigned>(threads), 0);
}

}  // namespace accel::blas::detail
