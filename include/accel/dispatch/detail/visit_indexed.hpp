// accel/dispatch/detail/visit_indexed.hpp — visit a variant knowing the alternative's index.
//
// f(std::integral_constant<std::size_t, I>, alternative) — the index names the backend, so a handle
// can be matched with the backend it belongs to. For the two or three alternatives accel has this is
// a short if-chain the optimiser sees through, cheaper than std::visit's table of function pointers.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>
#include <variant>

namespace accel::detail {

template <std::size_t I = 0, class Variant, class F>
decltype(auto) visit_indexed(Variant&& v, F&& f) {
  constexpr std::size_t count = std::variant_size_v<std::remove_cvref_t<Variant>>;
  if constexpr (I + 1 == count) {
    return std::forward<F>(f)(std::integral_constant<std::size_t, I>{}, *std::get_if<I>(&v));
  } else {
    if (v.index() == I) return std::forward<F>(f)(std::integral_constant<std::size_t, I>{}, *std::get_if<I>(&v));
    return visit_indexed<I + 1>(std::forward<Variant>(v), std::forward<F>(f));
  }
}

/// Calls f(std::integral_constant<std::size_t, I>{}) for the I equal to `index` (< Count).
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
