// accel/dispatch/detail/forward.hpp — how the forwarding parts of BasicAnyBackend (dispatch/forward/)
// reach the active backend.
//
// Each part is an empty base of BasicAnyBackend<Bs...>, templated on the same list; from a part,
// any_of(*this) is the whole backend, and:
//   on_active(*this, f)                 f(b) with the active backend b
//   on_active_indexed(*this, f)         f(i, b) with its position i (std::integral_constant)
//   on_stream_backend(*this, s, f)      f(b, ref): the backend and concrete ref of stream s's alternative
//                                       (memory and fills follow the stream, whichever backend is active)
//   on_stream(*this, s, f)              f(b, ref) when s belongs to the active backend; else
//                                       InvalidArgumentError naming both
#pragma once

#include <accel/dispatch/any_stream.hpp>
#include <accel/dispatch/detail/visit_indexed.hpp>

#include <cstddef>
#include <utility>
#include <variant>

namespace accel {

template <class... Bs>
class BasicAnyBackend;

namespace detail {

template <template <class...> class Part, class... Bs>
[[nodiscard]] const BasicAnyBackend<Bs...>& any_of(const Part<Bs...>& part) noexcept {
  return static_cast<const BasicAnyBackend<Bs...>&>(part);
}

template <template <class...> class Part, class... Bs, class F>
[[gnu::always_inline]] inline decltype(auto) on_active(const Part<Bs...>& part, F&& f) {
  return visit_indexed(any_of(part).variant(), [&](auto, auto b) -> decltype(auto) { return f(b); });
}

template <template <class...> class Part, class... Bs, class F>
[[gnu::always_inline]] inline decltype(auto) on_active_indexed(const Part<Bs...>& part, F&& f) {
  return visit_indexed(any_of(part).variant(), std::forward<F>(f));
}

template <template <class...> class Part, class... Bs, class F>
[[gnu::always_inline]] inline decltype(auto) on_stream_backend(const Part<Bs...>&, const AnyStreamRef<Bs...>& s,
                                                             F&& f) {
  return visit_indexed(s.variant(),
                       [&](auto i, auto ref) -> decltype(auto) { return f(backend_at<i(), Bs...>{}, ref); });
}

template <template <class...> class Part, class... Bs, class F>
[[gnu::always_inline]] inline decltype(auto) on_stream(const Part<Bs...>& part, const AnyStreamRef<Bs...>& s, F&& f) {
  const BasicAnyBackend<Bs...>& any = any_of(part);
  // (call, the stream's backend, the other handle's): here the other handle is the backend itself
  if (s.index() != any.index()) throw_backend_mismatch("stream argument", s.backend_name(), any.name());
  return visit_indexed(any.variant(),
                       [&](auto i, auto b) -> decltype(auto) { return f(b, get_unchecked<i()>(s.variant())); });
}

}  // namespace detail
}  // namespace accel
