// accel_capi.cpp — libaccel_capi.so: accel's ops behind a C ABI, so that the Python harnesses
// (compare_cpu_adam.py, compare_jit.py, torch_adam_gpu.py) call accel in the same process as torch
// and DeepSpeed, on the same tensors' memory (benchmarks/README.md, rule 5). Each entry point goes
// through accel's public C++ API, exactly as a C++ user's code does (the op builder, the JIT cache,
// FusedAdamOp), not around it. Every function returns 0 on success; on failure a negative value,
// and accel_capi_last_error() says why.
#include <accel/cpu/backend.hpp>
#include <accel/op_builders.hpp>
#if defined(ACCEL_HAS_CUDA)
#include <accel/cuda/backend.hpp>
#endif

#include "adam_ceiling.h"

#include <chrono>
#include <cstdint>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#define ACCEL_CAPI extern "C" __attribute__((visibility("default")))

namespace {

thread_local std::string last_error;

template <class F>
int guarded(F&& f) {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    last_error = e.what();
  } catch (...) {
    last_error = "unknown exception";
  }
  return -1;
}

accel::ops::AdamOptions adamw(float lr, float beta1, float beta2, float eps, float weight_decay) {
  accel::ops::AdamOptions o;
  o.lr = lr;
  o.beta1 = beta1;
  o.beta2 = beta2;
  o.eps = eps;
  o.weight_decay = weight_decay;
  o.adamw = true;
  return o;
}

// The CPU op, loaded once (JIT cache), one copy per thread count (set_num_threads copies the op).
const accel::cpu::FusedAdamOp& cpu_adam(int threads) {
  static std::mutex mu;
  static std::map<int, accel::cpu::FusedAdamOp> ops;
  const std::lock_guard<std::mutex> lock(mu);
  auto it = ops.find(threads);
  if (it == ops.end()) {
    auto op = accel::CpuBackend::get_op_builder<accel::ops::FusedAdam>().load();
    op.set_num_threads(threads);
    it = ops.emplace(threads, std::move(op)).first;
  }
  return it->second;
}

}  // namespace

ACCEL_CAPI const char* accel_capi_last_error() { return last_error.c_str(); }

/// 1 when the CUDA part was compiled in (not whether a GPU is present).
ACCEL_CAPI int accel_capi_has_cuda() {
#if defined(ACCEL_HAS_CUDA)
  return 1;
#else
  return 0;
#endif
}

/// One AdamW step (fp32, torch's hyper-parameters) over one tensor with accel's CPU fused Adam:
/// FusedAdamOp::step_sync on `threads` OpenMP threads (0: all). `step` counts from 1.
ACCEL_CAPI int accel_capi_cpu_adamw_step(float* p, const float* g, float* m, float* v, long long n, long long step,
                                         float lr, float beta1, float beta2, float eps, float weight_decay,
                                         int threads) {
  return guarded([&] {
    const accel::ops::AdamTensor t{p, g, m, v, nullptr, nullptr, static_cast<std::int64_t>(n)};
    cpu_adam(threads).step_sync(std::span(&t, 1), adamw(lr, beta1, beta2, eps, weight_decay), step);
  });
}

/// The JIT-compiled kernel's file (the op builder's cache entry), for the record.
ACCEL_CAPI const char* accel_capi_cpu_fused_adam_path() {
  static std::string path;
  guarded([&] { path = cpu_adam(0).op().path().string(); });
  return path.c_str();
}

/// The ceiling of Adam's access pattern (adam_ceiling.h), on `threads` threads.
ACCEL_CAPI int accel_capi_adam_ceiling(float* p, const float* g, float* m, float* v, long long n, int threads) {
  accel_bench_adam_ceiling(p, g, m, v, n, threads, 1e-9f);
  return 0;
}

/// A cold JIT build of the CPU fused Adam op into an empty cache directory, as a user's first
/// get_op_builder(...).load() does: *seconds gets the time of load(), *source 0 when it compiled.
ACCEL_CAPI int accel_capi_cpu_fused_adam_cold_load(const char* cache_dir, double* seconds, int* source) {
  return guarded([&] {
    auto b = accel::CpuBackend::create_op_builder("fused_adam");
    b.set_cache_dir(cache_dir);
    const auto t0 = std::chrono::steady_clock::now();
    const auto op = b.load();
    *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    *source = op.source() == accel::ops::LoadSource::compiled ? 0 : 1;
  });
}

/// One AdamW step with accel's CUDA fused Adam over `count` tensors on `stream` (a cudaStream_t,
/// torch.cuda.current_stream().cuda_stream) of device `device`; dtype 0: fp32 params, grads and states,
/// 2: all bf16. Enqueues only (no synchronization), as torch's fused step does.
ACCEL_CAPI int accel_capi_cuda_adamw_step(void* const* params, void* const* grads, void* const* exp_avgs,
                                          void* const* exp_avg_sqs, const long long* numels, int count, int dtype,
                                          long long step, float lr, float beta1, float beta2, float eps,
                                          float weight_decay, void* stream, int device) {
#if defined(ACCEL_HAS_CUDA)
  return guarded([&] {
    static const accel::cuda::FusedAdamOp op = accel::CudaBackend::get_op_builder<accel::ops::FusedAdam>().load();
    std::vector<accel::ops::AdamTensor> t(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) {
      t[static_cast<std::size_t>(i)] = {params[i], grads[i], exp_avgs[i], exp_avg_sqs[i], nullptr, nullptr,
                                        static_cast<std::int64_t>(numels[i])};
    }
    accel::ops::AdamDtypes d;
    if (dtype == 2) d = {accel::Dtype::bfloat16, accel::Dtype::bfloat16, std::nullopt};
    op.step(accel::cuda::StreamRef(static_cast<cudaStream_t>(stream), device), t,
            adamw(lr, beta1, beta2, eps, weight_decay), step, d);
  });
#else
  (void)params, (void)grads, (void)exp_avgs, (void)exp_avg_sqs, (void)numels, (void)count, (void)dtype, (void)step;
  (void)lr, (void)beta1, (void)beta2, (void)eps, (void)weight_decay, (void)stream, (void)device;
  last_error = "libaccel_capi was built without CUDA";
  return -2;
#endif
}
