// bench_blas — GEMM through accel::blas against the raw BLAS call, at the GPT engine's shapes, interleaved
// in one process: each round times every variant of a case once, one after the other, so that the
// machine's drifts (a VM switching speeds, a neighbour's load) reach all of them alike; the figure is the
// median ratio over the rounds, with its min-max.
//
// CPU (1 and 2 threads; GFLOP/s and the share of the FMA peak measured at start):
//   raw        dnnl_sgemm on the calling thread (a loop over the batch for the batched shapes: oneDNN
//              has no strided-batched sgemm)
//   accel      accel::blas on the device's default stream: runs inline on the calling thread, like raw
//   accel/ws   accel::blas on a worker stream, 8 calls enqueued, then one synchronize (the engine's way)
//   accel/ws1  accel::blas on a worker stream, synchronized after every call: the hand-off cost
//   bf16       accel::blas with bfloat16 operands on the default stream (oneDNN's matmul), GFLOP/s
//   bf16 wide  the same bfloat16 product with the operands widened to float and sgemm (C rounded once):
//              ACCEL_CPU_BLAS_BF16=widened, what a CPU without a faster bf16 product is better off with
// "cpu GF/s" and "(CPU time)" use process CPU time instead of wall time: on a VM shared with other work
// they are not lowered by time the threads were not running (at 2 threads they still charge the time a
// thread spins at a barrier while the other one is descheduled).
// CUDA (where there is a GPU): accel::blas vs cublasGemmEx / cublasGemmStridedBatchedEx on a handle of
// its own, same stream, timed with events, bf16 and float.
// GELU epilogues (both): accel::blas::gemm_gelu (with aux) and gemm_dgelu at the MLP's shapes against
// accel::blas::gemm of the same product, interleaved: what the fused GELU costs over the bare GEMM
// (the separate GELU kernels it replaces cost a full read and write of the product each).
//
//   bench_blas [--rounds N] [--smoke] [--gpu (the CUDA part only)] [--filter SUBSTRING]
#include <accel/accel.hpp>
#include <accel/blas.hpp>

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <time.h>

#include "fma_peak.hpp"

namespace {

using accel::blas::Trans;
using clock_type = std::chrono::steady_clock;

struct Shape {
  const char* name;
  Trans ta, tb;
  std::int64_t m, n, k, batch;
};

// The engine's products (row-major, x W^T forward; dX = dY W, dW = dY^T X backward), per size.
const Shape shapes[] = {
    {"tiny qkv      768x384x128", Trans::no, Trans::yes, 768, 384, 128, 1},
    {"tiny fc       768x512x128", Trans::no, Trans::yes, 768, 512, 128, 1},
    {"tiny fcproj   768x128x512", Trans::no, Trans::yes, 768, 128, 512, 1},
    {"tiny fc dX    768x128x512", Trans::no, Trans::no, 768, 128, 512, 1},
    {"tiny fc dW    512x128x768", Trans::yes, Trans::no, 512, 128, 768, 1},
    {"tiny att QK^T 48x 64x64x32", Trans::no, Trans::yes, 64, 64, 32, 48},
    {"tiny att PV   48x 64x32x64", Trans::no, Trans::no, 64, 32, 64, 48},
    {"shk qkv     16384x1152x384", Trans::no, Trans::yes, 16384, 1152, 384, 1},
    {"shk fcproj  16384x384x1536", Trans::no, Trans::yes, 16384, 384, 1536, 1},
    {"shk fc dW   1536x384x16384", Trans::yes, Trans::no, 1536, 384, 16384, 1},
    {"shk att QK^T 384x256x256x64", Trans::no, Trans::yes, 256, 256, 64, 384},
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

struct Options {
  int rounds = 7;
  bool smoke = false;
  std::string filter;
  bool gpu_only = false;
};

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

/// Wall-clock seconds per call of `fn` (which makes `calls` calls); the process CPU seconds it used per
/// call go to *cpu (on a loaded VM they are not raised by time the threads were not running).
double time_calls(const std::function<void()>& fn, int calls, double* cpu = nullptr) {
  const double c0 = process_cpu_seconds();
  const auto t0 = clock_type::now();
  fn();
  const double wall = std::chrono::duration<double>(clock_type::now() - t0).count() / calls;
  if (cpu != nullptr) *cpu = (process_cpu_seconds() - c0) / calls;
  return wall;
}

/// The raw call of the library accel runs this shape on: oneDNN's sgemm, or OpenBLAS's cblas_sgemm
/// where accel takes it ('T','N' on a CPU without AVX-512, accel/blas/detail/cpu_openblas.hpp).
void raw_sgemm(const Shape& s, const float* a, const float* b, float* c) {
  const std::int64_t lda = s.ta == Trans::no ? s.k : s.m, ldb = s.tb == Trans::no ? s.n : s.k;
  namespace d = accel::blas::detail;
  d::GemmArgs<float> g;
  g.ta = s.ta, g.tb = s.tb, g.m = s.m, g.n = s.n, g.k = s.k, g.lda = lda, g.ldb = ldb, g.ldc = s.n, g.batch = s.batch;
  g.a = a, g.b = b, g.c = c, g.beta = 0.0f;
  if (const d::OpenBlasApi* tn = d::openblas_for(d::Call{"gemm", "cpu", 0}, g); tn != nullptr) {
    d::openblas_sgemm(*tn, g);
    return;
  }
  for (std::int64_t i = 0; i < s.batch; ++i) {
    const dnnl_status_t st = dnnl_sgemm(s.ta == Trans::yes ? 'T' : 'N', s.tb == Trans::yes ? 'T' : 'N', s.m, s.n, s.k,
                                        1.0f, a + i * s.m * s.k, lda, b + i * s.k * s.n, ldb, 0.0f, c + i * s.m * s.n, s.n);
    if (st != dnnl_success) std::abort();
  }
}

template <class B, class T>
void accel_gemm(const B& be, typename B::StreamRef stream, const Shape& s, const T* a, const T* b, T* c) {
  const std::int64_t lda = s.ta == Trans::no ? s.k : s.m, ldb = s.tb == Trans::no ? s.n : s.k;
  if (s.batch == 1) {
    accel::blas::gemm(be, stream, s.ta, s.tb, s.m, s.n, s.k, 1.0f, a, lda, b, ldb, 0.0f, c, s.n);
  } else {
    accel::blas::gemm_strided_batched(be, stream, s.ta, s.tb, s.m, s.n, s.k, 1.0f, a, lda, s.m * s.k, b, ldb,
                                      s.k * s.n, 0.0f, c, s.n, s.m * s.n, s.batch);
  }
}

/// The hand-off a worker stream adds to a call that is waited for: enqueue an empty task, synchronize.
void report_handoff(accel::cpu::StreamRef worker, const Options& opt) {
  std::vector<double> us;
  for (int r = 0; r < (opt.smoke ? 1 : opt.rounds); ++r) {
    const int n = 2000;
    const auto t0 = clock_type::now();
    for (int i = 0; i < n; ++i) {
      worker.enqueue([] {});
      worker.synchronize();
    }
    us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count() / n);
  }
  std::printf("worker-stream hand-off (enqueue an empty task + synchronize): %.1f us median [%.1f-%.1f]\n",
              median(us), *std::min_element(us.begin(), us.end()), *std::max_element(us.begin(), us.end()));
}

/// The MLP's two products with their GELU epilogues against the bare GEMM, interleaved (`run` times one
/// variant: 0 gemm, 1 gemm_gelu with aux, 2 gemm_dgelu; returns seconds per call).
template <class Run>
void report_epilogues(const char* name, const Options& opt, Run&& run) {
  (void)run(0), (void)run(1), (void)run(2);
  std::vector<double> q_gelu, q_dgelu;
  for (int r = 0; r < (opt.smoke ? 1 : opt.rounds); ++r) {
    const double plain = run(0), gelu = run(1), dgelu = run(2);
    q_gelu.push_back(plain / gelu);
    q_dgelu.push_back(plain / dgelu);
  }
  const auto range = [](const std::vector<double>& q) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3fx [%.3f-%.3f]", median(q), *std::min_element(q.begin(), q.end()),
                  *std::max_element(q.begin(), q.end()));
    return std::string(buf);
  };
  std::printf("%-32s gemm/gemm_gelu %-24s gemm/gemm_dgelu %s\n", name, range(q_gelu).c_str(), range(q_dgelu).c_str());
  std::fflush(stdout);
}

void report_cpu_epilogues(const accel::CpuBackend& be, accel::cpu::StreamRef stream, const Options& opt) {
  const std::int64_t n_tok = 768, c = 128;  // tiny: 12 x 64 tokens, width 128, MLP 512
  std::vector<float> x(std::size_t(n_tok * 4 * c)), w(std::size_t(4 * c * c)), y(x.size()), pre(x.size()), dy(std::size_t(n_tok * c));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 13) - 6) * 0.05f;
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = float(int(i % 7) - 3) * 0.05f;
  for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = float(int(i % 5) - 2) * 0.05f;
  const int calls = opt.smoke ? 2 : 40;
  std::printf("GELU epilogues (tiny MLP: fc 768x512x128 forward, 768x512x128 dgelu; %s copy): bare gemm time / fused time, "
              "median [min-max]\n",
              accel::blas::detail::epilogue_lanes() == 16 ? "AVX-512" : accel::blas::detail::epilogue_lanes() == 8 ? "AVX2" : "baseline");
  report_epilogues("tiny fc 768x512x128", opt, [&](int variant) {
    return time_calls(
        [&] {
          for (int i = 0; i < calls; ++i) {
            if (variant == 0) {
              accel::blas::gemm(be, stream, Trans::no, Trans::yes, n_tok, 4 * c, c, 1.0f, x.data(), c, w.data(), c,
                                0.0f, y.data(), 4 * c);
            } else if (variant == 1) {
              accel::blas::gemm_gelu(be, stream, Trans::no, Trans::yes, n_tok, 4 * c, c, 1.0f, x.data(), c, w.data(),
                                     c, 0.0f, y.data(), 4 * c, pre.data(), 4 * c);
            } else {
              accel::blas::gemm_dgelu(be, stream, Trans::no, Trans::no, n_tok, 4 * c, c, 1.0f, dy.data(), c, w.data(),
                                      4 * c, 0.0f, y.data(), 4 * c, static_cast<const float*>(pre.data()), 4 * c);
            }
          }
        },
        calls);
  });
}

void run_cpu(const Options& opt) {
  const accel::CpuBackend be;
  const accel::cpu::StreamRef inline_stream = be.default_stream(0);
  accel::cpu::Stream worker;
  report_handoff(worker, opt);
  const auto& omp = accel::blas::detail::openmp();
  for (int threads : {1, 2}) {
    accel::blas::set_num_threads(threads);
    omp.set_num_threads(threads);  // the raw calls run on this thread
    const double peak = accel_bench::fma_peak_gflops(threads);
    const std::string openblas = accel::blas::detail::openblas_name();
    const bool tn_openblas = accel::blas::detail::openblas_takes_transposed_a();
    std::printf("\nCPU, %d thread%s: FMA peak %.1f GFLOP/s (%s%s)\n", threads, threads == 1 ? "" : "s", peak,
                accel::blas::detail::cpu_blas_name().c_str(),
                tn_openblas ? ("; 'T','N' on " + openblas + ", the raw call there too").c_str() : "");
    std::printf("%-30s %9s %6s %9s | %-24s %-24s | %-24s | %-24s | %9s %9s\n", "shape", "raw GF/s", "%peak", "cpu GF/s",
                "accel/raw (wall)", "accel/raw (CPU time)", "accel/ws (8 queued)", "accel/ws1 (sync each)",
                "bf16 GF/s", "bf16 wide");
    for (const Shape& s : shapes) {
      if (!opt.filter.empty() && std::string(s.name).find(opt.filter) == std::string::npos) continue;
      const double flop = 2.0 * double(s.m) * double(s.n) * double(s.k) * double(s.batch);
      if (opt.smoke && flop > 1e9) continue;
      std::vector<float> a(std::size_t(s.m * s.k * s.batch)), b(std::size_t(s.k * s.n * s.batch)),
          c(std::size_t(s.m * s.n * s.batch));
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = float(i % 13) * 0.01f;
      for (std::size_t i = 0; i < b.size(); ++i) b[i] = float(i % 7) * 0.02f;
      // Enough calls per timing for about 20 ms (at least 8, for the queued variant).
      raw_sgemm(s, a.data(), b.data(), c.data());
      const double one = time_calls([&] { raw_sgemm(s, a.data(), b.data(), c.data()); }, 1);
      const int calls = std::max(8, int(0.02 / std::max(one, 1e-7)) / 8 * 8);
      const int rounds = opt.smoke ? 1 : opt.rounds;
      std::vector<double> raw_t, accel_t, ws_t, ws1_t, raw_c, accel_c, bf16_t, bf16w_t;
      std::vector<accel::bfloat16> a16(a.size()), b16(b.size()), c16(c.size());
      for (std::size_t i = 0; i < a.size(); ++i) a16[i] = accel::bfloat16(a[i]);
      for (std::size_t i = 0; i < b.size(); ++i) b16[i] = accel::bfloat16(b[i]);
      const auto run_bf16 = [&] {
        for (int i = 0; i < calls; ++i) accel_gemm(be, inline_stream, s, a16.data(), b16.data(), c16.data());
      };
      // The same bfloat16 product with its operands widened to float and sgemm (ACCEL_CPU_BLAS_BF16=widened).
      auto& bf16_choice = accel::blas::detail::bfloat_gemm_choice();
      const auto run_bf16_widened = [&] {
        const auto before = bf16_choice.exchange(accel::blas::detail::BfloatGemm::widened);
        run_bf16();
        bf16_choice.store(before);
      };
      const auto run_raw = [&] {
        for (int i = 0; i < calls; ++i) raw_sgemm(s, a.data(), b.data(), c.data());
      };
      const auto run_accel = [&] {
        for (int i = 0; i < calls; ++i) accel_gemm(be, inline_stream, s, a.data(), b.data(), c.data());
      };
      const auto run_ws = [&] {
        for (int i = 0; i < calls; ++i) {
          accel_gemm(be, worker, s, a.data(), b.data(), c.data());
          if (i % 8 == 7) worker.synchronize();
        }
      };
      const auto run_ws1 = [&] {
        for (int i = 0; i < calls; ++i) {
          accel_gemm(be, worker, s, a.data(), b.data(), c.data());
          worker.synchronize();
        }
      };
      run_accel();
      run_ws();
      run_bf16();
      run_bf16_widened();
      for (int r = 0; r < rounds; ++r) {
        double cpu = 0;
        raw_t.push_back(time_calls(run_raw, calls, &cpu));
        raw_c.push_back(cpu);
        accel_t.push_back(time_calls(run_accel, calls, &cpu));
        accel_c.push_back(cpu);
        ws_t.push_back(time_calls(run_ws, calls));
        ws1_t.push_back(time_calls(run_ws1, calls));
        bf16_t.push_back(time_calls(run_bf16, calls));
        bf16w_t.push_back(time_calls(run_bf16_widened, calls));
      }
      const auto ratio = [&](const std::vector<double>& t, const std::vector<double>& base) {
        std::vector<double> q;  // raw time / accel time, per round: > 1 means accel is faster
        for (std::size_t i = 0; i < t.size(); ++i) q.push_back(base[i] / t[i]);
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.3fx [%.3f-%.3f]", median(q), *std::min_element(q.begin(), q.end()),
                      *std::max_element(q.begin(), q.end()));
        return std::string(buf);
      };
      const double raw_gflops = flop / median(raw_t) / 1e9;
      const double cpu_gflops = flop / (median(raw_c) / threads) / 1e9;
      std::printf("%-30s %9.1f %5.0f%% %9.1f | %-24s %-24s | %-24s | %-24s | %9.1f %9.1f\n", s.name, raw_gflops,
                  100.0 * raw_gflops / peak, cpu_gflops, ratio(accel_t, raw_t).c_str(), ratio(accel_c, raw_c).c_str(),
                  ratio(ws_t, raw_t).c_str(), ratio(ws1_t, raw_t).c_str(), flop / median(bf16_t) / 1e9,
                  flop / median(bf16w_t) / 1e9);
      std::fflush(stdout);
    }
    report_cpu_epilogues(be, inline_stream, opt);
  }
}


#if defined(ACCEL_HAS_CUDA)

// The CUDA products: the same as the CPU's plus GPT-2 small (12 x 1024 tokens per step, width 768).
const Shape gpu_shapes[] = {
    {"shk qkv     16384x1152x384", Trans::no, Trans::yes, 16384, 1152, 384, 1},
    {"shk fcproj  16384x384x1536", Trans::no, Trans::yes, 16384, 384, 1536, 1},
    {"shk fc dW   1536x384x16384", Trans::yes, Trans::no, 1536, 384, 16384, 1},
    {"shk att QK^T 384x256x256x64", Trans::no, Trans::yes, 256, 256, 64, 384},
    {"gpt2 qkv    12288x2304x768", Trans::no, Trans::yes, 12288, 2304, 768, 1},
    {"gpt2 fc     12288x3072x768", Trans::no, Trans::yes, 12288, 3072, 768, 1},
    {"gpt2 fc dX  12288x768x3072", Trans::no, Trans::no, 12288, 768, 3072, 1},
    {"gpt2 att QK^T 144x1024x1024x64", Trans::no, Trans::yes, 1024, 1024, 64, 144},
    {"tiny qkv      768x384x128", Trans::no, Trans::yes, 768, 384, 128, 1},
};

template <class T>
void run_cuda_type(const Options& opt, const char* type_name) {
  namespace bd = accel::blas::detail;
  const accel::CudaBackend be;
  accel::cuda::Stream stream;
  const accel::cuda::StreamRef s = stream;
  const bd::CublasApi& api = bd::cublas();
  if (!api.loaded()) {
    std::printf("cuBLAS unavailable: %s\n", api.error.c_str());
    return;
  }
  // The raw side: a handle of its own on the same stream, with a workspace of the same size.
  cublasHandle_t raw = nullptr;
  if (api.create(&raw) != CUBLAS_STATUS_SUCCESS) std::abort();
  (void)api.set_stream(raw, s.get());
  (void)api.set_math_mode(raw, CUBLAS_DEFAULT_MATH);
  const std::size_t ws_bytes = bd::cublas_workspace_bytes(s.device_index());
  void* ws = nullptr;
  ACCEL_CUDA_CHECK(cudaMalloc(&ws, ws_bytes));
  (void)api.set_workspace(raw, ws, ws_bytes);
  cudaEvent_t start = nullptr, stop = nullptr;
  ACCEL_CUDA_CHECK(cudaEventCreate(&start));
  ACCEL_CUDA_CHECK(cudaEventCreate(&stop));
  std::printf("\nCUDA %s (%s), %s: TFLOP/s of the raw call; ratio raw time / accel time\n", type_name,
              be.device_name(s.device_index()).c_str(), api.library.name().c_str());
  for (const Shape& sh : gpu_shapes) {
    if (!opt.filter.empty() && std::string(sh.name).find(opt.filter) == std::string::npos) continue;
    const std::int64_t lda = sh.ta == Trans::no ? sh.k : sh.m, ldb = sh.tb == Trans::no ? sh.n : sh.k;
    accel::Buffer<T, accel::CudaBackend> a(std::size_t(sh.m * sh.k * sh.batch), s), b(std::size_t(sh.k * sh.n * sh.batch), s),
        c(std::size_t(sh.m * sh.n * sh.batch), s);
    ACCEL_CUDA_CHECK(cudaMemsetAsync(a.data(), 0, a.bytes(), s.get()));
    ACCEL_CUDA_CHECK(cudaMemsetAsync(b.data(), 0, b.bytes(), s.get()));
    const float alpha = 1.0f, beta = 0.0f;
    constexpr cudaDataType type = bd::cuda_type<T>();
    const auto raw_call = [&] {
      const cublasStatus_t st =
          sh.batch == 1
              ? api.gemm_ex(raw, bd::cublas_op(sh.tb), bd::cublas_op(sh.ta), int(sh.n), int(sh.m), int(sh.k), &alpha,
                            b.data(), type, int(ldb), a.data(), type, int(lda), &beta, c.data(), type, int(sh.n),
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)
              : api.gemm_strided_batched_ex(raw, bd::cublas_op(sh.tb), bd::cublas_op(sh.ta), int(sh.n), int(sh.m),
                                            int(sh.k), &alpha, b.data(), type, int(ldb), sh.k * sh.n, a.data(), type,
                                            int(lda), sh.m * sh.k, &beta, c.data(), type, int(sh.n), sh.m * sh.n,
                                            int(sh.batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      if (st != CUBLAS_STATUS_SUCCESS) std::abort();
    };
    const auto accel_call = [&] {
      if (sh.batch == 1) {
        accel::blas::gemm(be, s, sh.ta, sh.tb, sh.m, sh.n, sh.k, 1.0f, a, 0, lda, b, 0, ldb, 0.0f, c, 0, sh.n);
      } else {
        accel::blas::gemm_strided_batched(be, s, sh.ta, sh.tb, sh.m, sh.n, sh.k, 1.0f, a, 0, lda, sh.m * sh.k, b, 0,
                                          ldb, sh.k * sh.n, 0.0f, c, 0, sh.n, sh.m * sh.n, sh.batch);
      }
    };
    const int calls = opt.smoke ? 3 : 50;
    const auto timed = [&](const auto& fn) {
      ACCEL_CUDA_CHECK(cudaEventRecord(start, s.get()));
      for (int i = 0; i < calls; ++i) fn();
      ACCEL_CUDA_CHECK(cudaEventRecord(stop, s.get()));
      ACCEL_CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      ACCEL_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      return double(ms) / 1e3 / calls;
    };
    (void)timed(raw_call);
    (void)timed(accel_call);
    std::vector<double> raw_t, accel_t, q;
    for (int r = 0; r < (opt.smoke ? 1 : opt.rounds); ++r) {
      raw_t.push_back(timed(raw_call));
      accel_t.push_back(timed(accel_call));
      q.push_back(raw_t.back() / accel_t.back());
    }
    const double flop = 2.0 * double(sh.m) * double(sh.n) * double(sh.k) * double(sh.batch);
    std::printf("%-32s %7.1f TFLOP/s | accel/raw %.3fx [%.3f-%.3f]\n", sh.name, flop / median(raw_t) / 1e12,
                median(q), *std::min_element(q.begin(), q.end()), *std::max_element(q.begin(), q.end()));
    std::fflush(stdout);
  }
  {
    // gpt2's MLP: 12 x 1024 tokens, width 768, 3072 wide.
    const std::int64_t n_tok = 12288, c = 768;
    accel::Buffer<T, accel::CudaBackend> x(std::size_t(n_tok * c), s), w(std::size_t(4 * c * c), s),
        y(std::size_t(n_tok * 4 * c), s), pre(std::size_t(n_tok * 4 * c), s);
    ACCEL_CUDA_CHECK(cudaMemsetAsync(x.data(), 0, x.bytes(), s.get()));
    ACCEL_CUDA_CHECK(cudaMemsetAsync(w.data(), 0, w.bytes(), s.get()));
    ACCEL_CUDA_CHECK(cudaMemsetAsync(pre.data(), 0, pre.bytes(), s.get()));
    const int calls = opt.smoke ? 3 : 50;
    std::printf("GELU epilogues (cuBLASLt), %s: bare gemm time / fused time, median [min-max]\n", type_name);
    report_epilogues("gpt2 fc 12288x3072x768", opt, [&](int variant) {
      ACCEL_CUDA_CHECK(cudaEventRecord(start, s.get()));
      for (int i = 0; i < calls; ++i) {
        if (variant == 0) {
          accel::blas::gemm(be, s, Trans::no, Trans::yes, n_tok, 4 * c, c, 1.0f, x.data(), c, w.data(), c, 0.0f,
                            y.data(), 4 * c);
        } else if (variant == 1) {
          accel::blas::gemm_gelu(be, s, Trans::no, Trans::yes, n_tok, 4 * c, c, 1.0f, x.data(), c, w.data(), c, 0.0f,
                                 y.data(), 4 * c, pre.data(), 4 * c);
        } else {
          accel::blas::gemm_dgelu(be, s, Trans::no, Trans::no, n_tok, 4 * c, c, 1.0f, x.data(), c, w.data(), 4 * c,
                                  0.0f, y.data(), 4 * c, static_cast<const T*>(pre.data()), 4 * c);
        }
      }
      ACCEL_CUDA_CHECK(cudaEventRecord(stop, s.get()));
      ACCEL_CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      ACCEL_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      return double(ms) / 1e3 / calls;
    });
  }
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  s.synchronize();
  (void)cudaFree(ws);
  (void)api.destroy(raw);
}

void run_cuda(const Options& opt) {
  const accel::Availability available = accel::CudaBackend{}.availability();
  if (!available.available) {
    std::printf("\nCUDA: skipped (%s)\n", available.reason.c_str());
    return;
  }
  run_cuda_type<float>(opt, "float");
  run_cuda_type<accel::bfloat16>(opt, "bfloat16");
}

#else

void run_cuda(const Options&) { std::printf("\nCUDA: not built\n"); }

#endif

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--smoke") == 0) {
      opt.smoke = true;
    } else if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      opt.rounds = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--gpu") == 0) {
      opt.gpu_only = true;
    } else if (std::strcmp(argv[i], "--filter") == 0 && i + 1 < argc) {
      opt.filter = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--rounds N] [--smoke] [--gpu] [--filter SUBSTRING]\n", argv[0]);
      return 2;
    }
  }
  std::printf("bench_blas: ratios are raw time / accel time (>= 1: accel as fast), median [min-max] of %d "
              "interleaved rounds\n",
              opt.smoke ? 1 : opt.rounds);
  if (!opt.gpu_only) run_cpu(opt);
  run_cuda(opt);
  return 0;
}
