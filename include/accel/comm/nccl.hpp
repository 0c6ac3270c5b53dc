// accel/comm/nccl.hpp — accel::comm::NcclCommunicator: CudaBackend's communicator, over NCCL.
//
// Every operation of accel::comm::CommunicatorOps (comm/communicator.hpp) on CUDA streams: the NCCL call
// enqueues the collective on the stream and returns (NCCL is loaded with dlopen on first use: a program
// built with accel::comm starts without libnccl and reports NCCL unavailable). One GPU per rank: the
// communicator's device; its streams and memory must be on that device (InvalidArgumentError naming
// both, checked with cudaPointerGetAttributes for raw pointers and spans). Collectives may be captured
// into a CUDA graph (NCCL >= 2.9): capturing is collective — every rank captures the same operations and
// launches the graph made from them.
//
// Communicators are non-blocking; a process-wide watchdog polls their asynchronous errors and the end
// events of their operations against the timeout (ACCEL_COMM_TIMEOUT, default 10 minutes), aborts a
// communicator on an error or a timeout (its kernels end, the streams drain), writes the flight recorder
// to stderr, and later operations on it throw the CommError (nccl_engine.hpp). Errors the NCCL call itself
// returns are thrown by the call.
//
//   world<CudaBackend>() (comm/launch.hpp)    every rank on the device of its local rank; the unique id
//                                             comes over MPI under mpirun, through the file
//                                             ACCEL_COMM_INIT_FILE under a torchrun-style launch
//   c.split(color, key), c.new_group(ranks)   ncclCommSplit (NCCL >= 2.18)
//   auto g = c.group(); ...; g.end();         ncclGroupStart / ncclGroupEnd: one launch
//   c.native_handle() -> ncclComm_t, c.device(), c.abort(), c.flight_recorder(), c.set_timeout(d)
#pragma once

#include <accel/comm/communicator.hpp>
#include <accel/concepts/comm.hpp>
#include <accel/detail/comm_engine.hpp>

#if defined(ACCEL_HAS_NCCL) && defined(ACCEL_HAS_CUDA)

#include <accel/comm/detail/communicator_base.hpp>
#include <accel/comm/detail/config.hpp>
#include <accel/comm/detail/id_file.hpp>
#include <accel/comm/detail/nccl_api.hpp>
#include <accel/comm/detail/nccl_engine.hpp>
#include <accel/comm/detail/runtime.hpp>
#include <accel/comm/flight_recorder.hpp>
#include <accel/comm/launch_info.hpp>
#include <accel/cuda/backend.hpp>

#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace accel::comm {

namespace detail {

/// The operations issued on this thread while an NcclGroup is open (tracked when it ends).
struct NcclGroupContext {
  int depth = 0;
  struct Item {
    std::shared_ptr<NcclState> state;
    Op op;
    std::uint64_t seq;
    cudaStream_t stream;
    bool capturing;
  };
  std::vector<Item> items;
};
inline NcclGroupContext& nccl_group_context() noexcept {
  thread_local NcclGroupContext context;
  return context;
}

[[nodiscard]] inline const NcclApi& require_nccl(const char* what) {
  const NcclApi& api = nccl();
  if (!api.loaded()) throw BackendUnavailableError(std::string("accel::comm::") + what + ": " + api.error);
  return api;
}

/// A CommError of communicator creation (no state yet).
[[noreturn]] inline void creation_error(const NcclApi& api, ncclComm_t comm, const std::string& what, ncclResult_t r,
                                        bool timed_out) {
  CommError::Info info;
  info.engine = "nccl";
  info.timed_out = timed_out;
  std::string message = "accel::comm (nccl): " + what;
  if (r != ncclSuccess) {
    info.engine_code = static_cast<int>(r);
    info.engine_string = api.describe(r);
    if (comm != nullptr) {
      if (const char* last = api.get_last_error(comm)) info.last_error = last;
    }
    info.hint = NcclApi::hint(r);
    message += ": " + info.engine_string;
    if (!info.last_error.empty()) message += "; NCCL's last error: " + info.last_error;
  } else {
    info.hint = "creating a communicator is collective: every rank must call it (and reach NCCL's bootstrap)";
  }
  message += ". Hint: " + info.hint;
  throw CommError(std::move(info), message);
}

/// Waits until a communicator just created (or split) is ready; aborts it and throws otherwise.
inline void wait_ready(const NcclApi& api, ncclComm_t comm, ncclResult_t r, const std::string& what) {
  const steady::time_point deadline = steady::now() + timeout_from_env();
  while (r == ncclInProgress && comm != nullptr) {
    if (api.comm_get_async_error(comm, &r) != ncclSuccess) r = ncclInternalError;
    if (r == ncclInProgress && steady::now() >= deadline) {
      api.comm_abort(comm);
      creation_error(api, nullptr, what + " timed out", ncclSuccess, true);
    }
    if (r == ncclInProgress) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  if (r != ncclSuccess) {
    if (comm != nullptr) api.comm_abort(comm);
    creation_error(api, nullptr, what + " failed", r, false);
  }
}

}  // namespace detail

/// The operations issued on this thread while it lives are one NCCL group (ncclGroupStart/End): one
/// launch. end() throws a CommError when NCCL refuses the group; the destructor of a group not ended
/// ends it and, on failure, marks the communicators failed and reports on stderr (it cannot throw).
class NcclGroup {
 public:
  NcclGroup() : api_(&detail::require_nccl("group")) {
    const ncclResult_t r = api_->group_start();
    if (r != ncclSuccess) throw BackendUnavailableError("accel::comm::group: ncclGroupStart: " + api_->describe(r));
    ++detail::nccl_group_context().depth;
  }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;
  ~NcclGroup() {
    if (ended_) return;
    try {
      close();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "accel::comm: a group of NCCL operations failed: %s\n", e.what());
    }
  }

  void end() {
    if (ended_) throw InvalidStateError("accel::comm::NcclGroup::end(): the group was already ended");
    close();
  }

 private:
  void close() {
    ended_ = true;
    detail::NcclGroupContext& g = detail::nccl_group_context();
    --g.depth;
    ncclResult_t r = api_->group_end();
    if (g.depth > 0) return;  // the outermost group launches
    std::vector<detail::NcclGroupContext::Item> items = std::move(g.items);
    g.items.clear();
    if (items.empty()) return;
    if (r != ncclSuccess && r != ncclInProgress) {
      detail::fail(*items.front().state, items.front().op, items.front().seq, r, "failed (ncclGroupEnd)");
    }
    if (r == ncclInProgress) {  // non-blocking communicators: each one of the group finishes the launch
      std::vector<const detail::NcclState*> waited;
      for (auto& item : items) {
        if (std::find(waited.begin(), waited.end(), item.state.get()) != waited.end()) continue;
        waited.push_back(item.state.get());
        const ncclResult_t w = detail::wait_in_progress(*item.state, detail::steady::now() + item.state->timeout());
        if (w == ncclInProgress) {
          detail::fail(*item.state, item.op, item.seq, ncclSuccess, "timed out while NCCL launched its group", true);
        }
        if (w != ncclSuccess) detail::fail(*item.state, item.op, item.seq, w, "failed (in a group)");
      }
    }
    for (auto& item : items) {
      if (!item.capturing) detail::track(*item.state, item.seq, item.op, item.stream, nullptr);
    }
  }

  const detail::NcclApi* api_;
  bool ended_ = false;
};

class NcclCommunicator : public detail::CommunicatorBase<NcclCommunicator, CudaBackend, detail::NcclState> {
 public:
  using Group = NcclGroup;

  /// An empty communicator. Movable, not copyable (CommunicatorBase); the NCCL communicator is
  /// finalized when the watchdog lets go of it.
  NcclCommunicator() noexcept = default;

  /// `size` ranks on `device`, joined by `id` (from unique_id() on one rank, passed to the others by the
  /// program): ncclCommInitRankConfig, non-blocking, waited for against the timeout.
  [[nodiscard]] static NcclCommunicator create(const ncclUniqueId& id, int size, int rank, int device,
                                               std::string name = "user communicator") {
    if (size <= 0) {
      throw InvalidArgumentError("accel::comm::NcclCommunicator::create: size " + std::to_string(size) +
                                 " is not a rank count: expected 1 or more");
    }
    if (rank < 0 || rank >= size) {
      throw InvalidArgumentError("accel::comm::NcclCommunicator::create: rank " + std::to_string(rank) +
                                 " is out of range: expected 0 to " + std::to_string(size - 1) + " (size " +
                                 std::to_string(size) + ")");
    }
    const detail::NcclApi& api = detail::require_nccl("NcclCommunicator::create");
    const cuda::Devices::DeviceGuard guard(device);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    const ncclResult_t r = api.comm_init_rank_config(&comm, size, id, rank, &config);
    detail::wait_ready(api, comm, r, "creating " + name + " (rank " + std::to_string(rank) + " of " +
                                         std::to_string(size) + ", cuda:" + std::to_string(device) + ")");
    return adopt(api, comm, device, std::move(name));
  }

  /// A fresh unique id (on one rank; the others must receive it).
  [[nodiscard]] static ncclUniqueId unique_id() {
    const detail::NcclApi& api = detail::require_nccl("NcclCommunicator::unique_id");
    ncclUniqueId id{};
    const ncclResult_t r = api.get_unique_id(&id);
    if (r != ncclSuccess) detail::creation_error(api, nullptr, "ncclGetUniqueId failed", r, false);
    return id;
  }

  // valid(), rank(), size(), local_rank(), local_size(), name(), engine(), timeout(), set_timeout(d),
  // flight_recorder(), failed(), split(color, key), new_group(ranks) and group():
  // comm/detail/communicator_base.hpp.

  [[nodiscard]] int device() const noexcept { return state_ ? state_->device : -1; }
  [[nodiscard]] ncclComm_t native_handle() const noexcept { return state_ ? state_->comm : nullptr; }
  /// Aborts the communicator now (ncclCommAbort): its kernels end, later operations are refused.
  void abort() noexcept {
    if (!state_) return;
    detail::mark_failed(*state_, state_->next_seq.load(),
                        detail::nccl_error(*state_, nullptr, state_->next_seq.load(), ncclSuccess,
                                           "aborted by the program (NcclCommunicator::abort)", false));
  }

  // ---- for CommunicatorOps ---------------------------------------------------------------------

  void launch(cuda::StreamRef s, const detail::Op& op, const detail::CallSite& call) {
    require_valid(call);
    detail::NcclState& st = *state_;
    detail::throw_if_failed(st, op, 0);
    if (s.device_index() != st.device) {
      call.invalid("the stream is on cuda:" + std::to_string(s.device_index()) + ", but the communicator's device is cuda:" +
                   std::to_string(st.device));
    }
    check_engine_support(call, op, st);
    check_memory(call, op, st);
    detail::NcclGroupContext& g = detail::nccl_group_context();
    detail::check_self_peer(call, op, st.rank, g.depth > 0);
    // Every check that can throw came before the sequence number is taken (a refused call takes none).
    const bool capturing = s.is_capturing();
    const std::uint64_t seq = st.next_seq.fetch_add(1, std::memory_order_relaxed) + 1;
    st.recorder.enqueued(seq, op, s.id(), capturing);
    const cuda::Devices::DeviceGuard guard(st.device);
    const cudaEvent_t start = capturing || g.depth > 0 ? nullptr : detail::begin(st, s.get());
    ncclResult_t r;
    {
      const std::lock_guard<std::mutex> lock(st.call_mutex);
      r = detail::issue(st, op, s.get());
    }
    st.recorder.started(seq);
    if (g.depth > 0) {
      if (r != ncclSuccess && r != ncclInProgress) detail::fail(st, op, seq, r, "failed");
      g.items.push_back({state_, op, seq, s.get(), capturing});
      return;
    }
    if (r == ncclInProgress) {
      r = detail::wait_in_progress(st, detail::steady::now() + st.timeout());
      if (r == ncclInProgress) detail::fail(st, op, seq, ncclSuccess, "timed out while NCCL enqueued it", true);
    }
    if (r != ncclSuccess) detail::fail(st, op, seq, r, "failed");
    if (capturing) {
      st.recorder.completed(seq);  // captured: a node of the graph, run by its launches
    } else {
      detail::track(st, seq, op, s.get(), start);
    }
  }

  /// Every rank on its local rank's device (comm::world<CudaBackend>() keeps one per process).
  [[nodiscard]] static NcclCommunicator create_world() {
    detail::Runtime& r = detail::runtime();
    const LaunchInfo launch = r.launch;
    const detail::NcclApi& api = detail::require_nccl("world<CudaBackend>");
    const int count = cuda::Devices::device_count();
    if (count == 0) {
      throw BackendUnavailableError("accel::comm::world<CudaBackend>: no CUDA device (" +
                                    cuda::Devices::availability().reason + ")");
    }
    const int device = launch.local_rank;
    if (device >= count) {
      throw InvalidArgumentError("accel::comm::world<CudaBackend>: local rank " + std::to_string(device) +
                                 " takes cuda:" + std::to_string(device) + ", but " + std::to_string(count) +
                                 " device(s) are visible (one GPU per rank: start at most as many ranks per node)");
    }
    cuda::Devices::set_device(device);
    ncclUniqueId id{};
    std::string id_file;
    if (launch.world_size == 1) {
      id = unique_id();
    } else if (launch.launcher == Launcher::mpi && r.mpi_broadcast != nullptr) {
      if (launch.rank == 0) id = unique_id();
      r.mpi_broadcast(&id, static_cast<int>(sizeof id));
    } else {
      const char* path = std::getenv("ACCEL_COMM_INIT_FILE");
      if (path == nullptr || *path == '\0') {
        throw InvalidArgumentError(
            "accel::comm::world<CudaBackend>: " + std::to_string(launch.world_size) + " ranks were started by " +
            (launch.launcher == Launcher::mpi ? "mpirun, but accel was built without MPI to pass NCCL's id"
                                              : "a torchrun-style launcher (RANK, WORLD_SIZE)") +
            ": set ACCEL_COMM_INIT_FILE to a path on a file system every rank sees (rank 0 writes NCCL's id there)");
      }
      id_file = path;
      std::vector<unsigned char> bytes(sizeof id);
      if (launch.rank == 0) {
        id = unique_id();
        std::memcpy(bytes.data(), &id, sizeof id);
        detail::publish_id_file(id_file, bytes);
      } else {
        bytes = detail::read_id_file(id_file, sizeof id, detail::timeout_from_env());
        std::memcpy(&id, bytes.data(), sizeof id);
      }
    }
    NcclCommunicator c;
    try {
      c = create(id, launch.world_size, launch.rank, device, "world");
    } catch (...) {
      if (launch.rank == 0 && !id_file.empty()) detail::remove_id_file(id_file);
      throw;
    }
    if (launch.rank == 0 && !id_file.empty()) detail::remove_id_file(id_file);  // every rank joined
    c.state_->local_rank = launch.local_rank;
    c.state_->local_size = launch.local_world_size;
    (void)api;
    return c;
  }

 private:
  friend class detail::CommunicatorBase<NcclCommunicator, CudaBackend, detail::NcclState>;
  static constexpr std::string_view type_name = "NcclCommunicator";

  [[nodiscard]] static NcclCommunicator adopt(const detail::NcclApi& api, ncclComm_t comm, int device, std::string name) {
    NcclCommunicator out;
    out.state_ = std::make_shared<detail::NcclState>(api, comm, device, std::move(name));
    detail::nccl_watchdog().watch(out.state_);
    return out;
  }

  /// What this NCCL version cannot do: bfloat16 and avg need 2.10.
  static void check_engine_support(const detail::CallSite& call, const detail::Op& op, const detail::NcclState& s) {
    if (s.api.version >= 21000) return;
    if (op.dtype == Dtype::bfloat16 && op.kind != detail::OpKind::barrier) {
      throw NotSupportedError(call.prefix() + ": bfloat16 needs NCCL 2.10 or newer; this is NCCL " + s.api.version_string());
    }
    if (op.reduce == ReduceOp::avg && detail::is_reduction(op.kind)) {
      throw NotSupportedError(call.prefix() + ": ReduceOp::avg needs NCCL 2.10 or newer (ncclAvg); this is NCCL " +
                              s.api.version_string());
    }
  }

  /// NCCL reads and writes device memory of the communicator's device (or managed memory).
  static void check_memory(const detail::CallSite& call, const detail::Op& op, const detail::NcclState& s) {
    if (op.count == 0) return;
    const auto check = [&](const void* p, const char* what) {
      if (p == nullptr) return;
      cudaPointerAttributes a{};
      if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        call.invalid(std::string(what) + " is not memory CUDA knows; NCCL needs device memory of cuda:" +
                     std::to_string(s.device));
      }
      if (a.type == cudaMemoryTypeManaged) return;
      if (a.type != cudaMemoryTypeDevice) {
        call.invalid(std::string(what) + " is host memory; NCCL reads and writes device memory of cuda:" +
                     std::to_string(s.device));
      }
      if (a.device != s.device) {
        call.invalid(std::string(what) + " is memory of cuda:" + std::to_string(a.device) +
                     ", but the communicator's device is cuda:" + std::to_string(s.device));
      }
    };
    // A non-root's unused buffer is not looked at (MPI ignores it too, so both engines accept the same
    // calls): broadcast's and scatter's input, reduce's and gather's output.
    using detail::OpKind;
    const bool root_here = op.root == s.rank;
    const bool reads = root_here || (op.kind != OpKind::broadcast && op.kind != OpKind::scatter);
    const bool writes = root_here || (op.kind != OpKind::reduce && op.kind != OpKind::gather);
    if (reads) check(op.send, "the input");
    if (writes && !(reads && op.recv == op.send)) check(op.recv, "the output");
  }

  [[nodiscard]] NcclCommunicator split_impl(int color, int key, std::string name) const {
    detail::NcclState& s = checked("split");
    if (s.api.comm_split == nullptr) {
      throw NotSupportedError("accel::comm: " + name + " needs ncclCommSplit (NCCL 2.18 or newer); this is NCCL " +
                              s.api.version_string());
    }
    if (s.failed.load(std::memory_order_acquire)) {  // no Op to name: the refusal names the split
      throw detail::nccl_error(s, nullptr, 0, ncclSuccess, "split " + s.refusal(" and was aborted", 0), false);
    }
    const cuda::Devices::DeviceGuard guard(s.device);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    // The child's handle lives on the heap: a split that times out leaks it (8 bytes) rather than
    // leave NCCL's thread a dangling pointer to write through later.
    auto slot = std::make_unique<ncclComm_t>(nullptr);
    ncclComm_t& comm = *slot;
    ncclResult_t r;
    {
      const std::lock_guard<std::mutex> lock(s.call_mutex);
      r = s.api.comm_split(s.comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, slot.get(), &config);
      if (r == ncclInProgress) r = detail::wait_in_progress(s, detail::steady::now() + s.timeout());
    }
    if (r == ncclSuccess && color >= 0) {
      // Non-blocking: NCCL writes *newcomm from its own thread only once the child is complete, which
      // can be after the parent reports success. Wait for it: returning earlier gave an invalid
      // communicator and NCCL a write into freed memory (seen on an H200: then a crash).
      const std::atomic_ref<ncclComm_t> child(comm);
      const detail::steady::time_point deadline = detail::steady::now() + s.timeout();
      while (child.load(std::memory_order_acquire) == nullptr) {
        ncclResult_t parent = ncclSuccess;
        if (s.api.comm_get_async_error(s.comm, &parent) != ncclSuccess) parent = ncclInternalError;
        if (parent != ncclSuccess && parent != ncclInProgress) {
          (void)slot.release();
          detail::creation_error(s.api, s.comm, "creating " + name + " (ncclCommSplit)", parent, false);
        }
        if (detail::steady::now() >= deadline) {
          (void)slot.release();
          detail::creation_error(s.api, s.comm, "creating " + name + " (ncclCommSplit) timed out", ncclSuccess, true);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      ncclResult_t ready = ncclInProgress;
      detail::wait_ready(s.api, child.load(std::memory_order_acquire), ready, "creating " + name);
    } else if (r != ncclSuccess) {
      if (r == ncclInProgress) (void)slot.release();  // still in NCCL's hands
      detail::creation_error(s.api, s.comm, "creating " + name + " (ncclCommSplit)", r, r == ncclInProgress);
    }
    if (comm == nullptr) return NcclCommunicator();
    NcclCommunicator out = adopt(s.api, comm, s.device, std::move(name));
    out.find_local_ranks();
    return out;
  }

  /// The rank and rank count of this node within the communicator: an all_gather of a hash of the host
  /// name (llm.c's approach), once, when a sub-communicator is made.
  void find_local_ranks() {
    detail::NcclState& s = *state_;
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    const std::uint64_t mine = std::hash<std::string>{}(host);
    std::vector<std::uint64_t> all(static_cast<std::size_t>(s.size));
    std::uint64_t* d = nullptr;
    cudaStream_t stream = nullptr;
    ACCEL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d), all.size() * sizeof(std::uint64_t)));
    struct Cleanup {
      std::uint64_t* d;
      cudaStream_t& stream;
      ~Cleanup() {
        if (stream != nullptr) (void)cudaStreamDestroy(stream);
        (void)cudaFree(d);
      }
    } const release{d, stream};
    ACCEL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    ACCEL_CUDA_CHECK(cudaMemcpy(d + s.rank, &mine, sizeof mine, cudaMemcpyHostToDevice));
    const detail::Op op{detail::OpKind::all_gather, Dtype::int64, ReduceOp::sum, -1, d + s.rank, d, 1};
    ncclResult_t r;
    {
      const std::lock_guard<std::mutex> lock(s.call_mutex);
      r = detail::issue(s, op, stream);
    }
    const detail::steady::time_point deadline = detail::steady::now() + s.timeout();
    if (r == ncclInProgress) r = detail::wait_in_progress(s, deadline);
    if (r != ncclSuccess) detail::fail(s, op, 0, r, "(finding the local ranks) failed", r == ncclInProgress);
    for (;;) {
      const cudaError_t q = cudaStreamQuery(stream);
      if (q == cudaSuccess) break;
      if (q != cudaErrorNotReady) ACCEL_CUDA_CHECK(q);
      if (detail::steady::now() >= deadline) detail::fail(s, op, 0, ncclSuccess, "(finding the local ranks) timed out", true);
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    ACCEL_CUDA_CHECK(cudaMemcpy(all.data(), d, all.size() * sizeof(std::uint64_t), cudaMemcpyDeviceToHost));
    s.local_rank = 0;
    s.local_size = 0;
    for (int i = 0; i < s.size; ++i) {
      if (all[static_cast<std::size_t>(i)] != mine) continue;
      ++s.local_size;
      if (i < s.rank) ++s.local_rank;
    }
  }
};

static_assert(accel::Communicator<NcclCommunicator>);

namespace detail {
inline std::string nccl_version() {
  const NcclApi& api = nccl();
  if (!api.loaded()) return "unavailable: " + api.error;
  return "NCCL " + api.version_string() + " (" + api.library.name() + ")";
}
inline void nccl_shutdown() { nccl_watchdog().stop(); }
inline void nccl_abort_all(const std::string& reason) { nccl_watchdog().abort_all(reason); }
inline const bool nccl_hooks_installed = [] {
  accel::detail::comm_version_probe(accel::detail::CommEngine::nccl).store(&nccl_version);
  runtime().nccl_shutdown = &nccl_shutdown;
  runtime().nccl_abort = &nccl_abort_all;
  return true;
}();
}  // namespace detail

}  // namespace accel::comm

template <>
struct accel::communicator_traits<accel::CudaBackend> {
  using type = accel::comm::NcclCommunicator;
};

static_assert(accel::Collectives<accel::CudaBackend>);

#else  // a build without NCCL says so

#include <string>

namespace accel::comm::detail {
inline std::string nccl_version_unavailable() {
#if defined(ACCEL_HAS_CUDA)
  return "unavailable: accel was built without NCCL (nccl.h was not found; install libnccl-dev and reconfigure)";
#else
  return "unavailable: accel was built without CUDA";
#endif
}
inline const bool nccl_hooks_installed = [] {
  accel::detail::comm_version_probe(accel::detail::CommEngine::nccl).store(&nccl_version_unavailable);
  return true;
}();
}  // namespace accel::comm::detail

#endif  // ACCEL_HAS_NCCL && ACCEL_HAS_CUDA
