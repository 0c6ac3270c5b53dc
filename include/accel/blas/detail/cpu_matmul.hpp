// accel/blas/detail/cpu_matmul.hpp — bfloat16 GEMM on CpuBackend: oneDNN's matmul primitive (bf16
// operands, float accumulation, bf16 C), which uses AMX or AVX512-BF16 where the CPU has them.
//
// oneDNN has no bf16 sgemm-style call, so each distinct problem (transposes, sizes, leading dimensions,
// strides, alpha, beta) becomes a matmul primitive, created at the first call (oneDNN compiles its
// kernel then: milliseconds) and cached for the life of the process; later calls with the same problem
// only bind the pointers and run it. A GPT step has a handful of distinct problems. Creating the
// primitive happens at the call, so a CPU without bf16 support is a NotSupportedError there, before
// anything is enqueued. alpha is oneDNN's output scale, beta a sum post-op (beta == 0: C is not read).
// A batch oneDNN cannot describe as one 3-D problem (a batch stride smaller than one matrix, A and B
// both broadcast) runs one matrix at a time through the single product's primitive (cpu_gemm.hpp), so
// bfloat16 takes the strides float and half take.
//
// Threads: oneDNN fixes a primitive's thread count when it creates it (from omp_get_max_threads() of
// the creating thread), and its parallel regions then ask for that many threads whatever the running
// thread's setting. So the primitive is created with the count the GEMM will run with
// (blas::set_num_threads, else OpenMP's default) and that count is part of the cache key: a
// primitive made for 2 threads and run where 1 was asked for spun 75 % of a 1-thread GPT step in
// libgomp's barriers on a loaded 2-core machine.
#pragma once

#include <accel/blas/detail/arguments.hpp>
#include <accel/blas/detail/cpu_bfloat_choice.hpp>
#include <accel/blas/detail/openmp.hpp>
#include <accel/core/bfloat16.hpp>
#include <accel/core/error.hpp>

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <bit>
#include <iterator>
#include <cstddef>
#include <cstdint>
#include <new>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace accel::blas::detail {

/// One cached problem: the primitive and the memory descriptors its arguments are bound with, and its
/// scratchpad's (the caller's: see run_bfloat_matmul).
struct BfloatMatmul {
  dnnl_primitive_t primitive = nullptr;
  dnnl_memory_desc_t a{}, b{}, c{}, scratchpad{};
  std::size_t scratchpad_bytes = 0;
};

class BfloatMatmuls {
 public:
  /// How many problems have a primitive (tests: which kernel a product went to).
  [[nodiscard]] std::size_t size() {
    std::lock_guard<std::mutex> lock(mutex_);
    return cache_.size();
  }

  /// The primitive for `g` (k > 0), created on first use. NotSupportedError when oneDNN has no bf16
  /// matmul for this CPU; Error for any other failure.
  const BfloatMatmul& get(const Call& call, const GemmArgs<bfloat16>& g) {
    const OpenMpApi& omp = openmp();
    const int requested = requested_threads().load(std::memory_order_relaxed);
    const int threads = !omp.loaded() ? 1 : requested > 0 ? requested : omp.get_max_threads();
    const Key key = make_key(g, threads);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      // Created with `threads` as this thread's OpenMP count (oneDNN reads it now), then restored.
      const int before = omp.loaded() ? omp.get_max_threads() : 1;
      if (omp.loaded() && before != threads) omp.set_num_threads(threads);
      try {
        it = cache_.emplace(key, create(call, g)).first;
      } catch (...) {
        if (omp.loaded() && before != threads) omp.set_num_threads(before);
        throw;
      }
      if (omp.loaded() && before != threads) omp.set_num_threads(before);
    }
    return *it->second;
  }

  /// The CPU engine every primitive runs on.
  [[nodiscard]] dnnl_engine_t engine() const noexcept { return engine_; }

 private:
  struct Key {  // every field of the problem and the thread count, as 64-bit words (no padding)
    std::int64_t v[13];
    friend bool operator==(const Key&, const Key&) = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const noexcept {
      std::uint64_t h = 0xcbf29ce484222325ull;
      for (const std::int64_t w : k.v) h = (h ^ static_cast<std::uint64_t>(w)) * 0x100000001b3ull;
      return static_cast<std::size_t>(h);
    }
  };

  static Key make_key(const GemmArgs<bfloat16>& g, int threads) {
    const auto scalars = (std::int64_t{std::bit_cast<std::int32_t>(g.alpha)} << 32) |
                         std::int64_t{std::bit_cast<std::uint32_t>(g.beta)};
    const std::int64_t transposes = (g.ta == Trans::yes ? 2 : 0) + (g.tb == Trans::yes ? 1 : 0);
    return Key{{g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.stride_a, g.stride_b, g.stride_c, g.batch, scalars, transposes,
                threads}};
  }

  static void check(const Call& call, dnnl_status_t status, const char* what) {
    if (status == dnnl_success) return;
    if (status == dnnl_unimplemented) {
      throw NotSupportedError(call.str() + ": bfloat16 GEMM is not available on this CPU (oneDNN has no bf16 matmul "
                              "for it: " + std::string(what) + " returned dnnl_unimplemented)");
    }
    throw Error(Errc::runtime_failure, call.str() + ": " + what + " failed with dnnl_status_t " + std::to_string(status),
                static_cast<std::int64_t>(status));
  }

  /// Row-major op(X) (rows x cols per matrix) as a oneDNN descriptor: 3-D (a batch stride of 0 is a batch
  /// of 1 that oneDNN broadcasts), or 2-D for a single product when `two_d`.
  static dnnl_memory_desc_t describe(const Call& call, bool two_d, std::int64_t batch, std::int64_t stride,
                                     std::int64_t rows, std::int64_t cols, std::int64_t ld, Trans t) {
    dnnl_memory_desc_t md;
    if (two_d) {
      const dnnl_dims_t dims = {rows, cols};
      const dnnl_dims_t strides = {t == Trans::no ? ld : 1, t == Trans::no ? 1 : ld};
      check(call, dnnl_memory_desc_init_by_strides(&md, 2, dims, dnnl_bf16, strides), "dnnl_memory_desc_init_by_strides");
      return md;
    }
    const bool shared = stride == 0 && batch > 1;
    const dnnl_dims_t dims = {shared ? 1 : batch, rows, cols};
    const dnnl_dims_t strides = {shared ? rows * cols : (stride == 0 ? rows * ld : stride), t == Trans::no ? ld : 1,
                                 t == Trans::no ? 1 : ld};
    check(call, dnnl_memory_desc_init_by_strides(&md, 3, dims, dnnl_bf16, strides), "dnnl_memory_desc_init_by_strides");
    return md;
  }

  /// Whether a single product is described in 2-D. oneDNN 2.6 gives a batch of 1 with a transposed B
  /// (x W^T, every forward GEMM of a GPT) its AVX512-BF16 GEMM and the same product in 2-D its AMX
  /// kernel: 1.3-2.0x faster on a Xeon with AMX. With a transposed A (the weight gradients dY^T X) the
  /// AVX512-BF16 GEMM was the faster one (the AMX kernel at 0.67-0.95x), so those stay 3-D, as does
  /// everything on CPUs without AMX, where this was not measured (benchmarks/RESULTS.md).
  static bool describe_in_2d(const GemmArgs<bfloat16>& g) {
    return onednn_has_amx() && g.batch == 1 && g.ta == Trans::no;
  }

  std::unique_ptr<BfloatMatmul> create(const Call& call, const GemmArgs<bfloat16>& g) {
    if (engine_ == nullptr) check(call, dnnl_engine_create(&engine_, dnnl_cpu, 0), "dnnl_engine_create");
    auto out = std::make_unique<BfloatMatmul>();
    const bool two_d = describe_in_2d(g);
    out->a = describe(call, two_d, g.batch, g.stride_a, g.m, g.k, g.lda, g.ta);
    out->b = describe(call, two_d, g.batch, g.stride_b, g.k, g.n, g.ldb, g.tb);
    out->c = describe(call, two_d, g.batch, g.stride_c, g.m, g.n, g.ldc, Trans::no);
    dnnl_matmul_desc_t desc;
    check(call, dnnl_matmul_desc_init(&desc, &out->a, &out->b, nullptr, &out->c), "dnnl_matmul_desc_init");
    dnnl_primitive_attr_t attr = nullptr;
    dnnl_post_ops_t post_ops = nullptr;
    dnnl_primitive_desc_t pd = nullptr;
    const auto release = [&] {
      if (pd != nullptr) dnnl_primitive_desc_destroy(pd);
      if (post_ops != nullptr) dnnl_post_ops_destroy(post_ops);
      if (attr != nullptr) dnnl_primitive_attr_destroy(attr);
    };
    try {
      check(call, dnnl_primitive_attr_create(&attr), "dnnl_primitive_attr_create");
      // The caller's scratchpad, not the library's: Debian's oneDNN (built without
      // DNNL_ENABLE_CONCURRENT_EXEC) gives every primitive one global scratchpad, so two streams running
      // a bf16 product at once wrote into each other's (570-594 of 600 products wrong:
      // benchmarks/blas/explore/onednn_scratchpad.cpp).
      check(call, dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), "scratchpad mode");
      if (g.alpha != 1.0f) check(call, dnnl_primitive_attr_set_output_scales(attr, 1, 0, &g.alpha), "output scales");
      if (g.beta != 0.0f) {
        check(call, dnnl_post_ops_create(&post_ops), "dnnl_post_ops_create");
        check(call, dnnl_post_ops_append_sum(post_ops, g.beta), "dnnl_post_ops_append_sum");
        check(call, dnnl_primitive_attr_set_post_ops(attr, post_ops), "dnnl_primitive_attr_set_post_ops");
      }
      check(call, dnnl_primitive_desc_create(&pd, &desc, attr, engine_, nullptr), "dnnl_primitive_desc_create");
      if (const dnnl_memory_desc_t* md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0)) {
        out->scratchpad = *md;
        out->scratchpad_bytes = dnnl_memory_desc_get_size(md);
      }
      check(call, dnnl_primitive_create(&out->primitive, pd), "dnnl_primitive_create");
    } catch (...) {
      release();
      throw;
    }
    release();
    return out;
  }

  std::mutex mutex_;
  dnnl_engine_t engine_ = nullptr;
  std::unordered_map<Key, std::unique_ptr<BfloatMatmul>, KeyHash> cache_;
};

/// Whether oneDNN takes op(X) of every matrix of a batch as one 3-D descriptor {batch, rows, cols}: its
/// strides, sorted, must not let one dimension's elements overlap the next one's (stride >= the smaller
/// stride x its dimension), or oneDNN refuses the descriptor. A batch stride smaller than one matrix
/// (stride 1, overlapping read-only matrices) fails that; a stride of 0 is described as a broadcast.
inline bool batch_layout_fits(std::int64_t stride, std::int64_t batch, std::int64_t rows, std::int64_t cols,
                              std::int64_t ld, Trans t) noexcept {
  if (stride == 0) return true;
  struct Dim {
    std::int64_t size, stride;
  };
  Dim d[3] = {{batch, stride}, {rows, t == Trans::no ? ld : 1}, {cols, t == Trans::no ? 1 : ld}};
  std::sort(std::begin(d), std::end(d), [](const Dim& x, const Dim& y) { return x.stride < y.stride; });
  for (int i = 0; i < 2; ++i) {
    std::int64_t covered = 0;
    if (__builtin_mul_overflow(d[i].stride, d[i].size, &covered) || d[i + 1].stride < covered) return false;
  }
  return true;
}

/// Whether a batch (batch > 1) runs as one oneDNN matmul; otherwise it runs one matrix at a time
/// through the primitive of a single product (single_product), so that bfloat16 takes every batch
/// float and half take. oneDNN also refuses A and B both broadcast (stride 0).
inline bool batch_in_one_matmul(const GemmArgs<bfloat16>& g) noexcept {
  return g.batch > 1 && !(g.stride_a == 0 && g.stride_b == 0) &&
         batch_layout_fits(g.stride_a, g.batch, g.m, g.k, g.lda, g.ta) &&
         batch_layout_fits(g.stride_b, g.batch, g.k, g.n, g.ldb, g.tb) &&
         batch_layout_fits(g.stride_c, g.batch, g.m, g.n, g.ldc, Trans::no);
}

/// Matrix 0 of g's batch as a single product (batch 1, strides unused): the problem whose primitive
/// runs each matrix of a batch oneDNN cannot take whole, and the same cached primitive as gemm()'s.
inline GemmArgs<bfloat16> single_product(const GemmArgs<bfloat16>& g) noexcept {
  GemmArgs<bfloat16> one = g;
  one.batch = 1;
  one.stride_a = one.stride_b = one.stride_c = 0;
  return one;
}

/// The process's cache; never destroyed (primitives may run until the process ends).
inline BfloatMatmuls& bfloat_matmuls() {
  static BfloatMatmuls* const cache = new BfloatMatmuls;
  return *cache;
}

/// C_i = beta * C_i in bfloat16 (k == 0); beta == 0 writes zeros.
inline void scale_c(const GemmArgs<bfloat16>& g, std::int64_t i) noexcept {
  bfloat16* c = g.c + i * g.stride_c;
  for (std::int64_t r = 0; r < g.m; ++r) {
    bfloat16* row = c + r * g.ldc;
    for (std::int64_t j = 0; j < g.n; ++j) {
      row[j] = g.beta == 0.0f ? bfloat16(0.0f) : bfloat16(g.beta * static_cast<float>(row[j]));
    }
  }
}

/// This thread's scratchpad for oneDNN's primitives, at least `bytes` (64-byte aligned, grown as
/// needed, kept for the thread's life). A primitive runs to completion on the thread that calls it
/// (dnnl_stream_wait), so one buffer a thread is never used by two products at once.
inline void* matmul_scratchpad(std::size_t bytes) {
  struct Aligned {
    void operator()(std::byte* p) const noexcept { ::operator delete[](p, std::align_val_t{64}); }
  };
  thread_local std::unique_ptr<std::byte[], Aligned> buffer;
  thread_local std::size_t capacity = 0;
  if (bytes > capacity) {
    buffer.reset();
    capacity = 0;
    buffer.reset(static_cast<std::byte*>(::operator new[](bytes, std::align_val_t{64})));
    capacity = bytes;
  }
  return buffer.get();
}

/// Runs in the task: binds the pointers (and this thread's scratchpad) to the cached primitive and
/// executes it on this thread.
inline void run_bfloat_matmul(dnnl_engine_t engine, const BfloatMatmul& mm, const GemmArgs<bfloat16>& g) {
  dnnl_memory_t a = nullptr, b = nullptr, c = nullptr, scratch = nullptr;
  dnnl_stream_t stream = nullptr;
  dnnl_status_t status = dnnl_memory_create(&a, &mm.a, engine, const_cast<bfloat16*>(g.a));
  if (status == dnnl_success) status = dnnl_memory_create(&b, &mm.b, engine, const_cast<bfloat16*>(g.b));
  if (status == dnnl_success) status = dnnl_memory_create(&c, &mm.c, engine, g.c);
  if (status == dnnl_success && mm.scratchpad_bytes > 0) {
    status = dnnl_memory_create(&scratch, &mm.scratchpad, engine, matmul_scratchpad(mm.scratchpad_bytes));
  }
  if (status == dnnl_success) status = dnnl_stream_create(&stream, engine, dnnl_stream_default_flags);
  if (status == dnnl_success) {
    const dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}, {DNNL_ARG_SCRATCHPAD, scratch}};
    status = dnnl_primitive_execute(mm.primitive, stream, scratch != nullptr ? 4 : 3, args);
    if (status == dnnl_success) status = dnnl_stream_wait(stream);
  }
  for (dnnl_memory_t m : {a, b, c, scratch}) {
    if (m != nullptr) dnnl_memory_destroy(m);
  }
  if (stream != nullptr) dnnl_stream_destroy(stream);
  if (status != dnnl_success) {
    throw Error(Errc::runtime_failure, "accel::blas: oneDNN's bf16 matmul failed with dnnl_status_t " +
                                           std::to_string(status), static_cast<std::int64_t>(status));
  }
}

}  // namespace accel::blas::detail
