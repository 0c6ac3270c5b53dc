// accel/comm/any_communicator.hpp — accel::comm::AnyCommunicator: AnyBackend's communicator, so that
// code written for Collectives<B> runs with the backend chosen at run time (Engine<AnyBackend>).
//
// It holds the communicator of one backend of the list (MpiCommunicator for CpuBackend, NcclCommunicator
// for CudaBackend) and forwards every operation to it, and valid(), rank(), size(), local_rank(),
// local_size(), name(), timeout(), set_timeout(), flight_recorder(), failed(), split(), new_group() and
// group(). native_handle() is not forwarded: its type is the engine's (MPI_Comm, ncclComm_t); take it
// from get<B>(). AnyStreamRefs and Buffer<T, AnyBackend>s of
// another backend than the communicator's are an InvalidArgumentError naming both. comm::world<AnyBackend>()
// makes the world communicator of the selected backend (get_accelerator()). A backend of the list that
// has no communicator stays in the list (alternatives are chosen by position, as AnyStreamRef's are);
// selecting it makes world() a NotSupportedError.
#pragma once

#include <accel/comm/communicator.hpp>
#include <accel/comm/flight_recorder.hpp>
#include <accel/concepts/comm.hpp>
#include <accel/core/error.hpp>
#include <accel/dispatch/any_backend.hpp>
#include <accel/dispatch/detail/visit_indexed.hpp>

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

namespace accel::comm {

namespace detail {

/// Stands for a backend without a communicator in AnyCommunicator's variant.
template <class B>
struct NoCommunicator {
  struct Group {
    void end() {}
  };
};

template <class B>
struct alternative {
  using type = NoCommunicator<B>;
};
template <class B>
  requires Collectives<B>
struct alternative<B> {
  using type = communicator_t<B>;
};
template <class B>
using alternative_t = typename alternative<B>::type;

template <class C>
inline constexpr bool is_no_communicator = false;
template <class B>
inline constexpr bool is_no_communicator<NoCommunicator<B>> = true;

}  // namespace detail

template <class... Bs>
class AnyCommunicator;

/// AnyCommunicator's group guard: the active backend's (MpiGroup, NcclGroup), built in place.
template <class... Bs>
class AnyGroup {
 public:
  explicit AnyGroup(std::size_t index) : index_(index) {
    accel::detail::with_index<sizeof...(Bs)>(index, [&](auto i) { std::get<i()>(groups_).emplace(); });
  }
  AnyGroup(const AnyGroup&) = delete;
  AnyGroup& operator=(const AnyGroup&) = delete;

  void end() {
    accel::detail::with_index<sizeof...(Bs)>(index_, [&](auto i) { std::get<i()>(groups_)->end(); });
  }

 private:
  std::size_t index_;
  std::tuple<std::optional<typename detail::alternative_t<Bs>::Group>...> groups_;
};

template <class... Bs>
class AnyCommunicator : public CommunicatorOps<AnyCommunicator<Bs...>, BasicAnyBackend<Bs...>> {
  using Variant = std::variant<std::monostate, detail::alternative_t<Bs>...>;

 public:
  using Group = AnyGroup<Bs...>;
  using StreamRef = AnyStreamRef<Bs...>;

  /// An empty communicator.
  AnyCommunicator() noexcept = default;
  /// The communicator of backend number I of the list.
  template <std::size_t I>
  AnyCommunicator(std::in_place_index_t<I>, detail::alternative_t<accel::detail::backend_at<I, Bs...>>&& c)
      : comm_(std::in_place_index<I + 1>, std::move(c)) {}
  /// A backend's communicator, where exactly one backend of the list has its type.
  template <class C>  // the count first: it is false for AnyCommunicator itself, before Communicator<C> recurses
    requires(accel::detail::count_of<C, detail::alternative_t<Bs>...> == 1 && Communicator<C>)
  AnyCommunicator(C&& c)  // NOLINT(google-explicit-constructor): wraps any backend's communicator
      : comm_(std::in_place_index<accel::detail::index_of<C, detail::alternative_t<Bs>...>() + 1>, std::move(c)) {}

  AnyCommunicator(AnyCommunicator&&) noexcept = default;
  AnyCommunicator& operator=(AnyCommunicator&&) noexcept = default;
  AnyCommunicator(const AnyCommunicator&) = delete;
  AnyCommunicator& operator=(const AnyCommunicator&) = delete;

  [[nodiscard]] bool valid() const noexcept {
    return visit_or(false, [](const auto& c) { return c.valid(); });
  }
  explicit operator bool() const noexcept { return valid(); }
  /// Position of the communicator's backend in Bs... (InvalidStateError when empty).
  [[nodiscard]] std::size_t index() const {
    if (comm_.index() == 0) throw InvalidStateError("accel::comm::AnyCommunicator::index(): an empty communicator");
    return comm_.index() - 1;
  }
  [[nodiscard]] int rank() const noexcept { return visit_or(-1, [](const auto& c) { return c.rank(); }); }
  [[nodiscard]] int size() const noexcept { return visit_or(0, [](const auto& c) { return c.size(); }); }
  [[nodiscard]] int local_rank() const noexcept { return visit_or(-1, [](const auto& c) { return c.local_rank(); }); }
  [[nodiscard]] int local_size() const noexcept { return visit_or(0, [](const auto& c) { return c.local_size(); }); }
  /// The active communicator's timeout, set_timeout and flight recorder (InvalidStateError naming the
  /// call when empty, as the backends' own).
  [[nodiscard]] std::chrono::nanoseconds timeout() const {
    return forward<std::chrono::nanoseconds>(comm_, "timeout", [](const auto& c) { return c.timeout(); });
  }
  void set_timeout(std::chrono::nanoseconds timeout) {
    forward<void>(comm_, "set_timeout", [&](auto& c) { c.set_timeout(timeout); });
  }
  [[nodiscard]] const FlightRecorder& flight_recorder() const {
    return forward<const FlightRecorder&>(comm_, "flight_recorder",
                                          [](const auto& c) -> const FlightRecorder& { return c.flight_recorder(); });
  }
  [[nodiscard]] std::string name() const {
    return visit_or(std::string("empty"), [](const auto& c) { return c.name(); });
  }
  [[nodiscard]] bool failed() const noexcept { return visit_or(false, [](const auto& c) { return c.failed(); }); }

  /// The concrete communicator of backend B (InvalidArgumentError if it is another backend's).
  template <class B>
    requires(accel::detail::count_of<B, Bs...> == 1 && Collectives<B>)
  [[nodiscard]] communicator_t<B>& get() {
    constexpr std::size_t i = accel::detail::index_of<B, Bs...>();
    if (auto* c = std::get_if<i + 1>(&comm_)) return *c;
    throw InvalidArgumentError("accel::comm::AnyCommunicator::get<" + std::string(B::name()) +
                               ">(): the communicator is " + backend_name());
  }

  [[nodiscard]] AnyCommunicator split(int color, int key) const {
    return wrap([&](const auto& c) { return c.split(color, key); }, "split");
  }
  [[nodiscard]] AnyCommunicator new_group(std::span<const int> ranks) const {
    return wrap([&](const auto& c) { return c.new_group(ranks); }, "new_group");
  }
  [[nodiscard]] Group group() const {
    if (comm_.index() == 0) throw InvalidStateError("accel::comm::AnyCommunicator::group(): an empty communicator");
    return Group(comm_.index() - 1);
  }

  // ---- for CommunicatorOps ---------------------------------------------------------------------

  [[nodiscard]] detail::CallSite call_site(const char* op) const noexcept {
    return visit_or(detail::CallSite{op}, [&](const auto& c) { return c.call_site(op); });
  }
  void require_valid(const detail::CallSite& call) const {
    if (comm_.index() == 0) {
      throw InvalidStateError(call.prefix() + ": an empty communicator (this rank is not in the group, or it was moved "
                                              "from)");
    }
    visit_or(0, [&](const auto& c) {
      c.require_valid(call);
      return 0;
    });
  }
  void launch(const StreamRef& s, const detail::Op& op, const detail::CallSite& call) {
    require_valid(call);
    if (s.index() != index()) {
      call.invalid("the stream is a " + std::string(s.backend_name()) + " stream, but the communicator is " +
                   backend_name() + "'s");
    }
    accel::detail::with_index<sizeof...(Bs)>(index(), [&](auto i) {
      auto& c = std::get<i() + 1>(comm_);
      if constexpr (!detail::is_no_communicator<std::remove_cvref_t<decltype(c)>>) {
        c.launch(std::get<i()>(s.variant()), op, call);
      }
    });
  }

  /// The selected backend's world communicator (comm::world<AnyBackend>() keeps one per process).
  [[nodiscard]] static AnyCommunicator create_world() {
    const BasicAnyBackend<Bs...> selected;
    return accel::detail::with_index<sizeof...(Bs)>(selected.index(), [&](auto i) -> AnyCommunicator {
      using B = accel::detail::backend_at<i(), Bs...>;
      if constexpr (Collectives<B>) {
        return AnyCommunicator(std::in_place_index<i()>, communicator_t<B>::create_world());
      } else {
        throw NotSupportedError("accel::comm::world<AnyBackend>: the selected backend " + std::string(B::name()) +
                                " has no communicator");
      }
    });
  }

 private:
  [[nodiscard]] std::string backend_name() const {
    if (comm_.index() == 0) return "empty";
    return std::string(accel::detail::backend_name_at<Bs...>(comm_.index() - 1));
  }

  /// f(the concrete communicator), or `fallback` when empty or a backend without one.
  template <class R, class F>
  R visit_or(R fallback, F&& f) const {
    if (comm_.index() == 0) return fallback;
    return accel::detail::with_index<sizeof...(Bs)>(comm_.index() - 1, [&](auto i) -> R {
      const auto& c = std::get<i() + 1>(comm_);
      if constexpr (detail::is_no_communicator<std::remove_cvref_t<decltype(c)>>) {
        return fallback;
      } else {
        return f(c);
      }
    });
  }

  /// f(the concrete communicator) of `comm` (comm_, const or not); InvalidStateError naming `what` when
  /// empty or a backend without one.
  template <class R, class V, class F>
  static R forward(V& comm, const char* what, F&& f) {
    const auto empty = [&] {
      return InvalidStateError(std::string("accel::comm::AnyCommunicator::") + what + "(): an empty communicator");
    };
    if (comm.index() == 0) throw empty();
    return accel::detail::with_index<sizeof...(Bs)>(comm.index() - 1, [&](auto i) -> R {
      auto& c = std::get<i() + 1>(comm);
      if constexpr (detail::is_no_communicator<std::remove_cvref_t<decltype(c)>>) {
        throw empty();
      } else {
        return f(c);
      }
    });
  }

  template <class F>
  AnyCommunicator wrap(F&& f, const char* what) const {
    if (comm_.index() == 0) {
      throw InvalidStateError(std::string("accel::comm::AnyCommunicator::") + what + "(): an empty communicator");
    }
    return accel::detail::with_index<sizeof...(Bs)>(comm_.index() - 1, [&](auto i) -> AnyCommunicator {
      const auto& c = std::get<i() + 1>(comm_);
      if constexpr (detail::is_no_communicator<std::remove_cvref_t<decltype(c)>>) {
        throw InvalidStateError("accel::comm::AnyCommunicator: no communicator");
      } else {
        return AnyCommunicator(std::in_place_index<i()>, f(c));
      }
    });
  }

  Variant comm_;
};

}  // namespace accel::comm

template <class... Bs>
  requires(accel::Collectives<Bs> || ...)
struct accel::communicator_traits<accel::BasicAnyBackend<Bs...>> {
  using type = accel::comm::AnyCommunicator<Bs...>;
};
