// bf16_layouts.cpp — exploration, not part of accel's benchmark set: how oneDNN's bf16 matmul is
// described changes which kernel it runs. The same single product, described as a 3-D batch of 1
// (as accel::blas did for every product) and in 2-D, timed in alternation (9 rounds after 2 warm-up
// pairs, one thread by default); prints the implementation oneDNN chose for each and the time ratio.
// The shapes are the GPT engine's at `shakespeare` (one lane: 32 sequences x 256 tokens) and `tiny`.
// The figures behind accel/blas/detail/cpu_matmul.hpp's describe_in_2d (benchmarks/RESULTS.md):
//   g++ -O2 -std=c++20 -fopenmp benchmarks/blas/explore/bf16_layouts.cpp -ldnnl -o /tmp/bf16_layouts
//   /tmp/bf16_layouts [THREADS]
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

void check(dnnl_status_t status, const char* what) {
  if (status == dnnl_success) return;
  std::fprintf(stderr, "%s failed: dnnl_status_t %d\n", what, static_cast<int>(status));
  std::exit(1);
}

dnnl_engine_t engine;

struct Matmul {
  dnnl_primitive_t primitive;
  dnnl_memory_desc_t a, b, c;
};

// Row-major op(X), rows x cols, leading dimension ld; 2-D or a 3-D batch of 1.
dnnl_memory_desc_t describe(bool two_d, std::int64_t rows, std::int64_t cols, std::int64_t ld, bool transposed) {
  dnnl_memory_desc_t md;
  const std::int64_t row_stride = transposed ? 1 : ld, col_stride = transposed ? ld : 1;
  if (two_d) {
    const dnnl_dims_t dims = {rows, cols}, strides = {row_stride, col_stride};
    check(dnnl_memory_desc_init_by_strides(&md, 2, dims, dnnl_bf16, strides), "memory desc");
  } else {
    const dnnl_dims_t dims = {1, rows, cols}, strides = {rows * ld, row_stride, col_stride};
    check(dnnl_memory_desc_init_by_strides(&md, 3, dims, dnnl_bf16, strides), "memory desc");
  }
  return md;
}

Matmul create(bool two_d, std::int64_t m, std::int64_t n, std::int64_t k, bool ta, bool tb) {
  Matmul mm;
  mm.a = describe(two_d, m, k, ta ? m : k, ta);
  mm.b = describe(two_d, k, n, tb ? k : n, tb);
  mm.c = describe(two_d, m, n, n, false);
  dnnl_matmul_desc_t desc;
  check(dnnl_matmul_desc_init(&desc, &mm.a, &mm.b, nullptr, &mm.c), "matmul desc");
  dnnl_primitive_desc_t pd;
  check(dnnl_primitive_desc_create(&pd, &desc, nullptr, engine, nullptr), "primitive desc");
  const char* impl = nullptr;
  check(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl), "impl query");
  std::printf("   %s: %s\n", two_d ? "2-D" : "3-D", impl);
  check(dnnl_primitive_create(&mm.primitive, pd), "primitive");
  dnnl_primitive_desc_destroy(pd);
  return mm;
}

double seconds(const Matmul& mm, void* a, void* b, void* c) {
  dnnl_memory_t ma, mb, mc;
  dnnl_stream_t stream;
  check(dnnl_memory_create(&ma, &mm.a, engine, a), "memory");
  check(dnnl_memory_create(&mb, &mm.b, engine, b), "memory");
  check(dnnl_memory_create(&mc, &mm.c, engine, c), "memory");
  check(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags), "stream");
  const dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
  const auto start = std::chrono::steady_clock::now();
  check(dnnl_primitive_execute(mm.primitive, stream, 3, args), "execute");
  check(dnnl_stream_wait(stream), "wait");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (dnnl_memory_t m : {ma, mb, mc}) dnnl_memory_destroy(m);
  dnnl_stream_destroy(stream);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  omp_set_num_threads(threads);
  check(dnnl_engine_create(&engine, dnnl_cpu, 0), "engine");
  struct Shape {
    const char* name;
    std::int64_t m, n, k;
    bool ta, tb;
  };
  constexpr std::int64_t M = 32 * 256, C = 384;
  const Shape shapes[] = {{"shakespeare qkv, x W^T", M, 3 * C, C, false, true},
                          {"shakespeare attention proj, x W^T", M, C, C, false, true},
                          {"shakespeare fc, x W^T", M, 4 * C, C, false, true},
                          {"shakespeare fc proj, x W^T", M, C, 4 * C, false, true},
                          {"shakespeare fc proj dX, dY W", M, 4 * C, C, false, false},
                          {"shakespeare fc proj dW, dY^T X", C, 4 * C, M, true, false},
                          {"shakespeare qkv dW, dY^T X", 3 * C, C, M, true, false},
                          {"tiny qkv, x W^T", 768, 384, 128, false, true},
                          {"tiny fc dW, dY^T X", 512, 128, 768, true, false}};
  std::vector<std::uint16_t> a(std::size_t{16} << 20, 0x3f80), b(a), c(a.size());  // bf16 1.0
  std::printf("oneDNN bf16 matmul, %d thread(s), effective ISA 0x%x; time of the 3-D batch of 1 / the 2-D "
              "description: median (min-max) of 9 rounds\n", threads, static_cast<unsigned>(dnnl_get_effective_cpu_isa()));
  for (const Shape& s : shapes) {
    std::printf("%s (%lld x %lld x %lld):\n", s.name, static_cast<long long>(s.m), static_cast<long long>(s.n),
                static_cast<long long>(s.k));
    const Matmul three = create(false, s.m, s.n, s.k, s.ta, s.tb), two = create(true, s.m, s.n, s.k, s.ta, s.tb);
    for (int i = 0; i < 2; ++i) {
      seconds(three, a.data(), b.data(), c.data());
      seconds(two, a.data(), b.data(), c.data());
    }
    std::vector<double> t3, t2, ratio;
    for (int i = 0; i < 9; ++i) {
      t3.push_back(seconds(three, a.data(), b.data(), c.data()));
      t2.push_back(seconds(two, a.data(), b.data(), c.data()));
      ratio.push_back(t3.back() / t2.back());
    }
    for (auto* v : {&t3, &t2, &ratio}) std::sort(v->begin(), v->end());
    const double flop = 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
    std::printf("   3-D %.0f GFLOP/s, 2-D %.0f GFLOP/s: 3-D / 2-D time %.2fx (%.2f-%.2f)\n", flop / t3[4] / 1e9,
                flop / t2[4] / 1e9, ratio[4], ratio[0], ratio[8]);
    dnnl_primitive_destroy(three.primitive);
    dnnl_primitive_destroy(two.primitive);
  }
}
