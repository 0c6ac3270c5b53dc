// accel/comm/detail/nccl_api.hpp — the NCCL entry points accel calls, loaded with dlopen on first use.
//
// Linking libnccl would make every program built with accel::comm fail to start where NCCL is absent;
// like cuBLAS and the driver, NCCL is opened when the first NCCL communicator needs it
// (ACCEL_NCCL_LIBRARY names the only library tried; else libnccl.so.2, libnccl.so, the toolkit's folders). Only the
// types come from <nccl.h>. The version (ncclGetVersion) decides what may be used: bfloat16 and avg need
// NCCL 2.10, ncclCommSplit 2.18 (else split/new_group are NotSupportedError). Compiled only where accel
// has NCCL.
#pragma once

#if defined(ACCEL_HAS_NCCL)

#include <accel/detail/dynamic_library.hpp>

#include <nccl.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace accel::comm::detail {

struct NcclApi {
  accel::detail::DynamicLibrary library;
  std::string error;  ///< why NCCL cannot be used; empty when it can
  int version = 0;    ///< ncclGetVersion: major * 10000 + minor * 100 + patch (NCCL >= 2.9)

  ncclResult_t (*get_version)(int*) = nullptr;
  ncclResult_t (*get_unique_id)(ncclUniqueId*) = nullptr;
  ncclResult_t (*comm_init_rank_config)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*) = nullptr;
  ncclResult_t (*comm_split)(ncclComm_t, int, int, ncclComm_t*, ncclConfig_t*) = nullptr;  // optional: 2.18
  ncclResult_t (*comm_finalize)(ncclComm_t) = nullptr;
  ncclResult_t (*comm_destroy)(ncclComm_t) = nullptr;
  ncclResult_t (*comm_abort)(ncclComm_t) = nullptr;
  const char* (*get_error_string)(ncclResult_t) = nullptr;
  const char* (*get_last_error)(ncclComm_t) = nullptr;
  ncclResult_t (*comm_get_async_error)(ncclComm_t, ncclResult_t*) = nullptr;
  ncclResult_t (*comm_count)(const ncclComm_t, int*) = nullptr;
  ncclResult_t (*comm_user_rank)(const ncclComm_t, int*) = nullptr;
  ncclResult_t (*all_reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*all_gather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*reduce_scatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*send)(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*group_start)() = nullptr;
  ncclResult_t (*group_end)() = nullptr;

  [[nodiscard]] bool loaded() const noexcept { return error.empty(); }

  /// "2.28.9"
  [[nodiscard]] std::string version_string() const {
    return std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
           std::to_string(version % 100);
  }

  /// "ncclSystemError (2: unhandled system error ...)"
  [[nodiscard]] std::string describe(ncclResult_t r) const {
    std::string out = result_name(r) + " (" + std::to_string(static_cast<int>(r));
    if (get_error_string != nullptr) {
      if (const char* s = get_error_string(r)) out += std::string(": ") + s;
    }
    return out + ")";
  }

  [[nodiscard]] static std::string result_name(ncclResult_t r) {
    switch (r) {
      case ncclSuccess: return "ncclSuccess";
      case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
      case ncclSystemError: return "ncclSystemError";
      case ncclInternalError: return "ncclInternalError";
      case ncclInvalidArgument: return "ncclInvalidArgument";
      case ncclInvalidUsage: return "ncclInvalidUsage";
      case ncclRemoteError: return "ncclRemoteError";
      case ncclInProgress: return "ncclInProgress";
      default: return "ncclResult_t";
    }
  }

  /// What usually causes each code (torch adds the same kind of line to NCCL's terse strings).
  [[nodiscard]] static std::string hint(ncclResult_t r) {
    switch (r) {
      case ncclUnhandledCudaError:
        return "a CUDA call inside NCCL failed: the device is in a bad state or a kernel before faulted; run with "
               "NCCL_DEBUG=WARN and check the CUDA error above it";
      case ncclSystemError:
        return "a system call (socket, malloc, shared memory, munmap) failed: a network interface is down or "
               "blocked (NCCL_SOCKET_IFNAME), /dev/shm is too small (in containers: --shm-size), or a peer "
               "process died";
      case ncclInternalError:
        return "NCCL hit an internal error: often a peer died or the topology changed; run with NCCL_DEBUG=INFO";
      case ncclInvalidArgument:
        return "an argument was refused (a null or host pointer, a bad count or datatype); the call had no effect";
      case ncclInvalidUsage:
        return "the call is not allowed here: two ranks on one GPU, ranks calling different collectives, or a "
               "communicator used after abort";
      case ncclRemoteError:
        return "a remote peer reported an error or disconnected: check the other ranks' output";
      default: return "run with NCCL_DEBUG=WARN for NCCL's own explanation";
    }
  }
};

[[nodiscard]] inline std::vector<std::string> nccl_candidates() {
  // An explicit choice is the only one tried: falling back to another NCCL would hide the mistake.
  if (const char* p = std::getenv("ACCEL_NCCL_LIBRARY"); p != nullptr && *p != '\0') return {p};
  // Built whole from one array, not grown from empty: g++ 12 at -O3 reports a false -Warray-bounds on
  // the first emplace_back into an empty vector<string> here (its reallocation path).
  std::string from_env[2];
  std::size_t n_env = 0;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* d = std::getenv(var); d != nullptr && *d != '\0') from_env[n_env++] = std::string(d) + "/lib64/libnccl.so.2";
  }
  std::vector<std::string> names{"libnccl.so.2", "libnccl.so"};
  names.insert(names.end(), from_env, from_env + n_env);
  names.emplace_back("/usr/local/cuda/lib64/libnccl.so.2");
  return names;
}

inline NcclApi* load_nccl() {
  auto* api = new NcclApi;
  try {
    const std::vector<std::string> names = nccl_candidates();
    api->library = accel::detail::DynamicLibrary::try_open(names.begin(), names.end());
    if (!api->library) {
      api->error = "NCCL cannot be loaded (install NCCL, e.g. libnccl2, or set ACCEL_NCCL_LIBRARY): " +
                   api->library.error();
      return api;
    }
    accel::detail::SymbolTable table(api->library);
    table.require(api->get_version, "ncclGetVersion")
        .require(api->get_unique_id, "ncclGetUniqueId")
        .require(api->comm_init_rank_config, "ncclCommInitRankConfig")
        .optional(api->comm_split, "ncclCommSplit")
        .require(api->comm_finalize, "ncclCommFinalize")
        .require(api->comm_destroy, "ncclCommDestroy")
        .require(api->comm_abort, "ncclCommAbort")
        .require(api->get_error_string, "ncclGetErrorString")
        .require(api->get_last_error, "ncclGetLastError")
        .require(api->comm_get_async_error, "ncclCommGetAsyncError")
        .require(api->comm_count, "ncclCommCount")
        .require(api->comm_user_rank, "ncclCommUserRank")
        .require(api->all_reduce, "ncclAllReduce")
        .require(api->broadcast, "ncclBroadcast")
        .require(api->reduce, "ncclReduce")
        .require(api->all_gather, "ncclAllGather")
        .require(api->reduce_scatter, "ncclReduceScatter")
        .require(api->send, "ncclSend")
        .require(api->recv, "ncclRecv")
        .require(api->group_start, "ncclGroupStart")
        .require(api->group_end, "ncclGroupEnd");
    if (!table.complete()) {
      api->error = table.error() + " (accel needs NCCL 2.14 or newer: non-blocking communicators, ncclCommFinalize, "
                                   "ncclGetLastError)";
      return api;
    }
    if (api->get_version(&api->version) != ncclSuccess) api->error = "ncclGetVersion failed";
  } catch (...) {
    api->error = "NCCL cannot be loaded (out of memory)";
  }
  return api;
}

/// The process's NCCL table: loaded on first use (thread-safe), never unloaded.
inline const NcclApi& nccl() {
  static const NcclApi* const api = load_nccl();
  return *api;
}

}  // namespace accel::comm::detail

#endif  // ACCEL_HAS_NCCL
