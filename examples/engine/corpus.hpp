// corpus.hpp — the training text: read and checked, a character vocabulary, a 90/10 split, and
// batches drawn with accel's Philox generator.
//
// Characters are what nanoGPT's char-level recipe takes (Python's sorted(set(text))): the code points
// of a UTF-8 text, sorted — 84 for the Gutenberg plays, which are ASCII, where a character is a byte;
// thousands for Chinese text, whose tokens then take 16 bits in memory (a byte while there are at most
// 256). A file that is not valid UTF-8 (Latin-1, say), or holds more than 65,536 distinct characters,
// is taken byte by byte instead, and the data line says so. The first 90 % of the characters train,
// the last 10 % validate (nanoGPT's split). A batch of B sequences takes B 32-bit Philox words w from
// its generator (accel::Generator::reserve_position, accel::rng::fill_bits): the start of sequence b
// is floor(w_b * (n - T) / 2^32), its input the T tokens from there and its target the T tokens one
// further. So (seed, offset) fixes every batch, on every backend.
#pragma once

#include "config.hpp"

#include <accel/random/fill.hpp>
#include <accel/random/generator.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace engine {

/// A split's tokens: a byte each, or 16 bits each for a vocabulary of more than 256 characters.
class TokenSpan {
 public:
  explicit TokenSpan(std::span<const std::uint8_t> bytes) noexcept : narrow_(bytes), size_(bytes.size()) {}
  explicit TokenSpan(std::span<const std::uint16_t> wide) noexcept : wide_(wide), size_(wide.size()) {}
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::int32_t operator[](std::size_t i) const noexcept {
    return wide_.empty() ? static_cast<std::int32_t>(narrow_[i]) : static_cast<std::int32_t>(wide_[i]);
  }

 private:
  std::span<const std::uint8_t> narrow_;
  std::span<const std::uint16_t> wide_;
  std::size_t size_ = 0;
};

class Corpus {
 public:
  /// The largest data file the engine reads (its tokens are held in memory: a byte each, or two for a
  /// vocabulary of more than 256 characters).
  static constexpr std::uint64_t max_bytes = 4ULL << 30;  // 4 GiB

  /// Reads and checks `path`; UsageError (exit status 2) for a file that cannot be read, is not a
  /// regular file (a directory, /dev/zero, a FIFO: checked on the open file, before reading a byte),
  /// is larger than max_bytes, is empty, or looks binary (a NUL byte, or more than 1 % control bytes
  /// other than tab, newline, CR, FF).
  static Corpus load(const std::string& path) {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer before fstat says what it is.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) throw UsageError("cannot read the data file " + path + ": " + std::strerror(errno));
    struct ::stat sb {};
    if (::fstat(fd, &sb) != 0) {
      const int e = errno;
      ::close(fd);
      throw UsageError("cannot read the data file " + path + ": " + std::strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
      ::close(fd);
      const char* what = S_ISDIR(sb.st_mode)    ? "a directory"
                         : S_ISCHR(sb.st_mode)  ? "a character device"
                         : S_ISBLK(sb.st_mode)  ? "a block device"
                         : S_ISFIFO(sb.st_mode) ? "a FIFO"
                         : S_ISSOCK(sb.st_mode) ? "a socket"
                                                : "not a regular file";
      throw UsageError("the data file " + path + " is " + what + ": the engine reads a regular text file");
    }
    const auto size = static_cast<std::uint64_t>(sb.st_size);
    if (size > max_bytes) {
      ::close(fd);
      throw UsageError("the data file " + path + " is " + std::to_string(size) + " bytes: the engine reads at most 4 GiB (" +
                       std::to_string(max_bytes) + " bytes)");
    }
    std::string text;
    text.resize(static_cast<std::size_t>(size));
    std::size_t got = 0;
    int err = 0;
    while (got < text.size()) {  // a file that grows while it is read: its first st_size bytes
      const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) err = errno;
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    ::close(fd);
    if (err != 0) throw UsageError("cannot read the data file " + path + ": " + std::strerror(err));
    text.resize(got);
    if (text.empty()) throw UsageError("the data file " + path + " is empty");
    std::size_t control = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
      const auto c = static_cast<unsigned char>(text[i]);
      if (c == 0) {
        throw UsageError("the data file " + path + " is binary (a NUL byte at offset " + std::to_string(i) +
                         "): the engine trains on text");
      }
      if (c < 32 && c != '\t' && c != '\n' && c != '\r' && c != '\f') ++control;
    }
    if (control * 100 > text.size()) {
      throw UsageError("the data file " + path + " looks binary (" + std::to_string(control) +
                       " control bytes): the engine trains on text");
    }
    Corpus c;
    c.path_ = path;
    c.bytes_ = text.size();
    const bool ascii = std::all_of(text.begin(), text.end(), [](char ch) { return static_cast<unsigned char>(ch) < 0x80; });
    if (!ascii) {
      // Two passes over the bytes (a 4 GiB text's code points would take 16 GiB): which characters
      // occur, then the tokens.
      std::vector<bool> seen(0x110000, false);
      std::size_t distinct = 0;
      bool valid = true;
      for (std::size_t i = 0; i < text.size();) {
        char32_t cp = 0;
        if (!next_utf8(text, i, cp)) {
          valid = false;
          break;
        }
        if (!seen[cp]) {
          seen[cp] = true;
          ++distinct;
        }
      }
      if (valid && distinct <= max_vocabulary) {
        c.units_ = Units::utf8;
        std::vector<std::uint16_t> stoi(0x110000, 0);
        for (char32_t cp = 0; cp < 0x110000; ++cp) {
          if (!seen[cp]) continue;
          stoi[cp] = static_cast<std::uint16_t>(c.itos_.size());
          c.itos_.push_back(encode_utf8(cp));
          c.points_.push_back(cp);
        }
        const auto fill = [&](auto& tokens) {
          using Token = typename std::decay_t<decltype(tokens)>::value_type;
          tokens.reserve(text.size());
          for (std::size_t i = 0; i < text.size();) {
            char32_t cp = 0;
            next_utf8(text, i, cp);
            tokens.push_back(static_cast<Token>(stoi[cp]));
          }
          tokens.shrink_to_fit();
        };
        if (distinct <= 256) {
          fill(c.tokens8_);
        } else {
          fill(c.tokens16_);
        }
        c.split_ = c.size() * 9 / 10;
        return c;
      }
      c.units_ = valid ? Units::bytes_too_many : Units::bytes_not_utf8;
    }
    std::array<bool, 256> seen{};
    for (const char ch : text) seen[static_cast<unsigned char>(ch)] = true;
    std::array<int, 256> stoi{};
    for (int b = 0; b < 256; ++b) {
      if (seen[b]) {
        stoi[b] = static_cast<int>(c.itos_.size());
        c.itos_.emplace_back(1, static_cast<char>(b));
        c.points_.push_back(static_cast<char32_t>(b));
      }
    }
    c.tokens8_.resize(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) c.tokens8_[i] = static_cast<std::uint8_t>(stoi[static_cast<unsigned char>(text[i])]);
    c.split_ = text.size() * 9 / 10;
    return c;
  }

  /// The most distinct characters a vocabulary holds (a token is 16 bits at most).
  static constexpr std::size_t max_vocabulary = 65536;

  /// What a token stands for: a character of an ASCII or UTF-8 text, or a byte of a text that is
  /// not UTF-8 or has more than max_vocabulary distinct characters.
  enum class Units { ascii, utf8, bytes_not_utf8, bytes_too_many };

  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] Units units() const noexcept { return units_; }
  /// The file's size in bytes (size() counts tokens: characters, or bytes).
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
  [[nodiscard]] int vocab_size() const noexcept { return static_cast<int>(itos_.size()); }
  /// The vocabulary as a string: token i's character (its UTF-8 bytes, or its byte), in token order.
  [[nodiscard]] std::string vocabulary() const {
    std::string v;
    for (const auto& u : itos_) v += u;
    return v;
  }
  [[nodiscard]] std::size_t size() const noexcept { return tokens16_.empty() ? tokens8_.size() : tokens16_.size(); }
  /// Bytes a token takes in memory: 1, or 2 for a vocabulary of more than 256 characters.
  [[nodiscard]] int token_bytes() const noexcept { return tokens16_.empty() ? 1 : 2; }
  [[nodiscard]] TokenSpan train() const noexcept { return span(0, split_); }
  [[nodiscard]] TokenSpan val() const noexcept { return span(split_, size() - split_); }
  /// A 64-bit hash of the tokens and the vocabulary (so of the file's text), eight bytes a step: what
  /// the ranks of a run compare (same_run.hpp), a few milliseconds for the plays' 5 MB.
  [[nodiscard]] std::uint64_t content_hash() const noexcept {
    const auto* p = tokens16_.empty() ? tokens8_.data() : reinterpret_cast<const std::uint8_t*>(tokens16_.data());
    const std::size_t n = size() * static_cast<std::size_t>(token_bytes());
    const auto mix = [](std::uint64_t h, std::uint64_t w) { return std::rotl(h ^ (w * 0x9E3779B97F4A7C15ULL), 29) * 0xBF58476D1CE4E5B9ULL; };
    std::uint64_t h = n;
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      std::uint64_t w;
      std::memcpy(&w, p + i, 8);
      h = mix(h, w);
    }
    for (; i < n; ++i) h = mix(h, p[i]);
    for (const char32_t c : points_) h = mix(h, c);
    return h ^ (h >> 31);
  }
  /// Token i as text: a character's UTF-8 bytes, or one byte.
  [[nodiscard]] const std::string& decode(int token) const { return itos_.at(static_cast<std::size_t>(token)); }
  /// The token of an ASCII character, or -1.
  [[nodiscard]] int encode(char ch) const noexcept { return token_of(static_cast<char32_t>(static_cast<unsigned char>(ch))); }

  /// A text as tokens, split as the corpus is (code points of UTF-8, or bytes); UsageError naming the
  /// first character the vocabulary lacks (or the first byte that is not UTF-8). `what` names the
  /// text's source for the message.
  [[nodiscard]] std::vector<std::int32_t> encode_text(const std::string& text, const std::string& what) const {
    std::vector<std::int32_t> out;
    for (std::size_t i = 0; i < text.size();) {
      const std::size_t at = i;
      char32_t unit = static_cast<unsigned char>(text[i]);
      if (units_ == Units::utf8 || units_ == Units::ascii) {
        if (!next_utf8(text, i, unit)) {
          throw UsageError(what + ": not valid UTF-8 at byte " + std::to_string(at) + " (the corpus " + path_ + " is UTF-8)");
        }
      } else {
        ++i;
      }
      const int t = token_of(unit);
      if (t < 0) {
        char code[16];
        std::snprintf(code, sizeof code, unit < 0x80 || units_ == Units::utf8 || units_ == Units::ascii ? "U+%04X" : "byte 0x%02X",
                      static_cast<unsigned>(unit));
        throw UsageError(what + ": '" + text.substr(at, i - at) + "' (" + code + ") is not in the vocabulary of " + path_ +
                         " (" + std::to_string(itos_.size()) + " characters)");
      }
      out.push_back(t);
    }
    return out;
  }

  /// The code point of the UTF-8 sequence at text[i], advancing i past it; false if it is not valid
  /// UTF-8 (a stray continuation byte, a truncated sequence, an overlong form, a surrogate or a value
  /// past U+10FFFF).
  static bool next_utf8(const std::string& text, std::size_t& i, char32_t& cp) {
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    const std::size_t n = text.size();
    const unsigned char b = p[i];
    if (b < 0x80) {
      cp = b;
      ++i;
      return true;
    }
    int len = 0;
    char32_t min = 0;
    if ((b & 0xE0) == 0xC0) {
      len = 2, cp = b & 0x1Fu, min = 0x80;
    } else if ((b & 0xF0) == 0xE0) {
      len = 3, cp = b & 0x0Fu, min = 0x800;
    } else if ((b & 0xF8) == 0xF0) {
      len = 4, cp = b & 0x07u, min = 0x10000;
    } else {
      return false;  // a continuation byte without a lead, or 0xF8..0xFF
    }
    if (n - i < static_cast<std::size_t>(len)) return false;
    for (int k = 1; k < len; ++k) {
      if ((p[i + static_cast<std::size_t>(k)] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + static_cast<std::size_t>(k)] & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += static_cast<std::size_t>(len);
    return true;
  }

  /// A code point (valid: at most U+10FFFF, not a surrogate) as UTF-8.
  static std::string encode_utf8(char32_t cp) {
    std::string s;
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += static_cast<char>(0xE0 | (cp >> 12));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | (cp >> 18));
      s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return s;
  }

 private:
  [[nodiscard]] int token_of(char32_t unit) const noexcept {
    const auto it = std::lower_bound(points_.begin(), points_.end(), unit);
    return it != points_.end() && *it == unit ? static_cast<int>(it - points_.begin()) : -1;
  }

  [[nodiscard]] TokenSpan span(std::size_t first, std::size_t n) const noexcept {
    return tokens16_.empty() ? TokenSpan(std::span<const std::uint8_t>(tokens8_).subspan(first, n))
                             : TokenSpan(std::span<const std::uint16_t>(tokens16_).subspan(first, n));
  }

  std::string path_;
  Units units_ = Units::ascii;
  std::size_t bytes_ = 0;
  std::vector<std::uint8_t> tokens8_;    // one of the two holds the text's tokens
  std::vector<std::uint16_t> tokens16_;
  std::vector<std::string> itos_;
  std::vector<char32_t> points_;  // token i's code point (or byte), ascending
  std::size_t split_ = 0;
};

/// Draws batches of `batch` sequences of `block` tokens from a split.
class BatchSampler {
 public:
  BatchSampler(TokenSpan split, int batch, int block)
      : split_(split), batch_(batch), block_(block) {}

  /// Fills inputs and targets ([batch x block] int32 each) with the next batch of `g`.
  void next(accel::Generator& g, std::int32_t* inputs, std::int32_t* targets) const {
    std::vector<std::uint32_t> words(static_cast<std::size_t>(batch_));
    const auto [seed, offset] = g.reserve_position(static_cast<std::uint64_t>(batch_));
    accel::rng::fill_bits(std::span<std::uint32_t>(words), seed, offset);
    const std::uint64_t range = split_.size() - static_cast<std::size_t>(block_);
    for (int b = 0; b < batch_; ++b) {
      const std::uint64_t start = (static_cast<std::uint64_t>(words[static_cast<std::size_t>(b)]) * range) >> 32;
      for (int t = 0; t < block_; ++t) {
        inputs[b * block_ + t] = split_[start + static_cast<std::size_t>(t)];
        targets[b * block_ + t] = split_[start + static_cast<std::size_t>(t) + 1];
      }
    }
  }

 private:
  TokenSpan split_;
  int batch_;
  int block_;
};

}  // namespace engine
