/* adam_ceiling.h — the memory ceiling of Adam's access pattern, for the CPU Adam benchmarks.
 *
 * A STREAM-like kernel with exactly fused Adam's traffic per element: read p, g, m, v; write p, m, v
 * (28 B per fp32 parameter, no write-allocate traffic beyond it: every written line was just read).
 * The arithmetic is one FMA per written array, so the loop is bound by memory, not by the sqrt and
 * division Adam adds; with AVX-512 it visits memory in the order the kernels do (runs of 8 lines per
 * array), the fastest order measured here. Same static split over threads as the kernels (64-element bounds), compiled
 * with the kernels' flags (-O3 -march=native -fopenmp). bench_adam_cpu links it; compare_cpu_adam.py
 * reaches it through libaccel_capi.so, so both harnesses measure the same ceiling.
 */
#ifndef ACCEL_BENCH_ADAM_CEILING_H
#define ACCEL_BENCH_ADAM_CEILING_H

#ifdef __cplusplus
extern "C" {
#endif

/* One pass over n elements with `threads` OpenMP threads (0: all). s: a small scale (e.g. 1e-9f). */
void accel_bench_adam_ceiling(float* p, const float* g, float* m, float* v, long long n, int threads, float s);

#ifdef __cplusplus
}
#endif

#endif
