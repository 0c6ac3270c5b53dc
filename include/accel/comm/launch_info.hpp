// accel/comm/launch_info.hpp — accel::comm::LaunchInfo: how this process was started, read from the
// environment the launchers set (no side effects: nothing is initialised).
//
//   mpirun / mpiexec (Open MPI, MPICH, Slurm with PMI):  OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE},
//                              PMI_{RANK,SIZE} with MPI_LOCALRANKID / MPI_LOCALNRANKS
//   torchrun, DeepSpeed's launcher: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE
//   neither: one rank
// A malformed or inconsistent value (RANK outside 0..WORLD_SIZE-1, RANK and mpirun's rank differ) is an
// InvalidArgumentError naming the variables.
#pragma once

#include <accel/core/error.hpp>

#include <cstdlib>
#include <string>
#include <string_view>

namespace accel::comm {

enum class Launcher {
  single,       ///< no launcher: one rank
  mpi,          ///< mpirun / mpiexec / srun with PMI
  environment,  ///< RANK / WORLD_SIZE (torchrun, DeepSpeed's launcher)
};

[[nodiscard]] constexpr std::string_view name(Launcher l) noexcept {
  switch (l) {
    case Launcher::single: return "single";
    case Launcher::mpi: return "mpi";
    case Launcher::environment: return "environment";
  }
  return "unknown";
}

struct LaunchInfo {
  Launcher launcher = Launcher::single;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
};

namespace detail {

/// The variable as an int in [min, max], or `fallback` when unset; InvalidArgumentError when malformed.
[[nodiscard]] inline int env_int(const char* variable, int fallback, int min, int max) {
  const char* value = std::getenv(variable);
  if (value == nullptr || *value == '\0') return fallback;
  const std::string text(value);
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (end != text.c_str() + text.size() || v < min || v > max) {
    throw InvalidArgumentError(std::string(variable) + "='" + text + "' is not an integer in " + std::to_string(min) +
                               ".." + std::to_string(max));
  }
  return static_cast<int>(v);
}

[[nodiscard]] inline bool env_set(const char* variable) {
  const char* value = std::getenv(variable);
  return value != nullptr && *value != '\0';
}

}  // namespace detail

/// Reads the launchers' variables (see the top of this header).
[[nodiscard]] inline LaunchInfo detect_launch() {
  using detail::env_int;
  using detail::env_set;
  constexpr int big = 1 << 24;
  LaunchInfo info;
  const char* size_var = nullptr;
  if (env_set("OMPI_COMM_WORLD_SIZE")) {
    size_var = "OMPI_COMM_WORLD_SIZE";
    info.launcher = Launcher::mpi;
    info.world_size = env_int("OMPI_COMM_WORLD_SIZE", 1, 1, big);
    info.rank = env_int("OMPI_COMM_WORLD_RANK", 0, 0, info.world_size - 1);
    info.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0, 0, info.world_size - 1);
    info.local_world_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1, 1, info.world_size);
  } else if (env_set("PMI_SIZE")) {
    size_var = "PMI_SIZE";
    info.launcher = Launcher::mpi;
    info.world_size = env_int("PMI_SIZE", 1, 1, big);
    info.rank = env_int("PMI_RANK", 0, 0, info.world_size - 1);
    info.local_rank = env_int("MPI_LOCALRANKID", 0, 0, info.world_size - 1);
    info.local_world_size = env_int("MPI_LOCALNRANKS", 1, 1, info.world_size);
  }
  if (env_set("WORLD_SIZE") || env_set("RANK")) {
    if (!env_set("WORLD_SIZE") || !env_set("RANK")) {
      throw InvalidArgumentError(std::string("RANK and WORLD_SIZE are set together (torchrun-style launch); only ") +
                                 (env_set("RANK") ? "RANK" : "WORLD_SIZE") + " is set");
    }
    const int world_size = env_int("WORLD_SIZE", 1, 1, big);
    const int rank = env_int("RANK", 0, 0, world_size - 1);
    if (info.launcher == Launcher::mpi) {
      if (rank != info.rank || world_size != info.world_size) {
        throw InvalidArgumentError("RANK=" + std::to_string(rank) + " WORLD_SIZE=" + std::to_string(world_size) +
                                   " disagree with the MPI launcher's rank " + std::to_string(info.rank) + " of " +
                                   std::to_string(info.world_size) + " (" + size_var + ")");
      }
      return info;
    }
    info.launcher = Launcher::environment;
    info.world_size = world_size;
    info.rank = rank;
    info.local_rank = env_int("LOCAL_RANK", rank, 0, world_size - 1);
    info.local_world_size = env_int("LOCAL_WORLD_SIZE", world_size, 1, world_size);
    if (info.local_rank >= info.local_world_size) {
      throw InvalidArgumentError("LOCAL_RANK=" + std::to_string(info.local_rank) + " is not below LOCAL_WORLD_SIZE=" +
                                 std::to_string(info.local_world_size));
    }
  }
  return info;
}

}  // namespace accel::comm
