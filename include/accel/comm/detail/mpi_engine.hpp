// accel/comm/detail/mpi_engine.hpp — how MpiCommunicator runs an operation: the MPI_I* call, then
// MPI_Test polled against the communicator's timeout, on whichever thread the CPU stream runs the
// operation on (the caller's when the stream was idle, else its worker).
//
// Polling: MPI_Test in a tight loop (Open MPI progresses only inside MPI calls), the clock read every 32
// tests from the 256th (a small operation ends before); after 1 ms of waiting every 32nd test also
// yields the core (a peer that has not arrived may be waiting for this core: on a machine with more
// runnable threads than cores, spinning 100 ms made the data-parallel engine's 2-rank step 1.3-1.4x
// slower at load 5 on 2 cores), after 2 s the loop sleeps 100 us between rounds (by then a peer is
// late, not the network).
//
// Who fell behind: an operation that has waited half its timeout (at most 5 s) tells every peer
// "I am waiting in #seq" (and, a collective, "in collective #c") once, on a duplicate of the
// communicator kept for this (`monitor`), and from then on reads what the peers told it. At the
// timeout (after a short grace for messages in flight), the ranks that were not seen waiting in this
// collective or a later one are the ones that did not arrive (collective numbers, not sequence numbers:
// sends and receives number only on the ranks that issue them); the CommError names them. Operations
// that finish in time send nothing.
//
// A rank that aborts the job (accel::comm::abort) sends its reason to every rank on the world's
// monitor; an operation that has waited 1 ms looks for such a notice every 10 ms, fails naming the
// aborting rank, and acknowledges it, and the aborting rank then ends the job with MPI_Abort.
//
// all_gather and reduce_scatter (every size) run as accel's ring of MPI_Isend / MPI_Irecv
// (ring_start), all_reduce up to 8 KiB per rank (128 KiB on 2) as accel's recursive doubling (doubling_start;
// mpi_tuning.hpp says why), polled the same way; their messages' tags come from the operation's
// number among the communicator's collectives (ring_tag), which every rank takes alike, in host order
// (mpi.hpp) — not from its sequence number, which counts sends and receives too.
// Compiled only where accel has MPI.
#pragma once

#if defined(ACCEL_HAS_MPI)

#include <accel/comm/comm_error.hpp>
#include <accel/comm/detail/config.hpp>
#include <accel/comm/detail/mpi_error.hpp>
#include <accel/comm/detail/mpi_tuning.hpp>
#include <accel/comm/detail/mpi_types.hpp>
#include <accel/comm/detail/op.hpp>
#include <accel/comm/detail/op_log.hpp>
#include <accel/comm/detail/runtime.hpp>
#include <accel/comm/detail/state_base.hpp>
#include <accel/comm/flight_recorder.hpp>

#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace accel::comm::detail {

using steady = std::chrono::steady_clock;

inline constexpr int monitor_tag = 0x4acc;  // "I am waiting in #seq" messages on the monitor communicator
inline constexpr int p2p_tag = 0x4acd;      // send / recv
inline constexpr int abort_tag = 0x4ace;    // "this rank aborts the job: <reason>", on the world's monitor
inline constexpr int abort_ack_tag = 0x4acf;  // "seen", back to the aborting rank
// accel's ring (all_gather / reduce_scatter) tags its messages ring_tag_base + seq mod ring_tags, on the
// communicator, up to MPI_TAG_UB (at least 32767 by the standard, 2^31 - 1 in Open MPI): above the tags
// above, so that nothing else shares them.
inline constexpr int ring_tag_base = 0x4ad0;

/// True once MPI_Finalize ran (then nothing may call MPI).
[[nodiscard]] inline bool mpi_finalized() noexcept {
  int done = 0;
  MPI_Finalized(&done);
  return done != 0;
}

/// One communicator's shared state: owned by its MpiCommunicator and by every operation in flight.
struct MpiState : StateBase {
  static constexpr std::string_view engine_name = "mpi";

  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm monitor = MPI_COMM_NULL;
  std::atomic<std::uint64_t> next_collective{0};  // numbers the collectives only (Pending::collective)
  std::vector<int> world_ranks;  // world rank of each rank
  bool check = false;  // ACCEL_COMM_CHECK: compare the ranks' arguments before each collective

  // Guarded by `mutex`:
  std::vector<std::uint64_t> peer_seq;  // the latest operation each rank was seen waiting in (its number)
  // ... and the latest collective (Pending::collective): what says whether it arrived in ours, where
  // sends and receives made the ranks' sequence numbers differ.
  std::vector<std::uint64_t> peer_collective;
  std::uint64_t announced = 0;          // the latest operation this rank announced
  struct PendingSend {
    MPI_Request request;
    std::unique_ptr<std::uint64_t[]> message;
  };
  std::vector<PendingSend> sends;
  // The scratch block of the last of accel's schedules that needed one (take_scratch, keep_scratch),
  // kept for the next: the ring's partial sums are 2 S / n per call (the engine's in-place ZeRO
  // reduce-scatter: every step), and a fresh block each call costs an allocation and its page faults
  // (glibc maps blocks above 32 MiB anew each time). The largest block used stays until the
  // communicator goes. (Blocks up to thread_scratch_limit are kept per thread instead.)
  std::shared_ptr<std::byte[]> spare_scratch;
  std::size_t spare_scratch_bytes = 0;

  // How many tags accel's ring cycles through (ring_tag): two ring operations share a tag only when
  // this many sequence numbers apart.
  std::uint64_t ring_tags = 32767 - ring_tag_base + 1;

  MpiState(MPI_Comm c, MPI_Comm m, std::string n, std::size_t trace)
      : StateBase(std::move(n), trace), comm(c), monitor(m), check(check_from_env()) {
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    peer_seq.assign(static_cast<std::size_t>(size), 0);
    peer_collective.assign(static_cast<std::size_t>(size), 0);
    int* tag_ub = nullptr;
    int found = 0;  // MPI_TAG_UB is an attribute of MPI_COMM_WORLD (MPI 3.1 section 8.1.2)
    if (MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found) == MPI_SUCCESS && found != 0 &&
        tag_ub != nullptr && *tag_ub > ring_tag_base) {
      ring_tags = static_cast<std::uint64_t>(*tag_ub) - ring_tag_base + 1;
    }
  }

  ~MpiState() {
    if (mpi_finalized()) return;  // MPI_Finalize freed everything
    for (PendingSend& s : sends) {
      int done = 0;
      MPI_Test(&s.request, &done, MPI_STATUS_IGNORE);
      if (done == 0) {  // a peer never took it: let MPI finish it, and leave it its buffer
        MPI_Request_free(&s.request);
        (void)s.message.release();
      }
    }
    if (monitor != MPI_COMM_NULL) MPI_Comm_free(&monitor);
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }

  [[nodiscard]] std::string describe() const {
    return "mpi, " + name + ", rank " + std::to_string(rank) + " of " + std::to_string(size);
  }
  /// "rank 2" or, on a sub-communicator, "rank 2 (world rank 5)".
  [[nodiscard]] std::string rank_name(int r) const {
    std::string out = "rank " + std::to_string(r);
    if (name != "world" && static_cast<std::size_t>(r) < world_ranks.size() &&
        world_ranks[static_cast<std::size_t>(r)] != r) {
      out += " (world rank " + std::to_string(world_ranks[static_cast<std::size_t>(r)]) + ")";
    }
    return out;
  }
};

/// The CommError of `op` #seq, with the fields filled from the state; `what` follows the prefix.
[[nodiscard]] inline CommError make_error(const MpiState& s, const Op& op, std::uint64_t seq, const std::string& what,
                                          CommError::Info info = {}) {
  info.engine = "mpi";
  info.communicator = s.name;
  info.op = std::string(name(op.kind));
  info.count = op.count;
  if (op.kind != OpKind::barrier) info.dtype = op.dtype;
  info.peer = op.root;
  info.rank = s.rank;
  info.size = s.size;
  info.seq = seq;
  std::string message = "accel::comm (" + s.describe() + "): " + op_text(op, seq) + " " + what;
  if (!info.hint.empty()) message += ". Hint: " + info.hint;
  return CommError(std::move(info), message);
}

/// Marks the communicator failed (later operations are refused), writes its flight recorder to stderr
/// and throws `error`. A timeout leaves MPI requests that will never complete, so the job must then end
/// with MPI_Abort (runtime.hpp); an error the engine reported leaves none.
[[noreturn]] inline void fail(MpiState& s, std::uint64_t seq, const CommError& error) {
  s.record_failure(seq, error.what());
  if (error.timed_out()) note_failure(error.what());
  s.report(s.describe(), seq, error);
  throw error;
}

/// An MPI call of `op` returned `code`.
[[noreturn]] inline void fail_mpi(MpiState& s, const Op& op, std::uint64_t seq, const char* call, int code,
                                  std::uint64_t collective = 0) {
  CommError::Info info;
  info.collective = collective;
  info.engine_code = mpi_error_class(code);
  info.engine_string = mpi_error_string(code);
  info.hint = mpi_hint(info.engine_code);
  // The text first: the order in which a call's arguments are evaluated is unspecified, and g++ moved
  // `info` away before reading its engine_string (the message said "MPI_Isend: ." with no error text).
  std::string what = std::string("failed: ") + call + ": " + info.engine_string;
  fail(s, seq, make_error(s, op, seq, what, std::move(info)));
}

/// Refuses an operation on a communicator that failed before.
inline void throw_if_failed(MpiState& s, const Op& op, std::uint64_t seq) {
  if (!s.failed.load(std::memory_order_acquire)) [[likely]] return;
  throw make_error(s, op, seq, s.refusal(" and cannot be used again", seq));
}

// ---- who fell behind -------------------------------------------------------------------------------

/// Reads the "waiting in #seq" messages that arrived. With s.mutex held.
inline void drain_announcements(MpiState& s) {
  for (;;) {
    int flag = 0;
    MPI_Message message;
    MPI_Status status;
    if (MPI_Improbe(MPI_ANY_SOURCE, monitor_tag, s.monitor, &flag, &message, &status) != MPI_SUCCESS || flag == 0) return;
    std::uint64_t body[3] = {0, 0, 0};  // seq, kind, collective number
    if (MPI_Mrecv(body, 3, MPI_UINT64_T, &message, &status) != MPI_SUCCESS) return;
    const auto from = static_cast<std::size_t>(status.MPI_SOURCE);
    if (from < s.peer_seq.size()) {
      s.peer_seq[from] = std::max(s.peer_seq[from], body[0]);
      s.peer_collective[from] = std::max(s.peer_collective[from], body[2]);
    }
  }
}

/// Tells every peer that this rank waits in operation #seq (once per operation; a collective also
/// gives its collective number), and reads theirs.
inline void announce(MpiState& s, std::uint64_t seq, OpKind kind, std::uint64_t collective) {
  const std::lock_guard<std::mutex> lock(s.mutex);
  if (s.announced < seq) {
    s.announced = seq;
    std::erase_if(s.sends, [](MpiState::PendingSend& p) {
      int done = 0;
      MPI_Test(&p.request, &done, MPI_STATUS_IGNORE);
      return done != 0;
    });
    for (int peer = 0; peer < s.size; ++peer) {
      if (peer == s.rank) continue;
      MpiState::PendingSend p{MPI_REQUEST_NULL, std::make_unique<std::uint64_t[]>(3)};
      p.message[0] = seq;
      p.message[1] = static_cast<std::uint64_t>(kind);
      p.message[2] = collective;
      if (MPI_Isend(p.message.get(), 3, MPI_UINT64_T, peer, monitor_tag, s.monitor, &p.request) == MPI_SUCCESS) {
        s.sends.push_back(std::move(p));
      }
    }
  }
  drain_announcements(s);
}

// ---- a rank that aborted the job (accel::comm::abort) ----------------------------------------------

/// The process's MPI communicators (for the flight recorders written when this rank aborts) and the
/// world's, whose monitor carries abort notices. Created on first use, never destroyed.
struct MpiRegistry {
  std::mutex mutex;
  std::vector<std::weak_ptr<MpiState>> states;
  std::weak_ptr<MpiState> world;
  // A notice received (by any thread): every operation waiting on this rank fails with it.
  std::atomic<bool> aborted{false};
  int aborted_by = -1;          // world rank; under mutex
  std::string reason;           // under mutex

  void add(const std::shared_ptr<MpiState>& s) {
    const std::lock_guard<std::mutex> lock(mutex);
    std::erase_if(states, [](const std::weak_ptr<MpiState>& w) { return w.expired(); });
    states.push_back(s);
  }
  void set_world(const std::shared_ptr<MpiState>& s) {
    const std::lock_guard<std::mutex> lock(mutex);
    world = s;
  }
  [[nodiscard]] std::vector<std::shared_ptr<MpiState>> live() {
    const std::lock_guard<std::mutex> lock(mutex);
    std::vector<std::shared_ptr<MpiState>> out;
    for (const auto& w : states) {
      if (auto s = w.lock()) out.push_back(std::move(s));
    }
    return out;
  }
};
inline MpiRegistry& mpi_registry() {
  static MpiRegistry* const instance = new MpiRegistry();
  return *instance;
}

/// Reads an abort notice if one arrived (on the world's monitor). Returns true when this call took it:
/// the caller then acknowledges it (ack_abort) once it has reported its own failure.
inline bool poll_abort_notice() {
  MpiRegistry& g = mpi_registry();
  if (g.aborted.load(std::memory_order_acquire)) return false;
  std::shared_ptr<MpiState> w;
  {
    const std::lock_guard<std::mutex> lock(g.mutex);
    w = g.world.lock();
  }
  if (!w || w->size < 2) return false;
  int flag = 0;
  MPI_Message message;
  MPI_Status status;
  if (MPI_Improbe(MPI_ANY_SOURCE, abort_tag, w->monitor, &flag, &message, &status) != MPI_SUCCESS || flag == 0) {
    return false;
  }
  int length = 0;
  MPI_Get_count(&status, MPI_CHAR, &length);
  std::string reason(static_cast<std::size_t>(std::max(length, 0)), '\0');
  if (MPI_Mrecv(reason.data(), length, MPI_CHAR, &message, &status) != MPI_SUCCESS) reason = "(unreadable)";
  {
    const std::lock_guard<std::mutex> lock(g.mutex);
    g.aborted_by = status.MPI_SOURCE;
    g.reason = std::move(reason);
  }
  g.aborted.store(true, std::memory_order_release);
  return true;
}

/// Tells the aborting rank that its notice was seen (it ends the job once every rank has, or after a
/// short grace): fire and forget.
inline void ack_abort() noexcept {
  MpiRegistry& g = mpi_registry();
  std::shared_ptr<MpiState> w;
  int to = -1;
  {
    const std::lock_guard<std::mutex> lock(g.mutex);
    w = g.world.lock();
    to = g.aborted_by;
  }
  if (!w || to < 0) return;
  static const int seen = 1;
  MPI_Request request = MPI_REQUEST_NULL;
  if (MPI_Isend(&seen, 1, MPI_INT, to, abort_ack_tag, w->monitor, &request) == MPI_SUCCESS) MPI_Request_free(&request);
}

/// This rank ends the job (accel::comm::abort, after its message): writes the flight recorder of each
/// MPI communicator, sends `reason` to every other rank of the world (an operation of theirs that waits
/// for this rank fails naming it, within 10 ms), waits until each has acknowledged or `grace` passed
/// (a rank busy computing does not answer), and calls MPI_Abort. Returns only where MPI is not running.
inline void mpi_abort_job(const std::string& reason, int exit_code,
                          std::chrono::milliseconds grace = std::chrono::milliseconds(2000)) noexcept {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized == 0 || finalized != 0) return;
  try {
    MpiRegistry& g = mpi_registry();
    for (const auto& s : g.live()) {
      const std::string dump = s->recorder.dump("accel::comm flight recorder (" + s->describe() + ", pid " +
                                                std::to_string(::getpid()) + "), when this rank aborted the job:");
      std::fprintf(stderr, "%s", dump.c_str());
    }
    std::fflush(stderr);
    std::shared_ptr<MpiState> w;
    {
      const std::lock_guard<std::mutex> lock(g.mutex);
      w = g.world.lock();
    }
    if (w && w->size > 1) {
      std::vector<MPI_Request> sends;
      for (int peer = 0; peer < w->size; ++peer) {
        if (peer == w->rank) continue;
        MPI_Request request = MPI_REQUEST_NULL;
        if (MPI_Isend(reason.data(), static_cast<int>(reason.size()), MPI_CHAR, peer, abort_tag, w->monitor,
                      &request) == MPI_SUCCESS) {
          sends.push_back(request);
        }
      }
      const steady::time_point deadline = steady::now() + grace;
      int acknowledged = 0, seen = 0, done = 0;
      MPI_Request ack = MPI_REQUEST_NULL;
      while (acknowledged < w->size - 1 && steady::now() < deadline) {
        if (ack == MPI_REQUEST_NULL &&
            MPI_Irecv(&seen, 1, MPI_INT, MPI_ANY_SOURCE, abort_ack_tag, w->monitor, &ack) != MPI_SUCCESS) {
          break;
        }
        if (MPI_Test(&ack, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
        if (done != 0) {
          ++acknowledged;
          ack = MPI_REQUEST_NULL;
          continue;
        }
        if (!sends.empty()) MPI_Testall(static_cast<int>(sends.size()), sends.data(), &done, MPI_STATUSES_IGNORE);
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
  } catch (...) {  // ending the job matters more than the report
  }
  std::fflush(nullptr);
  MPI_Abort(MPI_COMM_WORLD, exit_code);
}

// ---- starting and finishing an operation ---------------------------------------------------------

/// One step of a rank's recursive-doubling schedule (doubling_step, below): whom it sends its running
/// result to and whom it receives from (-1: nobody), whether what arrives is reduced into the result
/// (else it is the result), and whether the step is the rank's last.
struct DoublingStep {
  int send_to = -1;
  int recv_from = -1;
  bool reduce = false;
  bool last = false;
};

/// An operation in flight.
struct Pending {
  std::shared_ptr<MpiState> state;
  Op op;
  std::uint64_t seq = 0;
  // A collective's number among the communicator's collectives (0 for send and recv), the same on
  // every rank: seq is not, where some ranks sent or received and others did not. Its ring tags.
  std::uint64_t collective = 0;
  MPI_Request request = MPI_REQUEST_NULL;
  steady::time_point started{};
  bool done = false;
  bool announced = false;
  bool probe = false;  // ACCEL_COMM_CHECK's comparison before `op`: nothing to finish
  // all_gather / reduce_scatter as a ring of point-to-point messages (ring_start), all_reduce as
  // recursive doubling (doubling_start): `ring_requests` holds the step's sends, then its receives
  // (ring_pieces of each); `scratch` holds reduce_scatter's partial sums (2 blocks), all_reduce's
  // received values (1 block).
  bool ring = false;
  int ring_step = 0;
  int tag = 0;  // ring_tag(s, collective)
  int ring_piece_count = 1;
  int step_recv_from = -1;  // the rank the current step receives from (-1: none), for step_done's check
  std::array<MPI_Request, 2 * ring_max_pieces> ring_requests{};
  DoublingStep doubling{};  // the current step of recursive doubling (computed once per step)
  std::shared_ptr<std::byte[]> scratch{};
  std::size_t scratch_bytes = 0;
};

/// Keeps the scratch memory of an operation that is abandoned (failed, timed out) while its messages
/// may still arrive: MPI could write into it later. The job ends soon after (MPI_Abort).
inline void abandon(Pending& p) noexcept {
  if (!p.scratch) return;
  try {
    static std::mutex mutex;
    static auto* const kept = new std::vector<std::shared_ptr<std::byte[]>>();
    const std::lock_guard<std::mutex> lock(mutex);
    kept->push_back(std::move(p.scratch));
  } catch (...) {
    (void)new (std::nothrow) std::shared_ptr<std::byte[]>(std::move(p.scratch));  // never freed either
  }
}

/// Scratch blocks of at most this many bytes (a small all_reduce's received values) are kept per
/// thread, not per communicator: taking and keeping one takes no lock (two mutex sections cost ~30 ns
/// of a ~1 µs small collective). One block per thread, at most this size.
inline constexpr std::size_t thread_scratch_limit = std::size_t{128} << 10;
struct ThreadScratch {
  std::shared_ptr<std::byte[]> block;
  std::size_t bytes = 0;
};
[[nodiscard]] inline ThreadScratch& thread_scratch() noexcept {
  thread_local ThreadScratch kept;
  return kept;
}

/// Gives p a scratch block of at least `bytes` (p.scratch), before any of its messages is posted: this
/// thread's small block or the communicator's spare when it is large enough, else a new block (a
/// smaller spare is freed first). A failed allocation fails p, naming the bytes, with the user's
/// buffers untouched.
inline void take_scratch(Pending& p, std::size_t bytes, const char* schedule, const char* purpose) {
  MpiState& s = *p.state;
  if (bytes <= thread_scratch_limit) {
    ThreadScratch& mine = thread_scratch();
    if (mine.block && mine.bytes >= bytes) {
      p.scratch = std::move(mine.block);
      p.scratch_bytes = std::exchange(mine.bytes, 0);
      return;
    }
  }
  std::shared_ptr<std::byte[]> smaller;  // freed outside the lock
  {
    const std::lock_guard<std::mutex> lock(s.mutex);
    if (s.spare_scratch && s.spare_scratch_bytes >= bytes) {
      p.scratch = std::move(s.spare_scratch);
      p.scratch_bytes = std::exchange(s.spare_scratch_bytes, 0);
      return;
    }
    smaller = std::move(s.spare_scratch);
    s.spare_scratch_bytes = 0;
  }
  smaller.reset();
  std::byte* block = new (std::nothrow) std::byte[bytes];
  if (block == nullptr) {
    CommError::Info info;
    info.collective = p.collective;
    info.hint = std::string("accel's ") + schedule + " needs this much memory besides the buffers on every rank; free "
                "host memory, or split the operation into smaller parts";
    fail(s, p.seq,
         make_error(s, p.op, p.seq,
                    "failed: could not allocate " + std::to_string(bytes) + " bytes (" +
                        std::to_string((bytes + (1u << 20) - 1) >> 20) + " MiB) for the " + schedule + "'s " + purpose +
                        "; nothing was sent and the buffers are unchanged",
                    std::move(info)));
  }
  p.scratch = std::shared_ptr<std::byte[]>(block);
  p.scratch_bytes = bytes;
}

/// p completed: its scratch becomes this thread's small block (thread_scratch_limit) or the
/// communicator's spare, if larger than the one there.
inline void keep_scratch(Pending& p) noexcept {
  if (!p.scratch) return;
  if (p.scratch_bytes <= thread_scratch_limit) {
    ThreadScratch& mine = thread_scratch();
    if (mine.bytes < p.scratch_bytes) {  // the larger of the two stays
      mine.block = std::move(p.scratch);
      mine.bytes = std::exchange(p.scratch_bytes, 0);
    }
    p.scratch.reset();
    p.scratch_bytes = 0;
    return;
  }
  MpiState& s = *p.state;
  std::shared_ptr<std::byte[]> dropped;  // freed outside the lock
  {
    const std::lock_guard<std::mutex> lock(s.mutex);
    if (p.scratch_bytes > s.spare_scratch_bytes) {
      dropped = std::exchange(s.spare_scratch, std::move(p.scratch));
      s.spare_scratch_bytes = p.scratch_bytes;
    } else {
      dropped = std::move(p.scratch);
    }
  }
  p.scratch_bytes = 0;
}

/// The most elements per rank one MPI call carries (MPI 3.1 counts are int). MpiCommunicator::launch
/// refuses more at the call; checked_count is the engine's own guard behind it.
inline constexpr int mpi_count_limit = INT_MAX;

[[nodiscard]] inline int checked_count(MpiState& s, const Op& op, std::uint64_t seq, std::size_t count) {
  if (count > static_cast<std::size_t>(mpi_count_limit)) {
    CommError::Info info;
    info.hint = "MPI 3.1 counts are int; split the operation into parts of at most 2^31 - 1 elements";
    throw make_error(s, op, seq, "refused: " + std::to_string(count) + " elements exceed MPI's int count",
                     std::move(info));
  }
  return static_cast<int>(count);
}

// ---- all_gather and reduce_scatter as a ring (mpi_tuning.hpp: ring_selected) ----------------------
//
// n - 1 steps; in step k each rank sends one block to its right neighbour and receives one from its
// left (MPI_Isend + MPI_Irecv, tag ring_tag(s, seq)), and the next step starts when both completed. For 2
// ranks that is one exchange. all_gather: step k passes on block (rank - k) of the output (k = 0: the
// input itself) and receives block (rank - k - 1). reduce_scatter: step k passes on the partial
// reduction of block (rank - k - 1) (k = 0: the input's block) and receives the left rank's partial of
// block (rank - k - 2), to which this rank adds its own part of that block with MPI_Reduce_local (MPI's
// op: user-defined ones for half and bfloat16 too); after the last step that block is this rank's,
// (rank - n) mod n, complete.

//
// The tag: ring_tag(collective number). Every rank numbers a collective alike (in host order, mpi.hpp;
// sends and receives, which only some ranks issue, are not counted), so its messages meet; two ring
// operations share a tag only when s.ring_tags (MPI_TAG_UB - 0x4ad0 + 1: 2^31 - 19152 in Open MPI, at
// least 13616) numbers apart, and even then MPI's order between two ranks keeps them apart wherever
// every rank starts them in one order (one stream's operations): a mix-up needs that many collectives
// of the communicator to start on other streams while one is in flight.

[[nodiscard]] inline int ring_tag(const MpiState& s, std::uint64_t collective) noexcept {
  return ring_tag_base + static_cast<int>(collective % s.ring_tags);
}
[[nodiscard]] inline int ring_block(int r, int n) noexcept { return ((r % n) + n) % n; }

/// reduce_scatter in place: the output is this rank's block of the input.
[[nodiscard]] inline bool ring_in_place(const Pending& p, std::size_t bytes) noexcept {
  return p.op.recv == static_cast<const std::byte*>(p.op.send) + static_cast<std::size_t>(p.state->rank) * bytes;
}
/// Where reduce_scatter's step p.ring_step receives: the output in the last step (unless in place),
/// else the scratch block the step does not send from (on 2 ranks the only step sends from the input:
/// one block is enough).
[[nodiscard]] inline std::byte* ring_received(const Pending& p, std::size_t bytes) noexcept {
  if (p.ring_step == p.state->size - 2 && !ring_in_place(p, bytes)) return static_cast<std::byte*>(p.op.recv);
  if (p.state->size == 2) return p.scratch.get();
  return p.scratch.get() + static_cast<std::size_t>((p.ring_step + 1) % 2) * bytes;
}

/// Posts one step of accel's own schedules (ring, recursive doubling): `out` to rank `send_to` and
/// `in` from rank `recv_from` (-1: none), each as p.ring_piece_count messages with p's tag, sends first
/// (p.ring_requests: sends, then receives; a side not used stays MPI_REQUEST_NULL, which MPI_Testall
/// counts as complete). The pieces of a step share one tag: MPI keeps messages between two ranks with
/// one tag in order.
inline void post_step(Pending& p, const void* out, int send_to, void* in, int recv_from, const char* schedule) {
  MpiState& s = *p.state;
  const Op& op = p.op;
  const MPI_Datatype type = mpi_datatype(op.dtype);
  const std::size_t esize = size_of(op.dtype);
  const int pieces = p.ring_piece_count;
  const std::size_t piece = pieces == 1 ? op.count : ring_piece_bytes / esize;  // elements
  p.ring_requests.fill(MPI_REQUEST_NULL);
  p.step_recv_from = recv_from;
  for (int i = 0; i < pieces; ++i) {
    const std::size_t first = static_cast<std::size_t>(i) * piece;
    const int count = static_cast<int>(std::min(piece, op.count - first));  // checked by start()
    const std::size_t offset = first * esize;
    if (send_to >= 0) {
      const int rc = MPI_Isend(static_cast<const std::byte*>(out) + offset, count, type, send_to, p.tag, s.comm,
                               &p.ring_requests[static_cast<std::size_t>(i)]);
      if (rc != MPI_SUCCESS) {
        abandon(p);
        fail_mpi(s, op, p.seq, (std::string("MPI_Isend (") + schedule + ")").c_str(), rc, p.collective);
      }
    }
    if (recv_from >= 0) {
      const int rc = MPI_Irecv(static_cast<std::byte*>(in) + offset, count, type, recv_from, p.tag, s.comm,
                               &p.ring_requests[static_cast<std::size_t>(pieces + i)]);
      if (rc != MPI_SUCCESS) {
        abandon(p);
        fail_mpi(s, op, p.seq, (std::string("MPI_Irecv (") + schedule + ")").c_str(), rc, p.collective);
      }
    }
  }
}

/// Starts one of accel's schedules for p at its first step: the tag, the pieces.
inline void begin_schedule(Pending& p) {
  p.ring = true;
  p.ring_step = 0;
  p.tag = ring_tag(*p.state, p.collective);
  p.ring_piece_count = ring_pieces(p.op.count * size_of(p.op.dtype));
}

/// The ranks passed different counts to one of accel's schedules: a message of the current step from
/// `peer` was `how` ("truncated: ..." or "short: ..."). Fails p (on whichever rank sees it: the rank
/// with the smaller count gets MPI_ERR_TRUNCATE, the one with the larger a short message).
[[noreturn]] inline void fail_count_mismatch(Pending& p, const char* schedule, int peer, int engine_code,
                                             const std::string& how) {
  abandon(p);
  MpiState& s = *p.state;
  CommError::Info info;
  info.collective = p.collective;
  info.engine_code = engine_code;
  if (engine_code != 0) info.engine_string = mpi_error_string(engine_code);
  info.hint = "every rank must pass the same count (and dtype) to a collective; ACCEL_COMM_CHECK=1 compares them "
              "before each one and names the counts";
  fail(s, p.seq,
       make_error(s, p.op, p.seq,
                  std::string("failed: the ranks' counts differ: in step ") + std::to_string(p.ring_step) + " of " +
                      schedule + ", the message from " + s.rank_name(peer) + " was " + how,
                  std::move(info)));
}

/// Whether the current step's messages all completed (MPI_Testall; an MPI error fails p). Each
/// receive must have brought the piece post_step expected: MPI reports a longer message
/// (MPI_ERR_TRUNCATE) but completes a shorter one silently, which would reduce stale scratch.
[[nodiscard]] inline bool step_done(Pending& p, const char* schedule) {
  int flag = 0;
  const int pieces = p.ring_piece_count;
  // Not value-initialised: this runs on every poll of a step, and MPI writes each status it completes
  // (read only then; on MPI_ERR_IN_STATUS it writes every MPI_ERROR field).
  std::array<MPI_Status, 2 * ring_max_pieces> statuses;
  const int rc = MPI_Testall(2 * pieces, p.ring_requests.data(), &flag, statuses.data());
  const Op& op = p.op;
  const std::size_t piece = pieces == 1 ? op.count : ring_piece_bytes / size_of(op.dtype);
  const auto expected = [&](int i) { return std::min(piece, op.count - static_cast<std::size_t>(i) * piece); };
  if (rc != MPI_SUCCESS) {
    if (mpi_error_class(rc) == MPI_ERR_IN_STATUS && p.step_recv_from >= 0) {
      for (int i = 0; i < pieces; ++i) {
        const int e = statuses[static_cast<std::size_t>(pieces + i)].MPI_ERROR;
        if (mpi_error_class(e) == MPI_ERR_TRUNCATE) {
          fail_count_mismatch(p, schedule, p.step_recv_from, MPI_ERR_TRUNCATE,
                              "truncated: longer than the " + std::to_string(expected(i)) +
                                  " element(s) this rank expected (MPI_ERR_TRUNCATE)");
        }
      }
    }
    abandon(p);
    fail_mpi(*p.state, op, p.seq, (std::string("MPI_Testall (") + schedule + ")").c_str(), rc, p.collective);
  }
  if (flag == 0) return false;
  if (p.step_recv_from >= 0) {
    const MPI_Datatype type = mpi_datatype(op.dtype);
    for (int i = 0; i < pieces; ++i) {
      int received = 0;
      MPI_Get_count(&statuses[static_cast<std::size_t>(pieces + i)], type, &received);
      if (received < 0 || static_cast<std::size_t>(received) != expected(i)) {
        fail_count_mismatch(p, schedule, p.step_recv_from, 0,
                            "short: " + std::to_string(std::max(received, 0)) + " element(s) where this rank expected " +
                                std::to_string(expected(i)));
      }
    }
  }
  return true;
}

/// Posts step p.ring_step: its sends and its receives (post_step).
inline void ring_post(Pending& p) {
  MpiState& s = *p.state;
  const Op& op = p.op;
  const int n = s.size, r = s.rank, k = p.ring_step;
  const std::size_t bytes = op.count * size_of(op.dtype);
  const auto at = [&](const void* base, int b) {
    return static_cast<std::byte*>(const_cast<void*>(base)) + static_cast<std::size_t>(ring_block(b, n)) * bytes;
  };
  const void* out_block = nullptr;
  void* in_block = nullptr;
  if (op.kind == OpKind::all_gather) {
    out_block = k == 0 ? op.send : at(op.recv, r - k);
    in_block = at(op.recv, r - k - 1);
  } else {
    std::byte* partial = p.scratch.get();  // two blocks: the partial sent, the partial received
    out_block = k == 0 ? at(op.send, r - 1) : partial + static_cast<std::size_t>(k % 2) * bytes;
    in_block = ring_received(p, bytes);
  }
  post_step(p, out_block, ring_block(r + 1, n), in_block, ring_block(r - 1, n), "ring");
}

/// Starts p as a ring.
inline void ring_start(Pending& p) {
  MpiState& s = *p.state;
  const Op& op = p.op;
  const std::size_t bytes = op.count * size_of(op.dtype);
  begin_schedule(p);
  if (op.kind == OpKind::reduce_scatter && (s.size > 2 || ring_in_place(p, bytes))) {
    // Partial sums need room of their own unless the only step receives straight into the output.
    take_scratch(p, s.size == 2 ? bytes : 2 * bytes, "ring", "partial sums");
  }
  ring_post(p);
  if (op.kind == OpKind::all_gather) {  // this rank's own block, while the messages travel (no step sends it)
    std::byte* mine = static_cast<std::byte*>(op.recv) + static_cast<std::size_t>(s.rank) * bytes;
    if (op.send != mine) std::memcpy(mine, op.send, bytes);
  }
}

/// Tests the current step of p; when it completed, reduces what arrived and posts the next step.
/// True once the last step completed (the result is in place).
[[nodiscard]] inline bool ring_progress(Pending& p) {
  MpiState& s = *p.state;
  const Op& op = p.op;
  if (!step_done(p, "ring")) return false;
  const int n = s.size, r = s.rank, k = p.ring_step;
  const bool last = k == n - 2;
  if (op.kind == OpKind::reduce_scatter) {
    const std::size_t bytes = op.count * size_of(op.dtype);
    const std::byte* own =
        static_cast<const std::byte*>(op.send) + static_cast<std::size_t>(ring_block(r - k - 2, n)) * bytes;
    std::byte* received = ring_received(p, bytes);
    const MPI_Datatype type = mpi_datatype(op.dtype);
    const MPI_Op mop = mpi_op(op.reduce, op.dtype);
    const int count = static_cast<int>(op.count);
    // received = own (+) received: the next step's partial, or (last step) the result in the output;
    // in place the output is `own`, so the sum goes there.
    const int rr = last && ring_in_place(p, bytes) ? MPI_Reduce_local(received, op.recv, count, type, mop)
                                                   : MPI_Reduce_local(own, received, count, type, mop);
    if (rr != MPI_SUCCESS) {
      abandon(p);
      fail_mpi(s, op, p.seq, "MPI_Reduce_local (ring)", rr, p.collective);
    }
  }
  if (last) {
    keep_scratch(p);
    return true;
  }
  ++p.ring_step;
  ring_post(p);
  return false;
}

// ---- all_reduce as recursive doubling (mpi_tuning.hpp: doubling_selected) ------------------------
//
// With p2 the largest power of two <= n and rem = n - p2: each even rank below 2 rem first sends its
// input to the odd rank above it, which adds it to its own, and later receives the result from it;
// the p2 remaining ranks (numbered v: r / 2 below 2 rem, r - rem above) then run log2(p2) steps, in
// step j exchanging the whole running result with the rank numbered v ^ 2^j and reducing what arrived
// into it (MPI_Reduce_local: received (+) own). The two ranks of an exchange reduce the same two
// operands, so every rank ends with the same bits. Messages as the ring's: one tag per operation
// (ring_tag), eager-sized pieces from 3 to 8 KiB (ring_pieces).

/// Step k of rank r's schedule on n ranks (see above), written into `step` field by field (a
/// DoublingStep built whole and copied costs a store-forwarding stall, ~20 ns a call here).
inline void doubling_step(int n, int r, int k, DoublingStep& step) noexcept {
  int p2 = 1, steps = 0;
  while (p2 * 2 <= n) {
    p2 *= 2;
    ++steps;
  }
  const int rem = n - p2;
  step.send_to = -1;
  step.recv_from = -1;
  step.reduce = false;
  step.last = false;
  if (r < 2 * rem && r % 2 == 0) {  // hands its input to r + 1, then takes the result from it
    if (k == 0) {
      step.send_to = r + 1;
    } else {
      step.recv_from = r + 1;
      step.last = true;
    }
    return;
  }
  const bool folds = r < 2 * rem;  // an odd rank below 2 rem: one step before the exchanges, one after
  if (folds && k == 0) {
    step.recv_from = r - 1;
    step.reduce = true;
    return;
  }
  const int j = folds ? k - 1 : k;
  if (j == steps) {  // folds only: the result back to r - 1
    step.send_to = r - 1;
    step.last = true;
    return;
  }
  const int v = folds ? r / 2 : r - rem;
  const int w = v ^ (1 << j);
  const int peer = w < rem ? 2 * w + 1 : w + rem;
  step.send_to = peer;
  step.recv_from = peer;
  step.reduce = true;
  step.last = !folds && j == steps - 1;
}
[[nodiscard]] inline DoublingStep doubling_step(int n, int r, int k) noexcept {
  DoublingStep step;
  doubling_step(n, r, k, step);
  return step;
}

/// Posts step p.ring_step of p's schedule (post_step).
inline void doubling_post(Pending& p) {
  const DoublingStep& step = p.doubling;
  // The running result is op.recv; before the first step completes, op.send holds the same values
  // (doubling_start copies it while the first messages travel).
  const void* out = p.ring_step == 0 ? p.op.send : p.op.recv;
  void* in = step.reduce ? static_cast<void*>(p.scratch.get()) : p.op.recv;
  post_step(p, out, step.send_to, in, step.recv_from, "recursive doubling");
}

/// Starts p (an all_reduce) as recursive doubling.
inline void doubling_start(Pending& p) {
  MpiState& s = *p.state;
  const Op& op = p.op;
  const std::size_t bytes = op.count * size_of(op.dtype);
  begin_schedule(p);
  doubling_step(s.size, s.rank, 0, p.doubling);
  // Room for what arrives, unless this rank only hands its input over and takes the result back (its
  // first step receives nothing; every other rank's first step reduces).
  if (p.doubling.reduce) take_scratch(p, bytes, "recursive doubling", "received values");
  doubling_post(p);
  if (op.send != op.recv) std::memcpy(op.recv, op.send, bytes);  // the running result, while messages travel
}

/// Tests the current step of p; when it completed, reduces what arrived and posts the next step. True
/// once the last step completed (the result is in op.recv).
[[nodiscard]] inline bool doubling_progress(Pending& p) {
  MpiState& s = *p.state;
  const Op& op = p.op;
  if (!step_done(p, "recursive doubling")) return false;
  const DoublingStep& step = p.doubling;
  if (step.reduce) {
    const int rr = MPI_Reduce_local(p.scratch.get(), op.recv, static_cast<int>(op.count), mpi_datatype(op.dtype),
                                    mpi_op(op.reduce, op.dtype));
    if (rr != MPI_SUCCESS) {
      abandon(p);
      fail_mpi(s, op, p.seq, "MPI_Reduce_local (recursive doubling)", rr, p.collective);
    }
  }
  if (step.last) {
    keep_scratch(p);
    return true;
  }
  ++p.ring_step;
  doubling_step(s.size, s.rank, p.ring_step, p.doubling);
  doubling_post(p);
  return false;
}

/// Issues the MPI_I* call of p.op.
inline void start(Pending& p) {
  MpiState& s = *p.state;
  const Op& op = p.op;
  const MPI_Datatype type = mpi_datatype(op.dtype);
  const std::size_t esize = size_of(op.dtype);
  const int n = checked_count(s, op, p.seq, op.count);
  // The rank's block of an n x count buffer: where NCCL's in-place forms put this rank's part.
  const auto block = [&](const void* base, int r) {
    return static_cast<const char*>(base) + static_cast<std::size_t>(r) * op.count * esize;
  };
  const bool in_place = op.send == op.recv;
  int rc = MPI_SUCCESS;
  const char* call = "";
  switch (op.kind) {
    case OpKind::all_reduce:
      if (doubling_selected(s.size, op.count * esize)) return doubling_start(p);
      call = "MPI_Iallreduce";
      rc = iallreduce_tuning().start(s.size, op.count, op.count * esize, [&] {
        return MPI_Iallreduce(in_place ? MPI_IN_PLACE : op.send, op.recv, n, type, mpi_op(op.reduce, op.dtype), s.comm,
                              &p.request);
      });
      break;
    case OpKind::broadcast:
      call = "MPI_Ibcast";
      if (s.rank == op.root && !in_place && op.count > 0) std::memcpy(op.recv, op.send, op.count * esize);
      rc = MPI_Ibcast(op.recv, n, type, op.root, s.comm, &p.request);
      break;
    case OpKind::reduce: {
      call = "MPI_Ireduce";
      const bool root = s.rank == op.root;
      rc = MPI_Ireduce(root && in_place ? MPI_IN_PLACE : op.send, root ? op.recv : nullptr, n, type,
                       mpi_op(op.reduce, op.dtype), op.root, s.comm, &p.request);
      break;
    }
    case OpKind::all_gather:
      if (ring_selected(s.size, op.count * esize * static_cast<std::size_t>(s.size))) return ring_start(p);
      call = "MPI_Iallgather";
      rc = MPI_Iallgather(op.send == block(op.recv, s.rank) ? MPI_IN_PLACE : op.send, n, type, op.recv, n, type, s.comm,
                          &p.request);
      break;
    case OpKind::reduce_scatter: {
      if (ring_selected(s.size, op.count * esize * static_cast<std::size_t>(s.size))) return ring_start(p);
      call = "MPI_Ireduce_scatter_block";
      // In place (the output at this rank's block of the input): MPI's in-place form leaves the result
      // at the start of the buffer; finish() moves it to the rank's block.
      const bool inplace = op.recv == block(op.send, s.rank);
      rc = MPI_Ireduce_scatter_block(inplace ? MPI_IN_PLACE : op.send, inplace ? const_cast<void*>(op.send) : op.recv,
                                     n, type, mpi_op(op.reduce, op.dtype), s.comm, &p.request);
      break;
    }
    case OpKind::all_to_all:
      call = "MPI_Ialltoall";
      rc = MPI_Ialltoall(op.send, n, type, op.recv, n, type, s.comm, &p.request);
      break;
    case OpKind::gather: {
      call = "MPI_Igather";
      const bool root = s.rank == op.root;
      rc = MPI_Igather(root && op.send == block(op.recv, s.rank) ? MPI_IN_PLACE : op.send, n, type,
                       root ? op.recv : nullptr, n, type, op.root, s.comm, &p.request);
      break;
    }
    case OpKind::scatter: {
      call = "MPI_Iscatter";
      const bool root = s.rank == op.root;
      rc = MPI_Iscatter(root ? op.send : nullptr, n, type,
                        root && op.recv == block(op.send, s.rank) ? MPI_IN_PLACE : op.recv, n, type, op.root, s.comm,
                        &p.request);
      break;
    }
    case OpKind::send:
      call = "MPI_Isend";
      rc = MPI_Isend(op.send, n, type, op.root, p2p_tag, s.comm, &p.request);
      break;
    case OpKind::recv:
      call = "MPI_Irecv";
      rc = MPI_Irecv(op.recv, n, type, op.root, p2p_tag, s.comm, &p.request);
      break;
    case OpKind::barrier:
      call = "MPI_Ibarrier";
      rc = MPI_Ibarrier(s.comm, &p.request);
      break;
  }
  if (rc != MPI_SUCCESS) fail_mpi(s, op, p.seq, call, rc, p.collective);
}

/// What follows completion: avg's division, the in-place reduce_scatter's move, a recv's count check.
inline void finish(Pending& p, const MPI_Status& status) {
  if (p.probe) return;
  MpiState& s = *p.state;
  const Op& op = p.op;
  const std::size_t esize = size_of(op.dtype);
  if (op.kind == OpKind::recv) {
    int received = 0;
    MPI_Get_count(&status, mpi_datatype(op.dtype), &received);
    if (static_cast<std::size_t>(received) != op.count) {
      CommError::Info info;
      info.hint = "the two ranks passed different counts (or dtypes) to send and recv";
      fail(s, p.seq,
           make_error(s, op, p.seq,
                      "failed: received " + std::to_string(received) + " element(s) from " + s.rank_name(op.root) +
                          ", but expected " + std::to_string(op.count),
                      std::move(info)));
    }
  }
  if (op.kind == OpKind::reduce_scatter && !p.ring && s.rank != 0 &&
      op.recv == static_cast<const char*>(op.send) + static_cast<std::size_t>(s.rank) * op.count * esize) {
    std::memmove(op.recv, op.send, op.count * esize);
  }
  if (op.reduce == ReduceOp::avg && is_reduction(op.kind) && (op.kind != OpKind::reduce || s.rank == op.root)) {
    divide_by(op.dtype, op.recv, op.count, s.size);
  }
  if (s.log) op_log().record("mpi", op, s.size, std::chrono::duration<double>(steady::now() - p.started).count());
  s.recorder.completed(p.seq);
}

/// The timeout of p: names who did not arrive, marks the communicator failed, throws.
[[noreturn]] inline void time_out(Pending& p) {
  abandon(p);
  MpiState& s = *p.state;
  const Op& op = p.op;
  const auto timeout = s.timeout();
  // Let announcements in flight arrive (peers announce after half the timeout, at most 5 s).
  announce(s, p.seq, op.kind, p.collective);
  const auto grace = std::clamp<steady::duration>(timeout / 20, std::chrono::milliseconds(20), std::chrono::seconds(1));
  const steady::time_point grace_end = steady::now() + grace;
  while (steady::now() < grace_end) {
    {
      const std::lock_guard<std::mutex> lock(s.mutex);
      drain_announcements(s);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CommError::Info info;
  info.collective = p.collective;
  info.timed_out = true;
  info.waited_seconds = std::chrono::duration<double>(steady::now() - p.started).count();
  std::string who;
  std::vector<std::uint64_t> seen, seen_collective;
  {
    const std::lock_guard<std::mutex> lock(s.mutex);
    drain_announcements(s);
    seen = s.peer_seq;
    seen_collective = s.peer_collective;
  }
  const auto seen_text = [&](int r) {
    const std::uint64_t q = seen[static_cast<std::size_t>(r)];
    return q == 0 ? std::string("never seen waiting in any operation")
                  : "last seen waiting in operation #" + std::to_string(q);
  };
  if (has_peer(op.kind)) {
    info.missing_ranks.push_back(op.root);
    who = s.rank_name(op.root) + (op.kind == OpKind::recv ? " did not send the matching message" :
                                                           " did not receive it (the message was not taken)") +
          " (" + seen_text(op.root) + ")";
  } else {
    std::vector<int> present;
    for (int r = 0; r < s.size; ++r) {
      if (r == s.rank) continue;
      if (seen_collective[static_cast<std::size_t>(r)] >= p.collective) {
        present.push_back(r);
      } else {
        info.missing_ranks.push_back(r);
      }
    }
    for (std::size_t i = 0; i < info.missing_ranks.size(); ++i) {
      who += (i ? "; " : "") + s.rank_name(info.missing_ranks[i]) + " has not arrived (" +
             seen_text(info.missing_ranks[i]) + ")";
    }
    if (info.missing_ranks.empty()) {
      who = "every rank was seen waiting in it (a deadlock across streams or communicators, or the engine is stuck)";
    } else if (!present.empty()) {
      who += std::string("; waiting in it too: rank") + (present.size() > 1 ? "s" : "");
      for (std::size_t i = 0; i < present.size(); ++i) who += (i ? ", " : " ") + std::to_string(present[i]);
    }
  }
  info.hint = "a rank that never arrives is stuck in a computation, blocked on another operation, or dead; compare "
              "the flight recorders every rank wrote to stderr; ACCEL_COMM_TIMEOUT sets the timeout";
  char waited[64];
  std::snprintf(waited, sizeof waited, "%.3f s", info.waited_seconds);
  fail(s, p.seq, make_error(s, op, p.seq, std::string("timed out after ") + waited + ": " + who, std::move(info)));
}

/// p waits for a rank that aborted the job: p fails naming it (its reason, how long p waited), and
/// the notice is acknowledged after this rank's error and flight recorder are on stderr.
[[noreturn]] inline void fail_aborted(Pending& p, bool acknowledge) {
  abandon(p);
  MpiState& s = *p.state;
  MpiRegistry& g = mpi_registry();
  int by = -1;
  std::string reason;
  {
    const std::lock_guard<std::mutex> lock(g.mutex);
    by = g.aborted_by;
    reason = g.reason;
  }
  CommError::Info info;
  info.collective = p.collective;
  info.waited_seconds = std::chrono::duration<double>(steady::now() - p.started).count();
  std::string who = "world rank " + std::to_string(by);
  for (std::size_t r = 0; r < s.world_ranks.size(); ++r) {
    if (s.world_ranks[r] != by) continue;
    info.missing_ranks.push_back(static_cast<int>(r));
    who = s.rank_name(static_cast<int>(r));
  }
  if (s.world_ranks.empty() && by >= 0 && by < s.size) {  // no translation: the world itself
    info.missing_ranks.push_back(by);
    who = s.rank_name(by);
  }
  info.hint = "accel::comm::abort ended the job on that rank; its message and flight recorder are on its stderr";
  char waited[64];
  std::snprintf(waited, sizeof waited, "%.3f s", info.waited_seconds);
  const CommError error =
      make_error(s, p.op, p.seq, std::string("failed after ") + waited + ": " + who + " aborted the job: " + reason,
                 std::move(info));
  s.record_failure(p.seq, error.what());
  note_failure(error.what());  // the job ends (MPI_Abort at exit): the aborting rank will not come back
  s.report(s.describe(), p.seq, error);
  if (acknowledge) ack_abort();
  throw error;
}

/// Polls the operations until all completed; throws CommError on an engine error or a timeout.
inline void wait_all(std::span<Pending> ops) {
  std::size_t remaining = 0;
  for (const Pending& p : ops) remaining += p.done ? 0 : 1;
  unsigned spins = 0;
  steady::time_point first = ops.empty() ? steady::now() : ops.front().started;
  steady::time_point next_drain{};
  while (remaining > 0) {
    for (Pending& p : ops) {
      if (p.done) continue;
      int flag = 0;
      MPI_Status status{};
      if (p.ring) {
        flag = (p.op.kind == OpKind::all_reduce ? doubling_progress(p) : ring_progress(p)) ? 1 : 0;
      } else if (const int rc = MPI_Test(&p.request, &flag, &status); rc != MPI_SUCCESS) {
        fail_mpi(*p.state, p.op, p.seq, "MPI_Test", rc, p.collective);
      }
      if (flag != 0) {
        p.done = true;
        --remaining;
        finish(p, status);
      }
    }
    // The clock every 32 tests, from the 256th on: a small operation (~1 µs, a few dozen tests) ends
    // without reading it (~30 ns a read); nothing below acts before 1 ms.
    if (remaining == 0 || (++spins & 31u) != 0 || spins < 256) continue;
    const steady::time_point now = steady::now();
    const auto waited = now - first;
    if (waited < std::chrono::milliseconds(1)) continue;
    if (now >= next_drain) {  // every 10 ms: did a rank abort the job (accel::comm::abort)?
      const bool took = poll_abort_notice();
      if (mpi_registry().aborted.load(std::memory_order_acquire)) {
        for (Pending& p : ops) {
          if (!p.done) fail_aborted(p, took);
        }
      }
    }
    for (Pending& p : ops) {
      if (p.done) continue;
      const auto timeout = p.state->timeout();
      const auto age = now - p.started;
      if (age >= timeout) time_out(p);
      if (age >= std::min<steady::duration>(timeout / 2, std::chrono::seconds(5))) {
        if (!p.announced) {
          p.announced = true;
          announce(*p.state, p.seq, p.op.kind, p.collective);
        } else if (now >= next_drain) {
          const std::lock_guard<std::mutex> lock(p.state->mutex);
          drain_announcements(*p.state);
        }
      }
    }
    if (now >= next_drain) next_drain = now + std::chrono::milliseconds(10);
    if (waited >= std::chrono::seconds(2)) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    } else {  // waited >= 1 ms (above)
      sched_yield();
    }
  }
}

/// Gives an operation that a graph replay runs the sequence number the replay took for it (it had none
/// at capture; mpi.hpp takes the replay's numbers in host order when the replay is enqueued)
/// (and, for a collective, its collective number).
inline void number_replayed(Pending& p, std::uint64_t seq, std::uint64_t collective, std::uint64_t stream_id) {
  p.seq = seq;
  p.collective = collective;
  p.state->recorder.enqueued(p.seq, p.op, stream_id, true);
}

/// ACCEL_COMM_CHECK: the ranks compare operation, dtype, count, reduce op and root (an all_reduce of
/// each field and its negation, MPI_MAX: the largest and smallest value every rank passed) and all fail
/// together, naming what differs, when they do not agree.
inline void check_arguments(Pending& p) {
  MpiState& s = *p.state;
  const Op& op = p.op;
  if (has_peer(op.kind)) return;  // a send meets a recv: checked by the recv (its count)
  const bool reduction = is_reduction(op.kind);
  const std::int64_t fields[5] = {static_cast<std::int64_t>(op.kind), op.kind == OpKind::barrier ? -1 : static_cast<std::int64_t>(op.dtype),
                                  static_cast<std::int64_t>(op.count), reduction ? static_cast<std::int64_t>(op.reduce) : -1,
                                  has_root(op.kind) ? op.root : -1};
  std::int64_t both[10];
  for (int i = 0; i < 5; ++i) {
    both[i] = fields[i];
    both[5 + i] = -fields[i];
  }
  Pending fingerprint{p.state, Op{OpKind::all_reduce, Dtype::int64, ReduceOp::max, -1, nullptr, nullptr, 10}, p.seq};
  fingerprint.collective = p.collective;  // a timeout compares the ranks' collective numbers
  fingerprint.started = steady::now();
  const int rc = MPI_Iallreduce(MPI_IN_PLACE, both, 10, MPI_INT64_T, MPI_MAX, s.comm, &fingerprint.request);
  if (rc != MPI_SUCCESS) fail_mpi(s, op, p.seq, "MPI_Iallreduce (ACCEL_COMM_CHECK)", rc, p.collective);
  fingerprint.op = op;  // a timeout names the operation being checked
  fingerprint.probe = true;
  wait_all(std::span<Pending>(&fingerprint, 1));
  static constexpr const char* names[5] = {"operation", "dtype", "count", "reduce op", "root"};
  std::string differ;
  for (int i = 0; i < 5; ++i) {
    const std::int64_t most = both[i], least = -both[5 + i];
    if (most == least) continue;
    const auto text = [&](std::int64_t v) -> std::string {
      if (i == 0) return std::string(name(static_cast<OpKind>(v)));
      if (i == 1) return v < 0 ? "none" : std::string(name(static_cast<Dtype>(v)));
      if (i == 3) return v < 0 ? "none" : std::string(name(static_cast<ReduceOp>(v)));
      return std::to_string(v);
    };
    differ += (differ.empty() ? "" : "; ") + std::string(names[i]) + ": this rank passed " + text(fields[i]) +
              ", the ranks passed " + text(least) + " to " + text(most);
  }
  if (differ.empty()) return;
  CommError::Info info;
  info.collective = p.collective;
  info.hint = "every rank must issue the same collectives in the same order, with the same count, dtype, reduce op "
              "and root (ACCEL_COMM_CHECK found this before any data moved)";
  fail(s, p.seq, make_error(s, op, p.seq, "refused: the ranks disagree (" + differ + ")", std::move(info)));
}

/// Runs one operation to completion on the calling thread. p.started holds its enqueue time.
/// `here`: the launch runs it on its own thread right now (StreamRef::run_if_idle on an idle stream)
/// and has not recorded it: it is recorded as started when enqueued (one recorder write, no clock read
/// of its own: ~30 ns each, of a ~1 µs small collective). Otherwise it was recorded when enqueued and
/// starts now.
inline void execute(Pending& p, std::uint64_t stream_id, bool here) {
  MpiState& s = *p.state;
  if (here) s.recorder.enqueued(p.seq, p.op, stream_id, false, p.started, !s.check);
  throw_if_failed(s, p.op, p.seq);
  if (s.check) check_arguments(p);
  if (!here || s.check) p.started = s.recorder.started(p.seq);
  start(p);
  wait_all(std::span<Pending>(&p, 1));
}

/// Runs the operations of a group: all started, in order, then waited for together.
inline void execute_group(std::vector<Pending> ops) {
  // Everything that can refuse an operation first: one refused after another started would leave that
  // one's messages in flight into the user's buffers.
  for (Pending& p : ops) {
    throw_if_failed(*p.state, p.op, p.seq);
    (void)checked_count(*p.state, p.op, p.seq, p.op.count);
  }
  for (std::size_t i = 0; i < ops.size(); ++i) {
    ops[i].started = ops[i].state->recorder.started(ops[i].seq);
    try {
      start(ops[i]);
    } catch (...) {
      // The operations started before this one have messages in flight: their scratch must outlive them.
      for (std::size_t j = 0; j < i; ++j) abandon(ops[j]);
      throw;
    }
  }
  wait_all(ops);
}

}  // namespace accel::comm::detail

#endif  // ACCEL_HAS_MPI
