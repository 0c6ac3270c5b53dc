// accel/blas/detail/cpu_gemm.hpp — GEMM on CpuBackend: oneDNN's sgemm, run as one task on the CPU stream.
//
// bfloat16 (bf16 operands and C, float accumulation) runs oneDNN's matmul primitive instead, one cached
// primitive per distinct problem (blas/detail/cpu_matmul.hpp). half widens the operands to float (F16C),
// runs sgemm and rounds C back once (blas/detail/cpu_half.hpp), and so does bfloat16 where that is the
// faster way: on CPUs without AVX-512 (oneDNN 2.6 has no bf16 matmul there), and for single products on
// an Intel CPU without AMX (blas/detail/cpu_bfloat_choice.hpp; ACCEL_CPU_BLAS_BF16 overrides).
//
// Why oneDNN: at the GPT engine's shapes it reached 91-98 % of this machine's FMA peak on one thread,
// ahead of OpenBLAS and BLIS (benchmarks/RESULTS.md, "BLAS"). It runs on OpenMP, the runtime the CPU
// ops already use, so GEMMs and ops on one stream share the worker thread's OpenMP team instead of
// two thread pools spinning against each other.
//
// One exception, on CPUs without AVX-512: float32 'T','N' products (weight gradients) go to OpenBLAS's
// OpenMP build where it is installed, which is faster there at those shapes (blas/detail/cpu_openblas.hpp).
//
// An epilogue (GELU, GELU's gradient: blas/gemm_gelu.hpp) is a pass over C in the same task, right after
// the product (blas/detail/cpu_epilogue.hpp).
//
// The task is enqueued like every other CPU stream operation: it runs after the work enqueued before
// it and before the work enqueued after it (on a device's default stream, inline, before the call
// returns; during a graph capture it is recorded and runs at each replay). The GEMM runs on the thread
// that runs the task, with blas::num_threads() OpenMP threads. A batch of small matrices (no more work
// per matrix than one thread should do alone) is spread over the threads, whole matrices each, every
// one multiplied single-threaded (oneDNN does not split a matrix inside a parallel region); larger
// ones are split by oneDNN itself. A failure inside oneDNN is reported by the stream's next
// synchronize() as TaskError.
//
// The task always goes through the stream, also when the stream is idle: running it on the caller
// instead would race with work another thread enqueues meanwhile, and would start a second OpenMP team
// (teams belong to the thread that opens them) beside the worker's, both spinning on the same cores.
// The hand-off costs well under a microsecond while the worker polls for work (ACCEL_CPU_SPIN_US,
// cpu/detail/stream_state.hpp), 10-45 us when it has gone to sleep, nothing when the caller enqueues
// ahead (benchmarks/RESULTS.md, "The CPU stream's wait"); a device's default stream runs GEMMs inline.
#pragma once

#include <accel/blas/detail/arguments.hpp>
#include <accel/blas/detail/cpu_bfloat_choice.hpp>
#include <accel/blas/detail/cpu_epilogue.hpp>
#include <accel/blas/detail/cpu_half.hpp>
#include <accel/blas/detail/cpu_matmul.hpp>
#include <accel/blas/detail/cpu_openblas.hpp>
#include <accel/blas/detail/gemm_impl.hpp>
#include <accel/blas/detail/openmp.hpp>
#include <accel/cpu/backend.hpp>

#include <oneapi/dnnl/dnnl.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>

namespace accel::blas::detail {

/// "oneDNN 2.6.3"
[[nodiscard]] inline std::string cpu_blas_name() {
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

[[noreturn, gnu::cold, gnu::noinline]] inline void throw_dnnl(dnnl_status_t status) {
  throw Error(Errc::runtime_failure, "accel::blas: dnnl_sgemm failed with dnnl_status_t " + std::to_string(status),
              static_cast<std::int64_t>(status));
}

/// C_i = beta * C_i: what a GEMM with k == 0 computes (oneDNN refuses k == 0). beta == 0 writes zeros.
inline void scale_c(const GemmArgs<float>& g, std::int64_t i) noexcept {
  float* c = g.c + i * g.stride_c;
  for (std::int64_t r = 0; r < g.m; ++r) {
    float* row = c + r * g.ldc;
    for (std::int64_t j = 0; j < g.n; ++j) row[j] = g.beta == 0.0f ? 0.0f : g.beta * row[j];
  }
}

/// Matrix i of the batch; returns oneDNN's status.
inline dnnl_status_t sgemm_one(const GemmArgs<float>& g, std::int64_t i) noexcept {
  if (g.k == 0) {
    scale_c(g, i);
    return dnnl_success;
  }
  return dnnl_sgemm(g.ta == Trans::yes ? 'T' : 'N', g.tb == Trans::yes ? 'T' : 'N', g.m, g.n, g.k, g.alpha,
                    g.a + i * g.stride_a, g.lda, g.b + i * g.stride_b, g.ldb, g.beta, g.c + i * g.stride_c, g.ldc);
}

/// Work per matrix below which one thread per matrix beats splitting each matrix (multiply-adds):
/// 256 x 256 x 64, the engine's largest attention product, still gains from it.
inline constexpr std::int64_t small_matrix_work = std::int64_t{256} * 256 * 256;

/// A batch spread over an OpenMP team: thread t multiplies matrices [t * batch / n, (t + 1) * batch / n).
struct BatchWork {
  const GemmArgs<float>* g;
  std::atomic<int> status{dnnl_success};
};

inline void run_batch_share(void* data) noexcept {
  auto& work = *static_cast<BatchWork*>(data);
  const OpenMpApi& omp = openmp();
  const std::int64_t t = omp.get_thread_num(), n = omp.get_num_threads(), batch = work.g->batch;
  for (std::int64_t i = t * batch / n; i < (t + 1) * batch / n; ++i) {
    if (const dnnl_status_t s = sgemm_one(*work.g, i); s != dnnl_success) work.status.store(s, std::memory_order_relaxed);
  }
}

/// Runs in the task, on the stream's thread.
inline void cpu_sgemm(const GemmArgs<float>& g) {
  const int threads = apply_requested_threads();
  if (threads > 1 && g.batch >= threads &&
      double(g.m) * double(g.n) * double(g.k) <= double(small_matrix_work)) {
    BatchWork work{&g};
    openmp().parallel(&run_batch_share, &work, static_cast<unsigned>(threads), 0);
    if (const int s = work.status.load(std::memory_order_relaxed); s != dnnl_success) throw_dnnl(dnnl_status_t(s));
    return;
  }
  for (std::int64_t i = 0; i < g.batch; ++i) {
    if (const dnnl_status_t s = sgemm_one(g, i); s != dnnl_success) throw_dnnl(s);
  }
}

/// Whether oneDNN multiplies bfloat16 on this CPU: true until a matmul's creation says otherwise
/// (oneDNN 2.6's bf16 matmul needs AVX-512; an AVX2-only Zen 3 has none), then bfloat16 GEMMs take the
/// widened path for the rest of the process.
inline std::atomic<bool>& bfloat_matmul_available() noexcept {
  static std::atomic<bool> available{true};
  return available;
}

/// The cached matmul for `g`, or nullptr (and bfloat_matmul_available() false from now on) where oneDNN
/// has no bf16 matmul for this CPU. Any other failure throws.
inline const BfloatMatmul* find_matmul(const Call& call, const GemmArgs<bfloat16>& g) {
  try {
    return &bfloat_matmuls().get(call, g);
  } catch (const NotSupportedError& e) {
    if (bfloat_gemm_choice().load(std::memory_order_relaxed) == BfloatGemm::onednn)
      throw NotSupportedError(std::string(e.what()) + " (ACCEL_CPU_BLAS_BF16=onednn asks for it; auto or widened "
                              "multiplies the widened operands instead)");
    bfloat_matmul_available().store(false, std::memory_order_relaxed);
    return nullptr;
  }
}

/// half, and bfloat16 where oneDNN has no bf16 matmul: the operands widened to float, sgemm, C rounded
/// once (cpu_half.hpp).
template <class H>
void run_widened(cpu::StreamRef stream, const GemmArgs<H>& g) {
  stream.enqueue([g] {
    cpu_widened_gemm(g, [](const GemmArgs<float>& f) { cpu_sgemm(f); }, apply_requested_threads());
    cpu_epilogue(g);
  });
}

template <>
struct GemmImpl<CpuBackend> {
  template <class T>
  static constexpr bool supports = std::is_same_v<T, float> || std::is_same_v<T, bfloat16> || std::is_same_v<T, half>;

  template <class T>
  static void run(const Call& call, cpu::StreamRef stream, const GemmArgs<T>& g) {
    if constexpr (!supports<T>) {
      throw NotSupportedError(call.str() + ": " + type_name<T>() + " GEMM is not available on the CPU (" +
                              cpu_blas_name() + " multiplies float, bfloat16 and half there)");
    } else if constexpr (std::is_same_v<T, float>) {
      if (g.empty()) return;
      if (const OpenBlasApi* tn = openblas_for(call, g); tn != nullptr) {
        stream.enqueue([g, tn] {
          openblas_sgemm_blocks(*tn, g);
          cpu_epilogue(g);
        });
        return;
      }
      stream.enqueue([g] {
        cpu_sgemm(g);
        cpu_epilogue(g);
      });
    } else if constexpr (std::is_same_v<T, half>) {
      if (g.empty()) return;
      run_widened(stream, g);
    } else {
      if (g.empty()) return;
      if (g.k == 0) {
        stream.enqueue([g] {
          for (std::int64_t i = 0; i < g.batch; ++i) scale_c(g, i);
        });
        return;
      }
      const BfloatGemm choice = bfloat_gemm_choice().load(std::memory_order_relaxed);
      if (choice == BfloatGemm::invalid) {
        const char* env = std::getenv("ACCEL_CPU_BLAS_BF16");
        throw InvalidArgumentError(call.str() + ": ACCEL_CPU_BLAS_BF16=" + std::string(env != nullptr ? env : "") +
                                   " is not one of auto, onednn, widened");
      }
      // `onednn` goes on to the matmul even where it was found missing: find_matmul says so.
      if (choice == BfloatGemm::widened ||
          (choice == BfloatGemm::automatic &&
           (!bfloat_matmul_available().load(std::memory_order_relaxed) || widen_by_default(g)))) {
        run_widened(stream, g);
        return;
      }
      BfloatMatmuls& cache = bfloat_matmuls();
      if (batch_in_one_matmul(g)) {
        const BfloatMatmul* found = find_matmul(call, g);  // at the call: where oneDNN has none, widened
        if (found == nullptr) {
          run_widened(stream, g);
          return;
        }
        const BfloatMatmul& mm = *found;
        stream.enqueue([g, &mm, engine = cache.engine()] {
          (void)apply_requested_threads();
          run_bfloat_matmul(engine, mm, g);
        });
        return;
      }
      // A single product, or a batch oneDNN cannot describe whole: one matrix at a time.
      const GemmArgs<bfloat16> one = single_product(g);
      const BfloatMatmul* found = find_matmul(call, one);
      if (found == nullptr) {
        run_widened(stream, g);
        return;
      }
      const BfloatMatmul& mm = *found;
      stream.enqueue([g, one, &mm, engine = cache.engine()] {
        (void)apply_requested_threads();
        for (std::int64_t i = 0; i < g.batch; ++i) {
          GemmArgs<bfloat16> x = one;
          x.a = g.a + i * g.stride_a;
          x.b = g.b + i * g.stride_b;
          x.c = g.c + i * g.stride_c;
          run_bfloat_matmul(engine, mm, x);
        }
        cpu_epilogue(g);  // an epilogue comes with batch 1
      });
    }
  }
};

}  // namespace accel::blas::detail
