// accel/dispatch/any_graph.hpp — graph handles whose backend is chosen at run time.
//
// AnyGraph is a std::variant of every backend's Graph, AnyGraphCapture of their capture guards; calls
// forward to the active alternative. An empty AnyGraph follows the stream it is captured on; capturing
// or replaying a captured graph on a stream of another backend is an InvalidArgumentError naming both.
#pragma once

#include <accel/core/capture_mode.hpp>
#include <accel/core/error.hpp>
#include <accel/core/graph_pool_id.hpp>
#include <accel/dispatch/any_stream.hpp>
#include <accel/dispatch/detail/selection_state.hpp>
#include <accel/dispatch/detail/visit_indexed.hpp>

#include <cstddef>
#include <utility>
#include <variant>

namespace accel {

template <class... Bs>
class AnyGraphCapture;

/// A graph of any backend in Bs...; move-only. `AnyGraph{}` starts empty on the selected backend.
template <class... Bs>
class AnyGraph {
 public:
  using variant_type = std::variant<typename Bs::Graph...>;

  AnyGraph() : AnyGraph(detail::selected_backend_index<Bs...>()) {}
  /// An empty graph of backend number `backend_index` in Bs...
  explicit AnyGraph(std::size_t backend_index)
      : graph_(detail::with_index<sizeof...(Bs)>(detail::checked_backend_index<Bs...>("AnyGraph", backend_index),
                                                 [](auto i) { return variant_type(std::in_place_index<i()>); })) {}
  AnyGraph(AnyGraph&&) noexcept = default;
  AnyGraph& operator=(AnyGraph&&) noexcept = default;
  ~AnyGraph() = default;

  [[nodiscard]] bool captured() const noexcept {
    return std::visit([](const auto& g) { return g.captured(); }, graph_);
  }
  [[nodiscard]] bool capturing() const noexcept {
    return std::visit([](const auto& g) { return g.capturing(); }, graph_);
  }
  [[nodiscard]] GraphPoolId pool() const noexcept {
    return std::visit([](const auto& g) { return g.pool(); }, graph_);
  }
  void reset() {
    detail::visit_indexed(graph_, [](auto, auto& g) { g.reset(); });
  }
  void replay() {
    detail::visit_indexed(graph_, [](auto, auto& g) { g.replay(); });
  }
  void replay(const AnyStreamRef<Bs...>& stream) {
    check_same_backend("replay_graph", stream);
    detail::visit_indexed(graph_, [&](auto i, auto& g) { g.replay(detail::get_unchecked<i()>(stream.variant())); });
  }

  [[nodiscard]] std::size_t index() const noexcept { return graph_.index(); }
  [[nodiscard]] std::string_view backend_name() const { return detail::backend_name_at<Bs...>(index()); }
  [[nodiscard]] variant_type& variant() noexcept { return graph_; }
  [[nodiscard]] const variant_type& variant() const noexcept { return graph_; }

 private:
  friend class AnyGraphCapture<Bs...>;

  void check_same_backend(std::string_view call, const AnyStreamRef<Bs...>& stream) const {
    if (stream.index() != index()) detail::throw_backend_mismatch(call, stream.backend_name(), backend_name());
  }
  // Before a capture: an empty graph moves to the stream's backend. One being captured stays: replacing it
  // would abandon that capture, so the backend's own refusal is given here instead.
  void follow(const AnyStreamRef<Bs...>& stream) {
    if (stream.index() == index()) return;
    if (capturing()) throw InvalidStateError("capture_to_graph: a capture into this graph is already in progress");
    if (captured()) detail::throw_backend_mismatch("capture_to_graph", stream.backend_name(), backend_name());
    // Built first, then moved in: if creating the graph throws, the old one stays (never valueless).
    detail::with_index<sizeof...(Bs)>(stream.index(), [&](auto i) { graph_ = variant_type(std::in_place_index<i()>); });
  }

  variant_type graph_;
};

/// The guard of a capture into an AnyGraph; move-only (see GraphApi in concepts/graph.hpp).
template <class... Bs>
class AnyGraphCapture {
 public:
  AnyGraphCapture(AnyGraph<Bs...>& graph, const AnyStreamRef<Bs...>& stream, GraphPoolId pool = {},
                  CaptureMode mode = CaptureMode::global) {
    graph.follow(stream);
    detail::visit_indexed(stream.variant(), [&](auto i, auto s) {
      // follow() made the graph's backend the stream's.
      capture_.template emplace<i() + 1>(detail::get_unchecked<i()>(graph.variant()), s, pool, mode);
    });
  }
  AnyGraphCapture(AnyGraphCapture&&) noexcept = default;
  AnyGraphCapture& operator=(AnyGraphCapture&&) = delete;
  AnyGraphCapture(const AnyGraphCapture&) = delete;
  AnyGraphCapture& operator=(const AnyGraphCapture&) = delete;
  ~AnyGraphCapture() = default;

  /// Ends the capture; throws when it was invalidated (see the backend's GraphCapture::end).
  void end() {
    std::visit(
        [](auto& c) {
          if constexpr (!std::is_same_v<std::decay_t<decltype(c)>, std::monostate>) c.end();
        },
        capture_);
  }

 private:
  std::variant<std::monostate, typename Bs::GraphCapture...> capture_;
};

}  // namespace accel
