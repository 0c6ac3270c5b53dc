// accel/comm/detail/communicator_base.hpp — the members every engine's communicator has, written once
// over its state: MpiCommunicator (State = MpiState) and NcclCommunicator (State = NcclState) derive
// from CommunicatorBase<Self, Backend, State>, which derives from CommunicatorOps (the operations).
//
// Here: valid(), rank(), size(), local_rank(), local_size(), name(), engine(), timeout(), set_timeout(),
// flight_recorder(), failed(), split(color, key) and new_group(ranks) (their argument checks and names;
// the engine's split_impl(color, key, name) makes the communicator), group(), and CommunicatorOps'
// call_site() and require_valid(). The engine adds its creation, launch() and native_handle(). No
// virtual functions: Self is the concrete communicator (it befriends this base for split_impl).
// State derives from StateBase (state_base.hpp) and adds `static constexpr std::string_view
// engine_name` and describe().
#pragma once

#include <accel/comm/communicator.hpp>
#include <accel/comm/detail/arguments.hpp>
#include <accel/comm/flight_recorder.hpp>
#include <accel/core/error.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace accel::comm::detail {

template <class Self, class B, class State>
class CommunicatorBase : public CommunicatorOps<Self, B> {
 public:
  /// False for an empty communicator (what a rank outside a new group gets, or a moved-from one).
  [[nodiscard]] bool valid() const noexcept { return state_ != nullptr; }
  explicit operator bool() const noexcept { return valid(); }

  /// This rank (-1 for an empty communicator), the number of ranks (0 when empty), and the rank and
  /// number of ranks on this node.
  [[nodiscard]] int rank() const noexcept { return state_ ? state_->rank : -1; }
  [[nodiscard]] int size() const noexcept { return state_ ? state_->size : 0; }
  [[nodiscard]] int local_rank() const noexcept { return state_ ? state_->local_rank : -1; }
  [[nodiscard]] int local_size() const noexcept { return state_ ? state_->local_size : 0; }
  /// "world", "split of world (color 1)", "group [0, 2] of world"; "empty".
  [[nodiscard]] std::string name() const { return state_ ? state_->name : std::string("empty"); }
  /// "mpi", "nccl".
  [[nodiscard]] static constexpr std::string_view engine() noexcept { return State::engine_name; }

  /// The timeout of each operation issued from now on (ACCEL_COMM_TIMEOUT when created).
  [[nodiscard]] std::chrono::nanoseconds timeout() const { return checked("timeout").timeout(); }
  void set_timeout(std::chrono::nanoseconds timeout) {
    if (timeout.count() <= 0) {
      throw InvalidArgumentError(prefix() + "set_timeout: the timeout must be positive, got " +
                                 std::to_string(timeout.count()) + " ns");
    }
    checked("set_timeout").timeout_ns = timeout.count();
  }
  /// The last operations (ACCEL_COMM_TRACE_SIZE), for a dump of one's own.
  [[nodiscard]] const FlightRecorder& flight_recorder() const { return checked("flight_recorder").recorder; }
  /// True once an operation failed or timed out (later operations are refused).
  [[nodiscard]] bool failed() const noexcept { return state_ && state_->failed.load(); }

  /// Ranks with the same color form a new communicator, ordered by key (then by rank); a negative color
  /// gives this rank an empty one. Collective over this communicator.
  [[nodiscard]] Self split(int color, int key) const {
    return self().split_impl(color, key,
                             "split of " + checked("split").name + " (color " + std::to_string(color) + ")");
  }

  /// A communicator of `ranks` (ranks of this one; the new ranks follow their order); the other ranks
  /// get an empty one. Every rank of this communicator calls it with the same list (torch's new_group).
  [[nodiscard]] Self new_group(std::span<const int> ranks) const {
    const State& s = checked("new_group");
    std::vector<bool> seen(static_cast<std::size_t>(s.size), false);
    std::string list;
    int position = -1;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      const int r = ranks[i];
      if (r < 0 || r >= s.size) {
        throw InvalidArgumentError("accel::comm::new_group (" + s.describe() + "): rank " + std::to_string(r) +
                                   " is out of range 0.." + std::to_string(s.size - 1));
      }
      if (seen[static_cast<std::size_t>(r)]) {
        throw InvalidArgumentError("accel::comm::new_group (" + s.describe() + "): rank " + std::to_string(r) +
                                   " is listed twice");
      }
      seen[static_cast<std::size_t>(r)] = true;
      if (r == s.rank) position = static_cast<int>(i);
      list += (i ? ", " : "") + std::to_string(r);
    }
    if (ranks.empty()) throw InvalidArgumentError("accel::comm::new_group (" + s.describe() + "): no rank listed");
    return self().split_impl(position >= 0 ? 0 : -1, position, "group [" + list + "] of " + s.name);
  }

  /// Opens a group of operations on this thread (Self::Group: MpiGroup, NcclGroup).
  [[nodiscard]] auto group() const { return typename Self::Group(); }

  // ---- for CommunicatorOps ---------------------------------------------------------------------

  [[nodiscard]] CallSite call_site(const char* op) const noexcept {
    return {op, state_.get(), [](const void* s) {
              return s != nullptr ? static_cast<const State*>(s)->describe()
                                  : std::string(State::engine_name) + ", empty";
            }};
  }

  /// An empty communicator refuses every operation.
  void require_valid(const CallSite& call) const {
    if (!state_) [[unlikely]] {
      throw InvalidStateError(call.prefix() + ": an empty communicator (this rank is not in the group, or it was "
                                              "moved from)");
    }
  }

 protected:
  // Movable (the state moves), never copied: a communicator is one handle of the engine's.
  CommunicatorBase() noexcept = default;
  CommunicatorBase(CommunicatorBase&&) noexcept = default;
  CommunicatorBase& operator=(CommunicatorBase&&) noexcept = default;
  CommunicatorBase(const CommunicatorBase&) = delete;
  CommunicatorBase& operator=(const CommunicatorBase&) = delete;
  ~CommunicatorBase() = default;

  /// The state, or InvalidStateError naming the call on an empty communicator.
  [[nodiscard]] State& checked(const char* what) const {
    if (!state_) {
      throw InvalidStateError(prefix() + what +
                              "(): an empty communicator (this rank is not in the group, or it was moved from)");
    }
    return *state_;
  }

  std::shared_ptr<State> state_;

 private:
  [[nodiscard]] const Self& self() const noexcept { return static_cast<const Self&>(*this); }
  /// "accel::comm::MpiCommunicator::"
  [[nodiscard]] static std::string prefix() { return "accel::comm::" + std::string(Self::type_name) + "::"; }
};

}  // namespace accel::comm::detail
