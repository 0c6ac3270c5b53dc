// choose_cpu_blas.cpp — the measurement behind accel/blas's choice of CPU BLAS (benchmarks/RESULTS.md,
// "BLAS"): single-precision GEMM at the GPT engine's shapes, through one library, at 1 and 2 threads,
// as GFLOP/s and as a share of the machine's FMA peak (measured here with an FMA loop).
//
// Built once per library by choose_cpu_blas.sh (one process per library: two BLAS copies in one
// process would share symbols); the script runs the processes in alternation, several rounds.
//   -DUSE_CBLAS      OpenBLAS (pthread or OpenMP build) or BLIS (pthread or OpenMP): cblas_sgemm
//   -DUSE_OPENBLAS   adds openblas_set_num_threads / openblas_get_corename
//   -DUSE_BLIS       adds bli_thread_set_num_threads / bli_arch_string
//   -DUSE_DNNL       oneDNN's dnnl_sgemm (row-major), threads through OpenMP
// Output: one line per (shape, threads): "<lib> <threads> <shape> <gflops_median> <gflops_best> <cpu_gflops>",
// the last from process CPU time (flop / (CPU seconds / threads)): on a VM shared with other work it is
// not lowered by time the threads were not running, but still charges time they spun or waited.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <time.h>
#include <vector>

#include "fma_peak.hpp"

#if defined(USE_CBLAS)
#include <cblas.h>
#endif
#if defined(USE_BLIS)
extern "C" void bli_thread_set_num_threads(long n);
extern "C" long bli_arch_query_id(void);
extern "C" const char* bli_arch_string(long id);
#endif
#if defined(USE_DNNL)
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#endif

namespace {

using clock_type = std::chrono::steady_clock;

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

void set_threads(int n) {
#if defined(USE_OPENBLAS)
  openblas_set_num_threads(n);
#elif defined(USE_BLIS)
  bli_thread_set_num_threads(n);
#elif defined(USE_DNNL)
  omp_set_num_threads(n);
#endif
}

std::string library_detail() {
#if defined(USE_OPENBLAS)
  return std::string("core=") + openblas_get_corename();
#elif defined(USE_BLIS)
  return std::string("arch=") + bli_arch_string(bli_arch_query_id());
#else
  return "";
#endif
}

// Row-major C[m,n] = op(A) op(B), op(A) m x k.
void sgemm(bool ta, bool tb, int m, int n, int k, const float* a, const float* b, float* c) {
  const int lda = ta ? m : k;
  const int ldb = tb ? k : n;
#if defined(USE_CBLAS)
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b,
              ldb, 0.0f, c, n);
#elif defined(USE_DNNL)
  if (dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n) != dnnl_success) std::abort();
#endif
}

struct Shape {
  const char* name;
  bool ta, tb;
  int m, n, k, batch;
};

}  // namespace

int main(int argc, char** argv) {
  const char* lib = argc > 1 ? argv[1] : "blas";
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  if (argc > 3 && std::string(argv[3]) == "peak") {
    for (int t : {1, 2}) {
      double best = 0;
      for (int r = 0; r < 3; ++r) best = std::max(best, accel_bench::fma_peak_gflops(t));
      std::printf("fma_peak %d %.1f\n", t, best);
    }
    return 0;
  }
  const Shape shapes[] = {
      // tiny (4 layers, width 128, block 64, batch 12: 768 tokens): forward x W^T, backward dX and dW
      {"tiny_qkv_fwd", false, true, 768, 384, 128, 1},
      {"tiny_proj_fwd", false, true, 768, 128, 128, 1},
      {"tiny_fc_fwd", false, true, 768, 512, 128, 1},
      {"tiny_fcproj_fwd", false, true, 768, 128, 512, 1},
      {"tiny_fc_dx", false, false, 768, 128, 512, 1},
      {"tiny_fc_dw", true, false, 512, 128, 768, 1},
      // shakespeare (6 layers, width 384, block 256, batch 64: 16384 tokens)
      {"shk_qkv_fwd", false, true, 16384, 1152, 384, 1},
      {"shk_proj_fwd", false, true, 16384, 384, 384, 1},
      {"shk_fc_fwd", false, true, 16384, 1536, 384, 1},
      {"shk_fcproj_fwd", false, true, 16384, 384, 1536, 1},
      {"shk_fc_dx", false, false, 16384, 384, 1536, 1},
      {"shk_fc_dw", true, false, 1536, 384, 16384, 1},
      // attention, batch = B * heads: scores = Q K^T (T x T x head) and out = P V (T x head x T)
      {"tiny_att_qk", false, true, 64, 64, 32, 48},
      {"tiny_att_pv", false, false, 64, 32, 64, 48},
      {"shk_att_qk", false, true, 256, 256, 64, 384},
      {"shk_att_pv", false, false, 256, 64, 256, 384},
  };
  const char* only = std::getenv("SHAPES");  // substring filter
  std::fprintf(stderr, "%s %s\n", lib, library_detail().c_str());
  for (int threads : {1, 2}) {
    set_threads(threads);
    for (const Shape& s : shapes) {
      if (only != nullptr && std::string(s.name).find(only) == std::string::npos) continue;
      const std::size_t sa = std::size_t(s.m) * s.k, sb = std::size_t(s.k) * s.n, sc = std::size_t(s.m) * s.n;
      std::vector<float> a(sa * s.batch), b(sb * s.batch), c(sc * s.batch);
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = float(i % 13) * 0.01f;
      for (std::size_t i = 0; i < b.size(); ++i) b[i] = float(i % 7) * 0.02f;
      const double flop = 2.0 * s.m * s.n * s.k * s.batch;
      auto call = [&] {
        for (int i = 0; i < s.batch; ++i) sgemm(s.ta, s.tb, s.m, s.n, s.k, a.data() + i * sa, b.data() + i * sb, c.data() + i * sc);
      };
      // Each sample runs for at least 20 ms; warm-up first.
      call();
      int reps = 1;
      for (;;) {
        const auto t0 = clock_type::now();
        for (int r = 0; r < reps; ++r) call();
        if (std::chrono::duration<double>(clock_type::now() - t0).count() > 0.02) break;
        reps *= 2;
      }
      std::vector<double> g, cpu;
      for (int r = 0; r < rounds; ++r) {
        const double c0 = process_cpu_seconds();
        const auto t0 = clock_type::now();
        for (int i = 0; i < reps; ++i) call();
        const double sec = std::chrono::duration<double>(clock_type::now() - t0).count();
        g.push_back(flop * reps / sec / 1e9);
        cpu.push_back(flop * reps / ((process_cpu_seconds() - c0) / threads) / 1e9);
      }
      std::sort(g.begin(), g.end());
      std::sort(cpu.begin(), cpu.end());
      std::printf("%s %d %s %.1f %.1f %.1f\n", lib, threads, s.name, g[g.size() / 2], g.back(), cpu[cpu.size() / 2]);
      std::fflush(stdout);
    }
  }
}
