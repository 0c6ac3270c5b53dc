// accel/algo/device_span.hpp — accel::algo::DeviceSpan<T, B>: a non-owning view of elements in
// backend B's memory, the range type of accel's algorithms.
//
// The algorithms (algo/*.hpp) take a Buffer<T, B> directly or a DeviceSpan of one: a part of a buffer
// (DeviceSpan(buffer).subspan(offset, count)), or a pointer and a count the caller vouches for (memory
// of B's allocator, or any memory B's kernels can address). The backend is part of the type, so the
// algorithm knows where the elements live and which stream type orders the work.
//   DeviceSpan<T, B>(buffer)            every element of a Buffer<T, B> (implicit)
//   DeviceSpan<const T, B>(cbuffer)     read-only view (implicit from a const Buffer or a DeviceSpan<T, B>)
//   DeviceSpan<T, B>(p, n)              explicit; a null p with n > 0 is an InvalidArgumentError
//   s.subspan(offset, count)            checked: outside the span is an InvalidArgumentError
//   s.first(count)                      s.subspan(0, count)
// Like std::span, a DeviceSpan does not keep the memory alive: the buffer must outlive the work
// enqueued on it (or be freed in stream order, which the caching allocator makes safe).
#pragma once

#include <accel/core/error.hpp>
#include <accel/memory/buffer.hpp>

#include <concepts>
#include <cstddef>
#include <string>
#include <type_traits>

namespace accel::algo {

template <class T, class B>
class DeviceSpan {
  static_assert(!std::is_volatile_v<T>, "accel::algo::DeviceSpan<T, B>: T must not be volatile");
  static_assert(std::is_trivially_copyable_v<T>, "accel::algo::DeviceSpan<T, B>: T must be trivially copyable");

 public:
  using element_type = T;
  using value_type = std::remove_cv_t<T>;
  using backend_type = B;
  using pointer = T*;
  using size_type = std::size_t;

  /// An empty span.
  constexpr DeviceSpan() noexcept = default;

  /// `size` elements at `data` in B's memory. Throws InvalidArgumentError for a null pointer with size > 0.
  DeviceSpan(T* data, std::size_t size) : data_(data), size_(size) {
    if (data == nullptr && size > 0) {
      throw InvalidArgumentError("accel::algo::DeviceSpan: a null pointer with " + std::to_string(size) +
                                 " elements");
    }
  }

  /// Every element of `buffer`.
  DeviceSpan(Buffer<value_type, B>& buffer) noexcept  // NOLINT(google-explicit-constructor)
      : data_(buffer.data()), size_(buffer.size()) {}
  DeviceSpan(const Buffer<value_type, B>& buffer) noexcept  // NOLINT(google-explicit-constructor)
    requires std::is_const_v<T>
      : data_(buffer.data()), size_(buffer.size()) {}

  /// A read-only view of a writable span.
  template <class U>
    requires(std::is_const_v<T> && std::same_as<U, value_type>)
  DeviceSpan(DeviceSpan<U, B> other) noexcept  // NOLINT(google-explicit-constructor)
      : data_(other.data()), size_(other.size()) {}

  [[nodiscard]] constexpr T* data() const noexcept { return data_; }
  [[nodiscard]] constexpr std::size_t size() const noexcept { return size_; }
  [[nodiscard]] constexpr std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }
  [[nodiscard]] constexpr bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] constexpr T* begin() const noexcept { return data_; }
  [[nodiscard]] constexpr T* end() const noexcept { return data_ + size_; }

  /// Elements [offset, offset + count). Throws InvalidArgumentError when that leaves the span.
  [[nodiscard]] DeviceSpan subspan(std::size_t offset, std::size_t count) const {
    if (offset > size_ || count > size_ - offset) {
      throw InvalidArgumentError("accel::algo::DeviceSpan::subspan(" + std::to_string(offset) + ", " +
                                 std::to_string(count) + "): outside a span of " + std::to_string(size_) +
                                 " elements");
    }
    DeviceSpan s;
    s.data_ = data_ + offset;
    s.size_ = count;
    return s;
  }
  /// The first `count` elements (checked like subspan).
  [[nodiscard]] DeviceSpan first(std::size_t count) const { return subspan(0, count); }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

template <class T, class B>
DeviceSpan(Buffer<T, B>&) -> DeviceSpan<T, B>;
template <class T, class B>
DeviceSpan(const Buffer<T, B>&) -> DeviceSpan<const T, B>;

}  // namespace accel::algo
