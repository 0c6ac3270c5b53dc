// ACCEL_ALLOC_CONF: whatever the text, parse never crashes; a bad text is an InvalidArgumentError of a
// readable length; a text that parses has no empty entry and no option twice, follows one rule for
// every form of roundup_power2_divisions (a value accepted in a list is accepted alone), and gives a
// configuration whose rounding stays within one step of every request (no overflow, up to 2^64 - 1
// divisions).
#include "fuzz_main.hpp"

#include <accel/memory/allocator_config.hpp>
#include <accel/memory/detail/caching_rules.hpp>

#include <bit>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

[[noreturn]] void fail(const char* what, std::string_view text) {
  std::fprintf(stderr, "fuzz_alloc_conf: invariant broken: %s (input of %zu bytes)\n", what, text.size());
  std::abort();
}

// A message quotes at most 100 characters of the text and 40 of a token (4 bytes each when escaped).
constexpr std::size_t max_message = 1000;

std::size_t count(std::string_view haystack, std::string_view needle) {
  std::size_t n = 0;
  for (std::size_t at = haystack.find(needle); at != std::string_view::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace

void accel_fuzz_one(std::string_view text) {
  accel::AllocatorConfig config;
  try {
    config = accel::AllocatorConfig::parse(text);
  } catch (const accel::InvalidArgumentError& e) {
    if (std::string_view(e.what()).size() > max_message) fail("the error message is too long", text);
    return;
  }

  std::string compact;  // the text without spaces, which the tokenizer ignores
  for (const char ch : text) {
    if (ch != ' ') compact.push_back(ch);
  }
  if (!compact.empty() && (compact.front() == ',' || compact.back() == ',')) fail("a leading or trailing ','", text);
  for (const char* empty : {",,", "[,", ",]", "[]"}) {
    if (compact.find(empty) != std::string::npos) fail("an empty entry was accepted", text);
  }
  for (const char* option : {"max_split_size_mb", "max_non_split_rounding_mb", "roundup_power2_divisions",
                             "garbage_collection_threshold"}) {
    if (count(compact, option) > 1) fail("an option given twice was accepted", text);
  }

  for (const std::size_t d : config.roundup_power2_divisions) {
    if (d != 0 && !std::has_single_bit(d)) fail("divisions neither 0 nor a power of 2", text);
    try {
      (void)accel::AllocatorConfig::parse("roundup_power2_divisions:" + std::to_string(d));
    } catch (const accel::InvalidArgumentError&) {
      fail("a divisions value accepted in one form is refused in the other", text);
    }
  }

  using accel::caching::max_request;
  for (const std::size_t n : {std::size_t{1}, std::size_t{511}, std::size_t{513}, std::size_t{1200}, std::size_t{3000},
                              (std::size_t{1} << 20) + 1, std::size_t{700} << 20, (std::size_t{3} << 30) + 1,
                              (std::size_t{33} << 30) + 5, max_request}) {
    const std::size_t r = accel::caching::round_size(n, config);
    const std::size_t d = config.divisions_for(n);
    const std::size_t division_step = d > 1 ? std::bit_floor(n) / d : 0;
    const std::size_t step = division_step > 512 ? division_step : 512;
    if (r < n || r - n >= step) fail("a request rounded by more than one step", text);
    if (r % 512 != 0) fail("a rounded size that is not a multiple of 512", text);
  }
}
