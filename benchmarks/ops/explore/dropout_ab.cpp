// dropout_ab.cpp — exploration, not part of accel's benchmark set: two builds of nn_ops' CPU dropout
// kernel (kernels/cpu/nn_ops.cpp) loaded into one process, timed in alternation (7 rounds, one thread,
// 2^22 elements, p = 0.2) in float32, bfloat16 and float16 storage; prints the medians, their ratio and
// whether both builds wrote the same bytes (the input includes -0, large values and dropped elements).
//   F="-O3 -march=native -fopenmp -shared -fPIC -std=c++17 -fno-math-errno -ffp-contract=off -Ikernels/cpu -Ikernels/common"
//   git show HEAD~1:kernels/cpu/nn_ops.cpp > /tmp/nn_a.cpp && g++ $F /tmp/nn_a.cpp -o /tmp/nn_a.so
//   g++ $F kernels/cpu/nn_ops.cpp -o /tmp/nn_b.so
//   g++ -O2 -std=c++17 -Ikernels/common benchmarks/ops/explore/dropout_ab.cpp -o /tmp/dropout_ab -ldl
//   /tmp/dropout_ab /tmp/nn_a.so /tmp/nn_b.so
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "accel_nn_abi.h"

namespace {
using Entry = int (*)(const void*, int);

Entry entry(const char* path, const std::string& name) {
  void* so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  auto* f = so != nullptr ? reinterpret_cast<Entry>(dlsym(so, name.c_str())) : nullptr;
  if (f == nullptr) {
    std::fprintf(stderr, "%s: no %s (%s)\n", path, name.c_str(), so == nullptr ? dlerror() : "missing symbol");
    std::exit(1);
  }
  return f;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: dropout_ab A.so B.so\n");
    return 2;
  }
  const long long n = 1 << 22;
  std::vector<float> in(static_cast<std::size_t>(n));
  std::vector<std::uint32_t> bits(in.size());
  std::uint32_t s = 3;
  for (long long i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    bits[static_cast<std::size_t>(i)] = s;
    s = s * 1664525u + 1013904223u;
    float f = static_cast<float>(static_cast<std::int32_t>(s)) / 2147483648.0f * 4;
    if (i % 1000 == 7) f = -0.0f;
    if (i % 977 == 3) f = 1e38f;
    in[static_cast<std::size_t>(i)] = f;
  }
  std::printf("dropout_ab: %s (A) vs %s (B), 1 thread, %lld elements, p = 0.2, 7 rounds\n", argv[1], argv[2], n);
  for (const char* dtype : {"f32", "bf16", "f16"}) {
    // 16-bit storage: the input's float bits read as pairs of 16-bit values (any bit pattern will do)
    const std::size_t es = std::strcmp(dtype, "f32") == 0 ? 4 : 2;
    std::vector<char> out_a(static_cast<std::size_t>(n) * es), out_b(out_a.size());
    const Entry fa = entry(argv[1], std::string("accel_nn_dropout_") + dtype);
    const Entry fb = entry(argv[2], std::string("accel_nn_dropout_") + dtype);
    accel_nn_dropout_args a{out_a.data(), in.data(), bits.data(), n, 858993459u /* 0.2 x 2^32 */, 1.25f};
    accel_nn_dropout_args b = a;
    b.out = out_b.data();
    std::vector<double> ta, tb;
    for (int r = 0; r < 8; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      fa(&a, 1);
      const auto t1 = std::chrono::steady_clock::now();
      fb(&b, 1);
      const auto t2 = std::chrono::steady_clock::now();
      if (r == 0) continue;  // warm-up
      ta.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      tb.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
    }
    std::sort(ta.begin(), ta.end());
    std::sort(tb.begin(), tb.end());
    std::printf("%-4s A %.2f ms  B %.2f ms  A/B %.2fx  bytes: %s\n", dtype, ta[3], tb[3], ta[3] / tb[3],
                out_a == out_b ? "the same" : "DIFFERENT");
  }
}
