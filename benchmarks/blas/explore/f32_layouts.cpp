// f32_layouts.cpp — exploration, not part of accel's benchmark set: oneDNN's sgemm (what accel::blas runs
// for float32 on the CPU) against oneDNN's float32 matmul primitive (2-D description, beta via a sum
// post-op) at the GPT engine's shakespeare shapes (one lane: 32 x 256 tokens), timed in alternation,
// 9 rounds after 2 warm-up pairs; prints the matmul's implementation and sgemm / matmul time.
//   g++ -O2 -std=c++20 -fopenmp benchmarks/blas/explore/f32_layouts.cpp -ldnnl -o /tmp/f32_layouts
//   /tmp/f32_layouts [THREADS]
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
namespace {
void check(dnnl_status_t s, const char* w) { if (s != dnnl_success) { std::fprintf(stderr, "%s %d\n", w, (int)s); std::exit(1);} }
dnnl_engine_t engine;
struct Matmul { dnnl_primitive_t p; dnnl_memory_desc_t a, b, c; };
dnnl_memory_desc_t describe(std::int64_t rows, std::int64_t cols, std::int64_t ld, bool t) {
  dnnl_memory_desc_t md; const dnnl_dims_t dims = {rows, cols}, strides = {t ? 1 : ld, t ? ld : 1};
  check(dnnl_memory_desc_init_by_strides(&md, 2, dims, dnnl_f32, strides), "md"); return md; }
Matmul create(std::int64_t m, std::int64_t n, std::int64_t k, bool ta, bool tb, float beta) {
  Matmul mm; mm.a = describe(m, k, ta ? m : k, ta); mm.b = describe(k, n, tb ? k : n, tb); mm.c = describe(m, n, n, false);
  dnnl_matmul_desc_t d; check(dnnl_matmul_desc_init(&d, &mm.a, &mm.b, nullptr, &mm.c), "desc");
  dnnl_primitive_attr_t attr; dnnl_primitive_attr_create(&attr);
  if (beta != 0) { dnnl_post_ops_t po; dnnl_post_ops_create(&po); dnnl_post_ops_append_sum(po, beta); dnnl_primitive_attr_set_post_ops(attr, po); }
  dnnl_primitive_desc_t pd; check(dnnl_primitive_desc_create(&pd, &d, attr, engine, nullptr), "pd");
  const char* impl; dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl); std::printf("   matmul: %s\n", impl);
  check(dnnl_primitive_create(&mm.p, pd), "p"); return mm; }
double mm_seconds(const Matmul& mm, void* a, void* b, void* c) {
  dnnl_memory_t ma, mb, mc; dnnl_stream_t st;
  dnnl_memory_create(&ma, &mm.a, engine, a); dnnl_memory_create(&mb, &mm.b, engine, b); dnnl_memory_create(&mc, &mm.c, engine, c);
  dnnl_stream_create(&st, engine, dnnl_stream_default_flags);
  const dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
  auto t0 = std::chrono::steady_clock::now(); check(dnnl_primitive_execute(mm.p, st, 3, args), "exec"); dnnl_stream_wait(st);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (auto m : {ma, mb, mc}) dnnl_memory_destroy(m); dnnl_stream_destroy(st); return s; }
}
int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1; omp_set_num_threads(threads);
  check(dnnl_engine_create(&engine, dnnl_cpu, 0), "engine");
  struct Shape { const char* name; std::int64_t m, n, k; bool ta, tb; float beta; };
  constexpr std::int64_t M = 32 * 256, C = 384;
  const Shape shapes[] = {{"qkv x W^T", M, 3*C, C, false, true, 0}, {"fc x W^T", M, 4*C, C, false, true, 0},
    {"fcproj x W^T", M, C, 4*C, false, true, 0}, {"fcproj dX dY W", M, 4*C, C, false, false, 0},
    {"fcproj dW dY^T X", C, 4*C, M, true, false, 1}, {"fc dW dY^T X", 4*C, C, M, true, false, 1},
    {"qkv dW dY^T X", 3*C, C, M, true, false, 1}, {"proj dW", C, C, M, true, false, 1},
    {"tiny fc dW", 512, 128, 768, true, false, 1}};
  std::vector<float> a(std::size_t{16} << 20, 1.0f), b(a), c(a.size());
  for (auto& s : shapes) {
    std::printf("%s (%lld x %lld x %lld) beta %g:\n", s.name, (long long)s.m, (long long)s.n, (long long)s.k, s.beta);
    Matmul mm = create(s.m, s.n, s.k, s.ta, s.tb, s.beta);
    auto sg = [&] { auto t0 = std::chrono::steady_clock::now();
      check(dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.m, s.n, s.k, 1.0f, a.data(), s.ta ? s.m : s.k, b.data(), s.tb ? s.k : s.n, s.beta, c.data(), s.n), "sgemm");
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    for (int i = 0; i < 2; ++i) { sg(); mm_seconds(mm, a.data(), b.data(), c.data()); }
    std::vector<double> t1, t2, r;
    for (int i = 0; i < 9; ++i) { t1.push_back(sg()); t2.push_back(mm_seconds(mm, a.data(), b.data(), c.data())); r.push_back(t1.back()/t2.back()); }
    for (auto* v : {&t1, &t2, &r}) std::sort(v->begin(), v->end());
    double f = 2.0 * s.m * s.n * s.k;
    std::printf("   sgemm %.0f GFLOP/s, matmul %.0f GFLOP/s: sgemm/matmul time %.2fx (%.2f-%.2f)\n", f/t1[4]/1e9, f/t2[4]/1e9, r[4], r[0], r[8]);
    dnnl_primitive_destroy(mm.p);
  }
}
