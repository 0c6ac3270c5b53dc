// accel/memory/buffer.hpp — accel::Buffer<T, B>: a typed, owning buffer of device memory.
//
// Buffer<T, B> holds `count` elements of T allocated with B::raw_alloc(count * sizeof(T), stream) on
// a stream (default: the current stream), like torch.empty(...): the contents are uninitialised.
// It is move-only; its destructor returns the memory with B::raw_delete and never throws. The memory
// may be used on other streams after record_stream(s) (see concepts/memory.hpp).
// span() views the elements on the host and exists only where device memory is host memory
// (B::device_type() == DeviceType::cpu). T must be trivially copyable: buffers are filled and copied
// bytewise, between host and device, without running constructors.
// DeepSpeed's tensor types are aliases: FloatBuffer<B>, HalfBuffer<B>, BFloat16Buffer<B>,
// DoubleBuffer<B>, IntBuffer<B> (int32), LongBuffer<B> (int64), ByteBuffer<B> (uint8).
#pragma once

#include <accel/core/bfloat16.hpp>
#include <accel/core/device.hpp>
#include <accel/core/error.hpp>
#include <accel/core/half.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

namespace accel {

namespace detail {
/// Backends whose device memory the host can read and write directly.
template <class B>
concept HostAccessibleBackend = requires { requires B::device_type() == DeviceType::cpu; };
}  // namespace detail

template <class T, class B>
class Buffer {
  static_assert(std::is_trivially_copyable_v<T>,
                "accel::Buffer<T, B>: T must be trivially copyable (buffer contents are copied bytewise "
                "between host and device, without constructors)");
  static_assert(!std::is_const_v<T> && !std::is_volatile_v<T>, "accel::Buffer<T, B>: T must not be cv-qualified");

 public:
  using value_type = T;
  using backend_type = B;
  using StreamRef = typename B::StreamRef;

  /// An empty buffer with no stream.
  Buffer() noexcept = default;

  /// `count` uninitialised elements on `stream`'s device, for use in `stream` order.
  /// Throws OutOfMemoryError (also when count * sizeof(T) does not fit in size_t).
  explicit Buffer(std::size_t count, StreamRef stream = B{}.current_stream()) : stream_(stream) {
    if (count > std::numeric_limits<std::size_t>::max() / sizeof(T)) {
      throw OutOfMemoryError("accel::Buffer: " + std::to_string(count) + " elements of " +
                                 std::to_string(sizeof(T)) + " bytes do not fit in the address space",
                             std::numeric_limits<std::size_t>::max());
    }
    data_ = static_cast<T*>(B{}.raw_alloc(count * sizeof(T), stream));
    size_ = count;
  }

  Buffer(Buffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)), stream_(other.stream_) {}
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      reset();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      stream_ = other.stream_;
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  /// Frees the memory now (B::raw_delete); the buffer becomes empty.
  void reset() noexcept {
    if (data_ != nullptr) {
      try {
        B{}.raw_delete(data_);
      } catch (...) {  // cannot happen for memory from raw_alloc; a destructor must not throw
      }
      data_ = nullptr;
      size_ = 0;
    }
  }

  [[nodiscard]] T* data() noexcept { return data_; }
  [[nodiscard]] const T* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return size_ * sizeof(T); }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }

  /// The stream the memory was allocated on. Throws InvalidStateError for a default-constructed buffer.
  [[nodiscard]] StreamRef stream() const {
    if (!stream_) throw InvalidStateError("accel::Buffer::stream(): a default-constructed Buffer has no stream");
    return *stream_;
  }
  /// The index of the device that holds the memory.
  [[nodiscard]] int device_index() const { return stream().device_index(); }

  /// The memory is also used on `s`: it is not reused after this buffer frees it until the work
  /// enqueued on `s` before then has completed.
  void record_stream(StreamRef s) const {
    if (data_ != nullptr) B{}.record_stream(data_, s);
  }

  /// The elements, on the host; only for backends whose memory is host memory.
  [[nodiscard]] std::span<T> span() noexcept
    requires detail::HostAccessibleBackend<B>
  {
    return {data_, size_};
  }
  [[nodiscard]] std::span<const T> span() const noexcept
    requires detail::HostAccessibleBackend<B>
  {
    return {data_, size_};
  }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
  std::optional<StreamRef> stream_;
};

template <class B>
using FloatBuffer = Buffer<float, B>;
template <class B>
using HalfBuffer = Buffer<half, B>;
template <class B>
using BFloat16Buffer = Buffer<bfloat16, B>;
template <class B>
using DoubleBuffer = Buffer<double, B>;
template <class B>
using IntBuffer = Buffer<std::int32_t, B>;
template <class B>
using LongBuffer = Buffer<std::int64_t, B>;
template <class B>
using ByteBuffer = Buffer<std::uint8_t, B>;

}  // namespace accel
