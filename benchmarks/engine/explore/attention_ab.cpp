// attention_ab.cpp — exploration, not part of accel's benchmark set: two builds of the engine's CPU
// attention kernel (examples/engine/kernels/attention.cpp) loaded into one process and timed in
// alternation, one thread, forward and backward, float32 and bfloat16 storage. Prints each build's
// median milliseconds, GFLOP/s (the causal half of the four backward and two forward products) and the
// time ratio A / B, median and range, over the rounds; and whether both builds wrote the same bits.
//
// Build each kernel with the op builder's flags (include/accel/ops/host_compiler.hpp plus the op's own,
// examples/engine/gpt_kernels.hpp), e.g. the committed one and a variant:
//   K=examples/engine/kernels; F="-O3 -march=native -fopenmp -shared -fPIC -std=c++17 -fno-math-errno
//     -ffp-contract=fast -mprefer-vector-width=512 -Ikernels/cpu -Ikernels/common -I$K"
//   git show HEAD~1:$K/attention.cpp > /tmp/a.cpp && g++ $F /tmp/a.cpp -o /tmp/a.so
//   g++ $F $K/attention.cpp -o /tmp/b.so
//   g++ -O2 -std=c++17 -I$K benchmarks/engine/explore/attention_ab.cpp -o /tmp/attention_ab -ldl
//   /tmp/attention_ab /tmp/a.so /tmp/b.so [ROUNDS=7] [B,T,C,NH=32,256,384,6] [DROPOUT=0]
// The default shape is one lane of `shakespeare` on 2 threads (32 sequences of 256 tokens, 6 heads of 64).
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "attention.h"

namespace {

using Entry = int (*)(const void*, int);

std::uint16_t to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

struct Build {
  const char* path;
  Entry forward, backward;
};

Build load(const char* path, const char* dtype) {
  void* so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (so == nullptr) {
    std::fprintf(stderr, "%s\n", dlerror());
    std::exit(1);
  }
  const auto entry = [&](const std::string& name) {
    auto* f = reinterpret_cast<Entry>(dlsym(so, (name + dtype).c_str()));
    if (f == nullptr) {
      std::fprintf(stderr, "%s: no %s%s\n", path, name.c_str(), dtype);
      std::exit(1);
    }
    return f;
  };
  return {path, entry("gpt_attention_forward_"), entry("gpt_attention_backward_")};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: attention_ab A.so B.so [ROUNDS] [B,T,C,NH] [DROPOUT]\n");
    return 2;
  }
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 7;
  long long B = 32, T = 256, C = 384, NH = 6;
  if (argc > 4 && std::sscanf(argv[4], "%lld,%lld,%lld,%lld", &B, &T, &C, &NH) != 4) return 2;
  const double dropout = argc > 5 ? std::atof(argv[5]) : 0.0;
  const long long Tp = GPT_ATT_TP(T), hs = C / NH, N = B * T;
  std::vector<float> qkv(static_cast<std::size_t>(N * 3 * C)), dy(static_cast<std::size_t>(N * C));
  std::uint32_t state = 1;
  const auto uniform = [&] {  // [-1, 1)
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(static_cast<std::int32_t>(state >> 8) - (1 << 23)) / static_cast<float>(1 << 23);
  };
  for (float& x : qkv) x = 2 * uniform();
  for (float& x : dy) x = uniform();
  std::vector<std::uint32_t> bits(dropout > 0 ? static_cast<std::size_t>(B * NH * T * T) : 0);  // attention dropout's words
  for (std::uint32_t& w : bits) {
    state = state * 1664525u + 1013904223u;
    w = state ^ (state >> 16);
  }
  std::vector<std::uint16_t> qkv16(qkv.size()), dy16(dy.size());
  std::transform(qkv.begin(), qkv.end(), qkv16.begin(), to_bf16);
  std::transform(dy.begin(), dy.end(), dy16.begin(), to_bf16);
  const double causal = static_cast<double>(T) * static_cast<double>(T + 1) / 2;
  const double flop_forward = 2.0 * 2 * static_cast<double>(B * NH) * causal * static_cast<double>(hs);
  std::printf("attention_ab: %s (A) vs %s (B), 1 thread, B %lld T %lld C %lld NH %lld, attention dropout %g, %d rounds\n",
              argv[1], argv[2], B, T, C, NH, dropout, rounds);
  for (const char* dtype : {"f32", "bf16"}) {
    const bool half = std::strcmp(dtype, "bf16") == 0;
    const std::size_t es = half ? 2 : 4;
    const Build builds[2] = {load(argv[1], dtype), load(argv[2], dtype)};
    struct Out {
      std::vector<char> y, dqkv;
      std::vector<float> att;
    } out[2];
    std::vector<double> ms[2][2], ratio[2];  // [build][forward, backward], [forward, backward]
    for (int r = 0; r <= rounds; ++r) {
      double t[2][2];
      for (int k = 0; k < 2; ++k) {
        Out& o = out[k];
        o.y.assign(static_cast<std::size_t>(N * C) * es, 0);
        o.dqkv.assign(static_cast<std::size_t>(N * 3 * C) * es, 0);
        o.att.assign(static_cast<std::size_t>(B * NH * Tp * Tp), 0.0f);
        gpt_attention_args a{};
        a.y = o.y.data();
        a.dqkv = o.dqkv.data();
        a.att = o.att.data();
        a.qkv = half ? static_cast<const void*>(qkv16.data()) : qkv.data();
        a.dy = half ? static_cast<const void*>(dy16.data()) : dy.data();
        a.B = B, a.T = T, a.C = C, a.NH = NH;
        if (dropout > 0) {
          a.bits = bits.data();
          a.threshold = static_cast<unsigned>(dropout * 4294967296.0);
          a.scale = static_cast<float>(1.0 / (1.0 - dropout));
        }
        const auto t0 = std::chrono::steady_clock::now();
        if (builds[k].forward(&a, 1) != 0) return 3;
        const auto t1 = std::chrono::steady_clock::now();
        if (builds[k].backward(&a, 1) != 0) return 3;
        const auto t2 = std::chrono::steady_clock::now();
        t[k][0] = std::chrono::duration<double, std::milli>(t1 - t0).count();
        t[k][1] = std::chrono::duration<double, std::milli>(t2 - t1).count();
      }
      if (r == 0) continue;  // warm-up: page faults, the kernels' thread-local work areas
      for (int k = 0; k < 2; ++k) {
        for (int d = 0; d < 2; ++d) ms[k][d].push_back(t[k][d]);
      }
      for (int d = 0; d < 2; ++d) ratio[d].push_back(t[0][d] / t[1][d]);
    }
    const bool same = out[0].y == out[1].y && out[0].dqkv == out[1].dqkv && out[0].att == out[1].att;
    for (int d = 0; d < 2; ++d) {
      const double flop = d == 0 ? flop_forward : 2 * flop_forward;
      const double a = median(ms[0][d]), b = median(ms[1][d]);
      std::printf("%-4s %-8s A %7.2f ms (%5.1f GFLOP/s)  B %7.2f ms (%5.1f GFLOP/s)  A/B %.2fx (%.2f-%.2f)\n", dtype,
                  d == 0 ? "forward" : "backward", a, flop / a / 1e6, b, flop / b / 1e6, median(ratio[d]),
                  *std::min_element(ratio[d].begin(), ratio[d].end()), *std::max_element(ratio[d].begin(), ratio[d].end()));
    }
    std::printf("%-4s outputs (y, dqkv, att): %s\n", dtype, same ? "the same bits" : "DIFFERENT");
    if (!same && !half) {  // where: elements that differ and the largest difference, per output
      const auto report = [](const char* name, const float* x, const float* y, std::size_t n) {
        std::size_t count = 0;
        double worst = 0;
        for (std::size_t i = 0; i < n; ++i) {
          if (std::memcmp(x + i, y + i, 4) == 0) continue;
          ++count;
          worst = std::max(worst, std::fabs(static_cast<double>(x[i]) - y[i]));
        }
        std::printf("     %-4s %zu of %zu elements differ, max |A - B| %.3g\n", name, count, n, worst);
      };
      report("y", reinterpret_cast<const float*>(out[0].y.data()), reinterpret_cast<const float*>(out[1].y.data()),
             out[0].y.size() / 4);
      report("dqkv", reinterpret_cast<const float*>(out[0].dqkv.data()),
             reinterpret_cast<const float*>(out[1].dqkv.data()), out[0].dqkv.size() / 4);
      report("att", out[0].att.data(), out[1].att.data(), out[0].att.size());
    }
  }
}
