// accel::Generator: state blob, validation, reserve arithmetic and concurrency; cpu::Random directly.
#include <accel/concepts/rng.hpp>
#include <accel/cpu/backend.hpp>
#include <accel/cpu/random.hpp>
#include <accel/random/fill.hpp>
#include <accel/random/generator.hpp>
#include <accel/random/graph_draws.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <set>
#include <span>
#include <stdexcept>
#include <thread>
#include <vector>

namespace {

std::array<std::byte, 16> encode(std::uint64_t seed, std::uint64_t offset) {
  std::array<std::byte, 16> s{};
  for (int i = 0; i < 8; ++i) {
    s[i] = static_cast<std::byte>(seed >> (8 * i));
    s[8 + i] = static_cast<std::byte>(offset >> (8 * i));
  }
  return s;
}

struct CpuWithRandom : accel::cpu::Random {
  using StreamRef = accel::cpu::StreamRef;
};

}  // namespace

static_assert(accel::RngApi<CpuWithRandom>, "cpu::Random must implement RngApi");

TEST_CASE("Generator: defaults like torch, manual_seed rewinds") {
  accel::Generator g;
  CHECK(g.initial_seed() == 67280421310721ULL);
  CHECK(g.offset() == 0);
  CHECK(g.reserve(10) == 0);
  g.manual_seed(5);
  CHECK(g.initial_seed() == 5);
  CHECK(g.offset() == 0);
  const std::uint64_t s = g.seed();
  CHECK(g.initial_seed() == s);
  CHECK(g.offset() == 0);
}

TEST_CASE("Generator: state is seed then offset, little-endian, and round-trips") {
  accel::Generator g(0x1122334455667788ULL);
  (void)g.reserve(0x100);
  const auto st = g.get_state();
  CHECK(st == encode(0x1122334455667788ULL, 0x100));
  CHECK(st[0] == std::byte{0x88});
  CHECK(st[7] == std::byte{0x11});
  CHECK(st[9] == std::byte{0x01});

  accel::Generator h;
  h.set_state(st);
  CHECK(h.get_state() == st);
  CHECK(h.initial_seed() == 0x1122334455667788ULL);
  CHECK(h.reserve(4) == 0x100);
}

TEST_CASE("Generator: bad blobs are rejected with a clear message and change nothing") {
  accel::Generator g(42);
  (void)g.reserve(8);
  const auto before = g.get_state();
  const std::array<std::byte, 15> short_blob{};
  CHECK_THROWS_WITH_AS(g.set_state(short_blob), doctest::Contains("16-byte state"), accel::InvalidArgumentError);
  const std::vector<std::byte> long_blob(32);
  CHECK_THROWS_AS(g.set_state(long_blob), accel::InvalidArgumentError);
  CHECK_THROWS_AS(g.set_state({}), accel::InvalidArgumentError);
  for (std::uint64_t bad : {1ULL, 2ULL, 3ULL, 4097ULL}) {
    CHECK_THROWS_WITH_AS(g.set_state(encode(7, bad)), doctest::Contains("not a multiple of 4"),
                         accel::InvalidArgumentError);
  }
  CHECK(g.get_state() == before);
}

TEST_CASE("Generator: reserve rounds up to whole Philox blocks") {
  accel::Generator g(1);
  CHECK(g.reserve(0) == 0);
  CHECK(g.reserve(1) == 0);
  CHECK(g.reserve(4) == 4);
  CHECK(g.reserve(5) == 8);
  CHECK(g.reserve(3) == 16);
  CHECK(g.offset() == 20);
  const auto [seed, off] = g.reserve_position(7);
  CHECK(seed == 1);
  CHECK(off == 20);
  CHECK(g.offset() == 28);

  g.set_state(encode(1, ~std::uint64_t{3}));
  CHECK_THROWS_WITH_AS((void)g.reserve(8), doctest::Contains("Generator::reserve: "), accel::InvalidArgumentError);
  CHECK(g.offset() == ~std::uint64_t{3});

  // A count that cannot be rounded up to a whole block (it would wrap to 0 words): refused at offset 0 too.
  g.manual_seed(1);
  for (const std::uint64_t n : {~std::uint64_t{0}, ~std::uint64_t{0} - 2}) {
    CAPTURE(n);
    CHECK_THROWS_WITH_AS((void)g.reserve(n), doctest::Contains("words overflow the offset"), accel::InvalidArgumentError);
    const accel::Generator::Draw draw{n, false};
    std::uint64_t offset = 0;
    CHECK_THROWS_WITH_AS((void)g.reserve_draws(&draw, 1, &offset), doctest::Contains("words overflow the offset"),
                         accel::InvalidArgumentError);
    CHECK(g.offset() == 0);
  }
  CHECK(g.reserve(~std::uint64_t{0} - 3) == 0);  // the largest count that rounds: all but the last block
  CHECK(g.offset() == ~std::uint64_t{0} - 3);
}

TEST_CASE("Generator: wide reservations cover every block a double fill draws from") {
  // Fills use blocks [offset/4, ...). A double fill of n must not share a block with the next fill.
  // Check by marking: cuRAND's layout puts block (c, sub) at index c * 65536 + sub.
  for (std::uint64_t offset : {0ULL, 4ULL, 4ULL * 65535, 4ULL * 70000, 4ULL * 65536 * 3 + 40}) {
    for (std::uint64_t n : {1ULL, 4ULL, 5ULL, 77ULL, 4ULL * 65536 + 9}) {
      const std::uint64_t words = accel::Generator::wide_words(offset, n);
      CHECK(words % 4 == 0);
      const accel::rng::CurandPhiloxLayout layout(offset, 2);
      std::uint64_t max_block = 0, min_block = ~std::uint64_t{0};
      for (std::uint64_t grp = 0; grp < (n + 3) / 4; ++grp) {
        for (std::uint32_t k = 0; k < 2; ++k) {
          const auto c = layout.counter(grp, k);
          const std::uint64_t idx = ((static_cast<std::uint64_t>(c.y) << 32 | c.x) << 16) + c.z;
          max_block = std::max(max_block, idx);
          min_block = std::min(min_block, idx);
        }
      }
      CHECK(min_block >= offset / 4);
      CHECK(4 * (max_block + 1) == offset + words);
    }
  }
  accel::Generator g(3);
  CHECK(g.reserve_wide(0) == 0);
  CHECK(g.reserve_wide(1) == 0);
  CHECK(g.offset() == 4 * (65536 + 1));
  // Nothing to draw reserves nothing, wherever the generator stands; a count whose words overflow 64 bits
  // is refused, saying so, and changes nothing.
  for (const std::uint64_t offset : {4ULL, 4ULL * 65535, 4ULL * 65536 * 3 + 40}) {
    CHECK(accel::Generator::wide_words(offset, 0) == 0);
    g.set_state(encode(3, offset));
    CHECK(g.reserve_wide(0) == offset);
    CHECK(g.offset() == offset);
  }
  for (const std::uint64_t n : {~std::uint64_t{0} / 8 + 1, ~std::uint64_t{0}}) {
    CAPTURE(n);
    CHECK_THROWS_WITH_AS((void)g.reserve_wide(n), doctest::Contains("outputs overflow the offset"), accel::InvalidArgumentError);
    CHECK(g.offset() == 4 * 65536 * 3 + 40);
  }
}

TEST_CASE("Generator: reserve_draws equals consecutive reserves, and a failure changes nothing") {
  const std::array<accel::Generator::Draw, 4> draws{{{5, false}, {3, true}, {0, false}, {4, false}}};
  accel::Generator eager(11);
  eager.reserve(1);  // a non-zero starting offset
  std::array<std::uint64_t, 4> expected{};
  expected[0] = eager.reserve(5);
  expected[1] = eager.reserve_wide(3);
  expected[2] = eager.reserve(0);
  expected[3] = eager.reserve(4);

  accel::Generator by_span(11);
  by_span.reserve(1);
  std::array<std::uint64_t, 4> offsets{};
  CHECK(by_span.reserve_draws(draws, offsets) == 11);
  CHECK(offsets == expected);
  CHECK(by_span.offset() == eager.offset());

  accel::Generator by_pointer(11);
  by_pointer.reserve(1);
  std::array<std::uint64_t, 4> pointer_offsets{};
  CHECK(by_pointer.reserve_draws(draws.data(), draws.size(), pointer_offsets.data()) == 11);
  CHECK(pointer_offsets == expected);
  CHECK(by_pointer.offset() == eager.offset());

  std::array<std::uint64_t, 3> too_short{};
  CHECK_THROWS_WITH_AS((void)by_span.reserve_draws(draws, too_short), doctest::Contains("Generator::reserve_draws: "),
                       accel::InvalidArgumentError);
  CHECK(by_span.offset() == eager.offset());
  accel::Generator near_end(2);
  near_end.set_state(encode(2, ~std::uint64_t{15}));
  CHECK_THROWS_WITH_AS((void)near_end.reserve_draws(draws.data(), draws.size(), offsets.data()),
                       doctest::Contains("overflows the 64-bit offset"), accel::InvalidArgumentError);
  CHECK(near_end.offset() == ~std::uint64_t{15});
}

TEST_CASE("Generator::reserve_then: the launch gets reserve_position's numbers; a launch that throws gives them back") {
  accel::Generator g(9);
  g.reserve(8);
  std::uint64_t seen_seed = 0, seen_offset = 0;
  g.reserve_then(10, false, [&](std::uint64_t seed, std::uint64_t offset) {
    seen_seed = seed;
    seen_offset = offset;
  });
  CHECK(seen_seed == 9);
  CHECK(seen_offset == 8);
  CHECK(g.offset() == 20);  // 10 rounded up to whole blocks
  g.reserve_then(3, true, [&](std::uint64_t, std::uint64_t offset) { seen_offset = offset; });  // wide: as reserve_wide
  CHECK(seen_offset == 20);
  accel::Generator twin(9);
  twin.set_state(encode(9, 20));
  CHECK(twin.reserve_wide(3) == 20);
  CHECK(g.offset() == twin.offset());
  const std::uint64_t before = g.offset();
  CHECK_THROWS_WITH_AS(g.reserve_then(100, false, [](std::uint64_t, std::uint64_t) { throw std::runtime_error("launch failed"); }),
                       "launch failed", std::runtime_error);
  CHECK(g.offset() == before);  // given back
  // A reservation made after it keeps its numbers: the failed one's are then not given back.
  CHECK_THROWS_AS(g.reserve_then(4, false,
                                 [&](std::uint64_t, std::uint64_t) {
                                   (void)g.reserve(4);
                                   throw std::runtime_error("after another reservation");
                                 }),
                  std::runtime_error);
  CHECK(g.offset() == before + 8);
}

TEST_CASE("reserve_graph_draws: each generator's draws in recording order, interleaved generators apart") {
  accel::Generator a(7), b(9);
  b.reserve(8);
  const std::array<accel::GraphDraw, 4> draws{{{&a, 4, false}, {&b, 6, false}, {&a, 2, true}, {&b, 1, false}}};
  const auto positions = accel::reserve_graph_draws(draws);
  REQUIRE(positions.size() == 4);
  CHECK(positions[0] == std::pair<std::uint64_t, std::uint64_t>{7, 0});
  CHECK(positions[1] == std::pair<std::uint64_t, std::uint64_t>{9, 8});
  CHECK(positions[2] == std::pair<std::uint64_t, std::uint64_t>{7, 4});
  CHECK(positions[3] == std::pair<std::uint64_t, std::uint64_t>{9, 16});
  CHECK(a.offset() == 4 + accel::Generator::wide_words(4, 2));
  CHECK(b.offset() == 20);
  const std::uint64_t a_first = a.offset();  // a second replay (pointer form) starts where the first ended
  const auto again = accel::reserve_graph_draws(draws.data(), draws.size());
  REQUIRE(again.size() == 4);
  CHECK(again[0] == std::pair<std::uint64_t, std::uint64_t>{7, a_first});
  CHECK(again[1] == std::pair<std::uint64_t, std::uint64_t>{9, 20});
  CHECK(again[2] == std::pair<std::uint64_t, std::uint64_t>{7, a_first + 4});
  CHECK(again[3] == std::pair<std::uint64_t, std::uint64_t>{9, 28});
  CHECK(accel::reserve_graph_draws(draws.data(), 0).empty());
}

TEST_CASE("Generator::give_back: only the last reservation, under the seed it was made with") {
  accel::Generator g(5);
  g.reserve(8);
  std::array<std::uint64_t, 2> offsets{};
  const std::array<accel::Generator::Draw, 2> draws{{{6, false}, {3, true}}};
  std::uint64_t end = 0;
  CHECK(g.reserve_draws(draws.data(), draws.size(), offsets.data(), &end) == 5);
  CHECK(offsets[0] == 8);
  CHECK(offsets[1] == 16);
  CHECK(end == 16 + accel::Generator::wide_words(16, 3));
  CHECK(end == g.offset());
  CHECK_FALSE(g.give_back(6, 8, end));   // another seed: not this generator's reservation
  CHECK_FALSE(g.give_back(5, 8, end - 4));  // not where the generator stands
  CHECK_FALSE(g.give_back(5, end + 4, end));  // from past to: no such range
  CHECK(g.offset() == end);
  CHECK(g.give_back(5, 8, end));
  CHECK(g.offset() == 8);
  CHECK_FALSE(g.give_back(5, 8, end));  // once only
  (void)g.reserve(4);
  g.manual_seed(6);  // a reseed starts a new sequence: a range of the old one is not given back,
  (void)g.reserve(12);  // even where the offsets match
  CHECK_FALSE(g.give_back(5, 8, 12));
  CHECK(g.offset() == 12);
}

TEST_CASE("reserve_graph_draws: one generator's overflow leaves every generator as it was") {
  // Three generators, the third near the end of its offsets: a replay that draws from all three is
  // refused, and the first two give back what they had reserved (a refused replay consumes nothing).
  accel::Generator a(1), b(2), near_end(3);
  a.reserve(12);
  b.reserve(40);
  near_end.set_state(encode(3, ~std::uint64_t{15}));
  const std::array<accel::GraphDraw, 5> draws{
      {{&a, 4, false}, {&b, 6, true}, {&near_end, 64, false}, {&a, 9, false}, {&b, 1, false}}};
  CHECK_THROWS_WITH_AS((void)accel::reserve_graph_draws(draws.data(), draws.size()),
                       doctest::Contains("overflows the 64-bit offset"), accel::InvalidArgumentError);
  CHECK(a.offset() == 12);
  CHECK(b.offset() == 40);
  CHECK(near_end.offset() == ~std::uint64_t{15});
  // Without the refusing generator the same draws go through, from where each generator stood.
  const std::array<accel::GraphDraw, 4> fine{{{&a, 4, false}, {&b, 6, true}, {&a, 9, false}, {&b, 1, false}}};
  const auto positions = accel::reserve_graph_draws(fine.data(), fine.size());
  CHECK(positions[0] == std::pair<std::uint64_t, std::uint64_t>{1, 12});
  CHECK(positions[1] == std::pair<std::uint64_t, std::uint64_t>{2, 40});
  CHECK(positions[2] == std::pair<std::uint64_t, std::uint64_t>{1, 16});
  CHECK(a.offset() == 28);
}

TEST_CASE("reserve_graph_draws of one generator: the offsets consecutive eager reserves get, 1 to 20 draws") {
  // Up to 16 draws of one generator take the stack path, more the general one: both must agree with
  // eager calls, wide draws (64-bit outputs, aligned) included.
  for (std::size_t count = 1; count <= 20; ++count) {
    CAPTURE(count);
    accel::Generator graph(11), eager(11);
    graph.reserve(3);
    eager.reserve(3);
    std::vector<accel::GraphDraw> draws;
    for (std::size_t i = 0; i < count; ++i) draws.push_back({&graph, 5 + 3 * i, i % 3 == 1});
    const auto positions = accel::reserve_graph_draws(draws.data(), draws.size());
    REQUIRE(positions.size() == count);
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint64_t expected = draws[i].wide ? eager.reserve_wide(draws[i].n) : eager.reserve(draws[i].n);
      CHECK(positions[i] == std::pair<std::uint64_t, std::uint64_t>{11, expected});
    }
    CHECK(graph.offset() == eager.offset());
  }
}

TEST_CASE("Generator: threads reserving concurrently get disjoint ranges") {
  accel::Generator g(9);
  constexpr int threads = 8, per_thread = 2000;
  std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>> got(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        const std::uint64_t n = 1 + static_cast<std::uint64_t>((t * 7 + i) % 13);
        got[t].emplace_back(g.reserve(n), (n + 3) / 4 * 4);
      }
    });
  }
  for (auto& th : pool) th.join();
  std::vector<std::pair<std::uint64_t, std::uint64_t>> all;
  for (const auto& v : got) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  std::uint64_t next = 0;
  for (const auto& [begin, len] : all) {
    CHECK(begin == next);  // contiguous and disjoint
    next = begin + len;
  }
  CHECK(g.offset() == next);
}

TEST_CASE("cpu::Random: fills on a worker stream equal accel::rng at the reserved offsets") {
  using R = accel::cpu::Random;
  accel::cpu::Stream stream;
  accel::Generator g(123);
  std::vector<float> a(1001), b(999);
  std::vector<double> d(13);
  R::fill_uniform(stream, a.data(), a.size(), g);
  R::fill_normal(stream, b.data(), b.size(), 1.0f, 2.0f, g);
  R::fill_uniform(stream, d.data(), d.size(), g);
  CHECK(g.offset() == 2004 + accel::Generator::wide_words(2004, 13));
  stream.synchronize();
  std::vector<float> wa(1001), wb(999);
  std::vector<double> wd(13);
  accel::rng::fill_uniform(std::span<float>(wa), 123, 0);
  accel::rng::fill_normal(std::span<float>(wb), 123, 1004, 1.0f, 2.0f);
  accel::rng::fill_uniform(std::span<double>(wd), 123, 2004);
  CHECK(std::memcmp(a.data(), wa.data(), a.size() * sizeof(float)) == 0);
  CHECK(std::memcmp(b.data(), wb.data(), b.size() * sizeof(float)) == 0);
  CHECK(std::memcmp(d.data(), wd.data(), d.size() * sizeof(double)) == 0);

  // The default generator of the stream's device.
  R::manual_seed_all(77);
  std::vector<std::uint32_t> bits(9);
  R::fill_bits(stream, bits.data(), bits.size());
  stream.synchronize();
  std::vector<std::uint32_t> wbits(9);
  accel::rng::fill_bits(std::span<std::uint32_t>(wbits), 77, 0);
  CHECK(bits == wbits);
  CHECK(R::default_generator(stream.device_index()).offset() == 12);
  CHECK_THROWS_WITH_AS(R::fill_bits(stream, nullptr, 3), doctest::Contains("null pointer for 3 elements"),
                       accel::InvalidArgumentError);
  // A pointer not aligned to its element is refused as CUDA's kernels need it (one rule on every
  // backend), and the generator does not move.
  alignas(8) unsigned char raw[64] = {};
  double* misaligned = reinterpret_cast<double*>(raw + 4);
  CHECK_THROWS_WITH_AS(R::fill_normal(stream, misaligned, 3, 0.0, 1.0),
                       doctest::Contains("is not aligned to its 8-byte elements"), accel::InvalidArgumentError);
  CHECK(R::default_generator(stream.device_index()).offset() == 12);
  CHECK_THROWS_AS((void)R::default_generator(accel::cpu::Devices::device_count()), accel::InvalidArgumentError);
  R::manual_seed_all(accel::Generator::default_seed);
}
