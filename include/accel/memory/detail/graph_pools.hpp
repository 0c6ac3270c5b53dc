// accel/memory/detail/graph_pools.hpp — a CachingAllocator's graph pools (torch's private pools) and
// which streams allocate to them (torch's beginAllocateToPool / endAllocateToPool / releasePool).
//
// While a graph captures on a stream, begin() routes that stream's allocations to the graph's
// PrivatePool, whose segments serve nothing else; blocks freed into it stay there (a replay writes them
// again) until every graph holding the pool released it, and then its segments go back when free.
// They count in every statistic as usual. The allocator owns one GraphPools and calls it under its
// lock; route() is on its hot path: one test while no stream captures.
#pragma once

#include <accel/core/error.hpp>
#include <accel/memory/detail/caching_block.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace accel::detail {

template <class Stream>
class GraphPools {
 public:
  using Pool = PrivatePool<Stream>;

  /// The pool stream `stream_id` allocates to while a graph captures on it; nullptr otherwise.
  [[gnu::always_inline]] Pool* route(std::uint64_t stream_id) const noexcept {
    return routes_.empty() ? nullptr : find_route(stream_id);
  }

  /// From now on stream `stream_id` allocates from pool `pool_id`, created with a use count of 1 if
  /// new (a new graph's own pool), else retained once more (a pool shared between graphs). `name` is
  /// the allocator's, for errors.
  void begin(std::uint64_t pool_id, std::uint64_t stream_id, const std::string& name) {
    for (const Route& r : routes_) {
      if (r.stream_id == stream_id) {
        throw InvalidStateError(name + ": stream " + std::to_string(stream_id) + " already allocates to graph pool " +
                                std::to_string(r.pool_id) + " (a stream captures one graph at a time)");
      }
    }
    routes_.reserve(routes_.size() + 1);
    auto it = pools_.find(pool_id);
    if (it == pools_.end()) {
      it = pools_.emplace(pool_id, std::make_unique<Pool>(pool_id)).first;
    } else {
      ++it->second->use_count;
    }
    routes_.push_back(Route{pool_id, stream_id});
  }

  /// Stream `stream_id` allocates from the ordinary pools again (the capture ended).
  void end(std::uint64_t pool_id, std::uint64_t stream_id) noexcept {
    std::erase_if(routes_, [&](const Route& r) { return r.pool_id == pool_id && r.stream_id == stream_id; });
  }

  /// The pool `pool_id`, nullptr for an unknown id.
  [[nodiscard]] Pool* find(std::uint64_t pool_id) const noexcept {
    const auto it = pools_.find(pool_id);
    return it == pools_.end() ? nullptr : it->second.get();
  }

  /// f(pool) for every pool.
  template <class F>
  void for_each(F&& f) {
    for (auto& [id, pool] : pools_) f(*pool);
  }

  /// Forgets the pools no graph holds, that own no segment any more and that no stream allocates to
  /// (a pool released while its capture goes on stays until end(): route() must find it).
  void erase_dead() noexcept {
    if (pools_.empty()) [[likely]] return;
    for (auto it = pools_.begin(); it != pools_.end();) {
      const Pool& pool = *it->second;
      it = pool.use_count == 0 && pool.segments == 0 && !routed(pool.id) ? pools_.erase(it) : std::next(it);
    }
  }

 private:
  struct Route {
    std::uint64_t pool_id;
    std::uint64_t stream_id;
  };

  [[nodiscard]] bool routed(std::uint64_t pool_id) const noexcept {
    for (const Route& r : routes_) {
      if (r.pool_id == pool_id) return true;
    }
    return false;
  }

  Pool* find_route(std::uint64_t stream_id) const noexcept {
    for (const Route& r : routes_) {
      if (r.stream_id == stream_id) return pools_.find(r.pool_id)->second.get();
    }
    return nullptr;
  }

  std::map<std::uint64_t, std::unique_ptr<Pool>> pools_;  // by id
  std::vector<Route> routes_;  // streams whose allocations go to a graph pool (capturing streams)
};

}  // namespace accel::detail
