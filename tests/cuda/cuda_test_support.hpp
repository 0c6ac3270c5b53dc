// Shared by the CUDA backend's tests: the skip for machines without a CUDA device.
#pragma once

#include <accel/cuda/backend.hpp>

#include <doctest/doctest.h>

/// Returns from the test case, saying why, when there is no CUDA device.
#define SKIP_WITHOUT_GPU()                                                                         \
  do {                                                                                             \
    if (!accel::CudaBackend::is_available()) {                                                     \
      MESSAGE("SKIPPED: no CUDA device: " << accel::CudaBackend::availability().reason);           \
      return;                                                                                      \
    }                                                                                              \
  } while (false)
