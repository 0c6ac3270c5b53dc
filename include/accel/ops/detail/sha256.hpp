// accel/ops/detail/sha256.hpp — SHA-256 (FIPS 180-4) and a fast 64-bit checksum, for the JIT cache.
//
// Sha256 names cache entries: its input is every byte that decides what a compile produces (sources,
// headers, flags, compiler identity, architecture), so two different builds never share an entry.
// checksum64() guards an entry's payload against truncation and bit rot; it is not cryptographic and
// does not need to be (the cache trusts its own directory), but it is fast enough to run on every load.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace accel::ops::detail {

class Sha256 {
 public:
  Sha256() noexcept = default;

  Sha256& update(const void* data, std::size_t size) noexcept {
    const auto* p = static_cast<const unsigned char*>(data);
    total_ += size;
    while (size > 0) {
      const std::size_t take = std::min<std::size_t>(64 - used_, size);
      std::memcpy(block_.data() + used_, p, take);
      used_ += take;
      p += take;
      size -= take;
      if (used_ == 64) {
        compress(block_.data());
        used_ = 0;
      }
    }
    return *this;
  }
  Sha256& update(std::string_view text) noexcept { return update(text.data(), text.size()); }
  /// Adds a length-prefixed field, so ("ab","c") and ("a","bc") hash differently.
  Sha256& field(std::string_view text) noexcept {
    const std::uint64_t n = text.size();
    update(&n, sizeof n);
    return update(text);
  }

  /// The digest as 64 lowercase hex digits. The object must not be updated afterwards.
  [[nodiscard]] std::string hex() {
    const std::uint64_t bits = total_ * 8;
    const unsigned char pad = 0x80;
    update(&pad, 1);
    const unsigned char zero = 0;
    while (used_ != 56) update(&zero, 1);
    unsigned char length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(bits >> (56 - 8 * i));
    update(length, 8);
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(64);
    for (const std::uint32_t word : state_) {
      for (int shift = 28; shift >= 0; shift -= 4) out += digits[(word >> shift) & 0xF];
    }
    return out;
  }

 private:
  void compress(const unsigned char* chunk) noexcept {
    static constexpr std::array<std::uint32_t, 64> k{
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
    std::uint32_t w[64];
    for (int i = 0; i < 16; ++i) {
      w[i] = (std::uint32_t{chunk[4 * i]} << 24) | (std::uint32_t{chunk[4 * i + 1]} << 16) |
             (std::uint32_t{chunk[4 * i + 2]} << 8) | std::uint32_t{chunk[4 * i + 3]};
    }
    for (int i = 16; i < 64; ++i) {
      const std::uint32_t s0 = std::rotr(w[i - 15], 7) ^ std::rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const std::uint32_t s1 = std::rotr(w[i - 2], 17) ^ std::rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    std::uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
    std::uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
    for (int i = 0; i < 64; ++i) {
      const std::uint32_t s1 = std::rotr(e, 6) ^ std::rotr(e, 11) ^ std::rotr(e, 25);
      const std::uint32_t ch = (e & f) ^ (~e & g);
      const std::uint32_t t1 = h + s1 + ch + k[static_cast<std::size_t>(i)] + w[i];
      const std::uint32_t s0 = std::rotr(a, 2) ^ std::rotr(a, 13) ^ std::rotr(a, 22);
      const std::uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
      const std::uint32_t t2 = s0 + maj;
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    state_[0] += a;
    state_[1] += b;
    state_[2] += c;
    state_[3] += d;
    state_[4] += e;
    state_[5] += f;
    state_[6] += g;
    state_[7] += h;
  }

  std::array<std::uint32_t, 8> state_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                      0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::array<unsigned char, 64> block_{};
  std::size_t used_ = 0;
  std::uint64_t total_ = 0;
};

/// A fast 64-bit checksum (8 bytes per step, multiply-xorshift mixing). Detects truncation, torn
/// writes and flipped bits; not a cryptographic hash.
[[nodiscard]] inline std::uint64_t checksum64(const void* data, std::size_t size) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = 0x9E3779B97F4A7C15ull ^ (size * 0xC2B2AE3D27D4EB4Full);
  const auto mix = [](std::uint64_t x) {
    x ^= x >> 31;
    x *= 0x7FB5D329728EA185ull;
    x ^= x >> 27;
    x *= 0x81DADEF4BC2DD44Dull;
    x ^= x >> 33;
    return x;
  };
  std::size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    std::uint64_t word;
    std::memcpy(&word, p + i, 8);
    h = mix(h ^ word) + 0x165667B19E3779F9ull;
  }
  std::uint64_t tail = 0;
  for (std::size_t j = 0; i + j < size; ++j) tail |= std::uint64_t{p[i + j]} << (8 * j);
  return mix(h ^ tail ^ (std::uint64_t{size & 7} << 56));
}

}  // namespace accel::ops::detail
