// accel/concepts/profile.hpp — ProfileApi: named ranges for profilers (NVTX where available).
//
//   b.range_push(msg) -> int         opens a range on the calling thread; returns the new depth
//   b.range_push(msg, domain) -> int the same inside an NVTX domain (DeepSpeed's domain argument)
//   b.range_pop() -> int             closes the innermost range; returns the depth left;
//                                    popping with no open range throws InvalidStateError
//   b.range_pop(domain) -> int
#pragma once

#include <concepts>
#include <string_view>

namespace accel {

template <class B>
concept ProfileApi = requires(const B b, std::string_view msg) {
  { b.range_push(msg) } -> std::same_as<int>;
  { b.range_push(msg, msg) } -> std::same_as<int>;
  { b.range_pop() } -> std::same_as<int>;
  { b.range_pop(msg) } -> std::same_as<int>;
};

}  // namespace accel
