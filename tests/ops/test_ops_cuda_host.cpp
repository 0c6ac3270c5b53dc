// accel's other CUDA kernels run on the CPU, their own source compiled as host C++ (tests/support/cuda_host.hpp):
// fused Adam (kernels/cuda/fused_adam.cu, every dtype combination), the tensor ops (tensor_ops.cu: fill,
// cast and scale, the multi-tensor L2 norm, isfinite) and the Philox fills (random_fill.cu), against the CPU
// kernels, which the CUDA ones are documented to match bit for bit (Adam, fills, casts) or to the float
// rounding of a double sum (the norm). Their launchers (include/accel/cuda/ops.hpp, cuda/detail/random_fill.hpp)
// call the driver directly, so the launches here repeat theirs — the same tensor lists of at most
// mt_max_tensors tensors and 16384-element chunks, 512- and 256-thread blocks — with grids from one block to
// one a chunk: the kernels stride over their work, so every grid must give the same bits. test_nn_ops_cuda_host
// and test_flash_host run nn_ops.cu and the engine's attention.cu through their launchers. Last, the
// emulation's own semantics: shuffles, votes, barriers, 3-D blocks, and the mistakes it stops on.
#include "ops_test_support.hpp"

#include <accel/core/bfloat16.hpp>
#include <accel/core/half.hpp>
#include <accel/ops/abi.hpp>
#include <accel/ops/fused_adam.hpp>
#include <accel/ops/tensor_ops.hpp>
#include <accel/random/detail/block_fill.hpp>
#include <accel/random/fill.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

#include "../support/cuda_host.hpp"
#include "fused_adam.cu"
#include "random_fill.cu"
#include "tensor_ops.cu"

namespace {

using accel::Dtype;
namespace abi = accel::ops::abi;

constexpr long long kChunk = 16384;  // cuda::FusedAdamOp::chunk_size, TensorOpsOp::chunk_size

using cuda_host::Arena;

// Element i of a float32, float16 or bfloat16 array, as float; and stores.
void put(void* p, Dtype d, std::size_t i, float x) {
  if (d == Dtype::float32) static_cast<float*>(p)[i] = x;
  else if (d == Dtype::bfloat16) static_cast<accel::bfloat16*>(p)[i] = accel::bfloat16(x);
  else static_cast<accel::half*>(p)[i] = accel::half(x);
}

// A launch: (grid, block) over `entry(args...)`.
template <class F>
void run(unsigned grid, unsigned block, F&& f) {
  cuda_host::launch(cuda_host::Dim{grid, 1, 1}, cuda_host::Dim{block, 1, 1}, std::forward<F>(f));
}

// ---- fused Adam ----

using AdamEntry = void(const accel_adam_launch);
AdamEntry* adam_entry(Dtype p, Dtype g, std::optional<Dtype> c) {
  const auto i = [](Dtype d) { return d == Dtype::float32 ? 0 : d == Dtype::float16 ? 1 : 2; };
  static AdamEntry* const f32[3][3] = {
      {accel_fused_adam_pf32_gf32_cnone, accel_fused_adam_pf32_gf32_cf16, accel_fused_adam_pf32_gf32_cbf16},
      {accel_fused_adam_pf32_gf16_cnone, accel_fused_adam_pf32_gf16_cf16, accel_fused_adam_pf32_gf16_cbf16},
      {accel_fused_adam_pf32_gbf16_cnone, accel_fused_adam_pf32_gbf16_cf16, accel_fused_adam_pf32_gbf16_cbf16}};
  static AdamEntry* const bf16[3] = {accel_fused_adam_pbf16_gf32_cnone, accel_fused_adam_pbf16_gf16_cnone,
                                     accel_fused_adam_pbf16_gbf16_cnone};
  if (p == Dtype::bfloat16) return bf16[i(g)];
  return f32[i(g)][c ? (*c == Dtype::float16 ? 1 : 2) : 0];
}

// cuda::FusedAdamOp::step's launches: tensor lists of at most mt_max_tensors non-empty tensors, a grid of
// min(chunks, max_grid) 512-thread blocks.
// Returns the launches it made.
int emulated_adam_step(std::span<const accel::ops::AdamTensor> tensors, const accel::ops::AdamOptions& o,
                       std::int64_t step, const accel::ops::AdamDtypes& d, long long max_grid) {
  const abi::AdamHParams h = accel::ops::adam_hparams(o, step, d);
  const std::vector<abi::AdamTensor> t = accel::ops::adam_tensors(tensors, o, d);
  auto launch = std::make_unique<abi::AdamLaunch>();
  launch->h = h;
  launch->chunk_size = kChunk;
  AdamEntry* entry = adam_entry(d.param, d.grad, d.model_copy);
  int launches = 0;
  std::size_t i = 0;
  while (i < t.size()) {
    int n = 0;
    long long chunks = 0;
    for (; i < t.size() && n < abi::mt_max_tensors; ++i) {
      if (t[i].numel == 0) continue;
      launch->chunk_start[n] = chunks;
      launch->t[n] = t[i];
      chunks += (t[i].numel + kChunk - 1) / kChunk;
      ++n;
    }
    if (n == 0) break;
    launch->chunk_start[n] = chunks;
    launch->num_tensors = n;
    accel_adam_launch a;
    static_assert(sizeof a == sizeof(abi::AdamLaunch));
    std::memcpy(&a, launch.get(), sizeof a);
    run(static_cast<unsigned>(std::min(chunks, max_grid)), 512, [&a, entry] { entry(a); });
    ++launches;
  }
  return launches;
}

// One Adam step's tensors: sizes[k] elements each, `misalign` elements off 16 bytes for tensor 1.
struct AdamSet {
  std::vector<accel::ops::AdamTensor> t;
  std::vector<std::pair<void*, std::size_t>> state;  // every array a step writes, with its bytes
};
AdamSet make_adam_set(Arena& arena, const std::vector<long long>& sizes, const accel::ops::AdamDtypes& d, bool amsgrad,
                      unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  AdamSet s;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const auto n = static_cast<std::size_t>(sizes[k]);
    const std::size_t off = k == 1 ? 2 : 0;  // elements
    const auto array = [&](Dtype dt, float scale, bool positive) {
      void* p = arena.take(n * size_of(dt), off * size_of(dt));
      for (std::size_t i = 0; i < n; ++i) put(p, dt, i, positive ? std::fabs(normal(gen)) * scale : normal(gen) * scale);
      return p;
    };
    accel::ops::AdamTensor a;
    a.numel = sizes[k];
    a.param = array(d.param, 1.0f, false);
    a.grad = array(d.grad, 0.1f, false);
    a.exp_avg = array(d.param, 0.01f, false);
    a.exp_avg_sq = array(d.param, 0.001f, true);
    if (amsgrad) a.max_exp_avg_sq = array(d.param, 0.001f, true);
    if (d.model_copy) a.model_copy = arena.take(n * size_of(*d.model_copy), off * size_of(*d.model_copy));
    for (void* p : {a.param, a.exp_avg, a.exp_avg_sq, a.max_exp_avg_sq}) {
      if (p != nullptr) s.state.emplace_back(p, n * size_of(d.param));
    }
    if (a.model_copy != nullptr) s.state.emplace_back(a.model_copy, n * size_of(*d.model_copy));
    s.t.push_back(a);
  }
  return s;
}

// Bytes of the set's state that differ between two runs.
std::size_t differing_bytes(const AdamSet& a, const AdamSet& b) {
  std::size_t n = 0;
  for (std::size_t k = 0; k < a.state.size(); ++k) {
    const auto* x = static_cast<const unsigned char*>(a.state[k].first);
    const auto* y = static_cast<const unsigned char*>(b.state[k].first);
    for (std::size_t i = 0; i < a.state[k].second; ++i) n += x[i] != y[i];
  }
  return n;
}

}  // namespace

TEST_CASE("fused_adam.cu on the CPU: every dtype combination, the same bits as the CPU kernel at any grid") {
  (void)ops_test::cache_dir();
  // Two chunks and a tail; a tensor 2 elements off 16 bytes (the one-element path); an empty one; a
  // 16-byte-aligned tensor shorter than a vector access.
  const std::vector<long long> sizes = {2 * kChunk + 37, 1001, 0, 3};
  struct Combo {
    Dtype p, g;
    std::optional<Dtype> c;
  };
  const std::vector<Combo> combos = {
      {Dtype::float32, Dtype::float32, std::nullopt},   {Dtype::float32, Dtype::float32, Dtype::float16},
      {Dtype::float32, Dtype::float32, Dtype::bfloat16}, {Dtype::float32, Dtype::float16, std::nullopt},
      {Dtype::float32, Dtype::float16, Dtype::float16},  {Dtype::float32, Dtype::float16, Dtype::bfloat16},
      {Dtype::float32, Dtype::bfloat16, std::nullopt},  {Dtype::float32, Dtype::bfloat16, Dtype::float16},
      {Dtype::float32, Dtype::bfloat16, Dtype::bfloat16}, {Dtype::bfloat16, Dtype::float32, std::nullopt},
      {Dtype::bfloat16, Dtype::float16, std::nullopt},  {Dtype::bfloat16, Dtype::bfloat16, std::nullopt}};
  int variant = 0;
  for (const Combo& combo : combos) {
    const accel::ops::AdamDtypes d{combo.p, combo.g, combo.c};
    accel::ops::AdamOptions o;
    o.lr = 1e-2;
    o.weight_decay = 0.1;
    o.adamw = variant % 2 == 0;  // AdamW and Adam with L2 decay, AMSGrad every third, maximize once
    o.amsgrad = variant % 3 == 0;
    o.maximize = variant == 5;
    CAPTURE(std::string(accel::name(combo.p)));
    CAPTURE(std::string(accel::name(combo.g)));
    CAPTURE(combo.c ? std::string(accel::name(*combo.c)) : std::string("none"));
    CAPTURE(o.amsgrad);
    Arena arena;
    const AdamSet cpu = make_adam_set(arena, sizes, d, o.amsgrad, 7);
    for (const std::int64_t step : {1, 2}) ops_test::adam().step_sync(cpu.t, o, step, d);
    for (const long long grid : {1LL, 3LL, 264LL}) {  // one block; fewer than the chunks; one a chunk
      CAPTURE(grid);
      const AdamSet gpu = make_adam_set(arena, sizes, d, o.amsgrad, 7);
      for (const std::int64_t step : {1, 2}) emulated_adam_step(gpu.t, o, step, d, grid);
      CHECK(differing_bytes(gpu, cpu) == 0);
    }
    ++variant;
  }
  // More tensors than one launch carries: 300 small tensors, two launches.
  const accel::ops::AdamDtypes d{Dtype::float32, Dtype::bfloat16, Dtype::bfloat16};
  const std::vector<long long> many(300, 5);
  Arena arena;
  const AdamSet cpu = make_adam_set(arena, many, d, false, 9), gpu = make_adam_set(arena, many, d, false, 9);
  ops_test::adam().step_sync(cpu.t, accel::ops::AdamOptions{}, 1, d);
  CHECK(emulated_adam_step(gpu.t, accel::ops::AdamOptions{}, 1, d, 264) == 2);
  CHECK(differing_bytes(gpu, cpu) == 0);
}

namespace {

// ---- tensor ops ----

// cuda::TensorOpsOp's grid for n elements: 256-thread blocks, at most 8 a multiprocessor (132: an H200's).
unsigned grid_for(long long n) { return static_cast<unsigned>(std::max(1LL, std::min((n + 255) / 256, 132LL * 8))); }

// cuda::TensorOpsOp::l2norm's and all_finite's lists.
std::vector<accel_tensor_list> tensor_lists(const std::vector<abi::TensorRef>& refs) {
  std::vector<accel_tensor_list> lists;
  std::size_t i = 0;
  do {
    auto list = std::make_unique<abi::TensorList>();
    list->chunk_size = kChunk;
    long long chunks = 0;
    int n = 0;
    for (; i < refs.size() && n < abi::mt_max_tensors; ++i, ++n) {
      list->chunk_start[n] = chunks;
      list->t[n] = refs[i];
      chunks += (refs[i].numel + kChunk - 1) / kChunk;
    }
    list->chunk_start[n] = chunks;
    list->num_tensors = n;
    accel_tensor_list l;
    static_assert(sizeof l == sizeof(abi::TensorList));
    std::memcpy(&l, list.get(), sizeof l);
    lists.push_back(l);
  } while (i < refs.size());
  return lists;
}

}  // namespace

TEST_CASE("tensor_ops.cu on the CPU: fill, cast, scale, L2 norm and isfinite against the CPU kernels") {
  const auto& host = ops_test::tensor_ops().host();
  Arena arena;
  const std::vector<float> src = ops_test::random_floats(70000, 3, -4.0f, 4.0f);
  for (const Dtype from : {Dtype::float32, Dtype::float16, Dtype::bfloat16}) {
    for (const Dtype to : {Dtype::float32, Dtype::float16, Dtype::bfloat16}) {
      CAPTURE(std::string(accel::name(from)));
      CAPTURE(std::string(accel::name(to)));
      const long long n = 70000 - 3;
      void* in = arena.take(static_cast<std::size_t>(n) * size_of(from));
      for (long long i = 0; i < n; ++i) put(in, from, static_cast<std::size_t>(i), src[static_cast<std::size_t>(i)]);
      const std::size_t bytes = static_cast<std::size_t>(n) * size_of(to);
      void* want = arena.take(bytes);
      void* got = arena.take(bytes);
      for (const float factor : {1.0f, -0.37f}) {  // a cast, then a scale
        host.scale(want, to, in, from, n, factor);
        run(grid_for(n), 256, [&] { accel_scale(got, abi::code(to), in, abi::code(from), n, factor); });
        CHECK(std::memcmp(got, want, bytes) == 0);
      }
      host.fill(want, to, n, -1.5e-3f);
      run(grid_for(n), 256, [&] { accel_fill(got, abi::code(to), n, -1.5e-3f); });
      CHECK(std::memcmp(got, want, bytes) == 0);
    }
  }
  // The L2 norm of 300 tensors (two lists), one of them several chunks long and one 1 element off 16 bytes,
  // float32, float16 and bfloat16 mixed; then isfinite, with and without an inf in the last tensor.
  std::vector<abi::TensorRef> refs;
  std::vector<accel::ops::TensorRef> views;
  for (int k = 0; k < 300; ++k) {
    const Dtype d = k % 3 == 0 ? Dtype::float32 : k % 3 == 1 ? Dtype::float16 : Dtype::bfloat16;
    const long long n = k == 0 ? 3 * kChunk + 11 : 1 + k % 37;
    const std::size_t off = k == 1 ? 1 : 0;
    void* p = arena.take(static_cast<std::size_t>(n) * size_of(d), off * size_of(d));
    for (long long i = 0; i < n; ++i) put(p, d, static_cast<std::size_t>(i), src[static_cast<std::size_t>((i * 7 + k) % 70000)]);
    refs.push_back(abi::TensorRef{p, n, abi::code(d), 0});
    views.push_back(accel::ops::TensorRef{p, n, d});
  }
  float total = 0;
  std::vector<float> per(refs.size());
  host.l2norm(views, &total, per.data());
  // cuda::TensorOpsOp::l2norm: per list, the partial sums (min(chunks, 8 a multiprocessor) blocks), then one
  // block adding them into the running sum of squares kept before the partials.
  const std::vector<accel_tensor_list> lists = tensor_lists(refs);
  CHECK(lists.size() == 2);
  long long all_chunks = 0;
  for (const auto& r : refs) all_chunks += (r.numel + kChunk - 1) / kChunk;
  std::vector<double> work(static_cast<std::size_t>(all_chunks + 1), std::numeric_limits<double>::quiet_NaN());
  float got_total = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> got_per(refs.size(), std::numeric_limits<float>::quiet_NaN());
  std::size_t first = 0;
  for (std::size_t l = 0; l < lists.size(); ++l) {
    const accel_tensor_list& list = lists[l];
    double* partials = work.data() + 1;
    const long long chunks = list.chunk_start[list.num_tensors];
    run(static_cast<unsigned>(std::min(chunks, 132LL * 8)), 256, [&] { accel_l2norm_partial(list, partials); });
    float* out_per = got_per.data() + first;
    run(1, 256, [&] { accel_l2norm_finalize(list, partials, &got_total, out_per, l > 0 ? 1 : 0); });
    first += static_cast<std::size_t>(list.num_tensors);
  }
  CHECK(std::fabs(got_total - total) <= 1e-6 * total);
  double worst = 0;
  for (std::size_t k = 0; k < per.size(); ++k) worst = std::max(worst, std::fabs(static_cast<double>(got_per[k]) - per[k]) / per[k]);
  CHECK(worst <= 1e-6);
  for (const bool poison : {false, true}) {
    CAPTURE(poison);
    if (poison) put(const_cast<void*>(refs.back().data), Dtype::bfloat16, 0, std::numeric_limits<float>::infinity());
    int want = -1, got = 1;  // the host sets the flag to 1 before the launches
    host.all_finite(views, &want);
    for (const accel_tensor_list& list : tensor_lists(refs)) {
      run(static_cast<unsigned>(std::min(list.chunk_start[list.num_tensors], 132LL * 8)), 256,
          [&] { accel_isfinite(list, &got); });
    }
    CHECK(want == (poison ? 0 : 1));
    CHECK(got == want);
  }
}

TEST_CASE("random_fill.cu on the CPU: the host's Philox fills, any length, offset, alignment and grid") {
  // cuda/detail/random_fill.hpp launches min(blocks of 512 units, a wave); the kernel strides over units.
  Arena arena;
  for (const long long n : {1LL, 3LL, 4LL, 5LL, 17LL, 1000LL, 4099LL}) {
    for (const unsigned long long offset : {0ULL, 1ULL, 2ULL, 3ULL, 6ULL}) {
      for (const std::size_t misalign : {std::size_t{0}, std::size_t{1}}) {
        for (const unsigned grid : {1u, 2u, 7u}) {
          CAPTURE(n);
          CAPTURE(offset);
          CAPTURE(misalign);
          CAPTURE(grid);
          const auto un = static_cast<std::size_t>(n);
          const std::uint64_t seed = 0x1234567887654321ULL + static_cast<std::uint64_t>(n);
          std::vector<std::uint32_t> bits(un);
          std::vector<float> uf(un), nf(un);
          std::vector<double> ud(un), nd(un);
          accel::rng::fill_bits(bits, seed, offset);
          accel::rng::fill_uniform(std::span<float>(uf), seed, offset);
          accel::rng::fill_uniform(std::span<double>(ud), seed, offset);
          accel::rng::fill_normal(std::span<float>(nf), seed, offset, 0.5f, 2.0f);
          accel::rng::fill_normal(std::span<double>(nd), seed, offset, 0.5, 2.0);
          auto* gb = static_cast<unsigned*>(arena.take(un * 4, misalign * 4));
          auto* guf = static_cast<float*>(arena.take(un * 4, misalign * 4));
          auto* gnf = static_cast<float*>(arena.take(un * 4, misalign * 4));
          auto* gud = static_cast<double*>(arena.take(un * 8, misalign * 8));
          auto* gnd = static_cast<double*>(arena.take(un * 8, misalign * 8));
          const auto N = static_cast<unsigned long long>(n);
          run(grid, 512, [&] { accel_random_bits(gb, N, seed, offset, nullptr, 0); });
          run(grid, 512, [&] { accel_random_uniform_f32(guf, N, seed, offset, nullptr, 0); });
          run(grid, 512, [&] { accel_random_uniform_f64(gud, N, seed, offset, nullptr, 0); });
          run(grid, 512, [&] { accel_random_normal_f32(gnf, N, seed, offset, nullptr, 0, 0.5f, 2.0f); });
          run(grid, 512, [&] { accel_random_normal_f64(gnd, N, seed, offset, nullptr, 0, 0.5, 2.0); });
          CHECK(std::memcmp(gb, bits.data(), un * 4) == 0);
          CHECK(std::memcmp(guf, uf.data(), un * 4) == 0);
          CHECK(std::memcmp(gud, ud.data(), un * 8) == 0);
          CHECK(std::memcmp(gnf, nf.data(), un * 4) == 0);
          CHECK(std::memcmp(gnd, nd.data(), un * 8) == 0);
        }
      }
    }
  }
  // Graph-safe parameters: seed and offset read from device memory, plus the launch's intra offset.
  std::vector<float> want(100);
  accel::rng::fill_uniform(std::span<float>(want), 99, 40 + 8);
  const unsigned long long state[2] = {99, 40};
  auto* got = static_cast<float*>(arena.take(400));
  run(1, 512, [&] { accel_random_uniform_f32(got, 100, 1, 2, state, 8); });
  CHECK(std::memcmp(got, want.data(), 400) == 0);
}

// ---- The emulation's own semantics (tests/support/cuda_host.hpp) ----

TEST_CASE("cuda_host: shuffles and votes as CUDA defines them, by lane, width and warp") {
  std::vector<int> up(64), down(64), xr(64), idx(64), up8(64), any(64), all(64);
  std::vector<double> dd(64);
  std::vector<unsigned> bal(64);
  run(1, 64, [&] {
    const int t = static_cast<int>(threadIdx.x);
    const auto u = static_cast<std::size_t>(t);
    up[u] = __shfl_up_sync(~0u, t, 3);
    down[u] = __shfl_down_sync(~0u, t, 5);
    xr[u] = __shfl_xor_sync(~0u, t, 6);
    idx[u] = __shfl_sync(~0u, t, 7);
    up8[u] = __shfl_up_sync(~0u, t, 3, 8);                 // segments of 8 lanes
    dd[u] = __shfl_down_sync(~0u, 0.5 + t, 1, 16);         // 8-byte values, segments of 16
    bal[u] = __ballot_sync(~0u, t % 32 % 3 == 0);
    any[u] = __any_sync(~0u, t == 40);
    all[u] = __all_sync(~0u, t < 60);
  });
  int wrong = 0;
  for (int t = 0; t < 64; ++t) {
    const auto u = static_cast<std::size_t>(t);
    const int lane = t % 32, base = t - lane;
    wrong += up[u] != (lane >= 3 ? t - 3 : t);
    wrong += down[u] != (lane + 5 < 32 ? t + 5 : t);
    wrong += xr[u] != (t ^ 6);
    wrong += idx[u] != base + 7;
    wrong += up8[u] != (lane % 8 >= 3 ? t - 3 : t);
    wrong += dd[u] != (lane % 16 + 1 < 16 ? 1.5 + t : 0.5 + t);
    wrong += bal[u] != 0x49249249u;
    wrong += any[u] != (t >= 32 ? 1 : 0);
    wrong += all[u] != (t < 32 ? 1 : 0);
  }
  CHECK(wrong == 0);
}

TEST_CASE("cuda_host: 3-D blocks, barriers counting the threads still running, dynamic shared memory") {
  // Blocks of 4 x 3 x 2; the threads with x == 3 exit at once, the 18 others vote across barriers and read
  // what the others wrote to dynamic shared memory before them.
  std::vector<int> count(48, -1), any(48, -1), every(48, -1), seen(48, -1);
  cuda_host::launch(cuda_host::Dim{2, 1, 1}, cuda_host::Dim{4, 3, 2}, [&] {
    const unsigned t = threadIdx.x + 4 * (threadIdx.y + 3 * threadIdx.z), at = 24 * blockIdx.x + t;
    if (threadIdx.x == 3) return;
    float* s = cuda_host::dynamic_shared<float>();
    s[t] = static_cast<float>(at);
    count[at] = __syncthreads_count(threadIdx.y == 1);
    any[at] = __syncthreads_or(threadIdx.z == 1 && threadIdx.y == 2 && threadIdx.x == 0);
    every[at] = __syncthreads_and(threadIdx.x < 3);
    seen[at] = static_cast<int>(s[(threadIdx.x + 1) % 3 + 4 * (threadIdx.y + 3 * threadIdx.z)]);
  }, 24 * sizeof(float));
  int wrong = 0;
  for (int at = 0; at < 48; ++at) {
    const auto u = static_cast<std::size_t>(at);
    const int x = at % 4;
    if (x == 3) {
      wrong += count[u] != -1;  // exited before the barriers
      continue;
    }
    wrong += count[u] != 6 || any[u] != 1 || every[u] != 1;
    wrong += seen[u] != at - x + (x + 1) % 3;
  }
  CHECK(wrong == 0);
}

namespace {

// What a child process printed before it ended, and whether it ended by abort().
struct Death {
  bool aborted = false;
  std::string message;
};
template <class F>
Death in_child(F&& f) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::signal(SIGABRT, SIG_DFL);  // not the test framework's crash report
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    f();
    ::_exit(0);
  }
  ::close(fds[1]);
  Death d;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) d.message.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  d.aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
  return d;
}

}  // namespace

TEST_CASE("cuda_host: what would hang or be undefined on a GPU stops with a message") {
  const auto check = [](const Death& d, const char* expected) {
    CAPTURE(d.message);
    CHECK(d.aborted);
    CHECK(d.message.find(expected) != std::string::npos);
  };
  // Lane 0 of warp 0 waits at a barrier while its warp's other lanes wait at a shuffle: neither completes.
  check(in_child([] {
          run(1, 64, [] {
            if (threadIdx.x == 0) {
              __syncthreads();
            } else if (threadIdx.x < 32) {
              (void)__shfl_xor_sync(~0u, 1, 1);
            } else {
              __syncthreads();
            }
          });
        }),
        "no thread can move");
  check(in_child([] { run(1, 1025, [] {}); }), "a block of 0 or more than 1024 threads");
  check(in_child([] {
          run(1, 32, [] {
            if (threadIdx.x == 5) return;
            (void)__shfl_xor_sync(~0u, 1, 1);
          });
        }),
        "a warp-wide instruction after a lane of the warp exited");
  check(in_child([] {
          run(1, 32, [] {
            static unsigned flag = 0;  // never set: a wait for a signal no block will give
            while (flag == 0) __nanosleep(32);
          });
        }),
        "no thread can move");
  if (cuda_host::kSharedGuard > 0) {  // under ASan the write is its report instead
    check(in_child([] {
            cuda_host::launch(cuda_host::Dim{1, 1, 1}, cuda_host::Dim{32, 1, 1},
                              [] { cuda_host::dynamic_shared<float>()[threadIdx.x] = 1.0f; }, 16);
          }),
          "a write past the launch's dynamic shared memory");
  }
}
