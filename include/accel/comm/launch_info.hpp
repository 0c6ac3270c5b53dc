// accel/comm/launch_info.hpp — accel::comm::LaunchInfo: how this process was started, read from the
// environment the launchers set (no side effects: nothing is initialised).
//
//   mpirun / mpiexec (Open MPI, MPICH, Slurm with PMI):  OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE},
//                              PMI_{RANK,SIZE} with MPI_LOCALRANKID / MPI_LOCALNRANKS
//   torchrun, DeepSpeed's launcher: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE
//   neither: one rank
// Values are read as Python's int() reads them (surrounding whitespace and a leading '+' are fine; "1x",
// "0x1", "" and overflow are not). A malformed, missing or inconsistent value is an InvalidArgumentError
// naming the variables: RANK outside 0..WORLD_SIZE-1, a local rank not below the local size, a launcher's
// size without its rank (or the reverse), RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE set beside
// mpirun's and differing from them.
#pragma once

#include <accel/core/error.hpp>

#include <charconv>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>

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

/// The variable's value, or nullptr when it is unset or empty (a launcher never sets one empty).
[[nodiscard]] inline const char* env_value(const char* variable) {
  const char* value = std::getenv(variable);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

[[nodiscard]] inline bool env_set(const char* variable) { return env_value(variable) != nullptr; }

/// `text` as an integer the way Python's int() reads it (torchrun and DeepSpeed read these variables with
/// int()): surrounding ASCII whitespace and one leading '+' or '-' are allowed; nothing else is (no
/// "0x", no inner spaces, no trailing characters, nothing empty). False when malformed or out of range.
[[nodiscard]] inline bool parse_int_like_python(std::string_view text, long long& out) {
  constexpr std::string_view space = " \t\n\v\f\r";
  const auto first = text.find_first_not_of(space);
  if (first == std::string_view::npos) return false;
  text = text.substr(first, text.find_last_not_of(space) - first + 1);
  bool negative = false;
  if (text.front() == '+' || text.front() == '-') {
    negative = text.front() == '-';
    text.remove_prefix(1);
  }
  // from_chars into an unsigned reads digits only: a second sign, a space or nothing at all fails it.
  unsigned long long magnitude = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), magnitude);
  if (ec != std::errc{} || end != text.data() + text.size()) return false;
  // Past long long's range (a negated 2^64 - 1 would otherwise wrap to 1).
  if (magnitude > static_cast<unsigned long long>(std::numeric_limits<long long>::max())) return false;
  out = negative ? -static_cast<long long>(magnitude) : static_cast<long long>(magnitude);
  return true;
}

/// The variable as an int in [min, max], or `fallback` when unset; InvalidArgumentError when malformed
/// (see parse_int_like_python) or out of range. Set but empty is malformed, as int('') is.
[[nodiscard]] inline int env_int(const char* variable, int fallback, int min, int max) {
  const char* value = std::getenv(variable);
  if (value == nullptr) return fallback;
  const std::string text(value);
  long long v = 0;
  if (!parse_int_like_python(text, v) || v < min || v > max) {
    throw InvalidArgumentError(std::string(variable) + "='" + text + "' is not an integer in " + std::to_string(min) +
                               ".." + std::to_string(max));
  }
  return static_cast<int>(v);
}

/// One launcher's pair of variables (rank and size, or local rank and local size): both set or neither.
inline void require_pair(const char* rank_var, const char* size_var, const char* launcher) {
  const bool has_rank = env_set(rank_var);
  const bool has_size = env_set(size_var);
  if (has_rank != has_size) {
    throw InvalidArgumentError(std::string(has_size ? size_var : rank_var) + "='" +
                               env_value(has_size ? size_var : rank_var) + "' is set but " +
                               (has_size ? rank_var : size_var) + " is not: " + launcher + " sets them together");
  }
}

}  // namespace detail

/// Reads the launchers' variables (see the top of this header).
[[nodiscard]] inline LaunchInfo detect_launch() {
  using detail::env_int;
  using detail::env_set;
  constexpr int big = 1 << 24;
  LaunchInfo info;
  // The MPI launcher's variables, when it is one (Open MPI's first, then PMI's).
  const char* rank_var = nullptr;
  const char* size_var = nullptr;
  const char* local_rank_var = nullptr;
  const char* local_size_var = nullptr;
  if (env_set("OMPI_COMM_WORLD_SIZE") || env_set("OMPI_COMM_WORLD_RANK")) {
    rank_var = "OMPI_COMM_WORLD_RANK";
    size_var = "OMPI_COMM_WORLD_SIZE";
    local_rank_var = "OMPI_COMM_WORLD_LOCAL_RANK";
    local_size_var = "OMPI_COMM_WORLD_LOCAL_SIZE";
  } else if (env_set("PMI_SIZE") || env_set("PMI_RANK")) {
    rank_var = "PMI_RANK";
    size_var = "PMI_SIZE";
    local_rank_var = "MPI_LOCALRANKID";
    local_size_var = "MPI_LOCALNRANKS";
  }
  if (size_var != nullptr) {
    detail::require_pair(rank_var, size_var, "an MPI launcher");
    detail::require_pair(local_rank_var, local_size_var, "an MPI launcher");
    info.launcher = Launcher::mpi;
    info.world_size = env_int(size_var, 1, 1, big);
    info.rank = env_int(rank_var, 0, 0, info.world_size - 1);
    if (env_set(local_rank_var)) {
      info.local_rank = env_int(local_rank_var, 0, 0, info.world_size - 1);
      info.local_world_size = env_int(local_size_var, 1, 1, info.world_size);
    } else {
      // No local variables from the launcher (srun with PMI): torchrun's, where set, are the only word.
      local_rank_var = "LOCAL_RANK";
      local_size_var = "LOCAL_WORLD_SIZE";
      info.local_rank = env_int("LOCAL_RANK", 0, 0, info.world_size - 1);
      info.local_world_size = env_int("LOCAL_WORLD_SIZE", 1, 1, info.world_size);
    }
    if (info.local_rank >= info.local_world_size) {
      throw InvalidArgumentError(std::string(local_rank_var) + "=" + std::to_string(info.local_rank) +
                                 " is not below " + local_size_var + "=" + std::to_string(info.local_world_size));
    }
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
                                   std::to_string(info.world_size) + " (" + rank_var + "=" +
                                   std::to_string(info.rank) + " " + size_var + "=" +
                                   std::to_string(info.world_size) + ")");
      }
    } else {
      info.launcher = Launcher::environment;
      info.world_size = world_size;
      info.rank = rank;
      info.local_rank = env_int("LOCAL_RANK", rank, 0, world_size - 1);
      info.local_world_size = env_int("LOCAL_WORLD_SIZE", world_size, 1, world_size);
      if (info.local_rank >= info.local_world_size) {
        throw InvalidArgumentError("LOCAL_RANK=" + std::to_string(info.local_rank) + " is not below LOCAL_WORLD_SIZE=" +
                                   std::to_string(info.local_world_size));
      }
      return info;
    }
  }
  if (info.launcher == Launcher::mpi) {
    // torch code reads LOCAL_RANK / LOCAL_WORLD_SIZE to pick its GPU: where they are set beside the MPI
    // launcher's, they must agree with them, or accel and torch would pick different devices.
    const auto compare = [&](const char* torch_var, const char* mpi_var, int mpi_value, int min) {
      if (!env_set(torch_var) || std::string_view(torch_var) == mpi_var) return;  // already what was read
      const int value = env_int(torch_var, mpi_value, min, big);
      if (value != mpi_value) {
        throw InvalidArgumentError(std::string(torch_var) + "=" + std::to_string(value) +
                                   " disagrees with the MPI launcher's " + mpi_var + "=" + std::to_string(mpi_value));
      }
    };
    compare("LOCAL_RANK", local_rank_var, info.local_rank, 0);
    compare("LOCAL_WORLD_SIZE", local_size_var, info.local_world_size, 1);
  }
  return info;
}

}  // namespace accel::comm
