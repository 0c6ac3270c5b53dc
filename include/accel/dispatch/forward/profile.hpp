// accel/dispatch/forward/profile.hpp — ProfileApi (concepts/profile.hpp) of BasicAnyBackend<Bs...>.
#pragma once

#include <accel/dispatch/detail/forward.hpp>

#include <string_view>

namespace accel {

template <class... Bs>
struct AnyProfileApi {
  int range_push(std::string_view msg) const { return detail::on_active(*this, [&](auto b) { return b.range_push(msg); }); }
  int range_push(std::string_view msg, std::string_view domain) const {
    return detail::on_active(*this, [&](auto b) { return b.range_push(msg, domain); });
  }
  int range_pop() const { return detail::on_active(*this, [](auto b) { return b.range_pop(); }); }
  int range_pop(std::string_view domain) const {
    return detail::on_active(*this, [&](auto b) { return b.range_pop(domain); });
  }
};

}  // namespace accel
