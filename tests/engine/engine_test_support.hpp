// Shared by the engine's test files: a fresh temporary directory for a test's checkpoints and dumps.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include <stdlib.h>
#include <unistd.h>

namespace engine_test {

/// Every directory temp_dir made, removed when the test program exits — also those a test keeps for a
/// later step or leaves behind when a check fails midway. Only the process that made them removes them
/// (a forked child that exits must not delete what its parent still uses).
struct TempDirs {
  pid_t owner = ::getpid();
  std::vector<std::filesystem::path> made;
  TempDirs() = default;
  TempDirs(const TempDirs&) = delete;
  TempDirs& operator=(const TempDirs&) = delete;
  ~TempDirs() {
    if (::getpid() != owner) return;
    for (const auto& dir : made) {
      std::error_code ignored;  // already removed by its test, or never filled
      std::filesystem::remove_all(dir, ignored);
    }
  }
};

inline TempDirs& temp_dirs() {
  static TempDirs dirs;
  return dirs;
}

/// A fresh directory under $TMPDIR, "accel-engine-<tag>-XXXXXX", removed at the latest when the program exits.
inline std::filesystem::path temp_dir(const std::string& tag) {
  std::string tmpl = (std::filesystem::temp_directory_path() / ("accel-engine-" + tag + "-XXXXXX")).string();
  REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
  temp_dirs().made.emplace_back(tmpl);
  return tmpl;
}

}  // namespace engine_test
