// ACCEL_ALLOC_CONF parsing: torch's syntax and rules, and errors that quote the text.
#include "support/sizes.hpp"
#include "support/scoped_env.hpp"

#include <accel/memory/allocator_config.hpp>
#include <accel/memory/detail/caching_rules.hpp>

#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

using accel::AllocatorConfig;

namespace {
/// What parse() says when it refuses `text`; "(accepted)" when it does not.
std::string message(const std::string& text) {
  try {
    (void)AllocatorConfig::parse(text);
  } catch (const accel::InvalidArgumentError& e) {
    return e.what();
  }
  return "(accepted)";
}
}  // namespace

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

TEST_CASE("AllocatorConfig: roundup_power2_divisions has one rule in every form: 0 or a power of 2") {
  // The same values are accepted alone and in a list ('>' or an interval), and the same refused.
  for (const char* good : {"0", "1", "2", "4", "1024", "36028797018963968", "9223372036854775808"}) {
    CAPTURE(good);
    const auto alone = AllocatorConfig::parse(std::string("roundup_power2_divisions:") + good);
    const auto rest = AllocatorConfig::parse(std::string("roundup_power2_divisions:[>:") + good + "]");
    const auto interval = AllocatorConfig::parse(std::string("roundup_power2_divisions:[1:") + good + "]");
    const std::size_t value = std::stoull(good);
    for (std::size_t d : alone.roundup_power2_divisions) CHECK(d == value);
    CHECK(rest.roundup_power2_divisions[0] == 0);  // '>' fills the buckets after the last interval
    CHECK(rest.roundup_power2_divisions[15] == value);
    CHECK(interval.roundup_power2_divisions[0] == value);
  }
  for (const char* bad : {"3", "6", "36028797018963969", "18446744073709551615", "18446744073709551616", "-4"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS((void)AllocatorConfig::parse(std::string("roundup_power2_divisions:") + bad),
                    accel::InvalidArgumentError);
    CHECK_THROWS_AS((void)AllocatorConfig::parse(std::string("roundup_power2_divisions:[>:") + bad + "]"),
                    accel::InvalidArgumentError);
    CHECK_THROWS_AS((void)AllocatorConfig::parse(std::string("roundup_power2_divisions:[256:") + bad + "]"),
                    accel::InvalidArgumentError);
  }
  // 0 means off, as 1 does.
  CHECK(AllocatorConfig::parse("roundup_power2_divisions:0") == AllocatorConfig{});
}

TEST_CASE("AllocatorConfig: huge roundup_power2_divisions do not overflow the rounding") {
  using accel::caching::round_size;
  // 2^55 divisions and more used to overflow 512 * divisions: a 700 MiB request rounded to 1 GiB.
  for (const char* conf : {"roundup_power2_divisions:36028797018963968", "roundup_power2_divisions:9223372036854775808",
                           "roundup_power2_divisions:[>:36028797018963968]",
                           "roundup_power2_divisions:[512:1152921504606846976]"}) {
    CAPTURE(conf);
    const auto c = AllocatorConfig::parse(conf);
    CHECK(round_size(700 * MiB, c) == 700 * MiB);
    CHECK(round_size(700 * MiB + 1, c) == 700 * MiB + 512);
    CHECK(round_size(std::size_t{3} << 40, c) == std::size_t{3} << 40);
    CHECK(round_size(accel::caching::max_request, c) >= accel::caching::max_request);
    CHECK(round_size(accel::caching::max_request, c) - accel::caching::max_request < 512);
  }
  // Divisions apply only above 512 * d bytes, exactly as before.
  const auto d20 = AllocatorConfig::parse("roundup_power2_divisions:1048576");
  CHECK(round_size(1024 * MiB + 1, d20) == 1024 * MiB + 1024);  // 512 * 2^20 < size: steps of 1 GiB / 2^20
  const auto d21 = AllocatorConfig::parse("roundup_power2_divisions:2097152");
  CHECK(round_size(768 * MiB + 1, d21) == 768 * MiB + 512);  // 512 * 2^21 = 1 GiB > size: plain (not +256)
}

TEST_CASE("AllocatorConfig: an option given twice and an empty entry are refused by name") {
  for (const char* option : {"max_split_size_mb:100", "max_non_split_rounding_mb:30", "roundup_power2_divisions:4",
                             "garbage_collection_threshold:0.5"}) {
    const std::string o(option);
    const std::string name = o.substr(0, o.find(':'));
    CAPTURE(o);
    CHECK(message(o + "," + o).find("option " + name + " is given twice") != std::string::npos);
    CHECK(message(o + ",max_split_size_mb:64," + name + ":" + o.substr(o.find(':') + 1))
              .find("option " + name + " is given twice") != std::string::npos);
    CHECK(message(o + ",").find("an empty entry (a trailing ',')") != std::string::npos);
    CHECK(message(o + " , ").find("an empty entry (a trailing ',')") != std::string::npos);
    CHECK(message("," + o).find("an empty entry before the first ','") != std::string::npos);
    CHECK(message(o + ",,max_split_size_mb:64").find("an empty entry (',,')") != std::string::npos);
  }
  CHECK(message("roundup_power2_divisions:[256:1,]").find("an empty entry (a trailing ',') in the list") !=
        std::string::npos);
  CHECK(message("roundup_power2_divisions:[,256:1]").find("an empty entry in the list") != std::string::npos);
  CHECK(message("roundup_power2_divisions:[256:1,,512:2]").find("an empty entry in the list") != std::string::npos);
  CHECK(message("roundup_power2_divisions:[]").find("an empty list") != std::string::npos);
  CHECK(message("roundup_power2_divisions:[256:1,256:2]").find("interval '256' MiB is given twice") !=
        std::string::npos);
  CHECK(message("roundup_power2_divisions:[32768:1,65536:2]").find("interval '65536' MiB is given twice") !=
        std::string::npos);  // both name the last bucket
  CHECK(message("roundup_power2_divisions:[>:1,>:2]").find("'>' is given twice") != std::string::npos);
  // What stays accepted: spaces anywhere, an empty text, every option once.
  CHECK(message(" max_split_size_mb : 100 , roundup_power2_divisions : [ 256 : 1 , > : 2 ] ") == "(accepted)");
  CHECK(message("   ") == "(accepted)");
}

TEST_CASE("AllocatorConfig: messages quote at most 100 characters of the text, escaped") {
  const std::string long_value = "max_split_size_mb:" + std::string(100000, '9');
  const std::string m = message(long_value);
  INFO(m);
  CHECK(m.size() < 500);
  CHECK(m.find("ACCEL_ALLOC_CONF='" + long_value.substr(0, 100) + "...' (100018 characters)") != std::string::npos);
  CHECK(m.find("option max_split_size_mb: '" + std::string(40, '9') + "...' is not a non-negative integer") !=
        std::string::npos);

  const std::string long_option = std::string(100000, 'x') + ":1";
  const std::string u = message(long_option);
  CHECK(u.size() < 500);
  CHECK(u.find("unknown option '" + std::string(40, 'x') + "...'") != std::string::npos);

  // Control characters and quotes are escaped, so the quote stays readable on one line.
  const std::string c = message(std::string("max_split_size_mb:1\n'2\x01"));
  CHECK(c.find("ACCEL_ALLOC_CONF='max_split_size_mb:1\\x0a\\x272\\x01'") != std::string::npos);
}

TEST_CASE("AllocatorConfig: each refusal says what was wrong; every bucket boundary; sizes that would overflow") {
  const auto says = [&](const std::string& text, const std::string& why) {
    const std::string m = message(text);
    INFO(m);
    CHECK(m.find("': " + why + " (valid options:") != std::string::npos);
  };
  says("max_split_size_mb,256", "expected ':' before ','");
  says("garbage_collection_threshold:1.0", "option garbage_collection_threshold: '1.0' is not in (0.0, 1.0)");
  says("garbage_collection_threshold:1", "option garbage_collection_threshold: '1' is not in (0.0, 1.0)");
  says("garbage_collection_threshold:0.5x", "option garbage_collection_threshold: '0.5x' is not a number");
  says("roundup_power2_divisions:[", "roundup_power2_divisions: missing closing ']'");
  says("roundup_power2_divisions:[256:4", "roundup_power2_divisions: missing closing ']'");
  says("roundup_power2_divisions:[256:4,", "roundup_power2_divisions: missing closing ']'");
  // DEL is a control character too.
  CHECK(message("max_split_size_mb:1\x7f").find("ACCEL_ALLOC_CONF='max_split_size_mb:1\\x7f'") != std::string::npos);

  // A count of MiB whose bytes pass 2^64 saturates (never wraps to a small limit).
  CHECK(AllocatorConfig::parse("max_split_size_mb:17592186044416").max_split_size ==
        AllocatorConfig::unlimited / MiB * MiB);
  CHECK(AllocatorConfig::parse("max_non_split_rounding_mb:18446744073709551615").max_non_split_rounding_size ==
        AllocatorConfig::unlimited / MiB * MiB);

  // Keys of 32 GiB and more name the last bucket.
  const auto big = AllocatorConfig::parse("roundup_power2_divisions:[1:1,65536:4]");
  CHECK(big.roundup_power2_divisions[15] == 4);
  CHECK(big.roundup_power2_divisions[14] == 0);
  says("roundup_power2_divisions:[32768:2,131072:4]",
       "roundup_power2_divisions: interval '131072' MiB is given twice (or names the same bucket as an earlier one)");

  // divisions_for: bucket k holds sizes in [2^(20+k), 2^(21+k)); the first also everything smaller, the last
  // everything larger.
  AllocatorConfig c;
  for (std::size_t k = 0; k < AllocatorConfig::roundup_buckets; ++k) c.roundup_power2_divisions[k] = 100 + k;
  CHECK(c.divisions_for(0) == 100);
  CHECK(c.divisions_for(1) == 100);
  CHECK(c.divisions_for(2 * MiB - 1) == 100);
  CHECK(c.divisions_for(2 * MiB) == 101);
  for (std::size_t k = 1; k < AllocatorConfig::roundup_buckets; ++k) {
    CAPTURE(k);
    CHECK(c.divisions_for(std::size_t{1} << (20 + k)) == 100 + k);
    CHECK(c.divisions_for((std::size_t{1} << (20 + k)) - 1) == 100 + k - 1);
  }
  CHECK(c.divisions_for(std::size_t{64} << 30) == 115);
  CHECK(c.divisions_for(AllocatorConfig::unlimited) == 115);
}

TEST_CASE("AllocatorConfig: from_env reads ACCEL_ALLOC_CONF") {
  ScopedEnv env{{"ACCEL_ALLOC_CONF", "max_split_size_mb:128"}};
  CHECK(AllocatorConfig::from_env().max_split_size == 128 * MiB);
  env.set("ACCEL_ALLOC_CONF", "max_split_size_mb:1");
  CHECK_THROWS_AS((void)AllocatorConfig::from_env(), accel::InvalidArgumentError);
  env.unset("ACCEL_ALLOC_CONF");
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
