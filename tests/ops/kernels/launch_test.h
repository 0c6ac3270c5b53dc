/* launch_test.h — the argument struct of the test op behind tests/ops/test_launch.cpp: a user's own op
 * as ops/launch.hpp describes it (one plain C struct, the same bytes for the host and CUDA kernels). */
#ifndef LAUNCH_TEST_H
#define LAUNCH_TEST_H

typedef struct launch_test_axpy {
  float* y;        /* y[i] = a * x[i] + y[i] */
  const float* x;
  long long n;
  float a;
  int fail;        /* non-zero: the host kernel refuses its arguments (returns this code) */
} launch_test_axpy;

#endif
