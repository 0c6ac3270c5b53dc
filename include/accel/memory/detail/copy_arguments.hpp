// accel/memory/detail/copy_arguments.hpp — the argument check every backend's copy_async makes first,
// so a null pointer is the same InvalidArgumentError on each (CUDA would otherwise report its own
// "invalid argument" from inside cudaMemcpyAsync, without saying which pointer).
#pragma once

#include <accel/core/error.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace accel::detail {

/// Throws InvalidArgumentError naming the null pointer when a copy of `bytes` > 0 has one, and when
/// the two ranges partly overlap (memmove's job: memcpy and cudaMemcpyAsync are undefined there, and
/// which bytes arrive would depend on the copy's direction). dst == src leaves the bytes as they are
/// and is allowed, so code that copies onto a buffer that may be its source need not test for it.
inline void check_copy_arguments(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  if (dst == nullptr || src == nullptr) {
    throw InvalidArgumentError("copy_async: null " + std::string(dst == nullptr ? "destination" : "source") + " for " +
                               std::to_string(bytes) + " bytes");
  }
  const auto d = reinterpret_cast<std::uintptr_t>(dst), s = reinterpret_cast<std::uintptr_t>(src);
  if (d != s && d < s + bytes && s < d + bytes) {
    char text[160];
    std::snprintf(text, sizeof text, "copy_async: the destination %p and the source %p partly overlap (%zu bytes; memmove's case, not a copy's)", dst, src,
                  bytes);
    throw InvalidArgumentError(text);
  }
}

}  // namespace accel::detail
