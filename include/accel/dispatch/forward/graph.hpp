// accel/dispatch/forward/graph.hpp — GraphApi (concepts/graph.hpp) of BasicAnyBackend<Bs...>.
//
// A graph follows the stream it is captured on (an empty graph may change backend).
#pragma once

#include <accel/core/capture_mode.hpp>
#include <accel/core/graph_pool_id.hpp>
#include <accel/dispatch/any_graph.hpp>
#include <accel/dispatch/any_stream.hpp>
#include <accel/dispatch/detail/forward.hpp>

namespace accel {

template <class... Bs>
struct AnyGraphApi {
  [[nodiscard]] AnyGraph<Bs...> create_graph() const { return AnyGraph<Bs...>(detail::any_of(*this).index()); }
  [[nodiscard]] AnyGraphCapture<Bs...> capture_to_graph(AnyGraph<Bs...>& g) const {
    return AnyGraphCapture<Bs...>(g, detail::any_of(*this).current_stream());
  }
  [[nodiscard]] AnyGraphCapture<Bs...> capture_to_graph(AnyGraph<Bs...>& g, const AnyStreamRef<Bs...>& s,
                                                        GraphPoolId pool = {},
                                                        CaptureMode mode = CaptureMode::global) const {
    return AnyGraphCapture<Bs...>(g, s, pool, mode);
  }
  void replay_graph(AnyGraph<Bs...>& g) const { g.replay(); }
  void replay_graph(AnyGraph<Bs...>& g, const AnyStreamRef<Bs...>& s) const { g.replay(s); }
  [[nodiscard]] GraphPoolId graph_pool_handle() const noexcept { return GraphPoolId::make(); }
  [[nodiscard]] bool is_current_stream_capturing() const { return detail::any_of(*this).current_stream().is_capturing(); }
};

}  // namespace accel
