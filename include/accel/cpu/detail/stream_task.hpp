// accel/cpu/detail/stream_task.hpp — the move-only, type-erased void() a CPU stream queues.
//
// Like std::move_only_function<void()> (C++23) with a guaranteed small buffer: a callable of at most
// 48 bytes whose move constructor does not throw is stored inline, so enqueueing a lambda with a few
// captures allocates nothing; larger ones go to the heap. The whole object is one 64-byte cache line.
// Internal: users pass their callables to StreamRef::enqueue.
#pragma once

#include <cstddef>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

namespace accel::cpu::detail {

class StreamTask {
 public:
  static constexpr std::size_t inline_size = 48;

  /// True when a callable of type T is stored without allocating.
  template <class T>
  static constexpr bool stored_inline = sizeof(T) <= inline_size && alignof(T) <= alignof(std::max_align_t) &&
                                        std::is_nothrow_move_constructible_v<T>;

  StreamTask() noexcept = default;

  template <class F, class T = std::decay_t<F>>
    requires(!std::is_same_v<T, StreamTask> && std::is_invocable_v<T&> && std::is_constructible_v<T, F>)
  explicit StreamTask(F&& fn) {
    if constexpr (stored_inline<T>) {
      ::new (static_cast<void*>(buffer_)) T(std::forward<F>(fn));
      ops_ = &inline_ops<T>;
      trivial_ = std::is_trivially_copyable_v<T>;  // moved by memcpy, destroyed by nothing
    } else {
      T* heap = new T(std::forward<F>(fn));
      ::new (static_cast<void*>(buffer_)) T*(heap);
      ops_ = &heap_ops<T>;
    }
  }

  StreamTask(StreamTask&& other) noexcept { take(other); }

  StreamTask& operator=(StreamTask&& other) noexcept {
    if (this != &other) {
      reset();
      take(other);
    }
    return *this;
  }

  StreamTask(const StreamTask&) = delete;
  StreamTask& operator=(const StreamTask&) = delete;
  ~StreamTask() { reset(); }

  /// Runs the callable (it must hold one). Exceptions propagate to the caller (the stream).
  void operator()() { ops_->invoke(buffer_); }

  /// Destroys the callable and what it captured.
  void reset() noexcept {
    if (ops_ != nullptr && !trivial_) ops_->destroy(buffer_);
    ops_ = nullptr;
  }

  explicit operator bool() const noexcept { return ops_ != nullptr; }

 private:
  struct OpsTable {
    void (*invoke)(void* self);
    void (*relocate)(void* dst, void* src) noexcept;  // move-construct into dst, destroy src
    void (*destroy)(void* self) noexcept;
  };

  template <class T>
  static constexpr OpsTable inline_ops{
      [](void* self) { (*static_cast<T*>(self))(); },
      [](void* dst, void* src) noexcept {
        T* from = static_cast<T*>(src);
        ::new (dst) T(std::move(*from));
        from->~T();
      },
      [](void* self) noexcept { static_cast<T*>(self)->~T(); },
  };

  template <class T>
  static constexpr OpsTable heap_ops{
      [](void* self) { (**static_cast<T**>(self))(); },
      [](void* dst, void* src) noexcept { ::new (dst) T*(*static_cast<T**>(src)); },
      [](void* self) noexcept { delete *static_cast<T**>(self); },
  };

  void take(StreamTask& other) noexcept {  // *this is empty
    if (other.ops_ == nullptr) return;
    if (other.trivial_) {
      std::memcpy(buffer_, other.buffer_, inline_size);
    } else {
      other.ops_->relocate(buffer_, other.buffer_);
    }
    ops_ = std::exchange(other.ops_, nullptr);
    trivial_ = other.trivial_;
  }

  alignas(std::max_align_t) unsigned char buffer_[inline_size];
  const OpsTable* ops_ = nullptr;
  bool trivial_ = false;
};

static_assert(sizeof(StreamTask) == 64, "a StreamTask is one cache line");

}  // namespace accel::cpu::detail
