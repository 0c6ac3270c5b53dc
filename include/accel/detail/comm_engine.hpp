// accel/detail/comm_engine.hpp — what a backend answers for communication_backend_version().
//
// A backend names its communication engine (communication_backend_name(): "mpi", "nccl") but does not
// include it: accel/comm is an opt-in floor above the backends. So the engine's version comes through a
// hook that accel/comm/mpi.hpp and accel/comm/nccl.hpp install when a program includes them (with the
// version, or why the engine cannot be used: built without it, library missing). Without accel/comm
// the answer says so. Internal.
#pragma once

#include <atomic>
#include <string>

namespace accel::detail {

enum class CommEngine { mpi = 0, nccl = 1 };

using CommVersionProbe = std::string (*)();

inline std::atomic<CommVersionProbe>& comm_version_probe(CommEngine engine) noexcept {
  static std::atomic<CommVersionProbe> probes[2] = {nullptr, nullptr};
  return probes[static_cast<int>(engine)];
}

/// "Open MPI v4.1.4 (MPI 3.1)", "NCCL 2.28.9", or "unavailable: <why>".
[[nodiscard]] inline std::string comm_engine_version(CommEngine engine) {
  if (const CommVersionProbe probe = comm_version_probe(engine).load(std::memory_order_acquire)) return probe();
  return "unavailable in this program: communication goes through accel/comm (link accel::comm, include "
         "<accel/comm.hpp>)";
}

}  // namespace accel::detail
