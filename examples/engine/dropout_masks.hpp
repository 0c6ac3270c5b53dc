// dropout_masks.hpp — dropout's random bits as a function of (seed, step, site, sequence).
//
// A sequence's dropout mask must not depend on where it is computed: on how many ranks share the
// global batch, how many streams (lanes) split a micro-batch, or which micro-batch holds it. Drawn in
// enqueue order from one generator, the masks changed with --threads (one lane per thread), with the
// rank count, and so --deterministic was bit-identical over rank counts only without dropout. Here
// the bits of sequence q (its index in the step's global batch) at dropout site s (the embedding's, and
// each layer's attention probabilities, attention projection and MLP projection) in step t are the
// Philox words [q x stride, q x stride + words(s)) under the key (seed, t, s), stride = words(s) rounded
// up to a multiple of 4 (every fill starts on a Philox block). A lane's rows q0 .. q0 + n are one fill
// of n x words from q0 x stride when words is a multiple of 4; else n fills of words each, which the
// generator places a stride apart, as the definition wants.
//
// Graph-safe: a fill captured into a graph reserves its words from its generator when the graph
// replays. So every (slot, micro-batch, site) has a generator of its own, used once a step, and
// position() sets them all for the step before it is enqueued or replayed.
#pragma once

#include <accel/accel.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace engine {

class DropoutMasks {
 public:
  /// words[s]: site s's 32-bit words per sequence; slots: lanes with activations of their own;
  /// micro: micro-batches per step.
  DropoutMasks(std::uint64_t seed, std::vector<std::int64_t> words, int slots, int micro)
      : seed_(seed), words_(std::move(words)), slots_(slots), micro_(micro),
        gens_(std::make_unique<accel::Generator[]>(static_cast<std::size_t>(slots) * static_cast<std::size_t>(micro) *
                                                   words_.size())) {
    for (const std::int64_t w : words_) {
      if (w <= 0) throw std::invalid_argument("DropoutMasks: a site of " + std::to_string(w) + " words per sequence");
    }
  }

  [[nodiscard]] int sites() const noexcept { return static_cast<int>(words_.size()); }

  /// The key of site s in step t: the Philox seed its words come from.
  [[nodiscard]] std::uint64_t key(std::int64_t step, int site) const noexcept {
    std::uint64_t x = mix(seed_ ^ 0x6A09E667F3BCC909ULL);
    x = mix(x ^ static_cast<std::uint64_t>(step));
    return mix(x ^ (static_cast<std::uint64_t>(site) << 32));
  }

  /// Positions every generator for step t: slot's micro-batch m starts at global sequence
  /// first_sequence(slot, m).
  template <class FirstSequence>
  void position(std::int64_t step, FirstSequence&& first_sequence) {
    for (int slot = 0; slot < slots_; ++slot) {
      for (int m = 0; m < micro_; ++m) {
        const std::int64_t q0 = first_sequence(slot, m);
        for (int s = 0; s < sites(); ++s) {
          set(gen(slot, m, s), key(step, s), static_cast<std::uint64_t>(q0) * stride(s));
        }
      }
    }
  }

  /// The masks of `rows` sequences (from the slot's first for micro-batch m) at site s, into mask
  /// (rows x words(s) words), on stream `st`.
  template <accel::Accelerator B>
  void draw(const B& b, typename B::StreamRef st, int slot, int m, int site, std::uint32_t* mask, std::int64_t rows) {
    accel::Generator& g = gen(slot, m, site);
    const std::int64_t w = words_[static_cast<std::size_t>(site)];
    if (w % 4 == 0) {
      b.fill_bits(st, mask, static_cast<std::size_t>(rows * w), g);
      return;
    }
    for (std::int64_t r = 0; r < rows; ++r) b.fill_bits(st, mask + r * w, static_cast<std::size_t>(w), g);
  }

 private:
  static std::uint64_t mix(std::uint64_t x) noexcept {  // splitmix64's finaliser
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
  }

  [[nodiscard]] std::uint64_t stride(int site) const noexcept {
    return (static_cast<std::uint64_t>(words_[static_cast<std::size_t>(site)]) + 3) / 4 * 4;
  }

  accel::Generator& gen(int slot, int m, int site) {
    if (slot < 0 || slot >= slots_ || m < 0 || m >= micro_ || site < 0 || site >= sites()) {
      throw std::out_of_range("DropoutMasks: slot " + std::to_string(slot) + ", micro-batch " + std::to_string(m) +
                              ", site " + std::to_string(site) + " outside " + std::to_string(slots_) + " x " +
                              std::to_string(micro_) + " x " + std::to_string(sites()));
    }
    return gens_[(static_cast<std::size_t>(slot) * static_cast<std::size_t>(micro_) + static_cast<std::size_t>(m)) *
                     words_.size() +
                 static_cast<std::size_t>(site)];
  }

  static void set(accel::Generator& g, std::uint64_t seed, std::uint64_t offset) {
    accel::Generator::State st{};
    for (std::size_t i = 0; i < 8; ++i) {
      st[i] = static_cast<std::byte>((seed >> (8 * i)) & 0xFF);
      st[8 + i] = static_cast<std::byte>((offset >> (8 * i)) & 0xFF);
    }
    g.set_state(st);
  }

  std::uint64_t seed_;
  std::vector<std::int64_t> words_;
  int slots_, micro_;
  std::unique_ptr<accel::Generator[]> gens_;
};

}  // namespace engine
