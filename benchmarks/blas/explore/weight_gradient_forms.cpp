// weight_gradient_forms.cpp — exploration, not part of accel's benchmark set: three ways to compute a
// linear layer's weight gradient dW += dY^T X with oneDNN's sgemm (row-major), at the `tiny` engine's
// four shapes (dY: 768 x out, X: 768 x in, dW: out x in), one thread, timed in alternation:
//   tn          dnnl_sgemm('T','N') as the engine calls it (accel::blas::gemm(yes, no))
//   transposed  the transposed problem dW^T = X^T dY ('T','N' with the output's sides swapped) into a
//               scratch, then dW += scratch^T in 16 x 16 tiles
//   nn_bound    dnnl_sgemm('N','N') on an operand transposed beforehand (not timed): what the product
//               would cost if the transpose were free — a bound, not a way
// Prints, per shape, each form's median microseconds and GFLOP/s over the rounds, the ratio tn /
// transposed round by round (median and range), and the largest difference between the two results.
//
//   g++ -O2 -march=native -std=c++20 benchmarks/blas/explore/weight_gradient_forms.cpp -ldnnl -fopenmp
//       -o /tmp/weight_gradient_forms && /tmp/weight_gradient_forms [ROUNDS=11]
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
double time_us(int reps, F&& f) {  // mean over reps, after one untimed call
  f();
  const auto t0 = clock_type::now();
  for (int r = 0; r < reps; ++r) f();
  return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count() / reps;
}

void check(dnnl_status_t s) {
  if (s != dnnl_success) {
    std::fprintf(stderr, "dnnl_sgemm failed: %d\n", int(s));
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 11;
  omp_set_num_threads(1);
  struct Shape {
    const char* name;
    int out, in;
  };
  const Shape shapes[] = {{"qkv_w", 384, 128}, {"proj_w", 128, 128}, {"fc_w", 512, 128}, {"fcproj_w", 128, 512}};
  const int K = 768;  // tokens of a tiny micro-batch: 12 sequences of 64
  std::printf("%-9s %22s %22s %22s %24s %10s\n", "weight", "tn us (GF/s)", "transposed us (GF/s)", "nn_bound us (GF/s)",
              "tn / transposed", "max diff");
  for (const Shape& s : shapes) {
    const int M = s.out, N = s.in;
    std::vector<float> dy(std::size_t(K) * M), x(std::size_t(K) * N), dyt(std::size_t(M) * K);
    for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = float(int(i % 13) - 6) * 0.01f;
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 7) - 3) * 0.02f;
    for (int k = 0; k < K; ++k)
      for (int m = 0; m < M; ++m) dyt[std::size_t(m) * K + k] = dy[std::size_t(k) * M + m];
    std::vector<float> dw_tn(std::size_t(M) * N), dw_tr(std::size_t(M) * N), dw_nn(std::size_t(M) * N),
        scratch(std::size_t(N) * M);
    auto tn = [&] { check(dnnl_sgemm('T', 'N', M, N, K, 1.f, dy.data(), M, x.data(), N, 1.f, dw_tn.data(), N)); };
    auto transposed = [&] {
      check(dnnl_sgemm('T', 'N', N, M, K, 1.f, x.data(), N, dy.data(), M, 0.f, scratch.data(), M));
      for (int i0 = 0; i0 < M; i0 += 16)
        for (int j0 = 0; j0 < N; j0 += 16)
          for (int i = i0; i < std::min(i0 + 16, M); ++i)
            for (int j = j0; j < std::min(j0 + 16, N); ++j) dw_tr[std::size_t(i) * N + j] += scratch[std::size_t(j) * M + i];
    };
    auto nn = [&] { check(dnnl_sgemm('N', 'N', M, N, K, 1.f, dyt.data(), K, x.data(), N, 1.f, dw_nn.data(), N)); };
    std::vector<double> t_tn, t_tr, t_nn, ratio;
    for (int r = 0; r < rounds; ++r) {
      const double a = time_us(20, tn), b = time_us(20, transposed), c = time_us(20, nn);
      t_tn.push_back(a);
      t_tr.push_back(b);
      t_nn.push_back(c);
      ratio.push_back(a / b);
    }
    // One call each from zero: the two forms must agree to float rounding.
    std::fill(dw_tn.begin(), dw_tn.end(), 0.f);
    std::fill(dw_tr.begin(), dw_tr.end(), 0.f);
    tn();
    transposed();
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < dw_tn.size(); ++i) {
      diff = std::max(diff, double(std::fabs(dw_tn[i] - dw_tr[i])));
      scale = std::max(scale, double(std::fabs(dw_tn[i])));
    }
    const double flop = 2.0 * M * N * K;
    auto col = [&](const std::vector<double>& t) {  // "microseconds (GFLOP/s)"
      char text[64];
      std::snprintf(text, sizeof text, "%.1f (%.1f)", median(t), flop / median(t) / 1e3);
      return std::string(text);
    };
    std::printf("%-9s %22s %22s %22s %8.2f (%.2f-%.2f)x %10.1e\n", s.name, col(t_tn).c_str(), col(t_tr).c_str(),
                col(t_nn).c_str(), median(ratio),
                *std::min_element(ratio.begin(), ratio.end()), *std::max_element(ratio.begin(), ratio.end()),
                scale > 0 ? diff / scale : diff);
  }
}
