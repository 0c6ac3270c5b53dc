// 16-bit storage in kernel tests (accel::bfloat16, accel::half as H): float vectors rounded into H and
// widened back, their bit patterns, and the storage's dtype and unit roundoff — what the CPU kernels'
// bf16 and fp16 paths are checked with (tests/ops/test_nn_ops_16bit.cpp, tests/engine/test_attention.cpp).
#pragma once

#include <accel/core/dtype.hpp>

#include <cstdint>
#include <type_traits>
#include <vector>

namespace test16 {

template <class H>
constexpr accel::Dtype dtype_of = std::is_same_v<H, accel::bfloat16> ? accel::Dtype::bfloat16 : accel::Dtype::float16;

/// One rounding of a value v is within unit_roundoff<H> * |v| (bf16: 8 significant bits, fp16: 11).
template <class H>
constexpr double unit_roundoff = std::is_same_v<H, accel::bfloat16> ? 0x1p-8 : 0x1p-11;

/// Each float rounded to nearest even into H.
template <class H>
std::vector<H> to16(const std::vector<float>& v) {
  std::vector<H> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = H(v[i]);
  return out;
}
/// Each H as float (exact).
template <class H>
std::vector<float> widen(const std::vector<H>& v) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = static_cast<float>(v[i]);
  return out;
}
template <class H>
std::vector<std::uint16_t> bits16(const std::vector<H>& v) {
  std::vector<std::uint16_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = v[i].bits();
  return out;
}
/// The 16-bit rounding of each float: what a kernel that computes `v` in float32 stores.
template <class H>
std::vector<std::uint16_t> rounded_bits(const std::vector<float>& v) {
  return bits16(to16<H>(v));
}

}  // namespace test16
