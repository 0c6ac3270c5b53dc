#!/bin/sh
# A host compiler for the op builder (CXX) that builds every JIT kernel without AVX-512, so that a machine
# with it also runs the kernels' AVX2 paths (test_engine_attention_avx2).
exec "${ACCEL_TEST_HOST_CXX:-c++}" "$@" -mno-avx512f
