// accel/blas on the CPU: the BLAS's threads, buffers of another device (and, through a two-backend
// AnyBackend, of another backend), half and (without oneDNN's bf16
// matmul) bfloat16 widened to float.
#include "blas_test_support.hpp"
#include "concepts/mock_backend.hpp"

#include <accel/core/cpu_features.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <tuple>

using namespace blas_test;

TEST_CASE("blas threads: set_num_threads holds in the stream thread that runs the GEMM") {
  const int saved = accel::blas::num_threads();
  CHECK(saved >= 1);
  BLAS_CHECK_INVALID(accel::blas::set_num_threads(0), "n = 0");
  BLAS_CHECK_INVALID(accel::blas::set_num_threads(-3), "n = -3");
  CHECK(accel::blas::num_threads() == saved);  // unchanged by the refused calls

  const accel::CpuBackend be;
  accel::cpu::Stream stream;
  const accel::cpu::StreamRef s = stream;
  std::vector<float> a(4, 1.0f), b(4, 2.0f), c(4, 0.0f);
  for (int threads : {2, 1, 3}) {
    accel::blas::set_num_threads(threads);
    CHECK(accel::blas::num_threads() == threads);
    accel::blas::gemm(be, s, Trans::no, Trans::no, 2, 2, 2, 1.0f, a.data(), 2, b.data(), 2, 0.0f, c.data(), 2);
    // OpenMP's count is per thread: the worker that ran the GEMM now has it.
    std::atomic<int> seen{0};
    s.enqueue([&seen] { seen = accel::blas::detail::openmp().get_max_threads(); });
    s.synchronize();
    CHECK(seen == threads);
    CHECK(c == std::vector<float>{4, 4, 4, 4});
  }
  accel::blas::set_num_threads(saved);
}

TEST_CASE("blas threads: set_num_threads holds for bfloat16 GEMMs too, single and batched, whichever way they run") {
  // oneDNN's bf16 matmul (AVX-512 CPUs), a batch in one matmul or matrix by matrix, or the widened path:
  // each task applies the requested count on the worker before it multiplies.
  const int saved = accel::blas::num_threads();
  const accel::CpuBackend be;
  accel::cpu::Stream stream;
  const accel::cpu::StreamRef s = stream;
  std::vector<accel::bfloat16> a(2 * 4, accel::bfloat16(1.0f)), b(2 * 4, accel::bfloat16(2.0f)), c(2 * 4);
  for (const std::int64_t batch : {1, 2}) {
    for (int threads : {2, 1, 3}) {
      accel::blas::set_num_threads(threads);
      accel::blas::gemm_strided_batched(be, s, Trans::no, Trans::no, 2, 2, 2, 1.0f, a.data(), 2, 4, b.data(), 2, 4,
                                        0.0f, c.data(), 2, 4, batch);
      std::atomic<int> seen{0};
      s.enqueue([&seen] { seen = accel::blas::detail::openmp().get_max_threads(); });
      s.synchronize();
      CAPTURE(batch);
      CHECK(seen == threads);
      for (std::int64_t i = 0; i < 4 * batch; ++i) CHECK(static_cast<float>(c[std::size_t(i)]) == 4.0f);
    }
  }
  accel::blas::set_num_threads(saved);
}

TEST_CASE("blas: the CPU runs on an OpenMP runtime found in the process") {
  const auto& omp = accel::blas::detail::openmp();
  REQUIRE_MESSAGE(omp.loaded(), omp.error);
  CHECK(omp.get_max_threads() >= 1);
  CHECK((omp.parallel != nullptr));  // GOMP_parallel: batches of small matrices are spread over a team
  CHECK(accel::blas::detail::cpu_blas_name().rfind("oneDNN ", 0) == 0);
}

// The widened products' conversions are shared out this way (cpu_half.hpp): every row once, contiguous
// shares, one per thread of the team; small passes and one thread stay on the caller.
TEST_CASE("blas: for_row_shares gives every row to exactly one thread, in contiguous shares") {
  namespace d = accel::blas::detail;
  REQUIRE(d::openmp().loaded());
  const i64 rows = 1000;
  std::vector<std::atomic<int>> seen(static_cast<std::size_t>(rows));
  std::atomic<int> shares{0};
  std::vector<i64> firsts(8, -1), lasts(8, -1);
  d::for_row_shares(2, rows, d::min_shared_elements, [&](i64 first, i64 last) noexcept {
    const int t = d::openmp().get_thread_num();
    firsts[std::size_t(t)] = first;
    lasts[std::size_t(t)] = last;
    ++shares;
    for (i64 r = first; r < last; ++r) ++seen[std::size_t(r)];
  });
  CHECK(shares == 2);
  CHECK(firsts[0] == 0);
  CHECK(lasts[0] == 500);
  CHECK(firsts[1] == 500);
  CHECK(lasts[1] == 1000);
  i64 once = 0;
  for (const auto& s : seen) once += s == 1;
  CHECK(once == rows);

  // On the caller, as one share: one thread; one row; fewer elements than min_shared_elements.
  const auto caller_only = [](int threads, i64 n, i64 per_row) {
    std::vector<std::tuple<i64, i64, bool>> calls;
    const auto caller = std::this_thread::get_id();
    d::for_row_shares(threads, n, per_row, [&](i64 first, i64 last) noexcept {
      calls.emplace_back(first, last, std::this_thread::get_id() == caller);
    });
    return calls == std::vector<std::tuple<i64, i64, bool>>{{0, n, true}};
  };
  CHECK(caller_only(1, rows, d::min_shared_elements));
  CHECK(caller_only(2, 1, 4 * d::min_shared_elements));
  CHECK(caller_only(2, rows, d::min_shared_elements / rows));
  CHECK(caller_only(4, 0, 100));
}

TEST_CASE("gemm: a buffer of another device than the stream's is refused") {
  const accel::CpuBackend be;
  if (be.device_count() < 2) {
    MESSAGE("SKIPPED: needs 2 CPU devices (ACCEL_CPU_DEVICE_COUNT=2; the test_blas_2dev run)");
    return;
  }
  accel::cpu::Stream s0(0), s1(1);
  accel::Buffer<float, accel::CpuBackend> a(6, s0), b(6, s0), c(4, s0), c1(4, s1);
  BLAS_CHECK_INVALID(accel::blas::gemm(be, s0, Trans::no, Trans::no, 2, 2, 3, 1.0f, a, 0, 3, b, 0, 2, 0.0f, c1, 0, 2),
                     "c is memory of device 1, but the stream is on device 0");
  BLAS_CHECK_INVALID(accel::blas::gemm(be, s1, Trans::no, Trans::no, 2, 2, 3, 1.0f, a, 0, 3, b, 0, 2, 0.0f, c1, 0, 2),
                     "a is memory of device 0, but the stream is on device 1");
  // The same call on the buffers' own device runs.
  std::fill(a.span().begin(), a.span().end(), 1.0f);
  std::fill(b.span().begin(), b.span().end(), 0.5f);
  accel::blas::gemm(be, s0, Trans::no, Trans::no, 2, 2, 3, 1.0f, a, 0, 3, b, 0, 2, 0.0f, c, 0, 2);
  s0.synchronize();
  CHECK(std::vector<float>(c.span().begin(), c.span().end()) == std::vector<float>{1.5f, 1.5f, 1.5f, 1.5f});
}

TEST_CASE("gemm_gelu / gemm_dgelu: an aux buffer of another device than the stream's is refused") {
  const accel::CpuBackend be;
  if (be.device_count() < 2) {
    MESSAGE("SKIPPED: needs 2 CPU devices (ACCEL_CPU_DEVICE_COUNT=2; the test_blas_2dev run)");
    return;
  }
  accel::cpu::Stream s0(0), s1(1);
  accel::Buffer<float, accel::CpuBackend> a(6, s0), b(6, s0), c(4, s0), aux0(16, s0), aux1(16, s1);
  std::fill(c.span().begin(), c.span().end(), 7.0f);
  BLAS_CHECK_INVALID(
      accel::blas::gemm_gelu(be, s0, Trans::no, Trans::no, 2, 2, 3, 1.0f, a, 0, 3, b, 0, 2, 0.0f, c, 0, 2, aux1, 0, 8),
      "aux is memory of device 1, but the stream is on device 0");
  BLAS_CHECK_INVALID(
      accel::blas::gemm_dgelu(be, s0, Trans::no, Trans::no, 2, 2, 3, 1.0f, a, 0, 3, b, 0, 2, 0.0f, c, 0, 2, aux1, 0, 8),
      "aux is memory of device 1, but the stream is on device 0");
  BLAS_CHECK_INVALID(
      accel::blas::gemm_dgelu(be, s1, Trans::no, Trans::no, 2, 2, 3, 1.0f, a, 0, 3, b, 0, 2, 0.0f, c, 0, 2, aux1, 0, 8),
      "a is memory of device 0, but the stream is on device 1");
  s0.synchronize();
  CHECK(std::vector<float>(c.span().begin(), c.span().end()) == std::vector<float>{7.0f, 7.0f, 7.0f, 7.0f});
}

TEST_CASE("gemm: half on the CPU, also through AnyBackend: the float product of the widened operands, rounded once") {
  static_assert(accel::blas::detail::GemmImpl<accel::CpuBackend>::supports<accel::half>);
  static_assert(accel::blas::detail::GemmImpl<accel::CpuBackend>::supports<accel::bfloat16>);
  const accel::AnyBackend be{accel::CpuBackend{}};
  const accel::AnyBackend::StreamRef s = accel::CpuBackend{}.current_stream();
  // 1/3 and 0.1 are not exact in half: the product of the rounded operands, in float, then rounded.
  const float av[] = {1.0f / 3, 0.1f, -2.5f, 1000.0f, 3.0f, 0.5f};  // 2 x 3
  const float bv[] = {0.1f, 7.0f, -1.0f / 3, 0.25f, 60000.0f, 1.0f};  // 3 x 2: 60000 x 3 overflows half
  std::vector<accel::half> a(6), b(6), c(4, accel::half(1.0f));
  for (int i = 0; i < 6; ++i) {
    a[i] = accel::half(av[i]);
    b[i] = accel::half(bv[i]);
  }
  accel::blas::gemm(be, s, Trans::no, Trans::no, 2, 2, 3, 1.0f, a.data(), 3, b.data(), 2, 0.5f, c.data(), 2);
  s.synchronize();
  for (int r = 0; r < 2; ++r) {
    for (int col = 0; col < 2; ++col) {
      float acc = 0;  // float, in k order (what sgemm gives for k = 3 exactly up to rounding)
      for (int k = 0; k < 3; ++k) {
        acc += static_cast<float>(a[r * 3 + k]) * static_cast<float>(b[k * 2 + col]);
      }
      const float want = acc + 0.5f;  // beta * 1
      CAPTURE(r);
      CAPTURE(col);
      const float got = static_cast<float>(c[r * 2 + col]);
      if (std::isinf(static_cast<float>(accel::half(want)))) {
        CHECK(std::isinf(got));
      } else {
        CHECK(std::fabs(got - want) <= std::fabs(want) * 0x1p-10f);  // one half rounding
      }
    }
  }
  CHECK(std::isinf(static_cast<float>(c[0])));  // -2.5 x 60000 = -150000: beyond half's 65504
  CHECK(static_cast<float>(c[2]) == 30096.0f);    // 100 - 1 + 30000 + 0.5, rounded to half (spacing 16)
}

TEST_CASE("gemm_gelu on the CPU: the baseline (SSE), AVX2 and AVX-512 copies of the epilogue agree with the reference") {
  using namespace accel::blas::detail;
  const std::int64_t m = 3, n = 37, ld = 40;  // a tail of 5 after the lanes, padding untouched
  std::vector<float> pre(std::size_t(m * ld), 7.0f);
  for (std::int64_t r = 0; r < m; ++r) {
    for (std::int64_t j = 0; j < n; ++j) pre[std::size_t(r * ld + j)] = -9.0f + 18.0f * float(r * n + j) / float(m * n);
  }
  const auto reference = [](double x, bool grad) {
    const double k = 0.7978845608028654, u = k * (x + 0.044715 * x * x * x), t = std::tanh(u);
    return grad ? 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x) : 0.5 * x * (1 + t);
  };
  const auto run = [&](int lanes, Epilogue e) {
    std::vector<float> c = e == Epilogue::dgelu ? std::vector<float>(pre.size(), 2.0f) : pre;
    std::vector<float> aux = e == Epilogue::dgelu ? pre : std::vector<float>(pre.size(), -1.0f);
    GemmArgs<float> g{.m = m, .n = n, .k = 1, .c = c.data(), .ldc = ld, .epilogue = e, .aux = aux.data(), .ldaux = ld};
#if defined(ACCEL_EPILOGUE_AVX2)
    if (lanes == 16) epilogue_rows_avx512(g, 0, m);
    else if (lanes == 8) epilogue_rows_avx2(g, 0, m);
    else epilogue_rows_baseline(g, 0, m);
#else
    (void)lanes;
    epilogue_rows_baseline(g, 0, m);
#endif
    for (std::int64_t r = 0; r < m; ++r) {
      for (std::int64_t j = 0; j < ld; ++j) {
        const std::size_t i = std::size_t(r * ld + j);
        if (j >= n) {
          REQUIRE(c[i] == (e == Epilogue::dgelu ? 2.0f : 7.0f));  // padding untouched
          continue;
        }
        const double want = e == Epilogue::dgelu ? 2.0 * reference(pre[i], true) : reference(pre[i], false);
        REQUIRE(std::abs(double(c[i]) - want) <= 2e-6 * std::max(1.0, std::abs(want)));
        if (e == Epilogue::gelu) REQUIRE(aux[i] == pre[i]);
      }
    }
  };
  const int widest = epilogue_lanes();
  MESSAGE("this CPU runs the " << widest << "-lane copy of the epilogue");
  int copies = 0;
  for (const Epilogue e : {Epilogue::gelu, Epilogue::dgelu}) {
    for (const int lanes : {4, 8, 16}) {
      if (lanes > widest) continue;  // the copies this CPU can run
      run(lanes, e);
      ++copies;
    }
  }
  CHECK(copies >= 2);
}

TEST_CASE("gemm_gelu on the CPU: every copy at float's range ends gives GELU x or 0 and GELU' 1 or 0; NaN stays NaN") {
  // Past |x| of about 10 e^{-2u} leaves float's range and exp_in_place clamps it; the GELU must still
  // be x or 0 (not x / (1 + 2.4e38): -1.4 at -FLT_MAX), its gradient 1 or 0 (not x u'(x)'s overflow).
  using namespace accel::blas::detail;
  const float big = std::numeric_limits<float>::max();
  const std::vector<float> xs = {9.5f, -9.5f, 10.0f, -10.0f, 10.5f, -10.5f, 12.0f, -12.0f, 20.0f,  -20.0f, 1e3f,
                                 -1e3f, 1e19f, -1e19f, 1e20f, -1e20f, 1e30f, -1e30f, 1e35f, -1e35f, big,    -big};
  const auto reference = [](double x, bool grad) {  // in double: x^3 and x^2 stay finite up to FLT_MAX
    const double k = 0.7978845608028654, u = k * (x + 0.044715 * x * x * x), t = std::tanh(u);
    return grad ? 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x) : 0.5 * x * (1 + t);
  };
  const std::int64_t n = std::int64_t(xs.size()) + 1;  // and a NaN: more than 16 lanes, so a tail too
  const auto run = [&](int lanes, Epilogue e) {
    std::vector<float> pre = xs;
    pre.push_back(std::nanf(""));
    std::vector<float> c = e == Epilogue::dgelu ? std::vector<float>(pre.size(), 1.0f) : pre;
    std::vector<float> aux = e == Epilogue::dgelu ? pre : std::vector<float>(pre.size(), 0.0f);
    GemmArgs<float> g{.m = 1, .n = n, .k = 1, .c = c.data(), .ldc = n, .epilogue = e, .aux = aux.data(), .ldaux = n};
#if defined(ACCEL_EPILOGUE_AVX2)
    if (lanes == 16) epilogue_rows_avx512(g, 0, 1);
    else if (lanes == 8) epilogue_rows_avx2(g, 0, 1);
    else epilogue_rows_baseline(g, 0, 1);
#else
    (void)lanes;
    epilogue_rows_baseline(g, 0, 1);
#endif
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const double want = reference(xs[i], e == Epilogue::dgelu);
      INFO(lanes << " lanes, " << std::string(e == Epilogue::dgelu ? "GELU'" : "GELU") << "(" << xs[i] << ") = " << c[i]
                 << ", want " << want);
      CHECK(std::abs(double(c[i]) - want) <= 2e-6 * std::max(1.0, std::abs(want)));
    }
    INFO(lanes << " lanes: NaN gave " << c.back());
    CHECK(std::isnan(c.back()));
  };
  const int widest = epilogue_lanes();
  for (const Epilogue e : {Epilogue::gelu, Epilogue::dgelu}) {
    for (const int lanes : {4, 8, 16}) {
      if (lanes <= widest) run(lanes, e);
    }
  }
}

TEST_CASE("gemm_gelu on the CPU: the epilogue runs the widest copy the CPU has, and its threads cover every row") {
  using namespace accel::blas::detail;
#if defined(ACCEL_EPILOGUE_AVX2)
  // CPUID's answer (accel::cpu_features) against the compiler's, which the epilogue asks.
  const accel::CpuFeatures& cpu = accel::cpu_features();
  CHECK(epilogue_lanes() == (cpu.avx512f ? 16 : cpu.avx2 && cpu.fma ? 8 : 4));
#else
  CHECK(epilogue_lanes() == 4);
#endif
  // m x n past the threshold for a team (64 Ki elements), rows not a multiple of the threads.
  const std::int64_t m = 331, n = 203, ld = 205;
  std::vector<float> pre(std::size_t(m * ld), 5.0f);
  for (std::int64_t r = 0; r < m; ++r) {
    for (std::int64_t j = 0; j < n; ++j) pre[std::size_t(r * ld + j)] = -6.0f + 12.0f * float((r * 53 + j * 7) % 997) / 997.0f;
  }
  const auto epilogue = [&](bool dispatched, bool whole) {
    std::vector<float> c = pre, aux(pre.size(), -1.0f);
    GemmArgs<float> g{.m = m, .n = n, .k = 1, .c = c.data(), .ldc = ld, .epilogue = Epilogue::gelu, .aux = aux.data(), .ldaux = ld};
    if (!dispatched) {
#if defined(ACCEL_EPILOGUE_AVX2)
      if (epilogue_lanes() == 16) epilogue_rows_avx512(g, 0, m);
      else if (epilogue_lanes() == 8) epilogue_rows_avx2(g, 0, m);
      else epilogue_rows_baseline(g, 0, m);
#else
      epilogue_rows_baseline(g, 0, m);
#endif
    } else if (!whole) {
      epilogue_rows(g, 0, m);
    } else {
      cpu_epilogue(g);  // as gemm_gelu's task runs it: over blas::num_threads() threads
    }
    return c;
  };
  const std::vector<float> copy = epilogue(false, false);
  CHECK(std::memcmp(epilogue(true, false).data(), copy.data(), copy.size() * sizeof(float)) == 0);  // bit for bit
  const int saved = accel::blas::num_threads();
  for (const int threads : {1, 2, 3}) {
    accel::blas::set_num_threads(threads);
    const std::vector<float> c = epilogue(true, true);
    std::int64_t differ = 0;
    for (std::size_t i = 0; i < c.size(); ++i) differ += std::bit_cast<std::uint32_t>(c[i]) != std::bit_cast<std::uint32_t>(copy[i]);
    INFO(threads << " threads");
    CHECK(differ == 0);
  }
  accel::blas::set_num_threads(saved);
}

TEST_CASE("gemm's overlap check: shares_element agrees with counting elements, over random layouts") {
  // Small operands (a few rows, batches, strides, leading dimensions) placed at random offsets from
  // each other: the check says they share an element exactly when marking every element of one and
  // looking for a mark under the other does.
  using accel::blas::detail::Footprint;
  std::uint64_t state = 0x9e3779b97f4a7c15ULL;
  const auto next = [&](std::int64_t below) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return static_cast<std::int64_t>(state % static_cast<std::uint64_t>(below));
  };
  const auto random_footprint = [&] {
    Footprint f{};
    f.rows = 1 + next(4);
    f.cols = 1 + next(5);
    f.ld = f.cols + next(6);
    f.batch = 1 + next(4);
    f.stride = next(3) == 0 ? 0 : next(40);
    return f;
  };
  const auto elements = [](const Footprint& f, std::int64_t at) {
    std::vector<std::int64_t> where;
    for (std::int64_t t = 0; t < f.batch; ++t) {
      for (std::int64_t r = 0; r < f.rows; ++r) {
        for (std::int64_t c = 0; c < f.cols; ++c) where.push_back(at + t * f.stride + r * f.ld + c);
      }
    }
    return where;
  };
  int shared = 0, apart = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const Footprint w = random_footprint(), r = random_footprint();
    const std::int64_t offset = next(121) - 60;  // r's first element, from w's
    std::vector<char> marks(400, 0);
    for (const std::int64_t e : elements(w, 100)) marks[static_cast<std::size_t>(e)] = 1;
    bool expected = false;
    for (const std::int64_t e : elements(r, 100 + offset)) expected = expected || marks[static_cast<std::size_t>(e)] != 0;
    CAPTURE(trial);
    REQUIRE(accel::blas::detail::shares_element(w, r, offset) == expected);
    (expected ? shared : apart) += 1;
  }
  CHECK(shared > 1000);  // both answers were exercised
  CHECK(apart > 1000);
}

// bfloat16 on a CPU where oneDNN has no bf16 matmul (no AVX-512) takes half's path: widened to float,
// sgemm, C rounded once (blas/detail/cpu_half.hpp). Called directly, so that CPUs with the matmul check
// it too.
TEST_CASE("gemm: bfloat16 widened to float (CPUs without oneDNN's bf16 matmul) rounds as accel::bfloat16 does") {
  using accel::bfloat16;
  namespace d = accel::blas::detail;
  // Narrowing: ties both ways, overflow, infinities, NaN, subnormals, signed zero, then random bit patterns,
  // each against accel::bfloat16's conversion; widening exact.
  std::vector<float> x = {0.0f, -0.0f, 1.0f, 1.00390625f, 1.01171875f, -1.00390625f, 3.3961e38f, 3.40282347e38f,
                          -3.40282347e38f, INFINITY, -INFINITY, NAN, -NAN, 1e-40f, -1e-45f, 9.2e-41f, 0.1f, 65504.5f};
  std::uint32_t state = 12345;
  for (int i = 0; i < 100000; ++i) {
    state = state * 1664525u + 1013904223u;
    x.push_back(std::bit_cast<float>(state));
  }
  // The dispatched conversions, and each vector width this CPU runs on its own, from every start offset
  // (unaligned loads) so that every tail length is taken.
  using Narrow = void (*)(bfloat16*, const float*, i64);
  using Widen = void (*)(float*, const bfloat16*, i64);
  std::vector<std::tuple<const char*, Narrow, Widen>> ways = {{"dispatched", &d::narrow, &d::widen}};
#if ACCEL_DETAIL_BLAS_F16C
  if (accel::cpu_features().avx2) ways.emplace_back("avx2", &d::narrow_bf16_avx2, &d::widen_bf16_avx2);
  if (accel::cpu_features().avx512f) ways.emplace_back("avx512", &d::narrow_bf16_avx512, &d::widen_bf16_avx512);
#endif
  for (const auto& way : ways) {
    // (not a structured binding: clang 14 cannot capture one in doctest's message lambdas)
    const char* name = std::get<0>(way);
    const Narrow narrow = std::get<1>(way);
    const Widen widen = std::get<2>(way);
    for (const i64 start : {i64{0}, i64{1}, i64{3}, i64{7}, i64{13}}) {
      const i64 n = i64(x.size()) - start;
      std::vector<bfloat16> narrowed(std::size_t(n + 1), bfloat16::from_bits(0x5A5A));
      narrow(narrowed.data(), x.data() + start, n);
      std::vector<float> widened(std::size_t(n + 1), 42.0f);
      widen(widened.data(), narrowed.data(), n);
      std::size_t wrong = 0, inexact = 0;
      for (i64 i = 0; i < n; ++i) {
        wrong += narrowed[std::size_t(i)].bits() != bfloat16(x[std::size_t(start + i)]).bits();
        inexact += std::bit_cast<std::uint32_t>(widened[std::size_t(i)]) != std::uint32_t{narrowed[std::size_t(i)].bits()} << 16;
      }
      CHECK_MESSAGE(wrong == 0, name << " from " << start);
      CHECK_MESSAGE(inexact == 0, name << " from " << start);
      CHECK(narrowed.back().bits() == 0x5A5A);  // nothing written past n
      CHECK(widened.back() == 42.0f);
    }
  }

  // A batch of 2 with both transposes, alpha and beta: small integers, so every product and sum is exact in
  // float and C is the reference rounded once.
  const i64 m = 5, n = 4, k = 7, batch = 2;
  std::vector<bfloat16> a(std::size_t(k * m * batch)), b(std::size_t(n * k * batch)), c(std::size_t(m * n * batch));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = bfloat16(float(int(i * 7 % 11) - 5));
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = bfloat16(float(int(i * 5 % 13) - 6));
  for (std::size_t i = 0; i < c.size(); ++i) c[i] = bfloat16(float(int(i % 9) - 4));
  std::vector<float> want(c.size());
  for (i64 q = 0; q < batch; ++q) {
    for (i64 r = 0; r < m; ++r) {
      for (i64 j = 0; j < n; ++j) {
        double sum = 0;  // A stored k x m (transposed), B stored n x k (transposed)
        for (i64 l = 0; l < k; ++l) sum += double(float(a[q * k * m + l * m + r])) * double(float(b[q * n * k + j * k + l]));
        const std::size_t at = std::size_t(q * m * n + r * n + j);
        want[at] = float(0.5 * sum - 2.0 * double(float(c[at])));
      }
    }
  }
  d::GemmArgs<bfloat16> g;
  g.ta = Trans::yes;
  g.tb = Trans::yes;
  g.m = m;
  g.n = n;
  g.k = k;
  g.alpha = 0.5f;
  g.a = a.data();
  g.lda = m;
  g.stride_a = k * m;
  g.b = b.data();
  g.ldb = k;
  g.stride_b = n * k;
  g.beta = -2.0f;
  g.c = c.data();
  g.ldc = n;
  g.stride_c = m * n;
  g.batch = batch;
  d::cpu_widened_gemm(g, [](const d::GemmArgs<float>& f) { d::cpu_sgemm(f); });
  std::size_t differ = 0;
  for (std::size_t i = 0; i < c.size(); ++i) differ += c[i].bits() != bfloat16(want[i]).bits();
  CHECK(differ == 0);
}

// A long single product (more than 2 x widened_rows_per_call rows of C) is widened and multiplied in pieces
// of rows (cpu_half.hpp): each element of C is the same sum as in one sgemm of the whole widened operands,
// so the bits are that sgemm's, rounded once — for every transpose, with padded leading dimensions, alpha
// and beta, in bfloat16 and half, and the last piece shorter. One BLAS thread: the reference must not split
// k over threads either.
// On two threads the pieces are twice as long and their conversions are shared by the two (each piece of
// A and of C holds more than min_shared_elements here): the bits do not change.
TEST_CASE("gemm: a long widened product runs in pieces of rows, to the bit the product of the whole widened operands") {
  namespace d = accel::blas::detail;
  const int saved = accel::blas::num_threads();
  const auto check = [&](auto type_tag, int threads, Trans ta, Trans tb, float beta) {
    using H = decltype(type_tag);
    accel::blas::set_num_threads(threads);
    const i64 m = 2 * d::widened_rows_per_call * threads + 77, n = 40, k = 40;
    REQUIRE(m > 2 * d::widened_rows_per_call * threads);  // the pieces' path
    if (threads > 1) REQUIRE(d::widened_rows_per_call * threads * std::min(n, k) >= d::min_shared_elements);
    CAPTURE(threads);
    CAPTURE(int(ta));
    CAPTURE(int(tb));
    CAPTURE(beta);
    const i64 ar = ta == Trans::no ? m : k, ac = ta == Trans::no ? k : m, br = tb == Trans::no ? k : n,
              bc = tb == Trans::no ? n : k;
    const i64 lda = ac + 3, ldb = bc + 1, ldc = n + 5;
    std::vector<H> a(std::size_t(ar * lda)), b(std::size_t(br * ldb)), c(std::size_t(m * ldc));
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = H(fraction(i64(i), 3));
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = H(fraction(i64(i), 4));
    for (std::size_t i = 0; i < c.size(); ++i) c[i] = H(fraction(i64(i), 5));
    // The reference: the whole operands widened (packed), one sgemm, C rounded once.
    std::vector<float> aw(std::size_t(ar * ac)), bw(std::size_t(br * bc)), cw(std::size_t(m * n));
    for (i64 r = 0; r < ar; ++r) d::widen(aw.data() + r * ac, a.data() + r * lda, ac);
    for (i64 r = 0; r < br; ++r) d::widen(bw.data() + r * bc, b.data() + r * ldb, bc);
    for (i64 r = 0; r < m; ++r) d::widen(cw.data() + r * n, c.data() + r * ldc, n);
    // The same problem over the float copies (the reference) and over the 16-bit operands.
    const auto args = [&]<class T>(T* a_, i64 lda_, T* b_, i64 ldb_, T* c_, i64 ldc_) {
      return d::GemmArgs<T>{.ta = ta, .tb = tb, .m = m, .n = n, .k = k, .alpha = 0.75f, .a = a_, .lda = lda_,
                            .b = b_, .ldb = ldb_, .beta = beta, .c = c_, .ldc = ldc_};
    };
    d::cpu_sgemm(args(aw.data(), ac, bw.data(), bc, cw.data(), n));
    const d::GemmArgs<H> g = args(a.data(), lda, b.data(), ldb, c.data(), ldc);
    const std::vector<H> before = c;
    int calls = 0;
    d::cpu_widened_gemm(
        g,
        [&calls](const d::GemmArgs<float>& x) {
          ++calls;
          d::cpu_sgemm(x);
        },
        threads);
    CHECK(calls == 3);  // 512 (1024 on two threads) twice, then 77 rows
    std::size_t differ = 0, padding_changed = 0;
    for (i64 r = 0; r < m; ++r) {
      for (i64 j = 0; j < ldc; ++j) {
        const std::size_t at = std::size_t(r * ldc + j);
        if (j < n) {
          differ += std::bit_cast<std::uint16_t>(c[at]) != std::bit_cast<std::uint16_t>(H(cw[std::size_t(r * n + j)]));
        } else {
          padding_changed += std::bit_cast<std::uint16_t>(c[at]) != std::bit_cast<std::uint16_t>(before[at]);
        }
      }
    }
    CHECK(differ == 0);
    CHECK(padding_changed == 0);
  };
  for (const Trans ta : {Trans::no, Trans::yes}) {
    for (const Trans tb : {Trans::no, Trans::yes}) {
      for (const float beta : {0.0f, -1.25f}) {
        for (const int threads : {1, 2}) {
          check(accel::bfloat16{}, threads, ta, tb, beta);
          check(accel::half{}, threads, ta, tb, beta);
        }
      }
    }
  }
  accel::blas::set_num_threads(saved);
}

// A batch through the whole-copy path with its conversions shared by two threads (cpu_half.hpp): the same
// bits as on one, the gaps between rows and matrices of C untouched. The sgemm runs on one thread both times.
TEST_CASE("gemm: a widened batch converted on two threads gives the bits of one") {
  namespace d = accel::blas::detail;
  const int saved = accel::blas::num_threads();
  accel::blas::set_num_threads(1);
  const i64 m = 200, n = 180, k = 170, batch = 3;
  REQUIRE(m * k * batch >= d::min_shared_elements);
  REQUIRE(m < 2 * d::widened_rows_per_call);  // not the pieces' path
  const auto check = [&](auto type_tag, Trans ta, Trans tb, float beta) {
    using H = decltype(type_tag);
    CAPTURE(int(ta));
    CAPTURE(int(tb));
    CAPTURE(beta);
    const i64 ar = ta == Trans::no ? m : k, ac = ta == Trans::no ? k : m, br = tb == Trans::no ? k : n,
              bc = tb == Trans::no ? n : k;
    const i64 lda = ac + 3, ldb = bc + 1, ldc = n + 5;
    const i64 sa = ar * lda + 7, sb = br * ldb + 2, sc = m * ldc + 11;
    std::vector<H> a(std::size_t(sa * batch)), b(std::size_t(sb * batch)), c(std::size_t(sc * batch));
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = H(fraction(i64(i), 3));
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = H(fraction(i64(i), 4));
    for (std::size_t i = 0; i < c.size(); ++i) c[i] = H(fraction(i64(i), 5));
    d::GemmArgs<H> g{.ta = ta, .tb = tb, .m = m, .n = n, .k = k, .alpha = 0.75f, .a = a.data(), .lda = lda,
                     .stride_a = sa, .b = b.data(), .ldb = ldb, .stride_b = sb, .beta = beta, .ldc = ldc,
                     .stride_c = sc, .batch = batch};  // C: set per run below
    std::vector<H> one = c, two = c;
    const auto sgemm = [](const d::GemmArgs<float>& x) { d::cpu_sgemm(x); };
    g.c = one.data();
    d::cpu_widened_gemm(g, sgemm, 1);
    g.c = two.data();
    d::cpu_widened_gemm(g, sgemm, 2);
    std::size_t differ = 0, changed = 0, gaps_changed = 0;
    for (std::size_t i = 0; i < c.size(); ++i) {
      const i64 in_matrix = i64(i) % sc, col = in_matrix % ldc;
      const bool in_c = in_matrix < m * ldc && col < n;
      differ += std::bit_cast<std::uint16_t>(one[i]) != std::bit_cast<std::uint16_t>(two[i]);
      if (in_c) changed += std::bit_cast<std::uint16_t>(two[i]) != std::bit_cast<std::uint16_t>(c[i]);
      else gaps_changed += std::bit_cast<std::uint16_t>(two[i]) != std::bit_cast<std::uint16_t>(c[i]);
    }
    CHECK(differ == 0);
    CHECK(changed > std::size_t(m * n * batch / 2));  // the product was written
    CHECK(gaps_changed == 0);
  };
  for (const Trans ta : {Trans::no, Trans::yes}) {
    for (const Trans tb : {Trans::no, Trans::yes}) {
      for (const float beta : {0.0f, 0.5f}) {
        check(accel::bfloat16{}, ta, tb, beta);
        check(accel::half{}, ta, tb, beta);
      }
    }
  }
  accel::blas::set_num_threads(saved);
}

// ACCEL_CPU_BLAS_BF16 (blas/detail/cpu_bfloat_choice.hpp): the three names; anything else is refused by every
// bfloat16 GEMM, naming the value, with C untouched — not taken as the default.
TEST_CASE("gemm on the CPU: an unknown ACCEL_CPU_BLAS_BF16 is an InvalidArgumentError naming it") {
  using accel::bfloat16;
  namespace d = accel::blas::detail;
  CHECK(d::parse_bfloat_gemm("") == d::BfloatGemm::automatic);
  CHECK(d::parse_bfloat_gemm("auto") == d::BfloatGemm::automatic);
  CHECK(d::parse_bfloat_gemm("onednn") == d::BfloatGemm::onednn);
  CHECK(d::parse_bfloat_gemm("widened") == d::BfloatGemm::widened);
  for (const char* bad : {"widen", "ONEDNN", "amx", "auto "}) CHECK(d::parse_bfloat_gemm(bad) == d::BfloatGemm::invalid);

  const d::BfloatGemm saved = d::bfloat_gemm_choice().load();
  const char* env = std::getenv("ACCEL_CPU_BLAS_BF16");
  const std::string saved_env = env != nullptr ? env : "";
  ::setenv("ACCEL_CPU_BLAS_BF16", "widen", 1);
  d::bfloat_gemm_choice().store(d::BfloatGemm::invalid);
  const accel::CpuBackend be;
  const accel::cpu::StreamRef s = be.default_stream(0);
  std::vector<bfloat16> a(6, bfloat16(1.0f)), b(6, bfloat16(2.0f)), c(4, bfloat16(-3.0f));
  std::string what;
  try {
    accel::blas::gemm(be, s, Trans::no, Trans::no, 2, 2, 3, 1.0f, a.data(), 3, b.data(), 2, 0.0f, c.data(), 2);
  } catch (const accel::InvalidArgumentError& e) {
    what = e.what();
  }
  CHECK_MESSAGE(what.find("ACCEL_CPU_BLAS_BF16=widen is not one of auto, onednn, widened") != std::string::npos, what);
  for (const bfloat16 v : c) CHECK(v.bits() == bfloat16(-3.0f).bits());
  d::bfloat_gemm_choice().store(saved);
  if (env != nullptr) {
    ::setenv("ACCEL_CPU_BLAS_BF16", saved_env.c_str(), 1);
  } else {
    ::unsetenv("ACCEL_CPU_BLAS_BF16");
  }
}

// Both bfloat16 kernels accumulate in float and round once. On exact problems (small integers) they give
// the same bits; on fractions the widened product is, to the bit, the float sgemm of the widened operands
// rounded once, and the matmul is within one bfloat16 rounding of it (its sums run in another order).
// Under `auto`, a single product on an Intel CPU without AMX is the widened one (measured faster there),
// a batch goes to the matmul, and elsewhere every product does where oneDNN has one.
TEST_CASE("gemm on the CPU: bfloat16 through oneDNN's matmul or widened, as ACCEL_CPU_BLAS_BF16 and the CPU choose") {
  using accel::bfloat16;
  namespace d = accel::blas::detail;
  const d::BfloatGemm saved = d::bfloat_gemm_choice().load();
  const accel::CpuBackend be;
  const accel::cpu::StreamRef s = be.default_stream(0);

  d::GemmArgs<bfloat16> one, two;
  one.m = one.n = one.k = 8;
  two = one;
  two.batch = 2;
  CHECK(d::widen_by_default(one) == (d::intel_cpu() && !d::onednn_has_amx()));
  CHECK_FALSE(d::widen_by_default(two));

  const i64 m = 48, n = 40, k = 96;  // C = A B^T, the engine's forward layout
  std::vector<bfloat16> ai(std::size_t(m * k)), bi(std::size_t(n * k)), af(ai.size()), bf(bi.size());
  for (std::size_t i = 0; i < ai.size(); ++i) {
    ai[i] = bfloat16(float(int(i * 7 % 11) - 5));
    af[i] = bfloat16(fraction(i64(i), 1));
  }
  for (std::size_t i = 0; i < bi.size(); ++i) {
    bi[i] = bfloat16(float(int(i * 5 % 13) - 6));
    bf[i] = bfloat16(fraction(i64(i), 2));
  }
  i64 ldc = n;
  const auto product = [&](const std::vector<bfloat16>& a, const std::vector<bfloat16>& b) {
    std::vector<bfloat16> c(std::size_t(m * ldc), bfloat16(0.5f)), packed(std::size_t(m * n));
    accel::blas::gemm(be, s, Trans::no, Trans::yes, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, c.data(), ldc);
    for (i64 r = 0; r < m; ++r) {
      for (i64 j = 0; j < n; ++j) packed[std::size_t(r * n + j)] = c[std::size_t(r * ldc + j)];
    }
    return packed;
  };
  // The references: exact sums in double; the float sgemm of the widened fractions, rounded once.
  std::vector<float> exact(std::size_t(m * n)), sgemm_c(std::size_t(m * n));
  std::vector<float> awide(af.size()), bwide(bf.size());
  d::widen(awide.data(), af.data(), i64(af.size()));
  d::widen(bwide.data(), bf.data(), i64(bf.size()));
  for (i64 r = 0; r < m; ++r) {
    for (i64 j = 0; j < n; ++j) {
      double sum = 0;
      for (i64 l = 0; l < k; ++l) sum += double(float(ai[std::size_t(r * k + l)])) * double(float(bi[std::size_t(j * k + l)]));
      exact[std::size_t(r * n + j)] = float(sum);
    }
  }
  const d::GemmArgs<float> f{.tb = Trans::yes, .m = m, .n = n, .k = k, .a = awide.data(), .lda = k, .b = bwide.data(),
                             .ldb = k, .c = sgemm_c.data(), .ldc = n};
  d::cpu_sgemm(f);

  const bool has_matmul = accel::cpu_features().avx512f;  // oneDNN 2.6's bf16 matmul needs AVX-512
  for (const d::BfloatGemm choice : {d::BfloatGemm::widened, d::BfloatGemm::onednn, d::BfloatGemm::automatic}) {
    CAPTURE(int(choice));
    d::bfloat_gemm_choice().store(choice);
    if (choice == d::BfloatGemm::onednn && !has_matmul) {
      CHECK_THROWS_AS((void)product(ai, bi), accel::NotSupportedError);
      continue;
    }
    // A problem of its own per choice (C's row stride), so that a matmul primitive is created only for it.
    ldc = n + (choice == d::BfloatGemm::widened ? 0 : choice == d::BfloatGemm::onednn ? 1 : 2);
    const std::size_t primitives = d::bfloat_matmuls().size();
    const std::vector<bfloat16> ci = product(ai, bi), cf = product(af, bf);
    const bool made_primitive = d::bfloat_matmuls().size() > primitives;
    std::size_t wrong_exact = 0, not_widened = 0, beyond_rounding = 0;
    for (std::size_t i = 0; i < ci.size(); ++i) {
      wrong_exact += ci[i].bits() != bfloat16(exact[i]).bits();
      const float want = sgemm_c[i], got = float(cf[i]);
      not_widened += cf[i].bits() != bfloat16(want).bits();
      beyond_rounding += std::fabs(got - want) > 0x1p-7f * std::fabs(want) + 2e-5f;
    }
    CHECK(wrong_exact == 0);
    CHECK(beyond_rounding == 0);
    const bool widened = choice == d::BfloatGemm::widened ||
                         (choice == d::BfloatGemm::automatic && (!has_matmul || d::widen_by_default(one)));
    if (widened) CHECK(not_widened == 0);  // the widened product, to the bit
    CHECK(made_primitive == !widened);      // which kernel ran (the results agree to the bit at this size)
  }
  d::bfloat_gemm_choice().store(saved);
}

// Two streams running the same bf16 problem at once (the engine's lanes): each product must be its
// own. Debian's oneDNN gives every primitive one global scratchpad unless the caller brings its own;
// with the library's, 570 of 600 such products came out wrong on a Zen 5 EPYC.
TEST_CASE("gemm on the CPU: bfloat16 products on two streams at once give the bits of one at a time") {
  using accel::bfloat16;
  namespace d = accel::blas::detail;
  const d::BfloatGemm saved = d::bfloat_gemm_choice().load();
  const int saved_threads = accel::blas::num_threads();
  accel::blas::set_num_threads(1);  // a lane's share on a 2-core machine
  const accel::CpuBackend be;
  accel::cpu::Stream s1, s2;
  const i64 m = 768, n = 512, k = 128;  // the tiny GPT's MLP product, C = A B^T
  std::vector<bfloat16> a1(std::size_t(m * k)), b1(std::size_t(n * k)), a2(a1.size()), b2(b1.size());
  for (std::size_t i = 0; i < a1.size(); ++i) {
    a1[i] = bfloat16(fraction(i64(i), 1));
    a2[i] = bfloat16(fraction(i64(i) + 3 * m * k, 1));  // other values
  }
  for (std::size_t i = 0; i < b1.size(); ++i) {
    b1[i] = bfloat16(fraction(i64(i) + m * k, 1));
    b2[i] = bfloat16(fraction(i64(i) + 2 * m * k, 1));
  }
  for (const d::BfloatGemm choice : {d::BfloatGemm::automatic, d::BfloatGemm::widened}) {
    CAPTURE(int(choice));
    d::bfloat_gemm_choice().store(choice);
    const auto product = [&](const accel::cpu::StreamRef& s, const std::vector<bfloat16>& a, const std::vector<bfloat16>& b,
                             std::vector<bfloat16>& c) {
      accel::blas::gemm(be, s, Trans::no, Trans::yes, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, c.data(), n);
    };
    std::vector<bfloat16> want1(std::size_t(m * n)), want2(want1.size());
    product(s1, a1, b1, want1);
    s1.synchronize();
    product(s1, a2, b2, want2);
    s1.synchronize();
    REQUIRE(want1 != want2);
    const int rounds = 40;
    std::vector<std::vector<bfloat16>> c1(rounds, std::vector<bfloat16>(want1.size())), c2(c1);
    for (int r = 0; r < rounds; ++r) {  // both streams' queues full: their products overlap
      product(s1, a1, b1, c1[std::size_t(r)]);
      product(s2, a2, b2, c2[std::size_t(r)]);
    }
    s1.synchronize();
    s2.synchronize();
    int wrong = 0;
    for (int r = 0; r < rounds; ++r) {
      wrong += c1[std::size_t(r)] != want1;
      wrong += c2[std::size_t(r)] != want2;
    }
    CHECK(wrong == 0);
  }
  d::bfloat_gemm_choice().store(saved);
  accel::blas::set_num_threads(saved_threads);
}

// The other CPU kernels from two streams at once: oneDNN's sgemm (both forms the engine uses), OpenBLAS's
// OpenMP build for the 'T','N' products (CPUs without AVX-512; forced here where it loads), and half's
// widened products. Each stream's products must be its own, as one at a time.
TEST_CASE("gemm on the CPU: float and half products on two streams at once give the bits of one at a time") {
  namespace d = accel::blas::detail;
  const int saved_threads = accel::blas::num_threads();
  const d::TransposedABlas saved_tn = d::transposed_a_blas().load();
  accel::blas::set_num_threads(1);
  const accel::CpuBackend be;
  accel::cpu::Stream s1, s2;
  const i64 m = 384, n = 256, k = 128;
  const auto check = [&](auto zero, Trans ta, const char* what) {
    using T = decltype(zero);
    CAPTURE(what);
    // op(A) is m x k: stored k x m when transposed (the weight gradient's dY^T X).
    const i64 lda = ta == Trans::yes ? m : k;
    std::vector<T> a1(std::size_t(m * k)), b1(std::size_t(n * k)), a2(a1.size()), b2(b1.size());
    for (std::size_t i = 0; i < a1.size(); ++i) {
      a1[i] = T(fraction(i64(i), 1));
      a2[i] = T(fraction(i64(i) + 3 * m * k, 1));
    }
    for (std::size_t i = 0; i < b1.size(); ++i) {
      b1[i] = T(fraction(i64(i) + m * k, 1));
      b2[i] = T(fraction(i64(i) + 2 * m * k, 1));
    }
    const auto product = [&](const accel::cpu::StreamRef& s, const std::vector<T>& a, const std::vector<T>& b, std::vector<T>& c) {
      accel::blas::gemm(be, s, ta, Trans::yes, m, n, k, 1.0f, a.data(), lda, b.data(), k, 0.0f, c.data(), n);
    };
    std::vector<T> want1(std::size_t(m * n)), want2(want1.size());
    product(s1, a1, b1, want1);
    product(s1, a2, b2, want2);
    s1.synchronize();
    const int rounds = 30;
    std::vector<std::vector<T>> c1(rounds, std::vector<T>(want1.size(), zero)), c2(c1);
    for (int r = 0; r < rounds; ++r) {
      product(s1, a1, b1, c1[std::size_t(r)]);
      product(s2, a2, b2, c2[std::size_t(r)]);
    }
    s1.synchronize();
    s2.synchronize();
    const auto same = [](const std::vector<T>& x, const std::vector<T>& y) {
      return std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0;
    };
    int wrong = 0;
    for (int r = 0; r < rounds; ++r) wrong += !same(c1[std::size_t(r)], want1) + !same(c2[std::size_t(r)], want2);
    CHECK(wrong == 0);
  };
  d::transposed_a_blas().store(d::TransposedABlas::onednn);
  check(0.0f, Trans::no, "float, oneDNN, x W^T");
  check(0.0f, Trans::yes, "float, oneDNN, dY^T X");
  if (d::openblas().loaded()) {
    d::transposed_a_blas().store(d::TransposedABlas::openblas);
    check(0.0f, Trans::yes, "float, OpenBLAS, dY^T X");
  } else {
    MESSAGE("OpenBLAS's OpenMP build did not load: " << d::openblas().error);
  }
  d::transposed_a_blas().store(saved_tn);
  check(accel::half(0.0f), Trans::no, "half, widened");
  accel::blas::set_num_threads(saved_threads);
}

TEST_CASE("gemm through AnyBackend: a buffer of another backend than the stream's is refused; a backend without a GEMM says so") {
  // A CPU and a user's backend (tests/concepts/mock_backend.hpp: host memory, no GemmImpl) in one AnyBackend.
  using Two = accel::BasicAnyBackend<accel::CpuBackend, mock::Backend>;
  static_assert(accel::blas::detail::GemmImpl<Two>::supports<float>);  // the CPU's
  const Two be{accel::CpuBackend{}};
  const Two::StreamRef cpu = be.current_stream();
  const Two::StreamRef fake = Two{mock::Backend{}}.current_stream();
  accel::Buffer<float, Two> a(6, cpu), b(6, cpu), c(4, cpu), foreign(6, fake), foreign_c(4, fake);
  std::fill(a.data(), a.data() + 6, 1.0f);  // CPU memory (an AnyBackend buffer has no span())
  std::fill(b.data(), b.data() + 6, 0.5f);
  std::fill(c.data(), c.data() + 4, 7.0f);
  BLAS_CHECK_INVALID(accel::blas::gemm(be, cpu, Trans::no, Trans::no, 2, 2, 3, 1.0f, foreign, 0, 3, b, 0, 2, 0.0f, c, 0, 2),
                     "a is memory of the mock backend, but the stream is a cpu stream");
  BLAS_CHECK_INVALID(accel::blas::gemm(be, cpu, Trans::no, Trans::no, 2, 2, 3, 1.0f, a, 0, 3, foreign, 0, 2, 0.0f, c, 0, 2),
                     "b is memory of the mock backend, but the stream is a cpu stream");
  BLAS_CHECK_INVALID(
      accel::blas::gemm_strided_batched(be, cpu, Trans::no, Trans::no, 2, 2, 3, 1.0f, a, 0, 3, 0, b, 0, 2, 0, 0.0f,
                                        foreign_c, 0, 2, 4, 1),
      "c is memory of the mock backend, but the stream is a cpu stream");
  accel::Buffer<float, Two> foreign_aux(16, fake);  // 2 rows of ldaux = 8 (cuBLASLt's multiple, on every backend)
  BLAS_CHECK_INVALID(accel::blas::gemm_gelu(be, cpu, Trans::no, Trans::no, 2, 2, 3, 1.0f, a, 0, 3, b, 0, 2, 0.0f, c, 0,
                                            2, foreign_aux, 0, 8),
                     "aux is memory of the mock backend, but the stream is a cpu stream");
  // Every operand on the mock backend's stream: the check passes, the backend has no GEMM.
  accel::Buffer<float, Two> mock_b(6, fake);
  bool not_supported = false;
  try {
    accel::blas::gemm(be, fake, Trans::no, Trans::no, 2, 2, 3, 1.0f, foreign, 0, 3, mock_b, 0, 2, 0.0f, foreign_c, 0, 2);
  } catch (const accel::NotSupportedError& e) {
    not_supported = true;
    CHECK_MESSAGE(std::string(e.what()).find("float GEMM is not available on the mock backend") != std::string::npos,
                  e.what());
  }
  CHECK(not_supported);
  // Nothing refused was enqueued; the same call on the CPU's own buffers runs.
  cpu.synchronize();
  CHECK(std::vector<float>(c.data(), c.data() + 4) == std::vector<float>{7.0f, 7.0f, 7.0f, 7.0f});
  accel::blas::gemm(be, cpu, Trans::no, Trans::no, 2, 2, 3, 1.0f, a, 0, 3, b, 0, 2, 0.0f, c, 0, 2);
  cpu.synchronize();
  CHECK(std::vector<float>(c.data(), c.data() + 4) == std::vector<float>{1.5f, 1.5f, 1.5f, 1.5f});
}
