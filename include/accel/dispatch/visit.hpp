// accel/dispatch/visit.hpp — accel::visit: enter statically typed code once, at the boundary.
//
//   accel::visit(accel::get_accelerator(), [](auto backend) { Engine<decltype(backend)>{backend}.run(); });
// Inside the callable every call is a direct call on the concrete backend.
#pragma once

#include <accel/dispatch/any_backend.hpp>

#include <concepts>
#include <type_traits>

namespace accel {

template <class F, class... Bs>
decltype(auto) visit(const BasicAnyBackend<Bs...>& any, F&& f) {
  static_assert((std::invocable<F&, Bs> && ...),
                "accel::visit: the callable must accept every backend of the list — write it as a generic "
                "lambda `[](auto backend) {...}` or a template over accel::Accelerator B");
  if constexpr ((std::invocable<F&, Bs> && ...)) {
    using Result = std::common_type_t<std::invoke_result_t<F&, Bs>...>;
    return detail::visit_indexed(any.variant(), [&](auto, auto backend) -> Result { return f(backend); });
  }
}

}  // namespace accel
