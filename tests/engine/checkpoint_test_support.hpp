// Shared by the checkpoint tests: one rank's whole state of a layout, every value the same; what a
// call writes to stderr.
#pragma once

#include "checkpoint.hpp"
#include "layout.hpp"

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <fcntl.h>
#include <unistd.h>

namespace engine_test {

/// One rank's state of `step` for `layout` (the whole buffer as its shard), every value `v`.
inline engine::CheckpointState uniform_state(const engine::ParamLayout& layout, std::int64_t step, float v) {
  engine::CheckpointState st;
  st.step = step;
  st.shard = layout.total;
  st.params.assign(static_cast<std::size_t>(layout.total), v);
  st.exp_avg = st.params;
  st.exp_avg_sq = st.params;
  return st;
}

/// `f()` with stderr sent to the file `log` (then removed): returns what it wrote there.
template <class F>
std::string stderr_of(const std::filesystem::path& log, F f) {
  std::fflush(stderr);
  const int saved = ::dup(2);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE(saved >= 0);
  REQUIRE(fd >= 0);
  ::dup2(fd, 2);
  ::close(fd);
  f();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::ifstream in(log, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  in.close();
  std::filesystem::remove(log);
  return text;
}

}  // namespace engine_test
