// peak.cpp — the CPU's float32 peak: every thread runs independent chains of vector fused
// multiply-adds (compiled for this CPU: AVX-512, else AVX2, else SSE) in windows of about a millisecond for about
// `seconds`, and keeps its fastest window (a shared machine takes the core away now and then; the
// peak is what the core does when it runs); FLOP/s = 2 x lanes x FMAs / time, summed over the
// threads. The MFU the engine prints divides by this.
#include "peak.h"

#include <omp.h>

#define GPT_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
// The widest vector this CPU has, and as many chains as fit in its registers beside the two constants:
// more chains than registers spill every accumulator to the stack each round, and the loop then measures
// loads and stores (a 512-bit vector with 16 chains on an AVX2-only Zen 3 read 12.8 instead of ~180
// GFLOP/s). 12 chains are more than FMA latency x pipes on every core we run on (4-5 cycles x 2).
#if defined(__AVX512F__)
typedef float vec __attribute__((vector_size(64)));
constexpr int chains = 16;  // of 32 zmm registers
#elif defined(__AVX__)
typedef float vec __attribute__((vector_size(32)));
constexpr int chains = 12;  // of 16 ymm registers
#else
typedef float vec __attribute__((vector_size(16)));
constexpr int chains = 12;  // of 16 xmm registers
#endif
constexpr int lanes = sizeof(vec) / sizeof(float);
}  // namespace

GPT_EXPORT int gpt_fma_peak(const void* p, int num_threads) {
  const gpt_peak_args& a = *static_cast<const gpt_peak_args*>(p);
  // No more threads than the CPUs this process may run on: each thread keeps its best window, so a
  // thread beyond them would add a core's peak that is not there (3 threads on 2 CPUs: 1.5x the peak).
  const int asked = num_threads > 0 ? num_threads : omp_get_max_threads();
  const int threads = asked < omp_get_num_procs() ? asked : omp_get_num_procs();
  double total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    vec acc[chains];
    for (int c = 0; c < chains; ++c) acc[c] = vec{} + (1.0f + 1e-3f * c);
    const vec m = vec{} + 0.999999f, add = vec{} + 1e-7f;
    double best = 0;
    const double start = omp_get_wtime();
    while (omp_get_wtime() - start < a.seconds) {
      const double t0 = omp_get_wtime();
      for (int r = 0; r < 2000; ++r) {
        for (int c = 0; c < chains; ++c) acc[c] = acc[c] * m + add;  // an FMA (-ffp-contract=fast)
      }
      const double rate = 2000.0 * chains * lanes * 2 / (omp_get_wtime() - t0);
      best = rate > best ? rate : best;
    }
    float sum = 0;
    for (int c = 0; c < chains; ++c) sum += acc[c][0];
    volatile float sink = sum;  // the chains' results are used
    (void)sink;
    total += best;
  }
  *a.flops_per_second = total;
  return 0;
}
