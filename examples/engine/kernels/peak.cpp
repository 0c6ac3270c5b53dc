// peak.cpp — the CPU's float32 peak: every thread runs independent chains of vector fused
// multiply-adds (compiled for this CPU: AVX-512, else AVX2) for about `seconds`; FLOP/s = 2 x lanes x
// FMAs / time, summed over the threads. The MFU the engine prints divides by this.
#include "peak.h"

#include <omp.h>

#define GPT_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
typedef float v16 __attribute__((vector_size(64)));
}

GPT_EXPORT int gpt_fma_peak(const void* p, int num_threads) {
  const gpt_peak_args& a = *static_cast<const gpt_peak_args*>(p);
  const int threads = num_threads > 0 ? num_threads : omp_get_max_threads();
  double total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    constexpr int chains = 16;
    v16 acc[chains];
    for (int c = 0; c < chains; ++c) acc[c] = v16{} + (1.0f + 1e-3f * c);
    const v16 m = v16{} + 0.999999f, add = v16{} + 1e-7f;
    long long rounds = 0;
    const double t0 = omp_get_wtime();
    double t = t0;
    while (t - t0 < a.seconds) {
      for (int r = 0; r < 1000; ++r) {
        for (int c = 0; c < chains; ++c) acc[c] = acc[c] * m + add;  // an FMA (-ffp-contract=fast)
      }
      rounds += 1000;
      t = omp_get_wtime();
    }
    float sum = 0;
    for (int c = 0; c < chains; ++c) sum += acc[c][0];
    volatile float sink = sum;  // the chains' results are used
    (void)sink;
    total += static_cast<double>(rounds) * chains * 16 * 2 / (t - t0);
  }
  *a.flops_per_second = total;
  return 0;
}
