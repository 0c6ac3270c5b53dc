// accel/ops/detail/environment.hpp — the op builders' light helpers: environment variables, the default
// JIT cache directory, and a command line as a shell would take it. Split from process.hpp and
// jit_cache.hpp so that ops/op_builder.hpp (the builder types every backend names, in every
// translation unit) needs none of the POSIX process, file and hashing machinery.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

namespace accel::ops::detail {

/// The value of an environment variable, or empty when unset.
[[nodiscard]] inline std::string env_string(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::string(value) : std::string();
}

/// True when the variable is set to something other than "", "0", "false", "off", "no" (in any case).
[[nodiscard]] inline bool env_flag(const char* name) {
  std::string v = env_string(name);
  for (char& c : v) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  return !(v.empty() || v == "0" || v == "false" || v == "off" || v == "no");
}

/// Quotes one argument for display so that a user can paste the command into a POSIX shell.
[[nodiscard]] inline std::string shell_quote(std::string_view arg) {
  if (!arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                            "-_=+./:,@%") == std::string_view::npos) {
    return std::string(arg);
  }
  std::string out = "'";
  for (const char c : arg) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

[[nodiscard]] inline std::string join_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    out += shell_quote(a);
  }
  return out;
}

/// The JIT cache directory: $ACCEL_CACHE_DIR, else $XDG_CACHE_HOME/accel, else $HOME/.cache/accel,
/// else /tmp/accel-cache-<uid> (ops::JitCache::default_dir()).
[[nodiscard]] inline std::filesystem::path default_cache_dir() {
  if (std::string d = env_string("ACCEL_CACHE_DIR"); !d.empty()) return d;
  if (std::string d = env_string("XDG_CACHE_HOME"); !d.empty()) return std::filesystem::path(d) / "accel";
  if (std::string d = env_string("HOME"); !d.empty()) return std::filesystem::path(d) / ".cache" / "accel";
  return std::filesystem::path("/tmp") / ("accel-cache-" + std::to_string(::getuid()));
}

}  // namespace accel::ops::detail
