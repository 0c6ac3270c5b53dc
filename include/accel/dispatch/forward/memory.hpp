// accel/dispatch/forward/memory.hpp — MemoryApi (concepts/memory.hpp) of BasicAnyBackend<Bs...>.
//
// Memory follows the stream's backend (so Buffer<T, AnyBackend> works whichever backend its stream
// belongs to); the queries and the cache go to the active backend. raw_delete frees through whichever
// backend of the list holds the pointer: the active one is asked first, with its try_raw_delete (one
// lookup that frees what it finds; detail::try_raw_delete), then the others; a pointer none holds is
// reported by the active backend's raw_delete.
#pragma once

#include <accel/core/memory_stats.hpp>
#include <accel/dispatch/any_stream.hpp>
#include <accel/dispatch/detail/forward.hpp>

#include <concepts>
#include <cstddef>
#include <utility>

namespace accel {

namespace detail {

/// Frees p through b when b holds it (true), else changes nothing (false); nullptr: true. A backend
/// without try_raw_delete is asked on_accelerator first.
template <class B>
bool try_raw_delete(B b, void* p) {
  if constexpr (requires { { b.try_raw_delete(p) } -> std::same_as<bool>; }) {
    return b.try_raw_delete(p);
  } else {
    if (p != nullptr && !b.on_accelerator(p)) return false;
    b.raw_delete(p);
    return true;
  }
}

// One backend's allocation, out of line: the dispatcher then holds a compare and a call, as a virtual
// call would, and no backend pays for another's allocator — the compiler inlines a function called from
// one place whatever its size, and its frame would be set up on every backend's path.
template <class B>
[[gnu::noinline]] void* raw_alloc_on(B b, std::size_t bytes, typename B::StreamRef s) {
  return b.raw_alloc(bytes, s);
}

}  // namespace detail

template <class... Bs>
struct AnyMemoryApi {
  [[nodiscard]] void* raw_alloc(std::size_t bytes, const AnyStreamRef<Bs...>& s) const {
    return detail::on_stream_backend(*this, s, [&](auto b, auto ref) { return detail::raw_alloc_on(b, bytes, ref); });
  }
  /// Frees p through the backend of the list that holds it: true; false, changing nothing, when none
  /// does (nullptr: true).
  [[nodiscard]] bool try_raw_delete(void* p) const {
    if (detail::on_active(*this, [&](auto b) { return detail::try_raw_delete(b, p); })) [[likely]] return true;
    return try_raw_delete_elsewhere(p);
  }
  void raw_delete(void* p) const {
    if (try_raw_delete(p)) [[likely]] return;
    detail::on_active(*this, [&](auto b) { b.raw_delete(p); });  // reports a pointer no backend holds
  }
  void copy_async(const AnyStreamRef<Bs...>& s, void* dst, const void* src, std::size_t bytes) const {
    detail::on_stream_backend(*this, s, [&](auto b, auto ref) { b.copy_async(ref, dst, src, bytes); });
  }
  void record_stream(void* p, const AnyStreamRef<Bs...>& s) const {
    detail::on_stream_backend(*this, s, [&](auto b, auto ref) { b.record_stream(p, ref); });
  }
  void empty_cache() const { detail::on_active(*this, [](auto b) { b.empty_cache(); }); }

#define ACCEL_ANY_SIZE_QUERY(fn)                                                                         \
  [[nodiscard]] std::size_t fn() const { return detail::on_active(*this, [](auto b) { return b.fn(); }); } \
  [[nodiscard]] std::size_t fn(int dev) const { return detail::on_active(*this, [&](auto b) { return b.fn(dev); }); }
#define ACCEL_ANY_RESET(fn)                                                \
  void fn() const { detail::on_active(*this, [](auto b) { b.fn(); }); } \
  void fn(int dev) const { detail::on_active(*this, [&](auto b) { b.fn(dev); }); }
  ACCEL_ANY_SIZE_QUERY(memory_allocated)
  ACCEL_ANY_SIZE_QUERY(max_memory_allocated)
  ACCEL_ANY_SIZE_QUERY(memory_reserved)
  ACCEL_ANY_SIZE_QUERY(max_memory_reserved)
  ACCEL_ANY_SIZE_QUERY(memory_cached)
  ACCEL_ANY_SIZE_QUERY(max_memory_cached)
  ACCEL_ANY_SIZE_QUERY(total_memory)
  ACCEL_ANY_SIZE_QUERY(available_memory)
  ACCEL_ANY_RESET(reset_max_memory_allocated)
  ACCEL_ANY_RESET(reset_max_memory_cached)
  ACCEL_ANY_RESET(reset_peak_memory_stats)
  ACCEL_ANY_RESET(reset_accumulated_memory_stats)
#undef ACCEL_ANY_SIZE_QUERY
#undef ACCEL_ANY_RESET

  [[nodiscard]] MemoryStats memory_stats() const { return detail::on_active(*this, [](auto b) { return b.memory_stats(); }); }
  [[nodiscard]] MemoryStats memory_stats(int dev) const {
    return detail::on_active(*this, [&](auto b) { return b.memory_stats(dev); });
  }
  [[nodiscard]] MemoryInfo get_memory_info() const {
    return detail::on_active(*this, [](auto b) { return b.get_memory_info(); });
  }
  [[nodiscard]] MemoryInfo get_memory_info(int dev) const {
    return detail::on_active(*this, [&](auto b) { return b.get_memory_info(dev); });
  }
  void set_per_process_memory_fraction(double f) const {
    detail::on_active(*this, [&](auto b) { b.set_per_process_memory_fraction(f); });
  }
  void set_per_process_memory_fraction(double f, int dev) const {
    detail::on_active(*this, [&](auto b) { b.set_per_process_memory_fraction(f, dev); });
  }
  void pin_memory(void* p, std::size_t bytes) const { detail::on_active(*this, [&](auto b) { b.pin_memory(p, bytes); }); }
  [[nodiscard]] bool unpin_memory(void* p) const { return detail::on_active(*this, [&](auto b) { return b.unpin_memory(p); }); }
  [[nodiscard]] bool is_pinned(const void* p) const { return detail::on_active(*this, [&](auto b) { return b.is_pinned(p); }); }
  [[nodiscard]] bool on_accelerator(const void* p) const {
    return detail::on_active(*this, [&](auto b) { return b.on_accelerator(p); });
  }

 private:
  // Memory the active backend does not hold: the other backends of the list, in turn.
  [[gnu::noinline]] bool try_raw_delete_elsewhere(void* p) const {
    const std::size_t active = detail::any_of(*this).index();
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return ((I != active && detail::try_raw_delete(detail::backend_at<I, Bs...>{}, p)) || ...);
    }(std::index_sequence_for<Bs...>{});
  }
};

}  // namespace accel
