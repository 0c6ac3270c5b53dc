// The host end of a step's transfers (examples/engine/host_staging.hpp): two slots, step s in slot
// s % 2, each holding its inputs, targets, losses and gradient norm apart from everything else, page
// aligned as a whole (what pin_memory locks).
#include "host_staging.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include <unistd.h>

namespace {

/// [begin, end) of a span of bytes.
struct ByteRange {
  std::uintptr_t begin, end;
};

template <class T>
ByteRange range_of(const T* p, std::size_t n) {
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  return {at, at + n * sizeof(T)};
}

bool apart(const ByteRange& a, const ByteRange& b) { return a.end <= b.begin || b.end <= a.begin; }

}  // namespace

TEST_CASE("engine host staging: two slots, alternate steps, every part apart from every other") {
  const accel::CpuBackend cpu{};
  // 13 tokens: 16 losses fill whole 64-byte lines, so the norm needs room of its own
  for (const std::size_t tokens : {std::size_t{1}, std::size_t{13}, std::size_t{12 * 64}, std::size_t{1000003}}) {
    CAPTURE(tokens);
    const std::size_t losses = tokens + 3;
    engine::HostStaging<accel::CpuBackend> staging(cpu, tokens, losses);
    const auto& s0 = staging.slot(0);
    const auto& s1 = staging.slot(1);
    CHECK(&staging.slot(2) == &s0);  // step s in slot s % 2
    CHECK(&staging.slot(7) == &s1);
    CHECK(&staging.slot(1LL << 40) == &s0);
    const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    CHECK(reinterpret_cast<std::uintptr_t>(s0.inputs) % page == 0);  // the block pin_memory locks
    std::vector<ByteRange> parts;
    for (const auto* s : {&s0, &s1}) {
      CHECK(reinterpret_cast<std::uintptr_t>(s->losses) % 64 == 0);  // each slot's losses on their own lines
      parts.push_back(range_of(s->inputs, tokens));
      parts.push_back(range_of(s->targets, tokens));
      parts.push_back(range_of(s->losses, losses));
      parts.push_back(range_of(s->norm, 1));
    }
    for (std::size_t i = 0; i < parts.size(); ++i) {
      for (std::size_t j = i + 1; j < parts.size(); ++j) {
        CAPTURE(i);
        CAPTURE(j);
        CHECK(apart(parts[i], parts[j]));
      }
    }
    // Every byte of every part is memory of the block: written end to end, read back.
    for (const auto* s : {&s0, &s1}) {
      for (std::size_t i = 0; i < tokens; ++i) {
        s->inputs[i] = static_cast<std::int32_t>(i);
        s->targets[i] = -static_cast<std::int32_t>(i);
      }
      for (std::size_t i = 0; i < losses; ++i) s->losses[i] = 0.5f;
      *s->norm = 2.0f;
    }
    CHECK(s1.inputs[tokens - 1] == static_cast<std::int32_t>(tokens - 1));
    CHECK(s0.targets[tokens - 1] == -static_cast<std::int32_t>(tokens - 1));
    CHECK(s0.losses[losses - 1] == 0.5f);
    CHECK(*s0.norm == 2.0f);
    CHECK(*s1.norm == 2.0f);
  }
}
