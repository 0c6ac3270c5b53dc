// corpus.hpp — the training text: read and checked, a character vocabulary, a 90/10 split, and
// batches drawn with accel's Philox generator.
//
// Characters are bytes: the vocabulary is the sorted set of byte values in the file (84 for the
// Gutenberg plays; a UTF-8 text's multi-byte characters become several tokens). The first 90 % of
// the text trains, the last 10 % validates (nanoGPT's split). A batch of B sequences takes B 32-bit
// Philox words w from its generator (accel::Generator::reserve_position, accel::rng::fill_bits): the
// start of sequence b is floor(w_b * (n - T) / 2^32), its input the T tokens from there and its
// target the T tokens one further. So (seed, offset) fixes every batch, on every backend.
#pragma once

#include "config.hpp"

#include <accel/random/fill.hpp>
#include <accel/random/generator.hpp>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace engine {

class Corpus {
 public:
  /// The largest data file the engine reads (the whole text is held in memory, a byte per token).
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
    std::array<bool, 256> seen{};
    for (const char ch : text) seen[static_cast<unsigned char>(ch)] = true;
    c.stoi_.fill(-1);
    for (int b = 0; b < 256; ++b) {
      if (seen[b]) {
        c.stoi_[b] = static_cast<int>(c.itos_.size());
        c.itos_.push_back(static_cast<char>(b));
      }
    }
    c.tokens_.resize(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) c.tokens_[i] = static_cast<std::uint8_t>(c.stoi_[static_cast<unsigned char>(text[i])]);
    c.split_ = text.size() * 9 / 10;
    return c;
  }

  /// A corpus from a string and a vocabulary (checkpoints and tests).
  static Corpus from_vocabulary(const std::string& itos) {
    Corpus c;
    c.stoi_.fill(-1);
    c.itos_.assign(itos.begin(), itos.end());
    for (std::size_t i = 0; i < itos.size(); ++i) c.stoi_[static_cast<unsigned char>(itos[i])] = static_cast<int>(i);
    return c;
  }

  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] int vocab_size() const noexcept { return static_cast<int>(itos_.size()); }
  /// The vocabulary as a string: character i is token i.
  [[nodiscard]] std::string vocabulary() const { return {itos_.begin(), itos_.end()}; }
  [[nodiscard]] std::size_t size() const noexcept { return tokens_.size(); }
  [[nodiscard]] std::span<const std::uint8_t> train() const noexcept { return {tokens_.data(), split_}; }
  [[nodiscard]] std::span<const std::uint8_t> val() const noexcept {
    return {tokens_.data() + split_, tokens_.size() - split_};
  }
  [[nodiscard]] char decode(int token) const { return itos_.at(static_cast<std::size_t>(token)); }
  /// The token of a character, or -1.
  [[nodiscard]] int encode(char ch) const noexcept { return stoi_[static_cast<unsigned char>(ch)]; }

 private:
  std::string path_;
  std::vector<std::uint8_t> tokens_;
  std::vector<char> itos_;
  std::array<int, 256> stoi_{};
  std::size_t split_ = 0;
};

/// Draws batches of `batch` sequences of `block` tokens from a split.
class BatchSampler {
 public:
  BatchSampler(std::span<const std::uint8_t> split, int batch, int block)
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
  std::span<const std::uint8_t> split_;
  int batch_;
  int block_;
};

}  // namespace engine
