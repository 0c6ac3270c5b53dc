// Shared by the engine's test files: a fresh temporary directory for a test's checkpoints and dumps.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include <stdlib.h>

namespace engine_test {

/// A fresh directory under $TMPDIR, "accel-engine-<tag>-XXXXXX" (the test removes what it keeps there).
inline std::filesystem::path temp_dir(const std::string& tag) {
  std::string tmpl = (std::filesystem::temp_directory_path() / ("accel-engine-" + tag + "-XXXXXX")).string();
  REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
  return tmpl;
}

}  // namespace engine_test
