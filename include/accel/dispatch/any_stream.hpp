// accel/dispatch/any_stream.hpp — stream, event and guard handles whose backend is chosen at run time.
//
// Each is a std::variant of the corresponding handle of every backend in the list; calls forward to
// the active alternative. Mixing backends (a CUDA event waited on by a CPU stream) is an
// InvalidArgumentError naming both. Handles constructed without a backend use the selected one
// (accel::get_accelerator(), dispatch/select.hpp).
//
// Alternatives are chosen by position, never by type: two backends of a list may share handle types
// (a user's backend that delegates to the CPU backend's streams and events), and the variant then has
// the same type twice. A concrete handle converts implicitly only where its type names one backend of
// the list; otherwise say which: AnyStreamRef<Bs...>(std::in_place_index<I>, ref).
#pragma once

#include <accel/core/error.hpp>
#include <accel/core/event_options.hpp>
#include <accel/dispatch/detail/selection_state.hpp>
#include <accel/dispatch/detail/visit_indexed.hpp>

#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

namespace accel {

template <class... Bs>
class AnyEvent;

namespace detail {

/// How many of Ts... are T.
template <class T, class... Ts>
inline constexpr std::size_t count_of = (std::size_t{std::is_same_v<T, Ts>} + ... + 0);

/// The position of B in Bs... (which holds it once).
template <class B, class... Bs>
consteval std::size_t index_of() {
  constexpr bool same[] = {std::is_same_v<B, Bs>...};
  for (std::size_t i = 0; i < sizeof...(Bs); ++i) {
    if (same[i]) return i;
  }
  return sizeof...(Bs);
}

template <class... Bs>
std::string_view backend_name_at(std::size_t index) {
  constexpr std::string_view names[] = {Bs::name()...};
  return names[index];
}

/// `index` when it names a backend of Bs...; InvalidArgumentError naming it otherwise. with_index takes
/// the last alternative for any index past the others, so every index from a user is checked first.
template <class... Bs>
std::size_t checked_backend_index(std::string_view call, std::size_t index) {
  if (index >= sizeof...(Bs)) [[unlikely]] {
    std::string names;
    std::size_t i = 0;
    ((names += (i == 0 ? "" : ", ") + std::to_string(i) + " = " + std::string(Bs::name()), ++i), ...);
    throw InvalidArgumentError(std::string(call) + ": backend index " + std::to_string(index) +
                               " is out of range: the list has " + std::to_string(sizeof...(Bs)) + " backend" +
                               (sizeof...(Bs) == 1 ? "" : "s") + " (" + names + ")");
  }
  return index;
}

[[noreturn]] inline void throw_backend_mismatch(std::string_view call, std::string_view stream_backend,
                                                std::string_view other_backend) {
  throw InvalidArgumentError(std::string(call) + ": a " + std::string(other_backend) + " handle was used with a " +
                             std::string(stream_backend) + " stream; handles of different backends do not mix");
}

}  // namespace detail

/// Non-owning, trivially copyable view of a stream of any backend in Bs...
template <class... Bs>
class AnyStreamRef {
 public:
  using variant_type = std::variant<typename Bs::StreamRef...>;

  /// Views a backend's ref; only where exactly one backend of the list has that ref type.
  template <class R>
    requires(detail::count_of<R, typename Bs::StreamRef...> == 1)
  AnyStreamRef(R ref) noexcept : ref_(ref) {}  // NOLINT(google-explicit-constructor): views any backend's ref
  /// Views a ref of backend number I in Bs...
  template <std::size_t I>
  AnyStreamRef(std::in_place_index_t<I> backend, typename detail::backend_at<I, Bs...>::StreamRef ref) noexcept
      : ref_(backend, ref) {}

  void synchronize() const {
    detail::visit_indexed(ref_, [](auto, auto s) { s.synchronize(); });
  }
  [[nodiscard]] bool query() const {
    return detail::visit_indexed(ref_, [](auto, auto s) { return s.query(); });
  }
  void wait(const AnyEvent<Bs...>& event) const;
  void wait_stream(const AnyStreamRef& other) const {
    if (other.index() != index()) detail::throw_backend_mismatch("wait_stream", backend_name(), other.backend_name());
    detail::visit_indexed(ref_, [&](auto i, auto s) { s.wait_stream(detail::get_unchecked<i()>(other.ref_)); });
  }
  template <class F>
  void enqueue(F&& fn) const {
    // Each backend gets its own copy (moved from fn): fn's address then escapes into no backend's
    // call, so the optimiser keeps it in registers and the backend builds its task from them. Handing
    // every backend fn itself made fn a stack object written before the dispatch, which the CPU
    // stream then read back whole: a load spanning two fresh stores, which cannot be forwarded.
    detail::visit_indexed(ref_, [&](auto, auto s) { s.enqueue(std::decay_t<F>(std::forward<F>(fn))); });
  }
  [[nodiscard]] int device_index() const {
    return detail::visit_indexed(ref_, [](auto, auto s) { return s.device_index(); });
  }
  [[nodiscard]] std::uint64_t id() const {
    return detail::visit_indexed(ref_, [](auto, auto s) { return s.id(); });
  }
  /// The priority it was created with (lower is higher, as in torch; 0 for default streams).
  [[nodiscard]] int priority() const {
    return detail::visit_indexed(ref_, [](auto, auto s) { return s.priority(); });
  }
  [[nodiscard]] bool is_capturing() const {
    return detail::visit_indexed(ref_, [](auto, auto s) { return s.is_capturing(); });
  }

  /// Position of this stream's backend in Bs..., and its name.
  [[nodiscard]] std::size_t index() const noexcept { return ref_.index(); }
  [[nodiscard]] std::string_view backend_name() const { return detail::backend_name_at<Bs...>(index()); }
  /// The concrete ref; InvalidArgumentError if the stream belongs to another backend.
  template <class B>
    requires(detail::count_of<B, Bs...> == 1)
  [[nodiscard]] typename B::StreamRef get() const {
    constexpr std::size_t i = detail::index_of<B, Bs...>();
    if (const auto* ref = std::get_if<i>(&ref_)) return *ref;
    detail::throw_backend_mismatch("AnyStreamRef::get", backend_name(), B::name());
  }
  [[nodiscard]] const variant_type& variant() const noexcept { return ref_; }

  friend bool operator==(const AnyStreamRef&, const AnyStreamRef&) = default;

 private:
  variant_type ref_;
};

/// Owning stream of any backend; move-only. `AnyStream{}` creates one on the selected backend.
template <class... Bs>
class AnyStream {
 public:
  using variant_type = std::variant<typename Bs::Stream...>;

  AnyStream() : AnyStream(detail::selected_backend_index<Bs...>()) {}
  AnyStream(int device, int priority) : AnyStream(detail::selected_backend_index<Bs...>(), device, priority) {}
  /// A stream of backend number `backend_index` in Bs... (e.g. AnyBackend::index()).
  // Built in place: a default-constructed variant would first create a stream of the first backend.
  template <class... Args>
  explicit AnyStream(std::size_t backend_index, Args... args)
      : stream_(detail::with_index<sizeof...(Bs)>(detail::checked_backend_index<Bs...>("AnyStream", backend_index),
                                                  [&](auto i) {
          return variant_type(std::in_place_index<i()>, args...);
        })) {}
  /// Takes a backend's stream; only where exactly one backend of the list has that stream type.
  template <class S>
    requires(detail::count_of<std::remove_cvref_t<S>, typename Bs::Stream...> == 1 && !std::is_lvalue_reference_v<S>)
  explicit AnyStream(S&& owned) : stream_(std::move(owned)) {}
  /// Takes a stream of backend number I in Bs...
  template <std::size_t I>
  AnyStream(std::in_place_index_t<I> backend, typename detail::backend_at<I, Bs...>::Stream&& owned)
      : stream_(backend, std::move(owned)) {}

  AnyStream(AnyStream&&) noexcept = default;
  AnyStream& operator=(AnyStream&&) noexcept = default;
  ~AnyStream() = default;

  [[nodiscard]] AnyStreamRef<Bs...> ref() const {
    return detail::visit_indexed(stream_, [](auto i, const auto& s) -> AnyStreamRef<Bs...> {
      return AnyStreamRef<Bs...>(std::in_place_index<i()>, typename detail::backend_at<i(), Bs...>::StreamRef(s));
    });
  }
  operator AnyStreamRef<Bs...>() const { return ref(); }  // NOLINT(google-explicit-constructor)

  void synchronize() const { ref().synchronize(); }
  [[nodiscard]] bool query() const { return ref().query(); }
  void wait(const AnyEvent<Bs...>& event) const { ref().wait(event); }
  void wait_stream(const AnyStreamRef<Bs...>& other) const { ref().wait_stream(other); }
  template <class F>
  void enqueue(F&& fn) const {
    ref().enqueue(std::forward<F>(fn));
  }
  [[nodiscard]] int device_index() const { return ref().device_index(); }
  [[nodiscard]] std::uint64_t id() const { return ref().id(); }
  [[nodiscard]] int priority() const { return ref().priority(); }
  [[nodiscard]] bool is_capturing() const { return ref().is_capturing(); }
  [[nodiscard]] std::size_t index() const noexcept { return stream_.index(); }

 private:
  variant_type stream_;
};

/// Event of any backend; move-only. `AnyEvent{}` / `AnyEvent{true}` / `AnyEvent(EventOptions{...})`
/// start on the selected backend; recording on a stream of another backend re-creates the event there
/// (same options; if that creation throws, the event stays what it was).
template <class... Bs>
class AnyEvent {
 public:
  using variant_type = std::variant<typename Bs::Event...>;

  AnyEvent() : AnyEvent(false) {}
  explicit AnyEvent(bool enable_timing) : AnyEvent(EventOptions{.enable_timing = enable_timing}) {}
  explicit AnyEvent(EventOptions options)
      : options_(options), event_(make(detail::selected_backend_index<Bs...>(), options)) {}
  AnyEvent(AnyEvent&&) noexcept = default;
  AnyEvent& operator=(AnyEvent&&) noexcept = default;
  ~AnyEvent() = default;

  void record() {
    detail::visit_indexed(event_, [](auto i, auto& e) { e.record(detail::backend_at<i(), Bs...>{}.current_stream()); });
  }
  void record(const AnyStreamRef<Bs...>& stream) {
    if (stream.index() != event_.index()) [[unlikely]] return record_elsewhere(stream);
    detail::visit_indexed(stream.variant(), [&](auto i, auto s) { detail::get_unchecked<i()>(event_).record(s); });
  }
  [[nodiscard]] bool query() const {
    return detail::visit_indexed(event_, [](auto, const auto& e) { return e.query(); });
  }
  void synchronize() const {
    detail::visit_indexed(event_, [](auto, const auto& e) { e.synchronize(); });
  }
  [[nodiscard]] float elapsed_time(const AnyEvent& end) const {
    if (end.index() != index()) detail::throw_backend_mismatch("elapsed_time", backend_name(), end.backend_name());
    return detail::visit_indexed(
        event_, [&](auto i, const auto& e) { return e.elapsed_time(detail::get_unchecked<i()>(end.event_)); });
  }
  /// Makes later work on `stream` (default: the calling thread's current stream of the event's backend)
  /// wait for this event, as the backends' events do (torch's Event.wait).
  void wait(const AnyStreamRef<Bs...>& stream) const { stream.wait(*this); }
  void wait() const {
    detail::visit_indexed(event_, [](auto, const auto& e) { e.wait(); });
  }
  [[nodiscard]] bool timing_enabled() const noexcept { return options_.enable_timing; }
  [[nodiscard]] bool external() const noexcept { return options_.external; }
  [[nodiscard]] std::size_t index() const noexcept { return event_.index(); }
  [[nodiscard]] std::string_view backend_name() const { return detail::backend_name_at<Bs...>(index()); }
  [[nodiscard]] const variant_type& variant() const noexcept { return event_; }

 private:
  // Built in place: a default-constructed variant would first create an event of the first backend.
  static variant_type make(std::size_t backend_index, EventOptions options) {
    return detail::with_index<sizeof...(Bs)>(backend_index,
                                             [&](auto i) { return variant_type(std::in_place_index<i()>, options); });
  }
  // The event follows a stream of another backend: re-created there, built first and then moved in,
  // so that if creating it throws the old event stays (the variant is never valueless). Out of line:
  // the common path is two compares and the backend's record.
  [[gnu::noinline]] void record_elsewhere(const AnyStreamRef<Bs...>& stream) {
    detail::visit_indexed(stream.variant(), [&](auto i, auto s) {
      event_ = variant_type(std::in_place_index<i()>, options_);
      detail::get_unchecked<i()>(event_).record(s);
    });
  }

  EventOptions options_;
  variant_type event_;
};

template <class... Bs>
void AnyStreamRef<Bs...>::wait(const AnyEvent<Bs...>& event) const {
  if (event.index() != index()) detail::throw_backend_mismatch("wait", backend_name(), event.backend_name());
  detail::visit_indexed(ref_, [&](auto i, auto s) { s.wait(detail::get_unchecked<i()>(event.variant())); });
}

/// Makes a stream current for the calling thread (on its backend); restores the previous one.
template <class... Bs>
class AnyStreamGuard {
 public:
  explicit AnyStreamGuard(const AnyStreamRef<Bs...>& stream) {
    detail::visit_indexed(stream.variant(), [&](auto i, auto s) { guard_.template emplace<i() + 1>(s); });
  }
  AnyStreamGuard(const AnyStreamGuard&) = delete;
  AnyStreamGuard& operator=(const AnyStreamGuard&) = delete;
  ~AnyStreamGuard() = default;

 private:
  std::variant<std::monostate, typename Bs::StreamGuard...> guard_;
};

/// Makes a device current (on the selected backend, or a given one); restores the previous one.
template <class... Bs>
class AnyDeviceGuard {
 public:
  explicit AnyDeviceGuard(int device) : AnyDeviceGuard(detail::selected_backend_index<Bs...>(), device) {}
  AnyDeviceGuard(std::size_t backend_index, int device) {
    detail::with_index<sizeof...(Bs)>(detail::checked_backend_index<Bs...>("AnyDeviceGuard", backend_index),
                                      [&](auto i) { guard_.template emplace<i() + 1>(device); });
  }
  AnyDeviceGuard(const AnyDeviceGuard&) = delete;
  AnyDeviceGuard& operator=(const AnyDeviceGuard&) = delete;
  ~AnyDeviceGuard() = default;

 private:
  std::variant<std::monostate, typename Bs::DeviceGuard...> guard_;
};

}  // namespace accel
