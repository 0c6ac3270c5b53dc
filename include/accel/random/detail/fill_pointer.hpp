// accel/random/detail/fill_pointer.hpp — the check of a random fill's output pointer, shared by the
// backends: a null pointer with n > 0, or one not aligned to its elements (CUDA's kernels fault there;
// the CPU refuses it too, so that code which runs on one backend runs on the other).
#pragma once

#include <accel/core/error.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace accel::rng::detail {

inline void check_fill_pointer(const char* backend, const char* what, const void* p, std::size_t n,
                               std::size_t element_bytes) {
  if (p == nullptr && n != 0) {
    throw InvalidArgumentError(std::string(backend) + " " + what + ": null pointer for " + std::to_string(n) +
                               " elements");
  }
  if (reinterpret_cast<std::uintptr_t>(p) % element_bytes != 0) {
    char text[160];
    std::snprintf(text, sizeof text, "%s %s: the pointer %p is not aligned to its %zu-byte elements", backend, what, p,
                  element_bytes);
    throw InvalidArgumentError(text);
  }
}

}  // namespace accel::rng::detail
