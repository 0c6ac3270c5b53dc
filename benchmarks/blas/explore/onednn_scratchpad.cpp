// onednn_scratchpad.cpp — exploration, not part of accel's benchmark set: one oneDNN bf16 matmul
// primitive (768 x 512 x 128, the tiny GPT's MLP product) run from two threads at once on different
// operands, 300 products each, compared with the products run alone. In oneDNN's default (library)
// scratchpad mode Debian's 2.6 shares one scratchpad among all primitives (built without
// DNNL_ENABLE_CONCURRENT_EXEC), so concurrent products corrupt each other; with the caller's scratchpad
// (argument `u`: dnnl_scratchpad_mode_user, a buffer per thread) they do not. The figures behind
// accel/blas/detail/cpu_matmul.hpp's scratchpad (benchmarks/RESULTS.md, "bf16 on two CPU streams at once"):
//   g++ -O2 -std=c++20 benchmarks/blas/explore/onednn_scratchpad.cpp -ldnnl -lpthread -o /tmp/onednn_scratchpad
//   OMP_NUM_THREADS=1 /tmp/onednn_scratchpad      # the library's: 570, 594, 592 of 600 (Zen 5 EPYC)
//   OMP_NUM_THREADS=1 /tmp/onednn_scratchpad u    # the caller's: 0
#include <oneapi/dnnl/dnnl.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#define CHECK_DNNL(x)                                               \
  do {                                                              \
    if (const dnnl_status_t s_ = (x); s_ != dnnl_success) {         \
      std::printf("%s failed: dnnl_status_t %d\n", #x, int(s_));    \
      std::exit(1);                                                 \
    }                                                               \
  } while (0)

using Bits = std::vector<std::uint16_t>;

// float -> bfloat16 bits, rounded to nearest even.
static std::uint16_t to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<std::uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

int main(int argc, char** argv) {
  const bool user = argc > 1 && argv[1][0] == 'u';
  const std::int64_t M = 768, N = 512, K = 128;
  dnnl_engine_t engine;
  CHECK_DNNL(dnnl_engine_create(&engine, dnnl_cpu, 0));
  dnnl_memory_desc_t a, b, c;
  const dnnl_dims_t da = {1, M, K}, sa = {M * K, K, 1}, db = {1, K, N}, sb = {K * N, 1, K}, dc = {1, M, N},
                    sc = {M * N, N, 1};  // C = A B^T, B stored N x K
  CHECK_DNNL(dnnl_memory_desc_init_by_strides(&a, 3, da, dnnl_bf16, sa));
  CHECK_DNNL(dnnl_memory_desc_init_by_strides(&b, 3, db, dnnl_bf16, sb));
  CHECK_DNNL(dnnl_memory_desc_init_by_strides(&c, 3, dc, dnnl_bf16, sc));
  dnnl_matmul_desc_t desc;
  CHECK_DNNL(dnnl_matmul_desc_init(&desc, &a, &b, nullptr, &c));
  dnnl_primitive_attr_t attr;
  CHECK_DNNL(dnnl_primitive_attr_create(&attr));
  if (user) CHECK_DNNL(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
  dnnl_primitive_desc_t pd;
  CHECK_DNNL(dnnl_primitive_desc_create(&pd, &desc, attr, engine, nullptr));
  const char* impl = nullptr;
  CHECK_DNNL(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl));
  const dnnl_memory_desc_t* scratch_md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  const std::size_t scratch_bytes = scratch_md != nullptr ? dnnl_memory_desc_get_size(scratch_md) : 0;
  std::printf("impl %s, scratchpad %s (%zu bytes)\n", impl, user ? "the caller's" : "the library's", scratch_bytes);
  dnnl_primitive_t matmul;
  CHECK_DNNL(dnnl_primitive_create(&matmul, pd));

  const auto run = [&](Bits& A, Bits& B, Bits& C, std::vector<char>& scratch) {
    dnnl_memory_t ma, mb, mc, ms = nullptr;
    dnnl_stream_t stream;
    CHECK_DNNL(dnnl_memory_create(&ma, &a, engine, A.data()));
    CHECK_DNNL(dnnl_memory_create(&mb, &b, engine, B.data()));
    CHECK_DNNL(dnnl_memory_create(&mc, &c, engine, C.data()));
    CHECK_DNNL(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
    std::vector<dnnl_exec_arg_t> args = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
    if (user && scratch_bytes > 0) {
      CHECK_DNNL(dnnl_memory_create(&ms, scratch_md, engine, scratch.data()));
      args.push_back({DNNL_ARG_SCRATCHPAD, ms});
    }
    CHECK_DNNL(dnnl_primitive_execute(matmul, stream, static_cast<int>(args.size()), args.data()));
    CHECK_DNNL(dnnl_stream_wait(stream));
    for (dnnl_memory_t m : {ma, mb, mc, ms}) {
      if (m != nullptr) dnnl_memory_destroy(m);
    }
    dnnl_stream_destroy(stream);
  };

  std::mt19937 gen(1);
  std::normal_distribution<float> normal;
  Bits A1(M * K), B1(K * N), A2(M * K), B2(K * N);
  for (Bits* v : {&A1, &B1, &A2, &B2}) {
    for (auto& x : *v) x = to_bf16(normal(gen));
  }
  Bits want1(M * N), want2(M * N);
  std::vector<char> scratch(scratch_bytes + 64);
  run(A1, B1, want1, scratch);  // alone: the reference
  run(A2, B2, want2, scratch);
  std::atomic<int> wrong{0};
  const auto worker = [&](Bits* A, Bits* B, const Bits* want) {
    Bits C(M * N);
    std::vector<char> own(scratch_bytes + 64);  // each thread its own (used in user mode only)
    for (int i = 0; i < 300; ++i) {
      run(*A, *B, C, own);
      if (C != *want) ++wrong;
    }
  };
  std::thread t1(worker, &A1, &B1, &want1), t2(worker, &A2, &B2, &want2);
  t1.join();
  t2.join();
  std::printf("products unlike the one run alone: %d of 600\n", wrong.load());
  return 0;
}
