// accel/random/graph_draws.hpp — random fills recorded in a graph, and the offsets a replay reserves.
//
// A fill captured into a graph does not reserve offsets at capture time: it records a GraphDraw, and
// every replay reserves all of the graph's draws, each generator's in one atomic step and in recording
// order — exactly the offsets the same calls made eagerly at that moment would get. The recorded work
// reads its (seed, offset) from the replay (torch's graph-safe Philox), so each replay draws fresh
// numbers. Shared by every backend's graphs.
#pragma once

#include <accel/random/generator.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace accel {

/// One fill recorded in a graph: n outputs of `generator`, 32-bit (reserve) or 64-bit (reserve_wide).
struct GraphDraw {
  Generator* generator = nullptr;
  std::uint64_t n = 0;
  bool wide = false;
};

/// (seed, offset) for each of the `count` draws at `draws`, reserved now from the draws' generators,
/// written to positions[0..count). A replay calls this for every graph it runs: the usual graph, whose
/// draws all come from one generator, reserves them in one step without allocating. All or nothing:
/// when one generator refuses (InvalidArgumentError: its offset would overflow), those already reserved
/// give their draws back, so a refused replay consumes no generator's numbers.
// Pointer-based, as Generator::reserve_draws(pointer, ...) is: converting a vector to a std::span
// instantiates the ranges concepts, which costs nvcc's front end more than this whole function.
inline void reserve_graph_draws(const GraphDraw* draws, std::size_t count,
                                std::pair<std::uint64_t, std::uint64_t>* positions) {
  if (count == 0) return;
  constexpr std::size_t on_stack = 16;
  bool one_generator = count <= on_stack;
  for (std::size_t i = 1; one_generator && i < count; ++i) one_generator = draws[i].generator == draws[0].generator;
  if (one_generator) {
    Generator::Draw group[on_stack];
    std::uint64_t offsets[on_stack];
    for (std::size_t i = 0; i < count; ++i) group[i] = Generator::Draw{draws[i].n, draws[i].wide};
    const std::uint64_t seed = draws[0].generator->reserve_draws(group, count, offsets);
    for (std::size_t i = 0; i < count; ++i) positions[i] = {seed, offsets[i]};
    return;
  }
  std::vector<std::uint64_t> done(count, 0);  // not vector<bool>: one vector type less to compile
  std::vector<Generator::Draw> group;
  std::vector<std::size_t> indices;
  std::vector<std::uint64_t> offsets;
  struct Reserved {
    Generator* generator;
    std::uint64_t seed, from, to;
  };
  std::vector<Reserved> reserved;
  try {
    for (std::size_t first = 0; first < count; ++first) {
      if (done[first] != 0) continue;
      Generator* const generator = draws[first].generator;
      group.clear();
      indices.clear();
      for (std::size_t i = first; i < count; ++i) {
        if (draws[i].generator != generator) continue;
        group.push_back(Generator::Draw{draws[i].n, draws[i].wide});
        indices.push_back(i);
        done[i] = 1;
      }
      offsets.resize(group.size());
      reserved.reserve(reserved.size() + 1);  // before reserving: a push_back that throws would lose the record
      std::uint64_t end = 0;
      const std::uint64_t seed = generator->reserve_draws(group.data(), group.size(), offsets.data(), &end);
      reserved.push_back(Reserved{generator, seed, offsets[0], end});
      for (std::size_t k = 0; k < indices.size(); ++k) positions[indices[k]] = {seed, offsets[k]};
    }
  } catch (...) {  // one generator refused (its offset would overflow): the others give their draws back
    for (auto r = reserved.rbegin(); r != reserved.rend(); ++r) (void)r->generator->give_back(r->seed, r->from, r->to);
    throw;
  }
}

/// The same, returned as a vector.
[[nodiscard]] inline std::vector<std::pair<std::uint64_t, std::uint64_t>> reserve_graph_draws(const GraphDraw* draws,
                                                                                               std::size_t count) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> positions(count);
  reserve_graph_draws(draws, count, positions.data());
  return positions;
}

/// (seed, offset) for each draw, reserved now from the draws' generators.
[[nodiscard]] inline std::vector<std::pair<std::uint64_t, std::uint64_t>> reserve_graph_draws(
    std::span<const GraphDraw> draws) {
  return reserve_graph_draws(draws.data(), draws.size());
}

}  // namespace accel
