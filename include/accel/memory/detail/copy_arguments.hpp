// accel/memory/detail/copy_arguments.hpp — the argument check every backend's copy_async makes first,
// so a null pointer is the same InvalidArgumentError on each (CUDA would otherwise report its own
// "invalid argument" from inside cudaMemcpyAsync, without saying which pointer).
#pragma once

#include <accel/core/error.hpp>

#include <cstddef>
#include <string>

namespace accel::detail {

/// Throws InvalidArgumentError naming the null pointer when a copy of `bytes` > 0 has one.
inline void check_copy_arguments(void* dst, const void* src, std::size_t bytes) {
  if (bytes != 0 && (dst == nullptr || src == nullptr)) {
    throw InvalidArgumentError("copy_async: null " + std::string(dst == nullptr ? "destination" : "source") + " for " +
                               std::to_string(bytes) + " bytes");
  }
}

}  // namespace accel::detail
