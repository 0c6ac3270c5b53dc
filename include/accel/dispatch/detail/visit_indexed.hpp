// accel/dispatch/detail/visit_indexed.hpp — visit a variant knowing the alternative's index.
//
// f(std::integral_constant<std::size_t, I>, alternative) — the index names the backend, so a handle
// can be matched with the backend it belongs to. For the two or three alternatives accel has this is
// a short if-chain, forced inline so that the optimiser sees through it (one compare per call, no
// closure in memory), cheaper than std::visit's table of function pointers.
//
// The variants visited here are never valueless when their alternatives are nothrow-movable (accel's
// own handles, checked below): every replacement is built first, then moved in (AnyEvent, AnyGraph).
// So the last alternative is taken without testing its index again, and get_unchecked<I> reads an
// alternative whose index the caller has compared already (a stream and an event of the same
// backend). A user's backend whose handles may throw when moved keeps the test, and an emptied
// handle is an InvalidStateError instead of undefined behaviour.
#pragma once

#include <accel/core/error.hpp>

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

namespace accel::detail {

template <class Variant>
struct never_valueless;
template <class... Ts>
struct never_valueless<std::variant<Ts...>> : std::bool_constant<(std::is_nothrow_move_constructible_v<Ts> && ...)> {};

[[noreturn]] inline void throw_valueless() {
  throw InvalidStateError(
      "a handle of AnyBackend is empty: replacing it failed (its backend's handle threw when moved)");
}

/// Alternative I of v, which the caller knows v holds: no second test, no bad_variant_access path.
template <std::size_t I, class Variant>
[[gnu::always_inline]] inline auto& get_unchecked(Variant& v) {
  if constexpr (never_valueless<std::remove_cv_t<Variant>>::value) {
#if defined(__GNUC__) || defined(__clang__)
    if (v.index() != I) __builtin_unreachable();
#endif
  } else {
    if (v.index() != I) [[unlikely]] throw_valueless();
  }
  return *std::get_if<I>(&v);
}

template <std::size_t I = 0, class Variant, class F>
[[gnu::always_inline]] inline decltype(auto) visit_indexed(Variant&& v, F&& f) {
  constexpr std::size_t count = std::variant_size_v<std::remove_cvref_t<Variant>>;
  if constexpr (I + 1 == count) {
    return std::forward<F>(f)(std::integral_constant<std::size_t, I>{}, get_unchecked<I>(v));
  } else {
    if (v.index() == I) return std::forward<F>(f)(std::integral_constant<std::size_t, I>{}, get_unchecked<I>(v));
    return visit_indexed<I + 1>(std::forward<Variant>(v), std::forward<F>(f));
  }
}

/// Calls f(std::integral_constant<std::size_t, I>{}) for the I equal to `index`. Precondition: index <
/// Count (an index past the end takes the last I); an index a user gave is checked first
/// (checked_backend_index, dispatch/any_stream.hpp).
template <std::size_t Count, std::size_t I = 0, class F>
decltype(auto) with_index(std::size_t index, F&& f) {
  if constexpr (I + 1 == Count) {
    return std::forward<F>(f)(std::integral_constant<std::size_t, I>{});
  } else {
    if (index == I) return std::forward<F>(f)(std::integral_constant<std::size_t, I>{});
    return with_index<Count, I + 1>(index, std::forward<F>(f));
  }
}

template <std::size_t I, class... Bs>
using backend_at = std::tuple_element_t<I, std::tuple<Bs...>>;

}  // namespace accel::detail
