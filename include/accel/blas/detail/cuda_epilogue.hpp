// accel/blas/detail/cuda_epilogue.hpp — GEMMs with a GELU epilogue on CudaBackend: cuBLASLt's
// CUBLASLT_EPILOGUE_GELU / GELU_AUX / DGELU, applied to the float accumulator inside the GEMM's kernel
// (no second pass over C, as llm.c and torch's addmm + GELU do).
//
// Row-major through the operand swap, as cuda_gemm.hpp: cuBLASLt is asked for the column-major
// C^T = op(B)^T op(A)^T, whose n x m layout is C's memory; aux, of C's shape, is the same memory either
// way. A plan — the descriptors and the algorithm cuBLASLt's heuristic picked — is made once per distinct
// problem (types, transposes, sizes, strides, the alignment of every pointer: the heuristic reads the aux
// pointer's from the one set when it runs, the others' from the preferences) and kept; a call then sets the
// aux pointer on the plan's descriptor and enqueues one cublasLtMatmul on the stream, with the workspace
// of the stream's cuBLAS handle (cublas_handles.hpp: stream-ordered with the stream's other GEMMs, and
// allocated before any capture, so a captured call allocates nothing). One cuBLASLt handle per device.
// Compiled only where accel has CUDA.
#pragma once

#if defined(ACCEL_HAS_CUDA)

#include <accel/blas/detail/arguments.hpp>
#include <accel/blas/detail/cublas_handles.hpp>
#include <accel/blas/detail/cublaslt_api.hpp>
#include <accel/cuda/backend.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace accel::blas::detail {

[[noreturn, gnu::cold, gnu::noinline]] inline void throw_cublaslt(const std::string& what, cublasStatus_t status) {
  const Errc code = status == CUBLAS_STATUS_ALLOC_FAILED ? Errc::out_of_memory : Errc::runtime_failure;
  throw Error(code, what + " failed: " + cublaslt().describe(status), static_cast<std::int64_t>(status));
}

inline void lt_check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) [[unlikely]] throw_cublaslt(what, status);
}

/// The largest power of two up to 256 dividing the address (what cuBLASLt's heuristic may assume).
[[nodiscard]] inline std::uint32_t pointer_alignment(const void* p) noexcept {
  const auto v = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t a = 256;
  while (a > 1 && v % a != 0) a /= 2;
  return a;
}

struct LtPlanKey {
  int device;
  int type;  ///< cudaDataType
  int epilogue;
  int ta, tb;
  bool has_aux;
  std::int64_t m, n, k, lda, ldb, ldc, ldaux;
  std::uint32_t align_a, align_b, align_c, align_aux;  ///< the heuristic's algorithm relies on these
  friend bool operator==(const LtPlanKey&, const LtPlanKey&) = default;
};

struct LtPlanKeyHash {
  std::size_t operator()(const LtPlanKey& k) const noexcept {
    std::size_t h = 0;
    const auto mix = [&h](std::uint64_t v) { h = (h ^ static_cast<std::size_t>(v)) * 0x100000001B3ull + 0x9E3779B9u; };
    for (std::int64_t v : {std::int64_t(k.device), std::int64_t(k.type), std::int64_t(k.epilogue), std::int64_t(k.ta),
                           std::int64_t(k.tb), std::int64_t(k.has_aux), k.m, k.n, k.k, k.lda, k.ldb, k.ldc, k.ldaux,
                           std::int64_t(k.align_a), std::int64_t(k.align_b), std::int64_t(k.align_c),
                           std::int64_t(k.align_aux)}) {
      mix(static_cast<std::uint64_t>(v));
    }
    return h;
  }
};

/// One problem's descriptors and algorithm. `mutex` is held while a call sets the aux pointer and
/// enqueues (the descriptor is shared by every call of the problem).
struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout_a = nullptr, layout_b = nullptr, layout_c = nullptr;  // cuBLASLt's A, B, C = D
  cublasLtMatmulAlgo_t algo{};
  mutable std::mutex mutex;

  LtPlan() = default;
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  ~LtPlan() {
    const CublasLtApi& api = cublaslt();
    if (!api.loaded()) return;
    for (cublasLtMatrixLayout_t l : {layout_a, layout_b, layout_c}) {
      if (l != nullptr) (void)api.layout_destroy(l);
    }
    if (desc != nullptr) (void)api.desc_destroy(desc);
  }
};

[[nodiscard]] constexpr cublasLtEpilogue_t lt_epilogue(Epilogue e, bool has_aux) noexcept {
  if (e == Epilogue::dgelu) return CUBLASLT_EPILOGUE_DGELU;
  return has_aux ? CUBLASLT_EPILOGUE_GELU_AUX : CUBLASLT_EPILOGUE_GELU;
}

class LtPlans {
 public:
  /// The cuBLASLt handle of the current device (created on first use, kept).
  cublasLtHandle_t handle(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = handles_.find(device);
    if (it != handles_.end()) return it->second;
    const CublasLtApi& api = cublaslt();
    if (!api.loaded()) throw BackendUnavailableError(api.error);
    const RelaxedCaptureMode relaxed;
    cublasLtHandle_t h = nullptr;
    lt_check(api.create(&h), "cublasLtCreate");
    handles_.emplace(device, h);
    return h;
  }

  /// The plan for `key` (made on first use with `g`'s pointers for the heuristic's alignment).
  template <class T>
  const LtPlan& get(const Call& call, const LtPlanKey& key, const GemmArgs<T>& g, cublasLtHandle_t h,
                    std::size_t workspace_bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = plans_.find(key);
    if (it == plans_.end()) it = plans_.emplace(key, make(call, key, g, h, workspace_bytes)).first;
    return *it->second;
  }

  /// Plans made so far (tests).
  [[nodiscard]] std::size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return plans_.size();
  }

 private:
  template <class T>
  static std::unique_ptr<LtPlan> make(const Call& call, const LtPlanKey& key, const GemmArgs<T>& g, cublasLtHandle_t h,
                                      std::size_t workspace_bytes) {
    const CublasLtApi& api = cublaslt();
    const auto type = static_cast<cudaDataType>(key.type);
    auto plan = std::make_unique<LtPlan>();
    lt_check(api.desc_create(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    const auto set = [&](cublasLtMatmulDescAttributes_t attr, const auto& value) {
      lt_check(api.desc_set(plan->desc, attr, &value, sizeof(value)), "cublasLtMatmulDescSetAttribute");
    };
    const std::int32_t op_a = g.tb == Trans::yes ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's A is our B
    const std::int32_t op_b = g.ta == Trans::yes ? CUBLAS_OP_T : CUBLAS_OP_N;
    set(CUBLASLT_MATMUL_DESC_TRANSA, op_a);
    set(CUBLASLT_MATMUL_DESC_TRANSB, op_b);
    set(CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<std::uint32_t>(lt_epilogue(g.epilogue, g.aux != nullptr)));
    if (g.aux != nullptr) {
      const void* aux = g.aux;
      set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
      set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, std::int64_t{g.ldaux});
    }
    // Column-major shapes: our B (k x n, or n x k stored) is cuBLASLt's A of op_a; our A is its B.
    const auto layout = [&](cublasLtMatrixLayout_t* out, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
      lt_check(api.layout_create(out, type, static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(cols), ld),
               "cublasLtMatrixLayoutCreate");
    };
    if (g.tb == Trans::no) layout(&plan->layout_a, g.n, g.k, g.ldb);
    else layout(&plan->layout_a, g.k, g.n, g.ldb);
    if (g.ta == Trans::no) layout(&plan->layout_b, g.k, g.m, g.lda);
    else layout(&plan->layout_b, g.m, g.k, g.lda);
    layout(&plan->layout_c, g.n, g.m, g.ldc);

    cublasLtMatmulPreference_t pref = nullptr;
    lt_check(api.preference_create(&pref), "cublasLtMatmulPreferenceCreate");
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
    const auto pref_set = [&](cublasLtMatmulPreferenceAttributes_t attr, const auto& value) {
      if (status == CUBLAS_STATUS_SUCCESS) status = api.preference_set(pref, attr, &value, sizeof(value));
    };
    pref_set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, std::uint64_t{workspace_bytes});
    pref_set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_b);  // cuBLASLt's A is our B
    pref_set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_a);
    pref_set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c);
    pref_set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_c);
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = api.heuristic(h, plan->desc, plan->layout_a, plan->layout_b, plan->layout_c, plan->layout_c, pref, 1,
                             &result, &found);
    }
    (void)api.preference_destroy(pref);
    lt_check(status, "cublasLtMatmulAlgoGetHeuristic");
    if (found == 0) {
      throw NotSupportedError(call.str() + ": cuBLASLt has no kernel for this GEMM with its epilogue (m=" +
                              std::to_string(g.m) + " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k) + ", " +
                              type_name<T>() + ")");
    }
    plan->algo = result.algo;
    return plan;
  }

  mutable std::mutex mutex_;
  std::unordered_map<int, cublasLtHandle_t> handles_;
  std::unordered_map<LtPlanKey, std::unique_ptr<LtPlan>, LtPlanKeyHash> plans_;
};

/// The process's plans and handles; never destroyed (cuBLASLt may unload before static destructors).
inline LtPlans& lt_plans() {
  static LtPlans* const plans = new LtPlans;
  return *plans;
}

/// Enqueues g (an epilogue other than none, batch 1, checked) on `stream`. The caller has made the
/// stream's device current and passes the stream's cuBLAS handle (its workspace).
template <class T>
void run_lt_epilogue(const Call& call, cuda::StreamRef stream, const GemmArgs<T>& g, const CublasHandle& h,
                     cudaDataType type) {
  LtPlans& plans = lt_plans();
  const cublasLtHandle_t lt = plans.handle(stream.device_index());
  const LtPlanKey key{stream.device_index(), static_cast<int>(type), static_cast<int>(g.epilogue),
                      static_cast<int>(g.ta), static_cast<int>(g.tb), g.aux != nullptr, g.m, g.n, g.k, g.lda, g.ldb,
                      g.ldc, g.ldaux, pointer_alignment(g.a), pointer_alignment(g.b), pointer_alignment(g.c),
                      g.aux == nullptr ? 0u : pointer_alignment(g.aux)};
  const LtPlan& plan = plans.get(call, key, g, lt, h.workspace_bytes);
  const CublasLtApi& api = cublaslt();
  const std::lock_guard<std::mutex> handle_lock(h.mutex);  // the workspace is the handle's
  const std::lock_guard<std::mutex> plan_lock(plan.mutex);
  if (g.aux != nullptr) {
    const void* aux = g.aux;
    lt_check(api.desc_set(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)),
             "cublasLtMatmulDescSetAttribute");
  }
  const cublasStatus_t status = api.matmul(lt, plan.desc, &g.alpha, g.b, plan.layout_a, g.a, plan.layout_b, &g.beta,
                                           g.c, plan.layout_c, g.c, plan.layout_c, &plan.algo, h.workspace,
                                           h.workspace_bytes, stream.get());
  if (status != CUBLAS_STATUS_SUCCESS) [[unlikely]] throw_cublaslt(call.str() + ": cublasLtMatmul", status);
}

}  // namespace accel::blas::detail

#endif  // ACCEL_HAS_CUDA
