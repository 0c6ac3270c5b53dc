// accel/dispatch/detail/selection_state.hpp — the backend selected once per process, per backend list.
//
// The selection, and set_accelerator()'s override, belong to one backend list: SelectionState<Bs...>
// is per list, so a user's own list (BasicAnyBackend<MyBackend, CpuBackend>) and the built-in one
// select independently. The choice itself is accel::select_backend (dispatch/selection.hpp).
#pragma once

#include <accel/dispatch/selection.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace accel::detail {

// The selection state of the backend list Bs... (and of no other list).
template <class... Bs>
struct SelectionState {
  // -1: no override; else the index in Bs... set by set_accelerator().
  static std::atomic<int>& override_index() {
    static std::atomic<int> index{-1};
    return index;
  }
  // Computed once, thread-safely; if it throws, the next call tries again.
  static const BackendSelection& selection() {
    static const BackendSelection selected = [] {
      BackendSelection s = select_backend<Bs...>(std::getenv("ACCEL_BACKEND"), std::getenv("DS_ACCELERATOR"));
      if (const char* level = std::getenv("ACCEL_LOG_LEVEL"); level != nullptr && std::string_view(level) == "debug") {
        std::fprintf(stderr, "accel: selected backend %s (%s)\n", std::string(s.name).c_str(),
                     std::string(s.reason).c_str());
      }
      return s;
    }();
    return selected;
  }
};

template <class... Bs>
std::size_t selected_backend_index() {
  const int overridden = SelectionState<Bs...>::override_index().load(std::memory_order_acquire);
  if (overridden >= 0) return static_cast<std::size_t>(overridden);
  return SelectionState<Bs...>::selection().index;
}

}  // namespace accel::detail
