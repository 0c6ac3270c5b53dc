// CPU tensor ops: fill, cast, scale (bit-exact against accel::half / accel::bfloat16), the multi-tensor
// L2 norm (float64 reference, same bits at any thread count) and isfinite.
#include "ops_test_support.hpp"

#include <accel/core/bfloat16.hpp>
#include <accel/core/half.hpp>
#include <accel/cpu/stream.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace {

using accel::Dtype;
using accel::ops::TensorRef;

std::uint16_t bits16(float x, Dtype d) { return d == Dtype::bfloat16 ? accel::bfloat16(x).bits() : accel::half(x).bits(); }

/// Interesting floats: subnormals of every format, ties, overflow, inf, NaN.
std::vector<float> specials() {
  std::vector<float> v = ops_test::random_floats(5000, 1, -70000.0f, 70000.0f);
  const auto small = ops_test::random_floats(3000, 2, -1e-4f, 1e-4f);
  v.insert(v.end(), small.begin(), small.end());
  for (float x : {0.0f, -0.0f, 1.0f, 65504.0f, 65520.0f, 65519.99f, 6.1e-5f, 5.96e-8f, 2.98e-8f, 1e-40f, -1e-45f,
                  3.0e38f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), 1.00390625f, 1.0009765625f}) {
    v.push_back(x);
  }
  for (std::uint32_t i = 0; i < 4096; ++i) {  // a sweep of bit patterns, NaNs included
    const std::uint32_t u = i * 1048573u;
    float f;
    std::memcpy(&f, &u, 4);
    v.push_back(f);
  }
  return v;
}

}  // namespace

TEST_CASE("cpu tensor ops: cast float32 -> float16/bfloat16 -> float32 is bit-exact with accel's types") {
  const auto& ops = ops_test::tensor_ops().host();
  const auto src = specials();
  const auto n = std::int64_t(src.size());
  for (const Dtype d : {Dtype::float16, Dtype::bfloat16}) {
    CAPTURE(d);
    std::vector<std::uint16_t> narrow(src.size());
    ops.cast(narrow.data(), d, src.data(), Dtype::float32, n);
    std::vector<float> back(src.size());
    ops.cast(back.data(), Dtype::float32, narrow.data(), d, n);
    for (std::size_t i = 0; i < src.size(); ++i) {
      const std::uint16_t want = bits16(src[i], d);
      const float want_back = d == Dtype::bfloat16 ? float(accel::bfloat16::from_bits(want)) : float(accel::half::from_bits(want));
      if (narrow[i] != want || std::memcmp(&back[i], &want_back, 4) != 0) {
        FAIL_CHECK("value " << src[i] << ": got " << narrow[i] << " want " << want);
        break;
      }
    }
    // 16-bit -> other 16-bit goes through float32 exactly.
    std::vector<std::uint16_t> other(src.size());
    const Dtype o = d == Dtype::float16 ? Dtype::bfloat16 : Dtype::float16;
    ops.cast(other.data(), o, narrow.data(), d, n);
    for (std::size_t i = 0; i < src.size(); ++i) {
      const float mid = d == Dtype::bfloat16 ? float(accel::bfloat16::from_bits(narrow[i])) : float(accel::half::from_bits(narrow[i]));
      REQUIRE(other[i] == bits16(mid, o));
    }
  }
}

TEST_CASE("cpu tensor ops: fill and scale") {
  const auto& ops = ops_test::tensor_ops().host();
  std::vector<float> f(1001, 0.0f);
  ops.fill(f.data(), Dtype::float32, 1001, 2.5f);
  for (float x : f) REQUIRE(x == 2.5f);
  std::vector<std::uint16_t> h(777, 0);
  ops.fill(h.data(), Dtype::bfloat16, 777, 0.1f);
  for (auto x : h) REQUIRE(x == accel::bfloat16(0.1f).bits());
  ops.fill(h.data(), Dtype::float16, 777, -3.0f);
  for (auto x : h) REQUIRE(x == accel::half(-3.0f).bits());

  const auto src = ops_test::random_floats(10000, 3, -10, 10);
  std::vector<float> dst(src.size());
  ops.scale(dst.data(), Dtype::float32, src.data(), Dtype::float32, 10000, 0.125f);
  for (std::size_t i = 0; i < src.size(); ++i) REQUIRE(dst[i] == src[i] * 0.125f);
  ops.scale(dst.data(), Dtype::float32, dst.data(), Dtype::float32, 10000, 8.0f);  // in place
  for (std::size_t i = 0; i < src.size(); ++i) REQUIRE(dst[i] == src[i]);
  std::vector<std::uint16_t> b(src.size());
  ops.scale(b.data(), Dtype::bfloat16, src.data(), Dtype::float32, 10000, 3.0f);
  for (std::size_t i = 0; i < src.size(); ++i) REQUIRE(b[i] == accel::bfloat16(src[i] * 3.0f).bits());
  CHECK_THROWS_WITH_AS(ops.fill(f.data(), Dtype::int32, 1, 0),
                       doctest::Contains("dtype must be float32, float16 or bfloat16, got int32"),
                       accel::InvalidArgumentError);
  // Refused before the kernel runs (a null pointer would have crashed the stream's worker), the
  // argument named; nothing written.
  const std::vector<float> before = f;
  CHECK_THROWS_WITH_AS(ops.fill(nullptr, Dtype::float32, 10, 1.0f), "tensor_ops fill: dst is a null pointer with 10 elements",
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(ops.fill(f.data(), Dtype::float32, -1, 1.0f), "tensor_ops fill: n = -1 is negative",
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(ops.scale(f.data(), Dtype::float32, nullptr, Dtype::float32, 5, 2.0f),
                       "tensor_ops scale: src is a null pointer with 5 elements", accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(ops.scale(f.data() + 1, Dtype::float32, f.data(), Dtype::float32, 100, 2.0f),
                       doctest::Contains("tensor_ops scale: dst overlaps src (100 elements, float32 from float32)"),
                       accel::InvalidArgumentError);
  // a narrowing cast onto its own source: each bf16 write would land on a float not yet read
  CHECK_THROWS_WITH_AS(ops.cast(f.data(), Dtype::bfloat16, f.data(), Dtype::float32, 100),
                       doctest::Contains("only exactly in place between dtypes of one size is allowed"),
                       accel::InvalidArgumentError);
  CHECK(f == before);
  float total = 0;
  const TensorRef one{f.data(), 4, Dtype::float32};
  CHECK_THROWS_WITH_AS(ops.l2norm(std::span(&one, 1), nullptr), "tensor_ops l2norm: total is null", accel::InvalidArgumentError);
  ops.l2norm(std::span(&one, 1), &total);
  CHECK(total == doctest::Approx(std::sqrt(4 * 2.5 * 2.5)));
  ops.scale(f.data(), Dtype::float32, f.data(), Dtype::float32, 1001, 2.0f);  // exactly in place: allowed
  CHECK(f[1000] == 5.0f);
  ops.fill(nullptr, Dtype::float32, 0, 1.0f);  // nothing to write: no pointer needed
  CHECK_THROWS_WITH_AS(ops_test::tensor_ops().set_num_threads(-1),
                       "HostTensorOps::set_num_threads: n = -1 (it must be >= 0; 0: every core)", accel::InvalidArgumentError);
  // the stream forms check when called, not in the task
  accel::cpu::Stream stream;
  CHECK_THROWS_WITH_AS(ops_test::tensor_ops().fill(stream, nullptr, Dtype::float32, 10, 1.0f),
                       "tensor_ops fill: dst is a null pointer with 10 elements", accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(ops_test::tensor_ops().cast(stream, f.data() + 2, Dtype::float32, f.data(), Dtype::float32, 10),
                       doctest::Contains("dst overlaps src"), accel::InvalidArgumentError);
  stream.synchronize();  // nothing failed on the stream
}

TEST_CASE("cpu tensor ops: multi-tensor L2 norm (float64 reference, thread-count independent)") {
  std::vector<std::vector<float>> f32;
  for (std::size_t n : {1ul, 100ul, 8192ul, 8193ul, 300000ul}) f32.push_back(ops_test::random_floats(n, unsigned(n), -2, 2));
  std::vector<std::uint16_t> bf(12345);
  for (std::size_t i = 0; i < bf.size(); ++i) bf[i] = accel::bfloat16(float(i % 17) - 8.0f).bits();
  std::vector<TensorRef> refs;
  double want_total = 0;
  std::vector<double> want;
  for (auto& v : f32) {
    refs.push_back({v.data(), std::int64_t(v.size()), Dtype::float32});
    double s = 0;
    for (float x : v) s += double(x) * x;
    want.push_back(std::sqrt(s));
    want_total += s;
  }
  refs.push_back({bf.data(), std::int64_t(bf.size()), Dtype::bfloat16});
  {
    double s = 0;
    for (auto b : bf) s += double(float(accel::bfloat16::from_bits(b))) * float(accel::bfloat16::from_bits(b));
    want.push_back(std::sqrt(s));
    want_total += s;
  }
  auto one = ops_test::tensor_ops();
  one.set_num_threads(1);
  auto two = ops_test::tensor_ops();
  two.set_num_threads(2);
  std::vector<float> per1(refs.size()), per2(refs.size());
  const float t1 = one.l2norm_sync(refs, per1.data());
  const float t2 = two.l2norm_sync(refs, per2.data());
  CHECK(std::memcmp(&t1, &t2, 4) == 0);
  CHECK(std::memcmp(per1.data(), per2.data(), per1.size() * 4) == 0);
  CHECK(std::abs(t1 - std::sqrt(want_total)) <= 1e-6 * std::sqrt(want_total));  // summed in double
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(std::abs(per1[i] - want[i]) <= 1e-6 * want[i]);

  // On a stream, in order.
  accel::cpu::Stream s;
  float total = -1;
  two.l2norm(s, refs, &total);
  s.synchronize();
  CHECK(total == t1);
}

TEST_CASE("cpu tensor ops: all_finite finds inf and NaN in every float dtype") {
  const auto& ops = ops_test::tensor_ops();
  std::vector<float> a = ops_test::random_floats(50000, 9, -1, 1);
  std::vector<std::uint16_t> h(3000, accel::half(1.0f).bits()), b(3000, accel::bfloat16(1.0f).bits());
  const std::vector<TensorRef> refs{{a.data(), 50000, Dtype::float32}, {h.data(), 3000, Dtype::float16},
                                    {b.data(), 3000, Dtype::bfloat16}};
  CHECK(ops.all_finite_sync(refs));
  a[49999] = std::numeric_limits<float>::quiet_NaN();
  CHECK_FALSE(ops.all_finite_sync(refs));
  a[49999] = 0;
  h[1234] = accel::half(std::numeric_limits<float>::infinity()).bits();
  CHECK_FALSE(ops.all_finite_sync(refs));
  h[1234] = 0;
  b[0] = accel::bfloat16(-std::numeric_limits<float>::infinity()).bits();
  CHECK_FALSE(ops.all_finite_sync(refs));
  b[0] = accel::bfloat16(65504.0f * 1e30f).bits();  // finite in bf16
  CHECK(ops.all_finite_sync(refs));
  accel::cpu::Stream s;
  int flag = -1;
  ops.all_finite(s, refs, &flag);
  s.synchronize();
  CHECK(flag == 1);
  // A bad tensor is named by its index and what is wrong with it.
  std::vector<TensorRef> bad = refs;
  bad[2].numel = -3;
  CHECK_THROWS_WITH_AS((void)ops.all_finite_sync(bad), "tensor_ops all_finite: tensor 2 has numel -3",
                       accel::InvalidArgumentError);
  bad = refs;
  bad[1].data = nullptr;
  CHECK_THROWS_WITH_AS((void)ops.all_finite_sync(bad), "tensor_ops all_finite: tensor 1 is a null pointer with 3000 elements",
                       accel::InvalidArgumentError);
  bad[1].numel = 0;  // an empty tensor needs no memory
  CHECK(ops.all_finite_sync(bad));
}
