// accel/profile/ranges.hpp — named profiler ranges shared by every backend.
//
// Ranges go to NVTX when the build has it (ACCEL_HAS_NVTX), through NVTX's library loaded when a
// profiler is attached (detail/nvtx_api.hpp; works without a GPU: Nsight Systems picks them up for CPU
// and CUDA work alike). Each thread keeps its own depth per domain, so an unbalanced
// range_pop() is reported as an InvalidStateError instead of silently corrupting a profile. While a
// profile::TraceRecorder records (profile/trace.hpp), every push and pop also goes to its trace.
#pragma once

#include <accel/core/error.hpp>

#include <atomic>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#if defined(ACCEL_HAS_NVTX)
#include <accel/profile/detail/nvtx_api.hpp>
#endif

namespace accel::profile {

namespace detail {

// Depth of open ranges on this thread, per domain ("" is the default domain). A thread uses few
// domains, so a short list searched in order is enough — and far cheaper to compile in every
// translation unit than a hash map.
struct DomainDepth {
  std::string name;
  int depth = 0;
};

inline std::vector<DomainDepth>& thread_depths() {
  thread_local std::vector<DomainDepth> depths;
  return depths;
}

// The reference is used at once by range_push/range_pop (a new domain may move the list).
inline int& depth_of(std::string_view domain) {
  if (domain.empty()) {
    thread_local int default_depth = 0;
    return default_depth;
  }
  auto& depths = thread_depths();
  for (auto& d : depths) {
    if (d.name == domain) return d.depth;
  }
  depths.push_back(DomainDepth{std::string(domain), 0});
  return depths.back().depth;
}

/// Set by a recording profile::TraceRecorder: called on every push (with the message) and pop.
using RangeHook = void (*)(bool push, std::string_view message, std::string_view domain) noexcept;
inline std::atomic<RangeHook>& range_hook() noexcept {
  static std::atomic<RangeHook> hook{nullptr};
  return hook;
}

#if defined(ACCEL_HAS_NVTX)
// NVTX domains are process-wide and created once per name; the handles are never destroyed.
inline void* nvtx_domain(const NvtxApi& api, std::string_view name) {
  static std::mutex mutex;
  static auto* domains = new std::vector<std::pair<std::string, void*>>();
  const std::lock_guard lock(mutex);
  for (const auto& [n, handle] : *domains) {
    if (n == name) return handle;
  }
  domains->emplace_back(std::string(name), api.domain_create_a(std::string(name).c_str()));
  return domains->back().second;
}
#endif

}  // namespace detail

/// Whether ranges go to NVTX (built with ACCEL_HAS_NVTX: through NVTX's library, loaded when a profiler is
/// attached; detail/nvtx_api.hpp) or are only depth-checked.
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
  if (const detail::NvtxApi& nvtx = detail::nvtx(); nvtx.loaded) {
    const std::string text(message);
    if (domain.empty()) {
      nvtx.range_push_a(text.c_str());
    } else {
      detail::NvtxEventAttributes attributes;  // ASCII, no colour, category or payload
      attributes.message = text.c_str();
      nvtx.domain_range_push_ex(detail::nvtx_domain(nvtx, domain), &attributes);
    }
  }
#endif
  if (const detail::RangeHook hook = detail::range_hook().load(std::memory_order_acquire)) hook(true, message, domain);
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
  if (const detail::RangeHook hook = detail::range_hook().load(std::memory_order_acquire)) hook(false, {}, domain);
#if defined(ACCEL_HAS_NVTX)
  if (const detail::NvtxApi& nvtx = detail::nvtx(); nvtx.loaded) {
    if (domain.empty()) {
      nvtx.range_pop();
    } else {
      nvtx.domain_range_pop(detail::nvtx_domain(nvtx, domain));
    }
  }
#endif
  return --depth;
}

/// Open ranges of `domain` on the calling thread.
[[nodiscard]] inline int range_depth(std::string_view domain = {}) { return detail::depth_of(domain); }

}  // namespace accel::profile
