// accel/core/graph_pool_id.hpp — accel::GraphPoolId: names a graph memory pool (torch's MempoolId_t).
//
// Allocations made while a graph captures come from a pool private to that graph. Capturing a second
// graph with the first one's pool (`capture_to_graph(g2, s, g1.pool())`) or with one handle from
// `graph_pool_handle()` lets graphs share memory — safe when they are replayed in the order they were
// captured, as torch documents. Id 0 means "no pool given: the graph gets its own".
#pragma once

#include <atomic>
#include <cstdint>

namespace accel {

struct GraphPoolId {
  std::uint64_t id = 0;

  /// A fresh id, unique in the process (torch's graph_pool_handle()).
  [[nodiscard]] static GraphPoolId make() noexcept {
    static std::atomic<std::uint64_t> next{1};
    return GraphPoolId{next.fetch_add(1, std::memory_order_relaxed)};
  }
  [[nodiscard]] explicit operator bool() const noexcept { return id != 0; }
  friend bool operator==(GraphPoolId, GraphPoolId) = default;
};

}  // namespace accel
