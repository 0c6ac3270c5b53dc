// Must NOT compile: accel::blas::gemm on a backend with no GEMM (no GemmImpl specialization). The
// diagnostic says so and names what to specialize (the same backend inside an AnyBackend compiles:
// test_blas_cpu.cpp).
#include "mock_backend.hpp"

#include <accel/blas.hpp>

int main() {
  float a[4]{}, b[4]{}, c[4]{};
  const mock::Backend be;
  accel::blas::gemm(be, be.current_stream(), accel::blas::Trans::no, accel::blas::Trans::no, 2, 2, 2, 1.0f, a, 2, b, 2,
                    0.0f, c, 2);
}
