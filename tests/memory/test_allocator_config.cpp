// ACCEL_ALLOC_CONF parsing: torch's syntax and rules, and errors that quote the text.
#include <accel/memory/allocator_config.hpp>
#include <accel/memory/detail/caching_rules.hpp>

#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

using accel::AllocatorConfig;

namespace {
constexpr std::size_t MiB = std::size_t{1} << 20;
}

TEST_CASE("AllocatorConfig: defaults are torch's") {
  const AllocatorConfig c;
  CHECK(c.max_split_size == AllocatorConfig::unlimited);
  CHECK(c.max_non_split_rounding_size == 20 * MiB);
  CHECK(c.garbage_collection_threshold == 0.0);
  for (std::size_t d : c.roundup_power2_divisions) CHECK(d == 0);
  CHECK(AllocatorConfig::parse("") == c);
}

TEST_CASE("AllocatorConfig: parses torch's option syntax") {
  const auto c = AllocatorConfig::parse(
      "max_split_size_mb:256, roundup_power2_divisions:4,garbage_collection_threshold:0.8,max_non_split_rounding_mb:64");
  CHECK(c.max_split_size == 256 * MiB);
  CHECK(c.max_non_split_rounding_size == 64 * MiB);
  CHECK(c.garbage_collection_threshold == doctest::Approx(0.8));
  for (std::size_t d : c.roundup_power2_divisions) CHECK(d == 4);
  CHECK(c.divisions_for(1000) == 4);

  // Per-bucket divisions; keys are MiB, '>' fills every later bucket.
  const auto b = AllocatorConfig::parse("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]");
  CHECK(b.roundup_power2_divisions[0] == 1);  // buckets before the first key take its value
  CHECK(b.roundup_power2_divisions[8] == 1);
  CHECK(b.roundup_power2_divisions[9] == 2);
  CHECK(b.roundup_power2_divisions[10] == 4);
  CHECK(b.roundup_power2_divisions[11] == 8);
  CHECK(b.roundup_power2_divisions[15] == 8);
  CHECK(b.divisions_for(300 * MiB) == 1);
  CHECK(b.divisions_for(600 * MiB) == 2);
  CHECK(b.divisions_for(1536 * MiB) == 4);
  CHECK(b.divisions_for(std::size_t{64} << 30) == 8);

  // Huge values are clamped, as in torch.
  CHECK(AllocatorConfig::parse("max_split_size_mb:99999999999999").max_split_size > 0);
  CHECK(AllocatorConfig::parse("max_split_size_mb:20").max_split_size == 20 * MiB);
}

TEST_CASE("AllocatorConfig: an unknown option or a bad value is an error that quotes the text") {
  for (const char* bad : {"max_split_size_mb:19", "max_split_size_mb:abc", "max_split_size_mb", "max_split_size_mb:",
                          "max_split_size_mb:-1", "foo:1", "max_split_size_mb:64;foo", "expandable_segments:True",
                          "garbage_collection_threshold:1.5", "garbage_collection_threshold:0",
                          "garbage_collection_threshold:x", "roundup_power2_divisions:3",
                          "roundup_power2_divisions:[256:3]", "roundup_power2_divisions:[3:4]",
                          "roundup_power2_divisions:[256:4", "max_non_split_rounding_mb:1",
                          "max_split_size_mb:64 garbage_collection_threshold:0.5", ":", "max_split_size_mb:64,,"}) {
    CAPTURE(bad);
    try {
      (void)AllocatorConfig::parse(bad);
      FAIL("accepted a bad configuration");
    } catch (const accel::InvalidArgumentError& e) {
      const std::string what = e.what();
      CHECK(what.find("ACCEL_ALLOC_CONF='" + std::string(bad) + "'") != std::string::npos);
      CHECK(what.find("max_split_size_mb, max_non_split_rounding_mb, roundup_power2_divisions, "
                      "garbage_collection_threshold") != std::string::npos);
    }
  }
}

TEST_CASE("AllocatorConfig: from_env reads ACCEL_ALLOC_CONF") {
  ::setenv("ACCEL_ALLOC_CONF", "max_split_size_mb:128", 1);
  CHECK(AllocatorConfig::from_env().max_split_size == 128 * MiB);
  ::setenv("ACCEL_ALLOC_CONF", "max_split_size_mb:1", 1);
  CHECK_THROWS_AS((void)AllocatorConfig::from_env(), accel::InvalidArgumentError);
  ::unsetenv("ACCEL_ALLOC_CONF");
  CHECK(AllocatorConfig::from_env() == AllocatorConfig{});
}

TEST_CASE("caching rules: rounding and segment sizes are torch's") {
  using namespace accel::caching;
  const AllocatorConfig plain;
  CHECK(round_size(1, plain) == 512);
  CHECK(round_size(512, plain) == 512);
  CHECK(round_size(513, plain) == 1024);
  CHECK(round_size(1200, plain) == 1536);
  CHECK(round_size(MiB, plain) == MiB);
  CHECK(round_size(max_request, plain) % 512 == 0);  // no overflow at the largest request
  CHECK(round_size(max_request, plain) >= max_request);

  const auto four = AllocatorConfig::parse("roundup_power2_divisions:4");
  CHECK(round_size(1200, four) == 1536);              // 1200 <= 512 * 4: plain 512 B rounding (torch's code)
  CHECK(round_size(3000, four) == 3072);              // steps of 512 between 2048 and 4096
  CHECK(round_size(5000, four) == 5120);              // steps of 1024 between 4096 and 8192
  CHECK(round_size(MiB + 1, four) == MiB + MiB / 4);  // steps of 256 KiB between 1 and 2 MiB
  CHECK(round_size(8 * MiB, four) == 8 * MiB);        // powers of two stay
  CHECK(round_size(max_request, four) >= max_request);

  CHECK(is_small(MiB));
  CHECK_FALSE(is_small(MiB + 512));
  CHECK(segment_size(512) == 2 * MiB);
  CHECK(segment_size(MiB) == 2 * MiB);
  CHECK(segment_size(MiB + 512) == 20 * MiB);
  CHECK(segment_size(10 * MiB - 512) == 20 * MiB);
  CHECK(segment_size(10 * MiB) == 10 * MiB);
  CHECK(segment_size(11 * MiB + 512) == 12 * MiB);

  CHECK(format_size(512) == "512 bytes");
  CHECK(format_size(1536) == "1.50 KiB");
  CHECK(format_size(20 * MiB) == "20.00 MiB");
  CHECK(format_size(std::size_t{5} << 29) == "2.50 GiB");
}
