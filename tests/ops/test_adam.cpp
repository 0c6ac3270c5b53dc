// CPU fused Adam/AdamW against a float64 reference: fp32 (relative error <= 1e-6 per step, over many
// steps and shapes), AdamW, AMSGrad, maximize, no bias correction, fp16/bf16 grads, bf16 params,
// fp32 master weights with a bf16/fp16 model copy; identical bits at 1 and 2 threads; on a stream.
#include "ops_test_support.hpp"

#include <accel/core/bfloat16.hpp>
#include <accel/core/half.hpp>
#include <accel/cpu/stream.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace {

using accel::Dtype;
using accel::ops::AdamDtypes;
using accel::ops::AdamOptions;
using accel::ops::AdamTensor;

/// One Adam step in double for one element (the same formula as the kernel, torch's).
struct Ref {
  double p, m, v, vmax;
};
Ref ref_step(double p, double g, double m, double v, double vmax, const AdamOptions& o, std::int64_t step) {
  if (o.maximize) g = -g;
  if (!o.adamw) g += o.weight_decay * p;
  if (o.adamw) p *= 1.0 - o.lr * o.weight_decay;
  m = o.beta1 * m + (1.0 - o.beta1) * g;
  v = o.beta2 * v + (1.0 - o.beta2) * g * g;
  double vu = v;
  if (o.amsgrad) {
    vmax = std::max(vmax, v);
    vu = vmax;
  }
  const double bc1 = o.bias_correction ? 1.0 - std::pow(o.beta1, double(step)) : 1.0;
  const double bc2 = o.bias_correction ? 1.0 - std::pow(o.beta2, double(step)) : 1.0;
  p -= (o.lr / bc1) * m / (std::sqrt(vu) / std::sqrt(bc2) + o.eps);
  return {p, m, v, vmax};
}

/// fp32 state of a list of tensors.
struct State {
  std::vector<std::vector<float>> p, g, m, v, vmax;
  explicit State(const std::vector<std::size_t>& sizes, unsigned seed) {
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      p.push_back(ops_test::random_floats(sizes[i], seed + 7 * unsigned(i), -1.0f, 1.0f));
      g.push_back(std::vector<float>(sizes[i]));
      m.push_back(ops_test::random_floats(sizes[i], seed + 7 * unsigned(i) + 1, -0.01f, 0.01f));
      v.push_back(ops_test::random_floats(sizes[i], seed + 7 * unsigned(i) + 2, 0.0f, 1e-4f));
      vmax.push_back(v.back());
    }
  }
  void new_grads(unsigned seed) {
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = ops_test::random_floats(g[i].size(), seed + unsigned(i), -1.0f, 1.0f);
  }
  std::vector<AdamTensor> tensors() {
    std::vector<AdamTensor> t;
    for (std::size_t i = 0; i < p.size(); ++i) {
      t.push_back({p[i].data(), g[i].data(), m[i].data(), v[i].data(), vmax[i].data(), nullptr, std::int64_t(p[i].size())});
    }
    return t;
  }
};

/// |got - want| relative to the magnitude of the terms that made `want` (so cancellation is not blamed).
double rel(double got, double want, double scale) { return std::abs(got - want) / std::max(scale, 1e-30); }

/// Runs `steps` steps on `sizes`, comparing every step with the float64 reference from the same fp32 state.
double max_step_error(const AdamOptions& o, const std::vector<std::size_t>& sizes, int steps) {
  State s(sizes, 42);
  double worst = 0;
  for (int step = 1; step <= steps; ++step) {
    s.new_grads(1000u + unsigned(step));
    const State before = s;
    const auto t = s.tensors();
    ops_test::adam().step_sync(t, o, step);
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      for (std::size_t k = 0; k < sizes[i]; ++k) {
        const double p0 = before.p[i][k], g0 = before.g[i][k], m0 = before.m[i][k], v0 = before.v[i][k];
        const Ref r = ref_step(p0, g0, m0, v0, before.vmax[i][k], o, step);
        // m's terms cancel at times (beta1*m0 against (1-beta1)*g); the absolute error that leaves in
        // m reaches p through step_size * m / denom, so p's scale includes that path too.
        const double gg = std::abs(g0) + o.weight_decay * std::abs(p0);
        const double m_scale = o.beta1 * std::abs(m0) + (1 - o.beta1) * gg;
        const double bc1 = o.bias_correction ? 1.0 - std::pow(o.beta1, double(step)) : 1.0;
        const double bc2 = o.bias_correction ? 1.0 - std::pow(o.beta2, double(step)) : 1.0;
        const double denom = std::sqrt(o.amsgrad ? r.vmax : r.v) / std::sqrt(bc2) + o.eps;
        worst = std::max(worst, rel(s.m[i][k], r.m, m_scale));
        worst = std::max(worst, rel(s.v[i][k], r.v, o.beta2 * v0 + (1 - o.beta2) * gg * gg));
        worst = std::max(worst, rel(s.p[i][k], r.p, std::abs(p0) + std::abs(r.p - p0) + o.lr / bc1 * m_scale / denom));
        if (o.amsgrad) worst = std::max(worst, rel(s.vmax[i][k], r.vmax, r.vmax));
      }
    }
  }
  return worst;
}

const std::vector<std::size_t> shapes{1, 3, 64, 1000, 4097, 65536 + 5, 250001};

}  // namespace

TEST_CASE("cpu fused Adam matches a float64 reference (fp32, relative error <= 1e-6 per step)") {
  AdamOptions o;
  o.weight_decay = 0.0;
  SUBCASE("Adam") {}
  SUBCASE("Adam with L2 weight decay") { o.weight_decay = 0.01; }
  SUBCASE("AdamW") {
    o.adamw = true;
    o.weight_decay = 0.1;
    o.lr = 3e-3;
  }
  SUBCASE("AMSGrad") {
    o.amsgrad = true;
    o.weight_decay = 0.01;
  }
  SUBCASE("AdamW + AMSGrad + maximize") {
    o.adamw = o.amsgrad = o.maximize = true;
    o.weight_decay = 0.05;
  }
  SUBCASE("no bias correction, other betas") {
    o.bias_correction = false;
    o.beta1 = 0.8;
    o.beta2 = 0.95;
    o.eps = 1e-6;
  }
  const double err = max_step_error(o, shapes, 12);
  MESSAGE("max relative error per step: " << err);
  CHECK(err <= 1e-6);
}

TEST_CASE("cpu fused Adam over many steps stays within 1e-5 of a float64 trajectory") {
  AdamOptions o;
  o.adamw = true;
  o.weight_decay = 0.01;
  const std::size_t n = 20000;
  State s({n}, 7);
  std::vector<double> p(s.p[0].begin(), s.p[0].end()), m(s.m[0].begin(), s.m[0].end()), v(s.v[0].begin(), s.v[0].end());
  for (int step = 1; step <= 200; ++step) {
    s.new_grads(unsigned(step));
    const auto t = s.tensors();
    ops_test::adam().step_sync(t, o, step);
    for (std::size_t k = 0; k < n; ++k) {
      const Ref r = ref_step(p[k], s.g[0][k], m[k], v[k], 0, o, step);
      p[k] = r.p;
      m[k] = r.m;
      v[k] = r.v;
    }
  }
  double worst = 0;
  for (std::size_t k = 0; k < n; ++k) worst = std::max(worst, std::abs(s.p[0][k] - p[k]) / std::max(std::abs(p[k]), 1e-2));
  MESSAGE("max relative drift of params after 200 steps: " << worst);
  CHECK(worst <= 1e-5);
}

TEST_CASE("cpu fused Adam gives identical bits at 1 and 2 threads") {
  AdamOptions o;
  o.amsgrad = true;
  o.weight_decay = 0.01;
  auto one = ops_test::adam();
  one.set_num_threads(1);
  auto two = ops_test::adam();
  two.set_num_threads(2);
  auto three = ops_test::adam();
  three.set_num_threads(3);
  State a(shapes, 3), b(shapes, 3), c(shapes, 3);
  for (int step = 1; step <= 5; ++step) {
    a.new_grads(unsigned(step));
    b.new_grads(unsigned(step));
    c.new_grads(unsigned(step));
    one.step_sync(a.tensors(), o, step);
    two.step_sync(b.tensors(), o, step);
    three.step_sync(c.tensors(), o, step);
  }
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    CHECK(std::memcmp(a.p[i].data(), b.p[i].data(), shapes[i] * 4) == 0);
    CHECK(std::memcmp(a.m[i].data(), b.m[i].data(), shapes[i] * 4) == 0);
    CHECK(std::memcmp(a.v[i].data(), b.v[i].data(), shapes[i] * 4) == 0);
    CHECK(std::memcmp(a.vmax[i].data(), b.vmax[i].data(), shapes[i] * 4) == 0);
    CHECK(std::memcmp(a.p[i].data(), c.p[i].data(), shapes[i] * 4) == 0);
  }
}

// The fp32 kernel computes blocks of 128 elements in vector registers and the rest element by element
// (kernels/cpu/fused_adam.cpp): the same values shifted by 1..130 places land in the other path, and
// must come out with the same bits.
TEST_CASE("cpu fused Adam: the vector blocks and the scalar tail give the same bits") {
  for (const bool amsgrad : {false, true}) {
    AdamOptions o;
    o.adamw = !amsgrad;
    o.amsgrad = amsgrad;
    o.weight_decay = 0.01;
    auto op = ops_test::adam();
    op.set_num_threads(1);
    const std::size_t n = 300;
    const State base({n}, 11);
    for (const std::size_t shift : {std::size_t{1}, std::size_t{17}, std::size_t{64}, std::size_t{127}, std::size_t{130}}) {
      CAPTURE(amsgrad);
      CAPTURE(shift);
      State a = base;
      State b({n + shift}, 12);  // b's last n elements hold a's values
      for (const auto arrays : {&State::p, &State::m, &State::v, &State::vmax}) {
        std::copy((a.*arrays)[0].begin(), (a.*arrays)[0].end(), (b.*arrays)[0].begin() + std::ptrdiff_t(shift));
      }
      for (int step = 1; step <= 3; ++step) {
        a.new_grads(unsigned(step));
        b.new_grads(unsigned(step + 100));
        std::copy(a.g[0].begin(), a.g[0].end(), b.g[0].begin() + std::ptrdiff_t(shift));
        op.step_sync(a.tensors(), o, step);
        op.step_sync(b.tensors(), o, step);
      }
      CHECK(std::memcmp(a.p[0].data(), b.p[0].data() + shift, n * 4) == 0);
      CHECK(std::memcmp(a.m[0].data(), b.m[0].data() + shift, n * 4) == 0);
      CHECK(std::memcmp(a.v[0].data(), b.v[0].data() + shift, n * 4) == 0);
      CHECK(std::memcmp(a.vmax[0].data(), b.vmax[0].data() + shift, n * 4) == 0);
    }
  }
}

TEST_CASE("cpu fused Adam: fp32 master weights write a bf16 / fp16 model copy in the same pass") {
  for (const Dtype copy : {Dtype::bfloat16, Dtype::float16}) {
    CAPTURE(copy);
    const std::size_t n = 10007;
    State s({n}, 11);
    s.new_grads(5);
    std::vector<std::uint16_t> model(n, 0xFFFF);
    auto t = s.tensors();
    t[0].model_copy = model.data();
    AdamOptions o;
    ops_test::adam().step_sync(t, o, 1, AdamDtypes{Dtype::float32, Dtype::float32, copy});
    for (std::size_t k = 0; k < n; ++k) {
      const std::uint16_t want =
          copy == Dtype::bfloat16 ? accel::bfloat16(s.p[0][k]).bits() : accel::half(s.p[0][k]).bits();
      if (model[k] != want) {
        FAIL_CHECK("element " << k << ": model copy " << model[k] << " != round(param) " << want);
        break;
      }
    }
  }
}

TEST_CASE("cpu fused Adam: bf16 and fp16 gradients with fp32 params") {
  for (const Dtype gd : {Dtype::bfloat16, Dtype::float16}) {
    CAPTURE(gd);
    const std::size_t n = 5003;
    State s({n}, 13);
    s.new_grads(9);
    std::vector<std::uint16_t> g16(n);
    for (std::size_t k = 0; k < n; ++k) {
      g16[k] = gd == Dtype::bfloat16 ? accel::bfloat16(s.g[0][k]).bits() : accel::half(s.g[0][k]).bits();
      s.g[0][k] = gd == Dtype::bfloat16 ? float(accel::bfloat16::from_bits(g16[k])) : float(accel::half::from_bits(g16[k]));
    }
    State f32 = s;  // the same step with the decoded grads in fp32 must give the same bits
    auto t = s.tensors();
    t[0].grad = g16.data();
    AdamOptions o;
    o.weight_decay = 0.01;
    ops_test::adam().step_sync(t, o, 3, AdamDtypes{Dtype::float32, gd, std::nullopt});
    ops_test::adam().step_sync(f32.tensors(), o, 3);
    CHECK(std::memcmp(s.p[0].data(), f32.p[0].data(), n * 4) == 0);
    CHECK(std::memcmp(s.v[0].data(), f32.v[0].data(), n * 4) == 0);
  }
}

TEST_CASE("cpu fused Adam: bf16 params and states are the fp32 update rounded to bf16") {
  const std::size_t n = 4099;
  State s({n}, 17);
  s.new_grads(21);
  std::vector<std::uint16_t> p(n), g(n), m(n), v(n);
  for (std::size_t k = 0; k < n; ++k) {
    p[k] = accel::bfloat16(s.p[0][k]).bits();
    g[k] = accel::bfloat16(s.g[0][k]).bits();
    m[k] = accel::bfloat16(s.m[0][k]).bits();
    v[k] = accel::bfloat16(s.v[0][k]).bits();
    s.p[0][k] = float(accel::bfloat16::from_bits(p[k]));
    s.g[0][k] = float(accel::bfloat16::from_bits(g[k]));
    s.m[0][k] = float(accel::bfloat16::from_bits(m[k]));
    s.v[0][k] = float(accel::bfloat16::from_bits(v[k]));
  }
  AdamOptions o;
  o.adamw = true;
  o.weight_decay = 0.01;
  const AdamTensor t{p.data(), g.data(), m.data(), v.data(), nullptr, nullptr, std::int64_t(n)};
  ops_test::adam().step_sync(std::span(&t, 1), o, 2, AdamDtypes{Dtype::bfloat16, Dtype::bfloat16, std::nullopt});
  ops_test::adam().step_sync(s.tensors(), o, 2);  // the fp32 step from the same (decoded) values
  for (std::size_t k = 0; k < n; ++k) {
    REQUIRE(p[k] == accel::bfloat16(s.p[0][k]).bits());
    REQUIRE(m[k] == accel::bfloat16(s.m[0][k]).bits());
    REQUIRE(v[k] == accel::bfloat16(s.v[0][k]).bits());
  }
}

TEST_CASE("adam_hparams and adam_tensors: the kernel's arguments, and every bad input named") {
  using accel::ops::adam_hparams;
  using accel::ops::adam_tensors;
  namespace abi = accel::ops::abi;
  AdamOptions o;
  o.lr = 1e-3;
  o.weight_decay = 0.1;
  o.adamw = true;
  const auto h = adam_hparams(o, 3, {});
  CHECK(h.step_size == static_cast<float>(1e-3 / (1 - 0.9 * 0.9 * 0.9)));
  CHECK(h.inv_bc2_sqrt == static_cast<float>(1 / std::sqrt(1 - std::pow(0.999, 3.0))));
  CHECK(h.decay_factor == static_cast<float>(1 - 1e-3 * 0.1));
  CHECK(h.one_minus_beta1 == static_cast<float>(1 - 0.9));
  CHECK(h.one_minus_beta2 == static_cast<float>(1 - 0.999));
  CHECK(h.adamw == 1);
  CHECK(h.amsgrad == 0);
  CHECK(h.param_dtype == abi::code(Dtype::float32));
  CHECK(h.model_copy_dtype == abi::no_dtype);
  AdamOptions plain = o;
  plain.adamw = false;  // L2 regularisation: the decay goes into the gradient, not a factor
  plain.bias_correction = false;
  const auto hp = adam_hparams(plain, 3, AdamDtypes{Dtype::float32, Dtype::bfloat16, Dtype::float16});
  CHECK(hp.step_size == 1e-3f);
  CHECK(hp.inv_bc2_sqrt == 1.0f);
  CHECK(hp.decay_factor == 1.0f);
  CHECK(hp.grad_dtype == abi::code(Dtype::bfloat16));
  CHECK(hp.model_copy_dtype == abi::code(Dtype::float16));

  const auto error = [](auto&& call) -> std::string {
    try {
      (void)call();
    } catch (const accel::InvalidArgumentError& e) {
      return e.what();
    }
    return "no error";
  };
  const auto with = [&](auto change) {
    AdamOptions c = o;
    change(c);
    return error([&] { return adam_hparams(c, 1, {}); });
  };
  CHECK(with([](AdamOptions& c) { c.lr = -1e-3; }) == "fused_adam: lr = -0.001 must be >= 0");
  CHECK(with([](AdamOptions& c) { c.beta1 = 1.0; }) == "fused_adam: beta1 = 1 must be in [0, 1)");
  CHECK(with([](AdamOptions& c) { c.beta2 = -0.5; }) == "fused_adam: beta2 = -0.5 must be in [0, 1)");
  CHECK(with([](AdamOptions& c) { c.eps = std::nan(""); }) == "fused_adam: eps = nan must be >= 0");
  CHECK(with([](AdamOptions& c) { c.weight_decay = -0.1; }) == "fused_adam: weight_decay = -0.1 must be >= 0");
  CHECK(error([&] { return adam_hparams(o, 0, {}); }) == "fused_adam: step must be >= 1 (torch counts from 1), got 0");
  CHECK(error([&] { return adam_hparams(o, 1, AdamDtypes{Dtype::float16, Dtype::float32, {}}); }) ==
        "fused_adam: param dtype must be float32 or bfloat16, got float16");
  CHECK(error([&] { return adam_hparams(o, 1, AdamDtypes{Dtype::float32, Dtype::int32, {}}); }) ==
        "fused_adam: grad dtype must be float32, float16 or bfloat16, got int32");
  CHECK(error([&] { return adam_hparams(o, 1, AdamDtypes{Dtype::float32, Dtype::float32, Dtype::float32}); }) ==
        "fused_adam: model copy dtype must be float16 or bfloat16, got float32");
  CHECK(error([&] { return adam_hparams(o, 1, AdamDtypes{Dtype::bfloat16, Dtype::bfloat16, Dtype::bfloat16}); }) ==
        "fused_adam: a model copy needs float32 (master) params");

  float p[4], g[4], m[4], v[4], mx[4];
  const AdamTensor full{p, g, m, v, mx, nullptr, 4};
  const AdamTensor empty{nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0};  // nothing to step: no pointers needed
  const AdamTensor list[] = {full, empty};
  const auto t = adam_tensors(list, o, {});
  REQUIRE(t.size() == 2);
  CHECK(t[0].param == p);
  CHECK(t[0].numel == 4);
  CHECK(t[0].max_exp_avg_sq == nullptr);  // amsgrad off: the kernel must not touch it
  AdamOptions ams = o;
  ams.amsgrad = true;
  CHECK(adam_tensors(list, ams, {})[0].max_exp_avg_sq == mx);
  const auto tensor_error = [&](AdamTensor x, const AdamOptions& opt, const AdamDtypes& d) {
    const AdamTensor two[] = {full, x};
    return error([&] { return adam_tensors(two, opt, d); });
  };
  AdamTensor x = full;
  x.numel = -1;
  CHECK(tensor_error(x, o, {}) == "fused_adam: tensor 1: numel is negative");
  x = full;
  x.exp_avg_sq = nullptr;
  CHECK(tensor_error(x, o, {}) == "fused_adam: tensor 1: exp_avg_sq is null (numel 4)");
  x = full;
  x.grad = nullptr;
  CHECK(tensor_error(x, o, {}) == "fused_adam: tensor 1: grad is null (numel 4)");
  x = full;
  x.max_exp_avg_sq = nullptr;
  CHECK(tensor_error(x, o, {}) == "no error");
  CHECK(tensor_error(x, ams, {}) == "fused_adam: tensor 1: amsgrad needs max_exp_avg_sq");
  CHECK(error([&] { return adam_tensors(std::span(&full, 1), o, AdamDtypes{Dtype::float32, Dtype::float32, Dtype::bfloat16}); }) ==
        "fused_adam: tensor 0: a model copy dtype is set but model_copy is null");
}

TEST_CASE("cpu fused Adam runs in stream order and checks its arguments when called") {
  accel::cpu::Stream stream;
  State a({1000, 2000}, 5), b({1000, 2000}, 5);
  a.new_grads(1);
  b.new_grads(1);
  AdamOptions o;
  const auto ta = a.tensors();
  ops_test::adam().step(stream, ta, o, 1);
  ops_test::adam().step(stream, ta, o, 2);
  stream.synchronize();
  ops_test::adam().step_sync(b.tensors(), o, 1);
  ops_test::adam().step_sync(b.tensors(), o, 2);
  CHECK(std::memcmp(a.p[1].data(), b.p[1].data(), 2000 * 4) == 0);

  auto bad = a.tensors();
  bad[0].exp_avg = nullptr;
  CHECK_THROWS_AS(ops_test::adam().step(stream, bad, o, 3), accel::InvalidArgumentError);
  CHECK_THROWS_AS(ops_test::adam().step(stream, a.tensors(), o, 0), accel::InvalidArgumentError);
  AdamOptions ams = o;
  ams.amsgrad = true;
  bad = a.tensors();
  bad[1].max_exp_avg_sq = nullptr;
  CHECK_THROWS_AS(ops_test::adam().step(stream, bad, ams, 3), accel::InvalidArgumentError);
  CHECK_THROWS_AS(ops_test::adam().step(stream, a.tensors(), o, 3, AdamDtypes{Dtype::float16, Dtype::float32, {}}),
                  accel::InvalidArgumentError);
  stream.synchronize();
}
