// accel/comm/detail/nccl_engine.hpp — how NcclCommunicator runs an operation and watches it.
//
// Communicators are non-blocking (ncclConfig_t.blocking = 0): a call may return ncclInProgress, and
// ncclCommGetAsyncError is polled until it is done, against the timeout. The operation is then on the
// CUDA stream; an event recorded after it (not while the stream captures a graph: a captured collective
// is a node of the graph, and every rank must capture the same ones) lets the process's watchdog thread
// see it complete. The watchdog (every 10 ms) polls each communicator's asynchronous error and its
// operations' events; an error, or an operation older than the timeout, aborts the communicator
// (ncclCommAbort ends its kernels, so the stream does not hang), writes the flight recorder and the
// CommError to stderr, and makes every later operation on it throw that CommError. NCCL cannot tell
// which rank is missing; comparing the flight recorders every rank dumped shows it.
// Compiled only where accel has NCCL.
#pragma once

#if defined(ACCEL_HAS_NCCL)

#include <accel/comm/comm_error.hpp>
#include <accel/comm/detail/config.hpp>
#include <accel/comm/detail/nccl_api.hpp>
#include <accel/comm/detail/op.hpp>
#include <accel/comm/detail/op_log.hpp>
#include <accel/comm/detail/runtime.hpp>
#include <accel/comm/detail/state_base.hpp>
#include <accel/comm/flight_recorder.hpp>
#include <accel/cuda/error.hpp>

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace accel::comm::detail {

using steady = std::chrono::steady_clock;

[[nodiscard]] inline ncclDataType_t nccl_datatype(Dtype d) noexcept {
  switch (d) {
    case Dtype::float32: return ncclFloat32;
    case Dtype::float64: return ncclFloat64;
    case Dtype::float16: return ncclFloat16;
    case Dtype::bfloat16: return ncclBfloat16;
    case Dtype::int8: return ncclInt8;
    case Dtype::uint8: return ncclUint8;
    case Dtype::int32: return ncclInt32;
    case Dtype::int64: return ncclInt64;
    default: return ncclUint8;  // refused before (arguments.hpp)
  }
}

[[nodiscard]] inline ncclRedOp_t nccl_op(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::prod: return ncclProd;
    case ReduceOp::min: return ncclMin;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::avg: return ncclAvg;
  }
  return ncclSum;
}

struct NcclState : StateBase {
  static constexpr std::string_view engine_name = "nccl";

  const NcclApi& api;
  ncclComm_t comm = nullptr;
  int device = 0;

  std::mutex call_mutex;  // one NCCL call on this communicator at a time (NCCL communicators are not thread-safe)

  // Guarded by `mutex`:
  bool aborted = false;
  void* scratch = nullptr;  // 8 bytes of device memory: barrier's all_reduce
  struct Work {
    std::uint64_t seq = 0;
    Op op;
    cudaEvent_t start = nullptr;  // only with ACCEL_COMM_LOG
    cudaEvent_t end = nullptr;
    steady::time_point enqueued{};
  };
  std::deque<Work> works;
  std::vector<cudaEvent_t> spare_events;

  NcclState(const NcclApi& a, ncclComm_t c, int dev, std::string n)
      : StateBase(std::move(n), trace_size_from_env()), api(a), comm(c), device(dev) {
    api.comm_count(comm, &size);
    api.comm_user_rank(comm, &rank);
  }

  ~NcclState() {
    const std::lock_guard<std::mutex> calls(call_mutex);
    if (comm != nullptr) {
      bool done = aborted;
      if (!done && !failed.load()) {
        // Finalize (flushes NCCL's own work), polled with a bound; a communicator that does not finish is aborted.
        ncclResult_t r = api.comm_finalize(comm);
        const steady::time_point deadline = steady::now() + std::chrono::seconds(10);
        while (r == ncclInProgress && steady::now() < deadline) api.comm_get_async_error(comm, &r);
        if (r == ncclSuccess) done = api.comm_destroy(comm) == ncclSuccess;
      }
      if (!done && !aborted) api.comm_abort(comm);
      comm = nullptr;
    }
    for (Work& w : works) {
      if (w.start != nullptr) (void)cudaEventDestroy(w.start);
      if (w.end != nullptr) (void)cudaEventDestroy(w.end);
    }
    for (cudaEvent_t e : spare_events) (void)cudaEventDestroy(e);
    if (scratch != nullptr) (void)cudaFree(scratch);
  }

  [[nodiscard]] std::string describe() const {
    return "nccl, " + name + ", rank " + std::to_string(rank) + " of " + std::to_string(size) + ", cuda:" +
           std::to_string(device);
  }
};

/// The CommError of `op` #seq on `s` with engine result `r` (ncclSuccess for a timeout).
[[nodiscard]] inline CommError nccl_error(NcclState& s, const Op* op, std::uint64_t seq, ncclResult_t r,
                                          const std::string& what, bool timed_out, double waited = 0) {
  CommError::Info info;
  info.engine = "nccl";
  info.communicator = s.name;
  info.rank = s.rank;
  info.size = s.size;
  info.seq = seq;
  info.timed_out = timed_out;
  info.waited_seconds = waited;
  if (op != nullptr) {
    info.op = std::string(name(op->kind));
    info.count = op->count;
    if (op->kind != OpKind::barrier) info.dtype = op->dtype;
    info.peer = op->root;
  }
  if (r != ncclSuccess) {
    info.engine_code = static_cast<int>(r);
    info.engine_string = s.api.describe(r);
    if (s.comm != nullptr) {
      if (const char* last = s.api.get_last_error(s.comm)) info.last_error = last;
    }
    info.hint = NcclApi::hint(r);
  } else if (timed_out) {
    info.hint = "a rank has not reached this operation (stuck, or dead): compare the flight recorders every rank "
                "wrote to stderr; ACCEL_COMM_TIMEOUT sets the timeout";
  }
  std::string message = "accel::comm (" + s.describe() + "): " + (op != nullptr ? op_text(*op, seq) + " " : "") + what;
  if (r != ncclSuccess) message += ": " + info.engine_string;
  if (!info.last_error.empty()) message += "; NCCL's last error: " + info.last_error;
  if (!info.hint.empty()) message += ". Hint: " + info.hint;
  return CommError(std::move(info), message);
}

/// Marks `s` failed with `error` (first failure wins), aborts it, writes the flight recorder. No throw.
inline void mark_failed(NcclState& s, std::uint64_t seq, const CommError& error) noexcept {
  try {
    if (!s.record_failure(seq, error.what())) return;
    s.report(s.describe(), seq, error);
    note_failure(error.what());
    bool abort_now = false;
    {
      const std::lock_guard<std::mutex> lock(s.mutex);
      abort_now = !s.aborted && s.comm != nullptr;
      s.aborted = true;
    }
    // ncclCommAbort ends the communicator's kernels (streams then drain) and may be called from any
    // thread, also while another thread is inside an NCCL call on it.
    if (abort_now) s.api.comm_abort(s.comm);
  } catch (...) {
  }
}

[[noreturn]] inline void fail(NcclState& s, const Op& op, std::uint64_t seq, ncclResult_t r, const std::string& what,
                              bool timed_out = false, double waited = 0) {
  const CommError error = nccl_error(s, &op, seq, r, what, timed_out, waited);
  mark_failed(s, seq, error);
  throw error;
}

inline void throw_if_failed(NcclState& s, const Op& op, std::uint64_t seq) {
  if (!s.failed.load(std::memory_order_acquire)) [[likely]] return;
  throw nccl_error(s, &op, seq, ncclSuccess, s.refusal(" and was aborted", seq), false);
}

/// Polls ncclCommGetAsyncError until the communicator's calls are no longer in progress, or the
/// deadline passes (then ncclInProgress).
[[nodiscard]] inline ncclResult_t wait_in_progress(NcclState& s, steady::time_point deadline) {
  ncclResult_t r = ncclInProgress;
  unsigned spins = 0;
  for (;;) {
    if (s.api.comm_get_async_error(s.comm, &r) != ncclSuccess) return ncclInternalError;
    if (r != ncclInProgress) return r;
    if ((++spins & 63u) == 0 && steady::now() >= deadline) return ncclInProgress;
    if (spins > 4096) std::this_thread::yield();
  }
}

// ---- the watchdog -----------------------------------------------------------------------------------

class NcclWatchdog {
 public:
  void watch(const std::shared_ptr<NcclState>& s) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    states_.push_back(s);
    if (!started_) {
      started_ = true;
      std::thread([this] { run(); }).detach();
    }
  }
  /// accel::comm::abort: every live communicator fails with `reason` (its flight recorder to stderr,
  /// ncclCommAbort: its kernels end).
  void abort_all(const std::string& reason) noexcept {
    std::vector<std::shared_ptr<NcclState>> live;
    try {
      {
        const std::lock_guard<std::mutex> lock(mutex_);
        for (const auto& w : states_) {
          if (auto s = w.lock()) live.push_back(std::move(s));
        }
      }
      for (const auto& s : live) {
        const std::uint64_t seq = s->next_seq.load();
        mark_failed(*s, seq, nccl_error(*s, nullptr, seq, ncclSuccess, "aborted by accel::comm::abort: " + reason, false));
      }
    } catch (...) {  // the job ends anyway
    }
  }
  /// Stops the thread (before CUDA unloads at exit); it acknowledges within one period.
  void stop() noexcept {
    std::unique_lock<std::mutex> lock(mutex_);
    stopping_ = true;
    wake_.notify_all();
    if (started_) stopped_.wait_for(lock, std::chrono::seconds(2), [this] { return !running_; });
  }

 private:
  void run() noexcept {
    std::unique_lock<std::mutex> lock(mutex_);
    running_ = true;
    while (!stopping_) {
      std::vector<std::shared_ptr<NcclState>> live;
      std::erase_if(states_, [&](const std::weak_ptr<NcclState>& w) {
        if (std::shared_ptr<NcclState> s = w.lock()) {
          live.push_back(std::move(s));
          return false;
        }
        return true;  // destroyed
      });
      lock.unlock();
      for (const auto& s : live) check(*s);
      live.clear();  // the last owner may be here: destroy outside the lock
      lock.lock();
      wake_.wait_for(lock, std::chrono::milliseconds(10), [this] { return stopping_; });
    }
    running_ = false;
    stopped_.notify_all();
  }

  static void check(NcclState& s) noexcept {
    if (s.failed.load()) return;
    ncclResult_t async = ncclSuccess;
    if (s.api.comm_get_async_error(s.comm, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress) {
      mark_failed(s, s.next_seq.load(), nccl_error(s, nullptr, s.next_seq.load(), async, "asynchronous error", false));
      return;
    }
    const steady::time_point now = steady::now();
    std::unique_lock<std::mutex> lock(s.mutex);
    while (!s.works.empty()) {
      NcclState::Work& w = s.works.front();
      const cudaError_t q = cudaEventQuery(w.end);
      if (q == cudaErrorNotReady) {
        if (now - w.enqueued < s.timeout()) return;
        const NcclState::Work late = w;
        lock.unlock();
        mark_failed(s, late.seq,
                    nccl_error(s, &late.op, late.seq, ncclSuccess,
                               "timed out: not complete " +
                                   std::to_string(std::chrono::duration<double>(now - late.enqueued).count()) +
                                   " s after it was enqueued",
                               true, std::chrono::duration<double>(now - late.enqueued).count()));
        return;
      }
      if (q != cudaSuccess) {
        const NcclState::Work bad = w;
        lock.unlock();
        mark_failed(s, bad.seq,
                    nccl_error(s, &bad.op, bad.seq, ncclUnhandledCudaError,
                               std::string("failed on the device: ") + cudaGetErrorString(q), false));
        return;
      }
      if (s.log && w.start != nullptr) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, w.start, w.end) == cudaSuccess) op_log().record("nccl", w.op, s.size, ms / 1e3);
      }
      s.recorder.completed(w.seq);
      if (w.start != nullptr) s.spare_events.push_back(w.start);
      s.spare_events.push_back(w.end);
      s.works.pop_front();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_, stopped_;
  std::vector<std::weak_ptr<NcclState>> states_;
  bool started_ = false, stopping_ = false, running_ = false;
};

inline NcclWatchdog& nccl_watchdog() {
  static NcclWatchdog* const instance = new NcclWatchdog();
  return *instance;
}

/// An event from the state's spares, or a new one (timing only under ACCEL_COMM_LOG). With s.mutex held.
[[nodiscard]] inline cudaEvent_t take_event(NcclState& s) {
  if (!s.spare_events.empty()) {
    cudaEvent_t e = s.spare_events.back();
    s.spare_events.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  ACCEL_CUDA_CHECK(cudaEventCreateWithFlags(&e, s.log ? cudaEventDefault : cudaEventDisableTiming));
  return e;
}

/// Under ACCEL_COMM_LOG, an event recorded before the operation (its latency is end - start).
[[nodiscard]] inline cudaEvent_t begin(NcclState& s, cudaStream_t stream) {
  if (!s.log) return nullptr;
  cudaEvent_t start = nullptr;
  {
    const std::lock_guard<std::mutex> lock(s.mutex);
    start = take_event(s);
  }
  ACCEL_CUDA_CHECK(cudaEventRecord(start, stream));
  return start;
}

// ---- issuing ----------------------------------------------------------------------------------------

/// The NCCL calls of `op` on `stream` (all_to_all, gather and scatter as grouped sends and receives).
/// Returns the first result that is neither ncclSuccess nor ncclInProgress, else ncclInProgress if any
/// call was in progress.
[[nodiscard]] inline ncclResult_t issue(NcclState& s, const Op& op, cudaStream_t stream) {
  const NcclApi& api = s.api;
  const ncclDataType_t type = nccl_datatype(op.dtype);
  const std::size_t esize = size_of(op.dtype);
  const auto block = [&](const void* base, int r) {
    return static_cast<const char*>(base) + static_cast<std::size_t>(r) * op.count * esize;
  };
  ncclResult_t result = ncclSuccess;
  const auto step = [&](ncclResult_t r) {
    if (r == ncclInProgress) {
      if (result == ncclSuccess) result = ncclInProgress;
    } else if (r != ncclSuccess && (result == ncclSuccess || result == ncclInProgress)) {
      result = r;
    }
  };
  switch (op.kind) {
    case OpKind::all_reduce:
      step(api.all_reduce(op.send, op.recv, op.count, type, nccl_op(op.reduce), s.comm, stream));
      break;
    case OpKind::broadcast: step(api.broadcast(op.send, op.recv, op.count, type, op.root, s.comm, stream)); break;
    case OpKind::reduce:
      step(api.reduce(op.send, op.recv, op.count, type, nccl_op(op.reduce), op.root, s.comm, stream));
      break;
    case OpKind::all_gather: step(api.all_gather(op.send, op.recv, op.count, type, s.comm, stream)); break;
    case OpKind::reduce_scatter:
      step(api.reduce_scatter(op.send, op.recv, op.count, type, nccl_op(op.reduce), s.comm, stream));
      break;
    case OpKind::send: step(api.send(op.send, op.count, type, op.root, s.comm, stream)); break;
    case OpKind::recv: step(api.recv(op.recv, op.count, type, op.root, s.comm, stream)); break;
    case OpKind::barrier: {
      if (s.scratch == nullptr) ACCEL_CUDA_CHECK(cudaMalloc(&s.scratch, 8));
      step(api.all_reduce(s.scratch, s.scratch, 1, ncclFloat32, ncclSum, s.comm, stream));
      break;
    }
    case OpKind::all_to_all:
    case OpKind::gather:
    case OpKind::scatter: {
      step(api.group_start());
      for (int peer = 0; peer < s.size; ++peer) {
        if (op.kind == OpKind::all_to_all) {
          step(api.send(block(op.send, peer), op.count, type, peer, s.comm, stream));
          step(api.recv(const_cast<char*>(block(op.recv, peer)), op.count, type, peer, s.comm, stream));
        } else if (op.kind == OpKind::gather) {
          if (peer == op.root && !(s.rank == op.root && op.send == block(op.recv, s.rank))) {
            step(api.send(op.send, op.count, type, peer, s.comm, stream));
          }
          if (s.rank == op.root && !(peer == s.rank && op.send == block(op.recv, s.rank))) {
            step(api.recv(const_cast<char*>(block(op.recv, peer)), op.count, type, peer, s.comm, stream));
          }
        } else {  // scatter
          if (s.rank == op.root && !(peer == s.rank && op.recv == block(op.send, s.rank))) {
            step(api.send(block(op.send, peer), op.count, type, peer, s.comm, stream));
          }
          if (peer == op.root && !(s.rank == op.root && op.recv == block(op.send, s.rank))) {
            step(api.recv(op.recv, op.count, type, peer, s.comm, stream));
          }
        }
      }
      step(api.group_end());
      break;
    }
  }
  return result;
}

/// After the call: the event the watchdog polls (and a start event under ACCEL_COMM_LOG, recorded
/// before the call by `begin`). Nothing while the stream captures.
inline void track(NcclState& s, std::uint64_t seq, const Op& op, cudaStream_t stream, cudaEvent_t start) {
  const std::lock_guard<std::mutex> lock(s.mutex);
  cudaEvent_t end = take_event(s);
  ACCEL_CUDA_CHECK(cudaEventRecord(end, stream));
  s.works.push_back({seq, op, start, end, steady::now()});
}

}  // namespace accel::comm::detail

#endif  // ACCEL_HAS_NCCL
