// accel/algo/detail/arguments.hpp — what accel's algorithms accept, and the checks they make before
// enqueueing anything (a bad argument is an InvalidArgumentError thrown by the call, never a task failure).
#pragma once

#include <accel/algo/device_span.hpp>
#include <accel/core/error.hpp>
#include <accel/memory/buffer.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace accel::algo::detail {

// ---- ranges: Buffer<T, B> or DeviceSpan<T, B> ----------------------------------------------------

template <class R>
struct range_traits {};  // not a range: the algorithm's overload is not viable

template <class T, class B>
struct range_traits<Buffer<T, B>> {
  using backend = B;
  using element = T;
  static constexpr bool writable = true;
};
template <class T, class B>
struct range_traits<const Buffer<T, B>> {
  using backend = B;
  using element = const T;
  static constexpr bool writable = false;
};
template <class T, class B>
struct range_traits<DeviceSpan<T, B>> {
  using backend = B;
  using element = T;
  static constexpr bool writable = !std::is_const_v<T>;
};
template <class T, class B>
struct range_traits<const DeviceSpan<T, B>> : range_traits<DeviceSpan<T, B>> {};

template <class R>
using traits_of = range_traits<std::remove_reference_t<R>>;

/// A Buffer<T, B> or a DeviceSpan<T, B> (any value category, const or not).
template <class R>
concept Range = requires { typename traits_of<R>::backend; };

/// A range the algorithm may write: a non-const Buffer lvalue, or a DeviceSpan of non-const elements.
template <class R>
inline constexpr bool is_device_span = false;
template <class T, class B>
inline constexpr bool is_device_span<DeviceSpan<T, B>> = true;

template <class R>
concept OutputRange = Range<R> && traits_of<R>::writable &&
                      (std::is_lvalue_reference_v<R> || is_device_span<std::remove_cvref_t<R>>);

template <Range R>
using backend_t = typename traits_of<R>::backend;
template <Range R>
using value_t = std::remove_cv_t<typename traits_of<R>::element>;
template <Range R>
using span_t = DeviceSpan<typename traits_of<R>::element, backend_t<R>>;
/// The stream type of a range's backend: the algorithms' first parameter (not deduced, so an owning
/// Stream converts to its StreamRef).
template <Range R>
using stream_t = typename backend_t<R>::StreamRef;

// ---- checks --------------------------------------------------------------------------------------

/// "accel::algo::transform (cuda:0)"
template <class B>
[[nodiscard]] std::string call_name(const char* algorithm, typename B::StreamRef stream) {
  return std::string("accel::algo::") + algorithm + " (" + std::string(B::name()) + ":" +
         std::to_string(stream.device_index()) + ")";
}

template <class B>
[[noreturn, gnu::cold, gnu::noinline]] void invalid(const char* algorithm, typename B::StreamRef stream,
                                                   const std::string& what) {
  throw InvalidArgumentError(call_name<B>(algorithm, stream) + ": " + what);
}

inline std::string elements(std::size_t n) { return std::to_string(n) + (n == 1 ? " element" : " elements"); }

template <class R>
inline constexpr bool is_buffer = false;
template <class T, class B>
inline constexpr bool is_buffer<Buffer<T, B>> = true;

/// The range as a span, after checking that a Buffer lives on the stream's device (a span carries no
/// device: the caller vouches for it). Elsewhere the kernel would run on one device against another's
/// memory: an illegal address on CUDA, a silent cross-device use on the CPU.
template <Range R>
[[nodiscard]] span_t<R> span_on(const char* algorithm, stream_t<R> stream, const char* name, R&& range) {
  if constexpr (is_buffer<std::remove_cvref_t<R>>) {
    if (!range.empty() && range.device_index() != stream.device_index()) [[unlikely]] {
      invalid<backend_t<R>>(algorithm, stream,
                            std::string(name) + " is a buffer of device " + std::to_string(range.device_index()) +
                                ", not the stream's device " + std::to_string(stream.device_index()));
    }
  }
  return span_t<R>(range);
}

/// `out` must hold at least `needed` elements (the size of `input`).
template <class B>
void require_capacity(const char* algorithm, typename B::StreamRef stream, const char* out, std::size_t out_size,
                      const char* input, std::size_t needed) {
  if (out_size < needed) [[unlikely]] {
    invalid<B>(algorithm, stream,
               std::string(out) + " is too small: it holds " + elements(out_size) + " but " + input + " has " +
                   std::to_string(needed));
  }
}

template <class B>
void require_same_size(const char* algorithm, typename B::StreamRef stream, const char* a, std::size_t a_size,
                       const char* b, std::size_t b_size) {
  if (a_size != b_size) [[unlikely]] {
    invalid<B>(algorithm, stream,
               std::string("mismatched sizes: ") + a + " has " + elements(a_size) + " and " + b + " has " +
                   elements(b_size));
  }
}

/// `out` (out_count elements of out_elem bytes) must not overlap `input` (in_count elements of in_elem
/// bytes), except, when allowed, exactly in place (the same address and element size), which Thrust
/// allows for element-wise algorithms and scans.
template <class B>
void require_no_overlap(const char* algorithm, typename B::StreamRef stream, const char* out, const void* out_data,
                        std::size_t out_elem, std::size_t out_count, const char* input, const void* in_data,
                        std::size_t in_elem, std::size_t in_count, bool in_place_allowed) {
  if (out_count == 0 || in_count == 0) return;
  const auto o = reinterpret_cast<std::uintptr_t>(out_data);
  const auto i = reinterpret_cast<std::uintptr_t>(in_data);
  if (o >= i + in_count * in_elem || i >= o + out_count * out_elem) return;
  if (in_place_allowed && o == i && out_elem == in_elem) return;
  invalid<B>(algorithm, stream,
             std::string(out) + " overlaps " + input +
                 (in_place_allowed ? " (only the exact in-place case, the same address and element size, is allowed)"
                                   : ""));
}

/// Element-wise output over an input of n elements (transform, inclusive_scan).
template <class B, class O, class I>
void require_elementwise(const char* algorithm, typename B::StreamRef stream, const char* out, const O* out_data,
                         const char* input, const I* in_data, std::size_t n) {
  require_no_overlap<B>(algorithm, stream, out, out_data, sizeof(O), n, input, in_data, sizeof(I), n, true);
}

}  // namespace accel::algo::detail
