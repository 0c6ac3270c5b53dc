// launch_test.cpp — a user's own host op for tests/ops/test_launch.cpp: int entry(const void*, int).
#include "launch_test.h"

#include <omp.h>

extern "C" __attribute__((visibility("default"))) int launch_test_axpy_kernel(const void* p, int num_threads) {
  const launch_test_axpy* a = static_cast<const launch_test_axpy*>(p);
  if (a->fail != 0) return a->fail;
  const int threads = num_threads > 0 ? num_threads : omp_get_max_threads();
  int used = 0;
#pragma omp parallel for num_threads(threads)
  for (long long i = 0; i < a->n; ++i) {
    a->y[i] = a->a * a->x[i] + a->y[i];
    if (i == 0) used = omp_get_num_threads();
  }
  // y[n] (one past the data) reports the team size, so the test sees shape.threads arrive.
  a->y[a->n] = static_cast<float>(used);
  return 0;
}
