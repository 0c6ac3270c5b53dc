// RNG state blobs (random/generator.hpp, RngApi's get_rng_state/set_rng_state): a blob comes from
// outside — a checkpoint file, another process, torch — and may be anything. The input is:
//
//   bytes [0, size)   given whole to Generator::set_state: it must either throw InvalidArgumentError
//                     and leave the state exactly as it was (get_state() before == after), or accept —
//                     only a 16-byte blob whose offset is a multiple of 4 — and then get_state()
//                     returns the very same 16 bytes.
//   bytes [0, 16) + byte 16   the same blob through the CPU backend: set_rng_state(blob, dev) with dev
//                     from byte 16 (-1 .. device_count(), so out-of-range indices too; high bit set:
//                     the current-device overload). Same property for that device; every other
//                     device's state is untouched either way.
//   bytes 17..        operations on that device's generator, 9 bytes each (op, then n as u64 LE):
//                     reserve / reserve_position / reserve_wide / reserve_wide_position (n any),
//                     and fills through the backend on the device's default stream (n small). Each
//                     either throws InvalidArgumentError changing nothing, or advances the offset by
//                     exactly what an independent 128-bit computation says, without wrapping past
//                     2^64; fills write the words the Philox block function gives for (seed, offset).
//
// Two logical CPU devices (ACCEL_CPU_DEVICE_COUNT=2 unless set) so the per-device property is tested.
#include "fuzz_main.hpp"

#include <accel/cpu/backend.hpp>
#include <accel/random/generator.hpp>
#include <accel/random/philox.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <span>
#include <vector>

namespace {

using accel::Generator;
using u64 = std::uint64_t;
__extension__ typedef unsigned __int128 u128;  // __extension__: -Wpedantic accepts it
constexpr u64 u64_max = std::numeric_limits<u64>::max();

// Before the backend's first use (device_count() is fixed then); libFuzzer and the replay both run
// static initialisers before the first input.
const bool two_devices = [] { return ::setenv("ACCEL_CPU_DEVICE_COUNT", "2", 0) == 0; }();

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_rng_state: invariant broken: %s\n", what);
  std::abort();
}

u64 load_u64(std::span<const std::byte> bytes) {  // little-endian, missing bytes are 0
  u64 v = 0;
  for (std::size_t i = 0; i < 8 && i < bytes.size(); ++i) v |= static_cast<u64>(bytes[i]) << (8 * i);
  return v;
}

bool valid_blob(std::span<const std::byte> blob) {
  return blob.size() == Generator::state_size && load_u64(blob.subspan(8)) % 4 == 0;
}

bool same(const Generator::State& a, std::span<const std::byte> b) {
  return b.size() == a.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

// set_state through `set`, observed through `get`: the property of the whole target.
template <class Set, class Get>
void check_set_state(std::span<const std::byte> blob, bool expect_valid, Set set, Get get) {
  const Generator::State before = get();
  bool accepted = false;
  try {
    set(blob);
    accepted = true;
  } catch (const accel::InvalidArgumentError&) {
  }
  if (accepted != expect_valid) fail(expect_valid ? "a valid state blob was refused" : "a malformed state blob was accepted");
  if (accepted && !same(get(), blob)) fail("get_state() does not return the accepted blob");
  if (!accepted && get() != before) fail("a refused blob changed the state");
}

// ---- independent expectations (128-bit, so nothing wraps) ----------------------------------------

// reserve(n) from offset o: the new offset, or nothing when it would pass 2^64 - 1.
bool expected_reserve(u64 o, u64 n, u64& next) {
  const u128 end = static_cast<u128>(o) + ((static_cast<u128>(n) + 3) / 4) * 4;
  if (end > u64_max) return false;
  next = static_cast<u64>(end);
  return true;
}

// 64-bit block index of block k of group g of a double fill at o (cuRAND's layout, philox.hpp).
u128 wide_block(const accel::rng::CurandPhiloxLayout& layout, u64 g, unsigned k) {
  const accel::rng::U32x4 c = layout.counter(g, k);
  const u64 counter = (static_cast<u64>(c.y) << 32) | c.x;
  return static_cast<u128>(counter) * accel::rng::CurandPhiloxLayout::subsequences + c.z;
}

// reserve_wide(n) from o: just past the last block n doubles use, or nothing on overflow (n is also
// refused above 2^61, where the generator's own bound lies).
bool expected_reserve_wide(u64 o, u64 n, u64& next) {
  if (n == 0) {
    next = o;
    return true;
  }
  if (n > u64_max / 8) return false;
  const accel::rng::CurandPhiloxLayout layout(o, 2);
  const u128 end = 4 * (wide_block(layout, (n + 3) / 4 - 1, 1) + 1);
  if (end > u64_max) return false;
  next = static_cast<u64>(end);
  return true;
}

// A reservation through `take` (returning the start offset) on g: throws InvalidArgumentError
// changing nothing exactly when the expectation overflows, else returns o and lands on `next`.
template <class Take>
void check_reserve(Generator& g, u64 n, bool (*expect)(u64, u64, u64&), Take take) {
  const auto [seed, o] = g.position();
  u64 next = 0;
  const bool fits = expect(o, n, next);
  try {
    const u64 start = take(g, n);
    if (!fits) fail("a reservation past 2^64 - 1 was accepted (the offset wrapped)");
    if (start != o) fail("a reservation did not start at the offset");
    if (g.position() != std::pair{seed, next}) fail("a reservation advanced the offset by the wrong amount");
    if (next % 4 != 0) fail("an offset left a Philox block boundary");
  } catch (const accel::InvalidArgumentError&) {
    if (fits) fail("a reservation that fits was refused");
    if (g.position() != std::pair{seed, o}) fail("a refused reservation changed the state");
  }
}

// The blocks of a small double fill lie inside what reserve_wide took: no later fill reuses them.
void check_wide_blocks(u64 o, u64 n, u64 next) {
  const accel::rng::CurandPhiloxLayout layout(o, 2);
  for (u64 g = 0; g < (n + 3) / 4; ++g) {
    for (unsigned k = 0; k < 2; ++k) {
      const u128 b = wide_block(layout, g, k);
      if (b < o / 4 || b >= next / 4) fail("a double fill uses a block outside its reservation");
    }
  }
}

// ---- fills through the backend ----------------------------------------------------------------

void fill_bits(int dev, std::size_t n) {
  Generator& g = accel::CpuBackend::default_generator(dev);
  const auto [seed, o] = g.position();
  u64 next = 0;
  const bool fits = expected_reserve(o, n, next);
  std::vector<std::uint32_t> out(n, 0xA5A5A5A5u);
  try {
    accel::cpu_backend.fill_bits(accel::cpu::Streams::default_stream(dev), out.data(), n);  // runs inline
    if (!fits) fail("fill_bits past 2^64 - 1 was accepted");
  } catch (const accel::InvalidArgumentError&) {
    if (fits) fail("fill_bits that fits was refused");
    if (g.position() != std::pair{seed, o}) fail("a refused fill_bits changed the state");
    for (const std::uint32_t w : out) {
      if (w != 0xA5A5A5A5u) fail("a refused fill_bits wrote memory");
    }
    return;
  }
  if (g.position() != std::pair{seed, n == 0 ? o : next}) fail("fill_bits advanced the offset by the wrong amount");
  // Word j is word j % 4 of block j / 4 of the layout at o (o is block-aligned).
  const accel::rng::CurandPhiloxLayout layout(o, 1);
  const accel::rng::U32x2 key = accel::rng::philox_key(seed);
  for (std::size_t j = 0; j < n; ++j) {
    const accel::rng::U32x4 block = accel::rng::philox4x32_10(layout.counter(j / 4, 0), key);
    if (out[j] != accel::rng::word(block, static_cast<unsigned>(j % 4))) fail("fill_bits differs from Philox at (seed, offset)");
  }
}

void fill_uniform_double(int dev, std::size_t n) {
  Generator& g = accel::CpuBackend::default_generator(dev);
  const auto [seed, o] = g.position();
  u64 next = 0;
  const bool fits = expected_reserve_wide(o, n, next);
  std::vector<double> out(n, -1.0);
  try {
    accel::cpu_backend.fill_uniform(accel::cpu::Streams::default_stream(dev), out.data(), n);
    if (!fits) fail("fill_uniform(double) past 2^64 - 1 was accepted");
  } catch (const accel::InvalidArgumentError&) {
    if (fits) fail("fill_uniform(double) that fits was refused");
    if (g.position() != std::pair{seed, o}) fail("a refused fill_uniform(double) changed the state");
    return;
  }
  if (g.position() != std::pair{seed, next}) fail("fill_uniform(double) advanced the offset by the wrong amount");
  for (const double x : out) {
    if (!(x > 0.0 && x <= 1.0)) fail("fill_uniform(double) wrote a value outside (0, 1]");
  }
  check_wide_blocks(o, n, next);
}

}  // namespace

void accel_fuzz_one(std::string_view text) {
  (void)two_devices;
  const auto input = std::as_bytes(std::span(text.data(), text.size()));

  // 1. The whole input as a blob, on a generator of its own with a known, non-default state.
  {
    Generator g(0x0123456789ABCDEFull);
    g.reserve(40);
    check_set_state(input, valid_blob(input), [&](auto blob) { g.set_state(blob); }, [&] { return g.get_state(); });
  }
  if (input.size() <= Generator::state_size) return;

  // 2. The first 16 bytes through the backend, on device `dev` (possibly out of range).
  const auto blob = input.first(Generator::state_size);
  const auto selector = static_cast<unsigned>(input[Generator::state_size]);
  const int count = accel::CpuBackend::device_count();
  const bool current = (selector & 0x80u) != 0;
  const int dev = current ? accel::CpuBackend::current_device() : static_cast<int>(selector % static_cast<unsigned>(count + 2)) - 1;
  const bool dev_exists = dev >= 0 && dev < count;
  std::vector<Generator::State> others;
  for (int d = 0; d < count; ++d) others.push_back(accel::cpu_backend.get_rng_state(d));
  if (dev_exists) {
    check_set_state(
        blob, valid_blob(blob),
        [&](auto b) { current ? accel::cpu_backend.set_rng_state(b) : accel::cpu_backend.set_rng_state(b, dev); },
        [&] { return current ? accel::cpu_backend.get_rng_state() : accel::cpu_backend.get_rng_state(dev); });
  } else {
    try {
      accel::cpu_backend.set_rng_state(blob, dev);
      fail("set_rng_state accepted a device that does not exist");
    } catch (const accel::InvalidArgumentError&) {
    }
  }
  for (int d = 0; d < count; ++d) {
    if (d != dev && accel::cpu_backend.get_rng_state(d) != others[static_cast<std::size_t>(d)]) {
      fail("set_rng_state changed another device's state");
    }
  }
  if (!dev_exists) return;

  // 3. Operations on that device's generator: 9-byte records (op, n little-endian).
  Generator& g = accel::CpuBackend::default_generator(dev);
  const auto ops = input.subspan(Generator::state_size + 1);
  for (std::size_t at = 0; at < ops.size() && at < 9 * 32; at += 9) {
    const auto op = static_cast<unsigned>(ops[at]) % 6;
    const u64 n = load_u64(ops.subspan(at + 1));
    switch (op) {
      case 0: check_reserve(g, n, expected_reserve, [](Generator& gen, u64 k) { return gen.reserve(k); }); break;
      case 1: check_reserve(g, n, expected_reserve, [](Generator& gen, u64 k) { return gen.reserve_position(k).second; }); break;
      case 2: check_reserve(g, n, expected_reserve_wide, [](Generator& gen, u64 k) { return gen.reserve_wide(k); }); break;
      case 3: check_reserve(g, n, expected_reserve_wide, [](Generator& gen, u64 k) { return gen.reserve_wide_position(k).second; }); break;
      case 4: fill_bits(dev, static_cast<std::size_t>(n % 67)); break;
      default: fill_uniform_double(dev, static_cast<std::size_t>(n % 35)); break;
    }
  }
}
