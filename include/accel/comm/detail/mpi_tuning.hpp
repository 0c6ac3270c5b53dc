// accel/comm/detail/mpi_tuning.hpp — which of Open MPI's own MPI_Iallreduce algorithms accel asks for.
//
// accel's operations are non-blocking MPI calls (they must time out), which Open MPI 4 serves with its
// libnbc component. For fewer than 4 ranks libnbc always builds a binomial tree (reduce to rank 0, then
// broadcast: the data crosses twice, one direction at a time), which measured 2-8x slower than the
// blocking MPI_Allreduce from 4 KiB to 4 MiB on 2 ranks here, while libnbc's ring (both directions at
// once; for 2 or 3 ranks no more steps than the tree) was as fast as or faster than the blocking call at
// every size from 4 KiB up (benchmarks/RESULTS.md, "Collectives"). So for communicators of 2 or 3 ranks
// accel selects the ring for its own MPI_Iallreduce calls, through MPI's tool interface (the control
// variable coll_libnbc_iallreduce_algorithm, set just before the call and restored after, under a lock).
// Still MPI's algorithm and MPI on the wire; nothing changes where:
//   - the MPI library is not Open MPI (no such variable), or the variable cannot be written;
//   - the program chose an algorithm itself (OMPI_MCA_coll_libnbc_iallreduce_algorithm, or the variable
//     is not at its default when accel first looks);
//   - ACCEL_COMM_MPI_TUNING=0;
//   - 4 or more ranks (libnbc's own choice, Rabenseifner's algorithm for large messages, is good there).
//
// all_gather and reduce_scatter do not go to MPI_Iallgather / MPI_Ireduce_scatter_block at any size:
// there libnbc measured 0.44-0.86x the blocking calls on 2 ranks, 0.35-0.55x below 8 KiB, all_gather
// 0.22-0.43x at 2-8 MiB (1.18-1.41x slower than the ring at 256 MiB, level at 128 MiB), and
// reduce_scatter's busbw 2 GB/s at 2-8 MiB and 0.5-0.6 GB/s from 32 MiB up, where the ring moves 5-7 and
// 2.7-5.3 GB/s (benchmarks/RESULTS.md, "Collectives" and "Second CPU"). accel runs them as a ring
// of MPI_Isend / MPI_Irecv instead (mpi_engine.hpp: for 2 ranks one exchange, then MPI_Reduce_local for
// reduce_scatter; blocks of 3-8 KiB as eager-sized pieces: ring_pieces) — MPI's messages and MPI's
// reduction ops, accel's schedule. all_reduce up to 8 KiB per rank (128 KiB on 2 ranks) runs as accel's
// recursive doubling (doubling_selected). Larger sizes keep MPI's collectives; ACCEL_COMM_MPI_TUNING=0
// keeps them everywhere.
// Compiled only where accel has MPI.
#pragma once

#if defined(ACCEL_HAS_MPI)

#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>

namespace accel::comm::detail {

class IallreduceTuning {
 public:
  /// Calls `start()` (an MPI_Iallreduce) with libnbc's ring selected when that helps (see above).
  /// From 16 KiB: below it the two algorithms measured alike, and the switch itself costs ~0.4 us.
  static constexpr std::size_t min_bytes = 16 * 1024;

  template <class Start>
  int start(int ranks, std::size_t count, std::size_t bytes, Start&& start_call) {
    if (ranks < 2 || ranks > 3 || bytes < min_bytes || count < static_cast<std::size_t>(ranks) || !usable()) {
      return start_call();
    }
    const std::lock_guard<std::mutex> lock(mutex_);
    int ring = 1;
    if (MPI_T_cvar_write(handle_, &ring) != MPI_SUCCESS) return start_call();
    const int rc = start_call();
    MPI_T_cvar_write(handle_, &previous_);
    return rc;
  }

  /// True when accel may select the algorithm (first call looks it up; thread-safe).
  [[nodiscard]] bool usable() {
    std::call_once(once_, [this] { usable_ = look_up(); });
    return usable_;
  }

 private:
  bool look_up() noexcept {
    if (const char* v = std::getenv("ACCEL_COMM_MPI_TUNING"); v != nullptr && std::string_view(v) == "0") return false;
    if (std::getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm") != nullptr) return false;  // the program's choice
    int provided = 0;
    if (MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return false;
    int index = -1;
    if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &index) != MPI_SUCCESS || index < 0) return false;
    int count = 0;
    if (MPI_T_cvar_handle_alloc(index, nullptr, &handle_, &count) != MPI_SUCCESS || count != 1) return false;
    if (MPI_T_cvar_read(handle_, &previous_) != MPI_SUCCESS || previous_ != 0) return false;  // not the default
    return true;
  }

  std::once_flag once_;
  bool usable_ = false;
  std::mutex mutex_;
  MPI_T_cvar_handle handle_ = MPI_T_CVAR_HANDLE_NULL;
  int previous_ = 0;
};

/// False when ACCEL_COMM_MPI_TUNING=0: then MPI's own collectives run at every size.
[[nodiscard]] inline bool accel_schedules_allowed() {
  static const bool allowed = [] {
    const char* v = std::getenv("ACCEL_COMM_MPI_TUNING");
    return v == nullptr || std::string_view(v) != "0";
  }();
  return allowed;
}

/// Whether accel's own ring runs an all_gather or a reduce_scatter of S bytes on `ranks` ranks: at every
/// size, unless ACCEL_COMM_MPI_TUNING=0 (see above). MPI's libnbc measured behind the ring on 2 ranks —
/// reduce_scatter 2.5-10x from 2 MiB, all_gather 2-4x at 2-8 MiB and 1.18-1.41x at 256 MiB (level at
/// 128 MiB) — and level with it or behind on 3 (benchmarks/RESULTS.md, "Second CPU").
[[nodiscard]] inline bool ring_selected(int ranks, std::size_t bytes) {
  if (ranks < 2 || bytes == 0) return false;
  return accel_schedules_allowed();
}

/// The largest all_reduce (bytes per rank) accel runs as its own recursive doubling (mpi_engine.hpp:
/// doubling_start) instead of MPI_Iallreduce. Below 16 KiB libnbc builds a binomial tree for 2-3 ranks
/// (reduce to rank 0, then broadcast: two latencies, one direction at a time): 0.28-0.50x the blocking
/// MPI_Allreduce from 8 B to 2 KiB and 0.74x at 8 KiB on 2 ranks (benchmarks/RESULTS.md,
/// "Collectives"). Recursive doubling is one exchange per doubling of the ranks, both directions at
/// once, and every rank reduces the same two operands (IEEE arithmetic is commutative), so all ranks
/// hold the same bits. On 2 ranks it is one exchange of the whole buffer, which measured ahead of
/// libnbc's ring up to 128 KiB (2.1x the blocking call at 32 KiB against the ring's 1.1-1.2x) and behind
/// it from 512 KiB; on more ranks every step moves the whole buffer again (and 3, 5, 6, 7 ... ranks
/// fold the ranks above a power of two in and out: two more steps), so there it serves small messages
/// only.
inline constexpr std::size_t doubling_max_bytes = 8 * 1024;
inline constexpr std::size_t doubling_max_bytes_two_ranks = 128 * 1024;

/// Whether accel's recursive doubling runs an all_reduce of `bytes` per rank on `ranks` ranks.
[[nodiscard]] inline bool doubling_selected(int ranks, std::size_t bytes) {
  if (ranks < 2 || bytes == 0 || bytes > (ranks == 2 ? doubling_max_bytes_two_ranks : doubling_max_bytes)) return false;
  return accel_schedules_allowed();
}

/// How many messages a ring step sends its block of `bytes` in. A block of 3-8 KiB goes as pieces of
/// at most 2 KiB: a 4 KiB message is just above the shared-memory transport's eager limit (Open MPI's
/// vader: 4 KiB including its header), so it waits for a rendezvous, while eager pieces travel at once
/// (all_gather of 8 KiB on 2 ranks: 1.2 us as two pieces against 2.6 us as one message). Larger blocks
/// go whole: there the rendezvous costs little next to the copy.
inline constexpr std::size_t ring_piece_bytes = 2048;
inline constexpr int ring_max_pieces = 4;
[[nodiscard]] inline int ring_pieces(std::size_t bytes) noexcept {
  if (bytes <= 3 * 1024 || bytes > ring_piece_bytes * ring_max_pieces) return 1;
  return static_cast<int>((bytes + ring_piece_bytes - 1) / ring_piece_bytes);
}

/// The process's instance: created on first use, never destroyed (MPI_T's handle lives until exit).
inline IallreduceTuning& iallreduce_tuning() {
  static IallreduceTuning* const instance = new IallreduceTuning();
  return *instance;
}

}  // namespace accel::comm::detail

#endif  // ACCEL_HAS_MPI
