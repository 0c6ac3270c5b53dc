// accel/blas/detail/cublas_handles.hpp — one cuBLAS handle per CUDA stream, created on first use and kept.
//
// A handle is bound to its stream once (cublasSetStream) and given its own workspace, so GEMMs on one
// stream never share scratch memory with another stream's, and no call re-binds a handle another
// thread is using. The key is (device, native stream): a stream destroyed and another created at the
// same address reuses the handle, so the cache holds at most one handle per live native stream ever
// seen. The workspace comes from accel's caching allocator, allocated on the device's default stream
// (so that a first GEMM inside a graph capture does not take it from the graph's private pool), and is
// never freed, like the handles: both live until the process ends (cuBLAS may unload before static
// destructors run). cuBLAS asks no more of a GEMM than its workspace, so a captured GEMM allocates
// nothing. Creating a handle while another stream of the thread captures is legal: cudaMalloc calls
// are let through in relaxed capture mode for that moment. Calls on one handle from several threads
// are serialized by the handle's mutex (cuBLAS forbids concurrent use of a handle).
#pragma once

#if defined(ACCEL_HAS_CUDA)

#include <accel/blas/detail/cublas_api.hpp>
#include <accel/cuda/backend.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace accel::blas::detail {

struct CublasHandle {
  cublasHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  /// Held around each call on the handle: cuBLAS forbids using one handle from two threads at once,
  /// and two threads may enqueue on one stream. Uncontended (the usual case) it costs about 20 ns.
  mutable std::mutex mutex;
};

/// cuBLAS's recommended workspace: 32 MiB on Hopper and newer, 4 MiB before.
[[nodiscard]] inline std::size_t cublas_workspace_bytes(int device) {
  int major = 0;
  ACCEL_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return (major >= 9 ? std::size_t{32} : std::size_t{4}) << 20;
}

[[noreturn, gnu::cold, gnu::noinline]] inline void throw_cublas(const std::string& what, cublasStatus_t status) {
  const Errc code = status == CUBLAS_STATUS_ALLOC_FAILED ? Errc::out_of_memory : Errc::runtime_failure;
  throw Error(code, what + " failed: " + cublas().describe(status), static_cast<std::int64_t>(status));
}

/// Lets cudaMalloc through while another stream of this thread captures a graph (global mode forbids it).
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode() { ACCEL_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode_)); }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;
  ~RelaxedCaptureMode() { (void)ACCEL_CUDA_CHECK_NOTHROW(cudaThreadExchangeStreamCaptureMode(&mode_)); }

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

class CublasHandles {
 public:
  /// The handle bound to `stream` (created on first use). The caller has made stream's device current.
  const CublasHandle& get(cuda::StreamRef stream) {
    const Key key{stream.device_index(), stream.get()};
    thread_local const Key* last_key = nullptr;  // entries are never removed: pointers into the map stay valid
    thread_local const CublasHandle* last = nullptr;
    if (last_key != nullptr && *last_key == key) return *last;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = handles_.find(key);
    if (it == handles_.end()) it = handles_.emplace(key, create(key)).first;
    last_key = &it->first;
    last = it->second.get();
    return *last;
  }

  /// Handles created so far (tests).
  [[nodiscard]] std::size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return handles_.size();
  }

  /// Whether a handle exists for stream's (device, native stream) — one made for an earlier stream at
  /// the same address included (tests).
  [[nodiscard]] bool contains(cuda::StreamRef stream) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return handles_.contains(Key{stream.device_index(), stream.get()});
  }

 private:
  struct Key {
    int device;
    cudaStream_t stream;
    friend bool operator==(const Key&, const Key&) = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const noexcept {
      return std::hash<const void*>{}(k.stream) ^ (static_cast<std::size_t>(k.device) * 0x9E3779B97F4A7C15ull);
    }
  };

  static std::unique_ptr<CublasHandle> create(const Key& key) {
    const CublasApi& api = cublas();
    if (!api.loaded()) throw BackendUnavailableError(api.error);
    const RelaxedCaptureMode relaxed;
    auto owned = std::make_unique<CublasHandle>();
    CublasHandle& h = *owned;
    if (const cublasStatus_t s = api.create(&h.handle); s != CUBLAS_STATUS_SUCCESS) throw_cublas("cublasCreate", s);
    try {
      // float GEMMs stay float (no TF32), as torch's default; 16-bit inputs accumulate in float.
      if (const auto s = api.set_math_mode(h.handle, CUBLAS_DEFAULT_MATH); s != CUBLAS_STATUS_SUCCESS) {
        throw_cublas("cublasSetMathMode", s);
      }
      if (const auto s = api.set_stream(h.handle, key.stream); s != CUBLAS_STATUS_SUCCESS) {
        throw_cublas("cublasSetStream", s);
      }
      h.workspace_bytes = cublas_workspace_bytes(key.device);
      h.workspace = CudaBackend::raw_alloc(h.workspace_bytes, CudaBackend::default_stream(key.device));
      if (const auto s = api.set_workspace(h.handle, h.workspace, h.workspace_bytes); s != CUBLAS_STATUS_SUCCESS) {
        throw_cublas("cublasSetWorkspace", s);
      }
    } catch (...) {
      if (h.workspace != nullptr) CudaBackend::raw_delete(h.workspace);
      (void)api.destroy(h.handle);
      throw;
    }
    return owned;
  }

  mutable std::mutex mutex_;
  std::unordered_map<Key, std::unique_ptr<CublasHandle>, KeyHash> handles_;
};

/// The process's handles; never destroyed.
inline CublasHandles& cublas_handles() {
  static CublasHandles* const handles = new CublasHandles;
  return *handles;
}

}  // namespace accel::blas::detail

#endif  // ACCEL_HAS_CUDA
