// accel/profile/ranges.hpp — named profiler ranges shared by every backend.
//
// Ranges go to NVTX3 when the build has it (header-only, works without a GPU: Nsight Systems picks
// them up for CPU and CUDA work alike). Each thread keeps its own depth per domain, so an unbalanced
// range_pop() is reported as an InvalidStateError instead of silently corrupting a profile.
#pragma once

#include <accel/core/error.hpp>

#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#if defined(ACCEL_HAS_NVTX)
#include <nvtx3/nvToolsExt.h>
#endif

namespace accel::profile {

namespace detail {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

// Depth of open ranges on this thread, per domain ("" is the default domain).
inline std::unordered_map<std::string, int, StringHash, std::equal_to<>>& thread_depths() {
  thread_local std::unordered_map<std::string, int, StringHash, std::equal_to<>> depths;
  return depths;
}

inline int& depth_of(std::string_view domain) {
  auto& depths = thread_depths();
  auto it = depths.find(domain);
  if (it == depths.end()) it = depths.emplace(std::string(domain), 0).first;
  return it->second;
}

#if defined(ACCEL_HAS_NVTX)
// NVTX domains are process-wide and created once per name; the handles are never destroyed.
inline nvtxDomainHandle_t nvtx_domain(std::string_view name) {
  static std::mutex mutex;
  static auto* domains = new std::unordered_map<std::string, nvtxDomainHandle_t, StringHash, std::equal_to<>>();
  const std::lock_guard lock(mutex);
  auto it = domains->find(name);
  if (it == domains->end()) it = domains->emplace(std::string(name), nvtxDomainCreateA(std::string(name).c_str())).first;
  return it->second;
}
#endif

}  // namespace detail

/// Whether ranges reach a profiler (NVTX3 compiled in) or are only depth-checked.
[[nodiscard]] constexpr bool has_nvtx() noexcept {
#if defined(ACCEL_HAS_NVTX)
  return true;
#else
  return false;
#endif
}

/// Opens a range named `message` in `domain` ("" = the default domain); returns the new depth.
inline int range_push(std::string_view message, std::string_view domain = {}) {
#if defined(ACCEL_HAS_NVTX)
  const std::string text(message);
  if (domain.empty()) {
    nvtxRangePushA(text.c_str());
  } else {
    nvtxEventAttributes_t attributes{};
    attributes.version = NVTX_VERSION;
    attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attributes.message.ascii = text.c_str();
    nvtxDomainRangePushEx(detail::nvtx_domain(domain), &attributes);
  }
#else
  (void)message;  // only depth-checked without NVTX
#endif
  return ++detail::depth_of(domain);
}

/// Closes the innermost range of `domain` on this thread; returns the depth left.
inline int range_pop(std::string_view domain = {}) {
  int& depth = detail::depth_of(domain);
  if (depth == 0) {
    throw InvalidStateError("range_pop() with no open range" +
                            (domain.empty() ? std::string() : " in domain '" + std::string(domain) + "'") +
                            " on this thread");
  }
#if defined(ACCEL_HAS_NVTX)
  if (domain.empty()) {
    nvtxRangePop();
  } else {
    nvtxDomainRangePop(detail::nvtx_domain(domain));
  }
#endif
  return --depth;
}

/// Open ranges of `domain` on the calling thread.
[[nodiscard]] inline int range_depth(std::string_view domain = {}) { return detail::depth_of(domain); }

}  // namespace accel::profile
