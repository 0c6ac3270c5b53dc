// accel/memory/allocator_config.hpp — accel::AllocatorConfig: the caching allocator's tunables.
//
// Read from the ACCEL_ALLOC_CONF environment variable, in the syntax of torch's PYTORCH_ALLOC_CONF:
//   ACCEL_ALLOC_CONF="max_split_size_mb:256,roundup_power2_divisions:4,garbage_collection_threshold:0.8"
// The text is split into tokens at ',' ':' '[' ']'; spaces are ignored. Options, with torch's rules:
//   max_split_size_mb:N            blocks of N MiB or more are never split (N >= 20); default unlimited.
//                                  Also enables freeing oversize cached blocks before a full flush.
//   max_non_split_rounding_mb:N    an oversize request may take a cached block up to N MiB larger
//                                  (N >= 20; default 20)
//   roundup_power2_divisions:D     round sizes up to one of D equal steps between powers of two (D a
//                                  power of two), or per size bucket: [256:1,512:2,1024:4,>:8] (keys
//                                  in MiB, powers of two; values 0 (off) or powers of two). The 16
//                                  buckets are 1 MiB, 2 MiB, ... 32 GiB and up; sizes below 2 MiB use
//                                  the first.
//   garbage_collection_threshold:T in (0, 1). Only with a memory fraction set: once reserved memory
//                                  exceeds T * the allowed maximum, old unsplit cached large blocks
//                                  are freed before a new segment is allocated (no synchronization).
// roundup_power2_divisions follows one rule in both forms: 0 (off) or a power of two (torch refuses 0
// as a single value but takes it in a list; its documentation allows both). An unknown option, a bad
// value, an option given twice, an interval given twice and an empty entry (",,", a leading or
// trailing ',', "[]") throw InvalidArgumentError naming what was wrong, quoting the text (its first
// 100 characters, control characters escaped) and listing the valid options. Unlike torch, unknown
// options are not skipped: a typo is an error.
#pragma once

#include <accel/core/error.hpp>
#include <accel/detail/min_max.hpp>

#include <array>
#include <bit>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace accel {

/// Tunables of accel::CachingAllocator (torch's AcceleratorAllocatorConfig, native backend part).
struct AllocatorConfig {
  static constexpr std::size_t mib = std::size_t{1} << 20;
  static constexpr std::size_t unlimited = std::numeric_limits<std::size_t>::max();
  /// Number of roundup_power2_divisions buckets: [1 MiB, 2 MiB), [2, 4), ... [32 GiB, inf).
  static constexpr std::size_t roundup_buckets = 16;
  static constexpr std::string_view valid_options =
      "max_split_size_mb, max_non_split_rounding_mb, roundup_power2_divisions, garbage_collection_threshold";

  std::size_t max_split_size = unlimited;            ///< bytes; blocks this large are never split
  std::size_t max_non_split_rounding_size = 20 * mib;  ///< bytes
  std::array<std::size_t, roundup_buckets> roundup_power2_divisions{};  ///< 0 or 1 = off
  double garbage_collection_threshold = 0.0;         ///< 0 = off

  /// The divisions that apply to a request of `size` bytes (torch's roundup_power2_divisions(size)).
  [[nodiscard]] constexpr std::size_t divisions_for(std::size_t size) const noexcept {
    if (size == 0) return roundup_power2_divisions[0];
    const auto log_size = static_cast<std::size_t>(std::bit_width(size) - 1);
    constexpr std::size_t interval_start = 20;  // log2(1 MiB)
    std::size_t index = log_size > interval_start ? log_size - interval_start : 0;
    index = detail::min_of(index, roundup_buckets - 1);
    return roundup_power2_divisions[index];
  }

  /// Parses torch's option syntax. `source` names where the text came from, for messages.
  [[nodiscard]] static AllocatorConfig parse(std::string_view text, std::string_view source = "ACCEL_ALLOC_CONF") {
    AllocatorConfig config;
    const std::vector<std::string> tokens = tokenize(text);
    const auto fail = [&](const std::string& why) -> InvalidArgumentError {
      return InvalidArgumentError(std::string(source) + "='" + excerpt(text, max_quoted_text) + "'" +
                                  (text.size() > max_quoted_text ? " (" + std::to_string(text.size()) + " characters)"
                                                                 : std::string()) +
                                  ": " + why + " (valid options: " + std::string(valid_options) + ")");
    };
    const auto token = [&](std::size_t i) -> std::string_view {
      return i < tokens.size() ? std::string_view(tokens[i]) : std::string_view();
    };
    const auto shown = [&](std::size_t i) { return "'" + excerpt(token(i), max_quoted_token) + "'"; };
    const auto expect = [&](std::size_t i, std::string_view what) {
      if (token(i) != what) {
        throw fail("expected '" + std::string(what) + "'" + (i < tokens.size() ? " before " + shown(i) : std::string(" at the end")));
      }
    };
    const auto to_size = [&](std::size_t i, std::string_view option) -> std::size_t {
      const std::string_view t = token(i);
      std::size_t value = 0;
      const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
      if (t.empty() || ec != std::errc{} || end != t.data() + t.size()) {
        throw fail("option " + std::string(option) + ": " + shown(i) + " is not a non-negative integer");
      }
      return value;
    };
    const auto megabytes = [&](std::size_t i, std::string_view option) -> std::size_t {
      std::size_t value = to_size(i, option);
      if (value < 20) throw fail("option " + std::string(option) + " too small, must be >= 20");
      value = detail::min_of(value, unlimited / mib);
      return value * mib;
    };
    // One rule for every form of roundup_power2_divisions (a single value, or a value of the list):
    // 0 (off) or a power of two.
    const auto divisions = [&](std::size_t i) -> std::size_t {
      const std::size_t value = to_size(i, "roundup_power2_divisions");
      if (value != 0 && !std::has_single_bit(value)) {
        throw fail("roundup_power2_divisions: " + std::to_string(value) +
                   " divisions; the divisions must be a power of 2, or 0 to disable rounding");
      }
      return value;
    };

    constexpr std::string_view options[] = {"max_split_size_mb", "max_non_split_rounding_mb", "roundup_power2_divisions",
                                            "garbage_collection_threshold"};
    bool given[std::size(options)] = {};
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      const std::string& key = tokens[i];
      if (key == ",") throw fail(i == 0 ? "an empty entry before the first ','" : "an empty entry (',,')");
      std::size_t option = 0;
      while (option < std::size(options) && options[option] != key) ++option;
      if (option == std::size(options)) {
        if (key == ":" || key == "[" || key == "]") throw fail("unexpected '" + key + "'");
        throw fail("unknown option " + shown(i));
      }
      if (given[option]) throw fail("option " + key + " is given twice");
      given[option] = true;
      expect(++i, ":");
      if (key == "max_split_size_mb") {
        config.max_split_size = megabytes(++i, key);
      } else if (key == "max_non_split_rounding_mb") {
        config.max_non_split_rounding_size = megabytes(++i, key);
      } else if (key == "garbage_collection_threshold") {
        const std::string_view t = token(++i);
        double value = 0.0;
        const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
        if (t.empty() || ec != std::errc{} || end != t.data() + t.size()) {
          throw fail("option garbage_collection_threshold: " + shown(i) + " is not a number");
        }
        if (!(value > 0.0 && value < 1.0)) {
          throw fail("option garbage_collection_threshold: " + shown(i) + " is not in (0.0, 1.0)");
        }
        config.garbage_collection_threshold = value;
      } else {  // roundup_power2_divisions
        auto& div = config.roundup_power2_divisions;
        if (token(++i) == "[") {
          bool first_value = true;
          bool rest_given = false;
          std::size_t entries = 0;
          std::size_t last_index = 0;
          std::array<bool, roundup_buckets> bucket_given{};
          while (++i < tokens.size() && tokens[i] != "]") {
            if (tokens[i] == ",") throw fail("roundup_power2_divisions: an empty entry in the list");
            const std::size_t key_index = i;
            expect(++i, ":");
            const std::size_t value = divisions(++i);
            if (tokens[key_index] == ">") {
              if (rest_given) throw fail("roundup_power2_divisions: '>' is given twice");
              rest_given = true;
              for (std::size_t k = last_index + 1; k < div.size(); ++k) div[k] = value;
            } else {
              const std::size_t boundary = to_size(key_index, key);
              if (!std::has_single_bit(boundary)) {
                throw fail("roundup_power2_divisions: interval " + shown(key_index) + " MiB is not a power of 2");
              }
              const auto index = detail::min_of(static_cast<std::size_t>(std::bit_width(boundary) - 1), div.size() - 1);
              if (bucket_given[index]) {
                throw fail("roundup_power2_divisions: interval " + shown(key_index) +
                           " MiB is given twice (or names the same bucket as an earlier one)");
              }
              bucket_given[index] = true;
              if (first_value) {
                for (std::size_t k = 0; k < index; ++k) div[k] = value;
                first_value = false;
              }
              div[index] = value;
              last_index = index;
            }
            ++entries;
            if (token(i + 1) != "]") {
              if (i + 1 >= tokens.size()) throw fail("roundup_power2_divisions: missing closing ']'");
              expect(++i, ",");
              if (token(i + 1) == "]") throw fail("roundup_power2_divisions: an empty entry (a trailing ',') in the list");
            }
          }
          if (i >= tokens.size()) throw fail("roundup_power2_divisions: missing closing ']'");
          if (entries == 0) throw fail("roundup_power2_divisions: an empty list");
        } else {
          div.fill(divisions(i));
        }
      }
      if (i + 1 < tokens.size()) {
        expect(++i, ",");
        if (i + 1 == tokens.size()) throw fail("an empty entry (a trailing ',')");
      }
    }
    return config;
  }

  /// The configuration in ACCEL_ALLOC_CONF, or the defaults when it is unset or empty.
  [[nodiscard]] static AllocatorConfig from_env() {
    const char* value = std::getenv("ACCEL_ALLOC_CONF");
    if (value == nullptr) return {};
    return parse(value, "ACCEL_ALLOC_CONF");
  }

  friend bool operator==(const AllocatorConfig&, const AllocatorConfig&) = default;

  /// Messages quote at most this many characters of the text, and of one of its tokens.
  static constexpr std::size_t max_quoted_text = 100;
  static constexpr std::size_t max_quoted_token = 40;

 private:
  // At most `limit` characters of `text`, control characters and quotes escaped, "..." when cut.
  static std::string excerpt(std::string_view text, std::size_t limit) {
    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    for (std::size_t i = 0; i < text.size() && i < limit; ++i) {
      const auto ch = static_cast<unsigned char>(text[i]);
      if (ch < 0x20 || ch == 0x7f || ch == '\'' || ch == '\\') {
        out += "\\x";
        out += hex[ch >> 4];
        out += hex[ch & 15];
      } else {
        out += static_cast<char>(ch);
      }
    }
    if (text.size() > limit) out += "...";
    return out;
  }

  static std::vector<std::string> tokenize(std::string_view text) {
    std::vector<std::string> tokens;
    std::string buf;
    for (const char ch : text) {
      if (ch == ',' || ch == ':' || ch == '[' || ch == ']') {
        if (!buf.empty()) tokens.push_back(std::move(buf));
        buf.clear();
        tokens.emplace_back(1, ch);
      } else if (ch != ' ') {
        buf.push_back(ch);
      }
    }
    if (!buf.empty()) tokens.push_back(std::move(buf));
    return tokens;
  }
};

}  // namespace accel
