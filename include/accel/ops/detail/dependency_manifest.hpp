// accel/ops/detail/dependency_manifest.hpp — the dependency manifest of a JIT cache entry: the files a
// build read that its key does not cover (for the host toolchain: what the compiler's -MD list names
// beyond the spec's sources and listed headers), each with its size, mtime and SHA-256, stored as
// <entry>.deps beside the entry (ops/jit_cache.hpp writes and checks it).
//
// Format (text, one record a line; a path is length-prefixed, so spaces and newlines in it are safe):
//   accel-jit-deps 1 <payload size> <payload checksum64, 16 hex digits>
//   <sha256, 64 hex digits> <size> <mtime, ns since the epoch> <path length> <path>
//   ...
//   end <record count>
// The first line ties the manifest to the entry's payload (the footer's size and checksum): a manifest
// next to another build's entry — between the two renames of a rebuild, or left by an older accel — does
// not match, and the entry counts as stale rather than trusted.
//
// Check (on every cache hit): stat each file; same size and mtime: unchanged (the cheap path, a stat a
// file); else its bytes are hashed, and only different bytes, or a file that is gone, make the entry
// stale. As with make and ninja, an edit that keeps both the size and the mtime (to the nanosecond) is
// not seen. Anything that does not parse is stale: the entry is rebuilt, never trusted, never a crash.
// The files are hashed when the entry is committed, just after the compile: an edit made while the
// compiler ran is recorded as if the compile had seen it (the next edit of that file is noticed).
#pragma once

#include <accel/ops/detail/files.hpp>
#include <accel/ops/detail/sha256.hpp>

#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <sys/stat.h>

namespace accel::ops::detail {

/// One file an entry's build read, as it was when the entry was committed.
struct RecordedDependency {
  std::string path;  ///< absolute
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  std::string sha256;  ///< 64 lowercase hex digits
};

/// A manifest's content: the payload it belongs to and its files.
struct DependencyManifest {
  std::uint64_t payload_size = 0;
  std::uint64_t payload_checksum = 0;
  std::vector<RecordedDependency> files;
};

/// What a check of an entry's manifest found.
enum class ManifestState {
  absent,  ///< no manifest: the entry is judged by its key alone (as before manifests existed)
  fresh,   ///< every recorded file is as it was
  stale,   ///< a file changed or is gone, or the manifest is unreadable or belongs to another payload
};

[[nodiscard]] inline std::int64_t mtime_ns_of(const struct stat& st) noexcept {
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + static_cast<std::int64_t>(st.st_mtim.tv_nsec);
}

/// `path` recorded as it is now; nullopt when it cannot be read.
[[nodiscard]] inline std::optional<RecordedDependency> record_dependency(const std::filesystem::path& path) {
  std::string bytes;
  struct stat st {};
  if (!read_file(path, bytes, &st)) return std::nullopt;
  RecordedDependency d;
  d.path = path.string();
  d.size = bytes.size();
  d.mtime_ns = mtime_ns_of(st);
  Sha256 h;
  h.update(bytes);
  d.sha256 = h.hex();
  return d;
}

[[nodiscard]] inline std::string manifest_text(const DependencyManifest& m) {
  char line[128];
  std::snprintf(line, sizeof line, "accel-jit-deps 1 %" PRIu64 " %016" PRIx64 "\n", m.payload_size, m.payload_checksum);
  std::string out = line;
  for (const auto& d : m.files) {
    std::snprintf(line, sizeof line, " %" PRIu64 " %" PRId64 " %zu ", d.size, d.mtime_ns, d.path.size());
    out += d.sha256 + line + d.path + "\n";
  }
  out += "end " + std::to_string(m.files.size()) + "\n";
  return out;
}

/// Parses manifest_text's output; false on anything else (the entry is then stale).
[[nodiscard]] inline bool parse_manifest(std::string_view text, DependencyManifest& m) {
  m = {};
  std::size_t at = 0;
  // The next space- or newline-terminated token; false when the terminator is not `end`. (An empty one
  // is refused by whoever reads it: no field is empty.)
  const auto token = [&](std::string_view& out, char end) {
    const std::size_t stop = text.find(end, at);
    if (stop == std::string_view::npos) return false;
    out = text.substr(at, stop - at);
    at = stop + 1;
    return true;
  };
  const auto number = [](std::string_view s, int base, auto& value) {
    using T = std::remove_reference_t<decltype(value)>;
    if (s.empty()) return false;  // too many digits: strto(u)ll says ERANGE
    const std::string copy(s);
    if (!(std::isxdigit(static_cast<unsigned char>(copy[0])) || copy[0] == '-')) return false;
    char* stop = nullptr;
    errno = 0;
    if constexpr (std::is_signed_v<T>) {
      value = static_cast<T>(std::strtoll(copy.c_str(), &stop, base));
    } else {
      if (copy[0] == '-') return false;
      value = static_cast<T>(std::strtoull(copy.c_str(), &stop, base));
    }
    return errno == 0 && stop == copy.c_str() + copy.size();
  };
  std::string_view word;
  if (!token(word, ' ') || word != "accel-jit-deps") return false;
  if (!token(word, ' ') || word != "1") return false;
  if (!token(word, ' ') || !number(word, 10, m.payload_size)) return false;
  if (!token(word, '\n') || word.size() != 16 || !number(word, 16, m.payload_checksum)) return false;
  for (;;) {
    if (text.substr(at, 4) == "end ") {
      at += 4;
      std::size_t count = 0;
      if (!token(word, '\n') || !number(word, 10, count) || count != m.files.size()) return false;
      return at == text.size();
    }
    RecordedDependency d;
    std::size_t length = 0;
    if (!token(word, ' ') || word.size() != 64) return false;
    for (char c : word) {
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    }
    d.sha256 = std::string(word);
    if (!token(word, ' ') || !number(word, 10, d.size)) return false;
    if (!token(word, ' ') || !number(word, 10, d.mtime_ns)) return false;
    if (!token(word, ' ') || !number(word, 10, length)) return false;
    if (length == 0 || length > text.size() - at || at + length >= text.size() || text[at + length] != '\n') {
      return false;
    }
    d.path = std::string(text.substr(at, length));
    at += length + 1;
    m.files.push_back(std::move(d));
  }
}

/// Whether the manifest at `manifest` (if any) still describes the files, for the payload of
/// `payload_size` bytes with checksum `payload_checksum`. `why` (when given) says what is stale.
[[nodiscard]] inline ManifestState check_manifest(const std::filesystem::path& manifest, std::uint64_t payload_size,
                                                  std::uint64_t payload_checksum, std::string* why = nullptr) {
  std::string text;
  if (!read_file(manifest, text)) {
    struct stat st {};
    if (::stat(manifest.c_str(), &st) != 0 && errno == ENOENT) return ManifestState::absent;
    if (why != nullptr) *why = "its dependency manifest " + manifest.string() + " cannot be read";
    return ManifestState::stale;
  }
  DependencyManifest m;
  if (!parse_manifest(text, m)) {
    if (why != nullptr) *why = "its dependency manifest " + manifest.string() + " is malformed";
    return ManifestState::stale;
  }
  if (m.payload_size != payload_size || m.payload_checksum != payload_checksum) {
    if (why != nullptr) *why = "its dependency manifest " + manifest.string() + " belongs to another build";
    return ManifestState::stale;
  }
  for (const auto& d : m.files) {
    struct stat st {};
    if (::stat(d.path.c_str(), &st) != 0) {
      if (why != nullptr) *why = "the file " + d.path + " it was built from is gone";
      return ManifestState::stale;
    }
    if (static_cast<std::uint64_t>(st.st_size) == d.size && mtime_ns_of(st) == d.mtime_ns) continue;
    const std::optional<RecordedDependency> now = record_dependency(d.path);
    if (!now) {
      if (why != nullptr) *why = "the file " + d.path + " it was built from cannot be read";
      return ManifestState::stale;
    }
    if (now->sha256 != d.sha256) {
      if (why != nullptr) *why = "the file " + d.path + " it was built from has changed";
      return ManifestState::stale;
    }
  }
  return ManifestState::fresh;
}

}  // namespace accel::ops::detail
