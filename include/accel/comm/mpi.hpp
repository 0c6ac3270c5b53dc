// accel/comm/mpi.hpp — accel::comm::MpiCommunicator: CpuBackend's communicator, over MPI.
//
// Every operation of accel::comm::CommunicatorOps (comm/communicator.hpp) on CPU streams, in stream
// order: when the stream is idle the MPI call runs on the calling thread before the operation returns
// (no hand-off to the stream's worker); otherwise it is queued behind the stream's work and runs on the
// worker; while the stream captures a graph it is recorded and runs at each replay. MPI_I* calls
// polled against the timeout (ACCEL_COMM_TIMEOUT, default 10 minutes; set_timeout()). Errors:
//   - a bad argument: InvalidArgumentError / NotSupportedError from the call, nothing enqueued;
//   - a failed or timed-out operation: CommError (comm_error.hpp) — thrown by the call when it ran on
//     the calling thread, else by the stream's next synchronize() as a TaskError whose original() is
//     the CommError. The flight recorder goes to stderr and the communicator is failed (later operations
//     are refused with a CommError quoting the first). After a timeout (MPI requests are left that will
//     never complete) the job ends at exit with MPI_Abort; after an error MPI reported (which leaves
//     none) finalize() ends MPI as usual.
//   - another rank called accel::comm::abort (launch.hpp): an operation waiting for it fails within
//     about 10 ms with a CommError naming it and quoting its reason (then MPI_Abort ends the job).
//
//   world<CpuBackend>() (comm/launch.hpp)      MPI_COMM_WORLD's copy, rank = the launcher's rank
//   MpiCommunicator::from_native(comm)         a copy of a program's own MPI communicator
//   c.split(color, key), c.new_group(ranks)    sub-communicators (collective over c, from one thread,
//                                              while none of c's operations is in flight); a rank with
//                                              a negative color, or not in `ranks`, gets an empty one
//   auto g = c.group(); ...; g.end();          the operations issued meanwhile (any MPI communicator,
//                                              one stream) start together and complete together
//   c.native_handle() -> MPI_Comm, c.flight_recorder(), c.timeout(), c.set_timeout(d)
//
// Every rank must issue a communicator's operations in the same order (on one stream, or streams
// ordered by events). Their sequence numbers (the flight recorder's) and the collectives' own numbers
// (the MPI tags of accel's ring and recursive doubling: mpi_engine.hpp) follow the host's call order on
// every path: taken by the call, or, for an operation captured into a graph, by each replay_graph call
// (cpu/detail/graph_numbering.hpp) — never when a stream's thread reaches the operation, which differs
// from rank to rank. half and bfloat16 are
// reduced by MPI through user-defined ops (mpi_types.hpp).
#pragma once

#include <accel/comm/communicator.hpp>
#include <accel/comm/detail/mpi_runtime.hpp>
#include <accel/concepts/comm.hpp>
#include <accel/cpu/backend.hpp>

#if defined(ACCEL_HAS_MPI)

#include <accel/comm/detail/communicator_base.hpp>
#include <accel/comm/detail/config.hpp>
#include <accel/comm/detail/mpi_engine.hpp>
#include <accel/comm/flight_recorder.hpp>
#include <accel/core/error.hpp>
#include <accel/cpu/detail/graph_numbering.hpp>

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace accel::comm {

class MpiCommunicator;

namespace detail {

/// Where an operation recorded in a graph finds, at each replay, its sequence number and (a
/// collective) its collective number.
struct MpiSlots {
  cpu::detail::CountSlot seq;
  cpu::detail::CountSlot collective;
};
/// Numbers p, recorded in a graph, with the numbers the running replay took for it.
inline void number_from_replay(Pending& p, const MpiSlots& slots, std::uint64_t stream_id) {
  const std::uint64_t collective = has_peer(p.op.kind) ? 0 : cpu::detail::replay_number(slots.collective);
  number_replayed(p, cpu::detail::replay_number(slots.seq), collective, stream_id);
}

/// The operations issued on this thread while an MpiGroup is open (slots[i]: where ops[i], recorded
/// in a graph, finds its numbers at each replay).
struct MpiGroupContext {
  int depth = 0;
  std::vector<Pending> ops;
  std::vector<MpiSlots> slots;
  std::optional<cpu::StreamRef> stream;
};
inline MpiGroupContext& mpi_group_context() noexcept {
  thread_local MpiGroupContext context;
  return context;
}

/// The task that runs one operation (queued, run by the caller on an idle stream, or recorded in a
/// graph: then its sequence number is 0 and `slot` says where each replay's number is).
struct MpiTask {
  Pending pending;
  std::uint64_t stream_id;
  MpiSlots slots;
  // Runs once with its own numbers, in place, or, recorded in a graph, once per replay on a numbered
  // copy.
  void operator()() {
    if (pending.seq != 0) return execute(pending, stream_id, false);
    Pending p = pending;
    number_from_replay(p, slots, stream_id);
    execute(p, stream_id, false);
  }
};
struct MpiGroupTask {
  std::vector<Pending> ops;
  std::vector<MpiSlots> slots;
  std::uint64_t stream_id;
  void operator()() const {
    std::vector<Pending> run = ops;
    for (std::size_t i = 0; i < run.size(); ++i) {
      if (run[i].seq == 0) number_from_replay(run[i], slots[i], stream_id);
    }
    execute_group(std::move(run));
  }
};

/// Waits for a request of communicator creation against the timeout.
inline void wait_creation(MPI_Request& request, const std::string& what) {
  const auto timeout = timeout_from_env();
  const steady::time_point start = steady::now();
  unsigned spins = 0;
  for (;;) {
    int done = 0;
    const int rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      CommError::Info info;
      info.engine = "mpi";
      info.engine_code = mpi_error_class(rc);
      info.engine_string = mpi_error_string(rc);
      info.hint = mpi_hint(info.engine_code);
      throw CommError(std::move(info), "accel::comm (mpi): " + what + " failed: " + mpi_error_string(rc));
    }
    if (done != 0) return;
    if ((++spins & 31u) == 0 && steady::now() - start >= timeout) {
      CommError::Info info;
      info.engine = "mpi";
      info.timed_out = true;
      info.waited_seconds = std::chrono::duration<double>(steady::now() - start).count();
      info.hint = "creating a communicator is collective: every rank of the parent must call it";
      // The text before `info` moves (a call's arguments are evaluated in an unspecified order).
      std::string message = "accel::comm (mpi): " + what + " timed out after " + std::to_string(info.waited_seconds) +
                            " s: a rank did not arrive. Hint: " + info.hint;
      throw CommError(std::move(info), std::move(message));
    }
  }
}

}  // namespace detail

/// The operations issued on this thread while it lives run as one launch: started together when the
/// outermost group ends, completed together (NCCL's ncclGroupStart/End; DeepSpeed's coalesced calls).
/// end() launches them with run_or_enqueue (errors are thrown by end() when they ran there); the
/// destructor of a group not ended enqueues them (errors reach the stream's next synchronize()).
class MpiGroup {
 public:
  MpiGroup() { ++detail::mpi_group_context().depth; }
  MpiGroup(const MpiGroup&) = delete;
  MpiGroup& operator=(const MpiGroup&) = delete;
  ~MpiGroup() {
    if (ended_) return;
    try {
      close(false);
    } catch (const std::exception& e) {  // a destructor does not throw; a stream refused the task
      std::fprintf(stderr, "accel::comm: a group of operations could not be launched: %s\n", e.what());
    }
  }

  /// Ends the group (the outermost one launches the operations); throws what they threw when they ran
  /// on this thread.
  void end() {
    if (ended_) throw InvalidStateError("accel::comm::MpiGroup::end(): the group was already ended");
    close(true);
  }

 private:
  void close(bool may_throw) {
    ended_ = true;
    detail::MpiGroupContext& g = detail::mpi_group_context();
    if (--g.depth > 0) return;
    std::vector<detail::Pending> ops = std::move(g.ops);
    std::vector<detail::MpiSlots> slots = std::move(g.slots);
    g.ops.clear();
    g.slots.clear();
    const std::optional<cpu::StreamRef> stream = std::exchange(g.stream, std::nullopt);
    if (ops.empty()) return;
    detail::MpiGroupTask task{std::move(ops), std::move(slots), stream->id()};
    if (may_throw) {
      stream->run_or_enqueue(std::move(task));
    } else {
      stream->enqueue(std::move(task));
    }
  }

  bool ended_ = false;
};

class MpiCommunicator : public detail::CommunicatorBase<MpiCommunicator, CpuBackend, detail::MpiState> {
 public:
  using Group = MpiGroup;

  /// An empty communicator (what a rank outside a new group gets); operations on it throw. Movable, not
  /// copyable (CommunicatorBase); operations in flight keep the MPI communicator until they end.
  MpiCommunicator() noexcept = default;

  /// A communicator over a copy of `comm` (collective over it; MPI must be initialised with
  /// MPI_THREAD_MULTIPLE).
  [[nodiscard]] static MpiCommunicator from_native(MPI_Comm comm, std::string name = "user communicator") {
    detail::mpi_ensure_initialized(detail::runtime(), nullptr, nullptr);
    MPI_Comm copy = MPI_COMM_NULL;
    MPI_Request request = MPI_REQUEST_NULL;
    const int rc = MPI_Comm_idup(comm, &copy, &request);
    if (rc != MPI_SUCCESS) {
      throw InvalidArgumentError("accel::comm::MpiCommunicator::from_native: MPI_Comm_idup failed: " +
                                 detail::mpi_error_string(rc));
    }
    detail::wait_creation(request, "copying " + name);
    return adopt(copy, std::move(name));
  }

  // valid(), rank(), size(), local_rank(), local_size(), name() ("world", "split of world (color 1)",
  // "group [0, 2] of world"), engine(), timeout(), set_timeout(d), flight_recorder(), failed(),
  // split(color, key), new_group(ranks) and group(): comm/detail/communicator_base.hpp. The local rank
  // and size are this node's (MPI_COMM_TYPE_SHARED).

  [[nodiscard]] MPI_Comm native_handle() const noexcept { return state_ ? state_->comm : MPI_COMM_NULL; }

  // ---- for CommunicatorOps ---------------------------------------------------------------------

  void launch(cpu::StreamRef s, const detail::Op& op, const detail::CallSite& call) {
    require_valid(call);
    detail::MpiState& st = *state_;
    detail::throw_if_failed(st, op, 0);
    detail::MpiGroupContext& g = detail::mpi_group_context();
    // Every check that can throw comes before the numbers are taken: a call refused on one rank must
    // not advance its sequence and collective numbers (the ranks' ring tags would part, and the next
    // collective hang).
    detail::check_self_peer(call, op, st.rank, g.depth > 0);
    if (op.count > static_cast<std::size_t>(detail::mpi_count_limit)) {
      call.invalid("count " + std::to_string(op.count) + " exceeds the MPI engine's limit of " +
                   std::to_string(detail::mpi_count_limit) +
                   " elements per rank (MPI 3.1 counts are int); split the operation into parts");
    }
    if (g.depth > 0 && g.stream && !(*g.stream == s)) {
      call.invalid("the operations of a group run on one stream: this one is on stream " + std::to_string(s.id()) +
                   ", the group's on stream " + std::to_string(g.stream->id()));
    }
    // The sequence number (and so a ring's MPI tag: mpi_engine.hpp) in host order, identical on every
    // rank: taken now, or, while s captures a graph, by each replay when it is enqueued (never when the
    // replayed operation runs, which depends on thread timing).
    // A collective also takes its collective number (its ring's tags), in the same way.
    detail::MpiSlots slots;
    const auto number = [&](std::atomic<std::uint64_t>& counter, cpu::detail::CountSlot& slot) {
      return !s.is_capturing() ? counter.fetch_add(1, std::memory_order_relaxed) + 1
                               : cpu::detail::GraphNumbering::take(
                                     s, std::shared_ptr<std::atomic<std::uint64_t>>(state_, &counter), slot);
    };
    const std::uint64_t seq = number(st.next_seq, slots.seq);
    // First without a share of the state (a shared_ptr that owns nothing: copying and destroying it
    // takes no atomic operation): an operation run here and now needs none, this communicator lives
    // through the call. One that outlives the call takes a share below.
    detail::Pending p{std::shared_ptr<detail::MpiState>(std::shared_ptr<detail::MpiState>(), state_.get()), op, seq};
    if (seq != 0) p.started = detail::steady::now();  // its enqueue, and its start if it runs here and now
    if (!detail::has_peer(op.kind)) p.collective = number(st.next_collective, slots.collective);
    if (g.depth > 0) {
      p.state = state_;
      if (seq != 0) st.recorder.enqueued(seq, op, s.id(), false, p.started);
      g.stream = s;
      g.ops.push_back(std::move(p));
      g.slots.push_back(slots);
      return;
    }
    if (seq != 0) {
      auto here = [&] { detail::execute(p, s.id(), true); };
      if (s.run_if_idle(here)) return;
    }
    p.state = state_;
    if (seq != 0) st.recorder.enqueued(seq, op, s.id(), false, p.started);
    s.enqueue(detail::MpiTask{std::move(p), s.id(), slots});
  }

  /// MPI_COMM_WORLD's copy (comm::world<CpuBackend>() keeps one per process).
  [[nodiscard]] static MpiCommunicator create_world() {
    detail::Runtime& r = detail::runtime();
    if (r.launch.launcher == Launcher::environment && r.launch.world_size > 1) {
      throw BackendUnavailableError(
          "accel::comm::world<CpuBackend>: RANK/WORLD_SIZE say " + std::to_string(r.launch.world_size) +
          " ranks started by a torchrun-style launcher, but CPU ranks communicate through MPI, which cannot join "
          "processes it did not launch: start them with mpirun -np " + std::to_string(r.launch.world_size));
    }
    detail::mpi_ensure_initialized(r, nullptr, nullptr);
    MPI_Comm copy = MPI_COMM_NULL;
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Comm_idup(MPI_COMM_WORLD, &copy, &request);
    detail::wait_creation(request, "copying MPI_COMM_WORLD");
    MpiCommunicator world = adopt(copy, "world");
    detail::mpi_registry().set_world(world.state_);  // its monitor carries accel::comm::abort's notices
    return world;
  }

 private:
  friend class detail::CommunicatorBase<MpiCommunicator, CpuBackend, detail::MpiState>;
  static constexpr std::string_view type_name = "MpiCommunicator";

  /// Takes `comm` (just created, every rank of it here): a control copy, the node split, the state.
  [[nodiscard]] static MpiCommunicator adopt(MPI_Comm comm, std::string name) {
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm control = MPI_COMM_NULL;
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Comm_idup(comm, &control, &request);
    detail::wait_creation(request, "creating " + name);
    MPI_Comm_set_errhandler(control, MPI_ERRORS_RETURN);
    MpiCommunicator out;
    out.state_ = std::make_shared<detail::MpiState>(comm, control, std::move(name), detail::trace_size_from_env());
    detail::MpiState& s = *out.state_;
    MPI_Comm node = MPI_COMM_NULL;
    MPI_Comm_split_type(control, MPI_COMM_TYPE_SHARED, s.rank, MPI_INFO_NULL, &node);
    if (node != MPI_COMM_NULL) {
      MPI_Comm_rank(node, &s.local_rank);
      MPI_Comm_size(node, &s.local_size);
      MPI_Comm_free(&node);
    }
    MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
    MPI_Comm_group(comm, &group);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    std::vector<int> ranks(static_cast<std::size_t>(s.size));
    for (int i = 0; i < s.size; ++i) ranks[static_cast<std::size_t>(i)] = i;
    s.world_ranks.assign(static_cast<std::size_t>(s.size), -1);
    MPI_Group_translate_ranks(group, s.size, ranks.data(), world, s.world_ranks.data());
    MPI_Group_free(&group);
    MPI_Group_free(&world);
    detail::mpi_registry().add(out.state_);
    return out;
  }

  [[nodiscard]] MpiCommunicator split_impl(int color, int key, std::string name) const {
    detail::MpiState& s = checked("split");
    // MPI_Comm_split blocks until every rank arrives: a non-blocking barrier first bounds the wait.
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Ibarrier(s.monitor, &request);
    detail::wait_creation(request, "creating " + name + " (every rank of " + s.name + " must call it)");
    MPI_Comm comm = MPI_COMM_NULL;
    const int rc = MPI_Comm_split(s.monitor, color < 0 ? MPI_UNDEFINED : color, key, &comm);
    if (rc != MPI_SUCCESS) {
      throw InvalidArgumentError("accel::comm: creating " + name + ": MPI_Comm_split failed: " +
                                 detail::mpi_error_string(rc));
    }
    if (comm == MPI_COMM_NULL) return MpiCommunicator();
    return adopt(comm, std::move(name));
  }
};

static_assert(accel::Communicator<MpiCommunicator>);

namespace detail {
inline void mpi_abort_hook(const std::string& reason, int exit_code) { mpi_abort_job(reason, exit_code); }
inline const bool mpi_abort_installed = [] {
  runtime().mpi_abort = &mpi_abort_hook;
  return true;
}();
}  // namespace detail

}  // namespace accel::comm

template <>
struct accel::communicator_traits<accel::CpuBackend> {
  using type = accel::comm::MpiCommunicator;
};

static_assert(accel::Collectives<accel::CpuBackend>);

#endif  // ACCEL_HAS_MPI
