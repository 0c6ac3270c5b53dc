// accel's CPU fused Adam against torch.optim.Adam/AdamW (torch 2.x, foreach=False): 5 cases (L2 and
// decoupled weight decay, AMSGrad, maximize), 1024 params, 20 steps, inputs from an integer hash that
// benchmarks/ops/torch_adam.py generates the same way. data/torch_adam_reference.bin holds torch's
// params and states after the 20 steps (regenerate: python3 benchmarks/ops/torch_adam.py reference <file>).
#include "ops_test_support.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

float x(std::uint32_t k, std::uint32_t s, std::uint32_t seed) {
  const std::uint32_t h = k * 2654435761u + s * 40503u + seed * 97u;
  return static_cast<float>((static_cast<double>(h % 20001u) - 10000.0) / 10000.0);
}

template <class T>
T take(const std::string& bytes, std::size_t& at) {
  T v;
  std::memcpy(&v, bytes.data() + at, sizeof v);
  at += sizeof v;
  return v;
}

}  // namespace

TEST_CASE("cpu fused Adam matches torch.optim.Adam / AdamW (20 steps)") {
  const std::string bytes = ops_test::read_text(std::filesystem::path(ACCEL_OPS_TEST_DATA_DIR) / "torch_adam_reference.bin");
  REQUIRE(bytes.size() > 20);
  REQUIRE(bytes.compare(0, 8, "ACCELTR1") == 0);
  std::size_t at = 8;
  const auto n = take<std::uint32_t>(bytes, at), steps = take<std::uint32_t>(bytes, at), cases = take<std::uint32_t>(bytes, at);
  for (std::uint32_t c = 0; c < cases; ++c) {
    const std::string name(bytes.data() + at, strnlen(bytes.data() + at, 64));
    at += 64;
    CAPTURE(name);
    accel::ops::AdamOptions o;
    o.lr = take<double>(bytes, at);
    o.beta1 = take<double>(bytes, at);
    o.beta2 = take<double>(bytes, at);
    o.eps = take<double>(bytes, at);
    o.weight_decay = take<double>(bytes, at);
    const auto flags = take<std::uint32_t>(bytes, at), seed = take<std::uint32_t>(bytes, at);
    o.adamw = (flags & 1) != 0;
    o.amsgrad = (flags & 2) != 0;
    o.maximize = (flags & 4) != 0;
    std::vector<std::vector<float>> want(4, std::vector<float>(n));
    for (auto& w : want) {
      std::memcpy(w.data(), bytes.data() + at, n * 4);
      at += n * 4;
    }
    std::vector<float> p(n), g(n), m(n, 0.0f), v(n, 0.0f), vmax(n, 0.0f);
    for (std::uint32_t k = 0; k < n; ++k) p[k] = 0.5f * x(k, 1000, seed);
    const accel::ops::AdamTensor t{p.data(), g.data(), m.data(), v.data(), vmax.data(), nullptr, std::int64_t(n)};
    for (std::uint32_t s = 1; s <= steps; ++s) {
      for (std::uint32_t k = 0; k < n; ++k) g[k] = x(k, s, seed);
      ops_test::adam().step_sync(std::span(&t, 1), o, s);
    }
    const std::vector<float>* got[4] = {&p, &m, &v, &vmax};
    const char* names[4] = {"param", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
    for (int a = 0; a < 4; ++a) {
      if (a == 3 && !o.amsgrad) continue;
      // Normwise: max |accel - torch| / max |torch|. The two compute each step in fp32 with different
      // operation orders (torch: lerp, sqrt(v)/sqrt(bc2) + eps, addcdiv), so ulps differ; elementwise
      // ratios blow up where a state crosses zero.
      double diff = 0, scale = 0;
      for (std::uint32_t k = 0; k < n; ++k) {
        diff = std::max(diff, std::abs(double((*got[a])[k]) - double(want[a][k])));
        scale = std::max(scale, std::abs(double(want[a][k])));
      }
      const double rel = diff / scale;
      MESSAGE(name << " " << std::string(names[a]) << ": max |accel - torch| / max |torch| = " << rel);
      CHECK(rel <= 1e-6);
    }
  }
}
