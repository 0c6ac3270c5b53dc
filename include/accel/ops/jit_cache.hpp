// accel/ops/jit_cache.hpp — accel::ops::JitCache: the on-disk cache of JIT-compiled ops.
//
// Location: $ACCEL_CACHE_DIR, else $XDG_CACHE_HOME/accel, else $HOME/.cache/accel (created on first
// use). Layout: <dir>/v1/<op name>/<key>.<ext> (a shared object `.so`, a cubin `.cubin` or `.ptx`)
// and <key>.lock beside it. The key is a SHA-256 over everything that decides what the compile
// produces (op_builder.hpp lists the fields), so a change of source, header, flag, compiler or
// architecture gives a new entry and never reuses an old one.
//
// Entry format: the payload exactly as the compiler wrote it, followed by a 48-byte footer
//   "ACCELJT1" | payload size (u64 LE) | checksum64(payload) (u64) | first 16 hex digits of the key |
//   "ACCELEND"
// A shared object stays loadable by dlopen with the footer appended (the loader maps only what the
// ELF program headers name), so an entry is dlopen'ed in place, without a copy. On every load the
// footer is checked: a file shorter than its footer says, without its end magic (truncated), with a
// checksum or key that does not match (corrupt) is removed and rebuilt.
//
// Writes are atomic: the compiler writes <key>.<ext>.tmp.<pid>.<n> in the same directory, the footer
// is appended, the file is fsync'ed, renamed over <key>.<ext>, and the directory is fsync'ed. A compile
// that fails leaves no entry and no temporary file. Builds of one key are serialised across processes
// by flock(2) on <key>.lock: the first process compiles, the others wait, find the entry and load it —
// so N processes starting together compile once. A process killed mid-build releases the lock (the
// kernel drops it with the descriptor) and leaves at most a temporary file, removed by the next build.
//
// ACCEL_JIT_VERBOSE=1 prints each hit, compile (command and seconds) and rebuild to stderr.
// stats() counts this process's hits, compiles and rebuilt entries (for tests and reports).
#pragma once

#include <accel/core/error.hpp>
#include <accel/ops/detail/process.hpp>
#include <accel/ops/detail/sha256.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <unistd.h>

namespace accel::ops {

namespace detail {

/// Prints one "[accel jit] ..." line to stderr when ACCEL_JIT_VERBOSE is set.
inline void jit_log(const std::string& line) {
  static const bool verbose = env_flag("ACCEL_JIT_VERBOSE");
  if (verbose) std::fprintf(stderr, "[accel jit] %s\n", line.c_str());
}

[[nodiscard]] inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

inline constexpr char footer_magic[8] = {'A', 'C', 'C', 'E', 'L', 'J', 'T', '1'};
inline constexpr char footer_end[8] = {'A', 'C', 'C', 'E', 'L', 'E', 'N', 'D'};
inline constexpr std::size_t footer_size = 48;

}  // namespace detail

/// The state of a cache entry on disk.
enum class EntryState { ok, missing, truncated, corrupt };

[[nodiscard]] constexpr std::string_view to_string(EntryState s) noexcept {
  switch (s) {
    case EntryState::ok: return "ok";
    case EntryState::missing: return "missing";
    case EntryState::truncated: return "truncated";
    case EntryState::corrupt: return "corrupt";
  }
  return "unknown";
}

/// What get_or_build found or made.
struct CacheEntry {
  std::filesystem::path path;  ///< the entry file (payload + footer)
  std::size_t payload_size = 0;
  bool compiled = false;       ///< true when this call ran the build
  std::string payload;         ///< the payload bytes, when asked for (cubins); empty otherwise
};

/// Counters for this process (all JitCache objects together).
struct JitCacheStats {
  std::uint64_t hits = 0;
  std::uint64_t compiles = 0;
  std::uint64_t rebuilt = 0;  ///< entries found truncated or corrupt, removed and built again
};

class JitCache {
 public:
  /// $ACCEL_CACHE_DIR, else $XDG_CACHE_HOME/accel, else $HOME/.cache/accel, else /tmp/accel-cache-<uid>.
  [[nodiscard]] static std::filesystem::path default_dir() { return detail::default_cache_dir(); }

  JitCache() : JitCache(default_dir()) {}
  explicit JitCache(std::filesystem::path dir) : dir_(std::move(dir)) {}

  [[nodiscard]] const std::filesystem::path& dir() const noexcept { return dir_; }

  /// <dir>/v1/<op>/<key>.<ext>
  [[nodiscard]] std::filesystem::path entry_path(std::string_view op, std::string_view key,
                                                 std::string_view ext) const {
    return dir_ / "v1" / std::string(op) / (std::string(key) + "." + std::string(ext));
  }

  /// Checks an entry's footer and checksum. On ok, `payload` (when given) receives the payload bytes
  /// and `payload_size` its length. `why` (when given) says what is wrong otherwise.
  [[nodiscard]] static EntryState verify(const std::filesystem::path& path, std::string_view key,
                                         std::string* payload = nullptr, std::size_t* payload_size = nullptr,
                                         std::string* why = nullptr) {
    std::string bytes;
    if (!detail::read_file(path, bytes)) {
      if (why != nullptr) *why = "no such entry";
      return EntryState::missing;
    }
    const auto fail = [&](EntryState s, const char* reason) {
      if (why != nullptr) *why = reason;
      return s;
    };
    if (bytes.size() < detail::footer_size) return fail(EntryState::truncated, "shorter than its footer");
    const char* footer = bytes.data() + bytes.size() - detail::footer_size;
    if (std::memcmp(footer + 40, detail::footer_end, 8) != 0) return fail(EntryState::truncated, "no end marker");
    if (std::memcmp(footer, detail::footer_magic, 8) != 0) return fail(EntryState::corrupt, "bad footer magic");
    std::uint64_t size = 0, sum = 0;
    std::memcpy(&size, footer + 8, 8);
    std::memcpy(&sum, footer + 16, 8);
    if (size != bytes.size() - detail::footer_size) return fail(EntryState::truncated, "payload length mismatch");
    if (key.size() >= 16 && std::memcmp(footer + 24, key.data(), 16) != 0) {
      return fail(EntryState::corrupt, "footer names another key");
    }
    if (detail::checksum64(bytes.data(), size) != sum) return fail(EntryState::corrupt, "checksum mismatch");
    if (payload_size != nullptr) *payload_size = size;
    if (payload != nullptr) {
      bytes.resize(size);
      *payload = std::move(bytes);
    }
    return EntryState::ok;
  }

  /// The state of the entry for (op, key, ext), without building anything.
  [[nodiscard]] EntryState state(std::string_view op, std::string_view key, std::string_view ext) const {
    return verify(entry_path(op, key, ext), key);
  }

  /// Returns a valid entry for (op, key, ext). When none exists (or it is truncated or corrupt), takes
  /// the key's lock, checks again, and calls `build(tmp)`, which must write the payload to the file
  /// `tmp` or throw; the footer is then appended and the file committed atomically. An exception from
  /// `build` propagates after the temporary file is removed (the cache is left as it was).
  /// With `want_payload`, the returned entry carries the payload bytes.
  template <class Build>
  CacheEntry get_or_build(std::string_view op, std::string_view key, std::string_view ext, Build&& build,
                          bool want_payload = false) {
    const std::filesystem::path path = entry_path(op, key, ext);
    CacheEntry entry;
    entry.path = path;
    std::string* payload = want_payload ? &entry.payload : nullptr;
    std::string why;
    // Fast path: no lock, no directory creation.
    EntryState s = verify(path, key, payload, &entry.payload_size, &why);
    if (s == EntryState::ok) {
      counters().hits.fetch_add(1, std::memory_order_relaxed);
      return entry;
    }
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) {
      throw Error(Errc::runtime_failure,
                  "accel jit cache: cannot create " + path.parent_path().string() + ": " + ec.message(), ec.value());
    }
    const std::filesystem::path lock_path = path.parent_path() / (std::string(key) + ".lock");
    detail::FileLock lock(lock_path);
    s = verify(path, key, payload, &entry.payload_size, &why);
    if (s == EntryState::ok) {  // another process built it while we waited
      counters().hits.fetch_add(1, std::memory_order_relaxed);
      return entry;
    }
    remove_temporaries(path);
    if (s != EntryState::missing) {
      detail::jit_log(std::string(op) + ": cache entry " + path.string() + " is " + std::string(to_string(s)) +
                      " (" + why + "): rebuilding");
      std::filesystem::remove(path, ec);
      counters().rebuilt.fetch_add(1, std::memory_order_relaxed);
    }
    static std::atomic<std::uint64_t> sequence{0};
    const std::filesystem::path tmp =
        path.string() + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(sequence.fetch_add(1));
    try {
      build(tmp);
      commit(tmp, path, key, payload, &entry.payload_size);
    } catch (...) {
      std::filesystem::remove(tmp, ec);
      throw;
    }
    counters().compiles.fetch_add(1, std::memory_order_relaxed);
    entry.compiled = true;
    return entry;
  }

  /// This process's counters.
  [[nodiscard]] static JitCacheStats stats() noexcept {
    return {counters().hits.load(), counters().compiles.load(), counters().rebuilt.load()};
  }

 private:
  struct Counters {
    std::atomic<std::uint64_t> hits{0}, compiles{0}, rebuilt{0};
  };
  static Counters& counters() noexcept {
    static Counters c;
    return c;
  }

  // Temporaries of this key left by a killed build (we hold the key's lock: nobody else writes them).
  static void remove_temporaries(const std::filesystem::path& path) {
    std::error_code ec;
    const std::string prefix = path.filename().string() + ".tmp.";
    for (std::filesystem::directory_iterator it(path.parent_path(), ec), end; !ec && it != end; it.increment(ec)) {
      if (it->path().filename().string().starts_with(prefix)) {
        std::error_code ignored;
        std::filesystem::remove(it->path(), ignored);
      }
    }
  }

  static void commit(const std::filesystem::path& tmp, const std::filesystem::path& path, std::string_view key,
                     std::string* payload, std::size_t* payload_size) {
    std::string bytes;
    if (!detail::read_file(tmp, bytes)) {
      throw Error(Errc::runtime_failure, "accel jit cache: the build wrote no output at " + tmp.string());
    }
    char footer[detail::footer_size] = {};
    const std::uint64_t size = bytes.size();
    const std::uint64_t sum = detail::checksum64(bytes.data(), bytes.size());
    std::memcpy(footer, detail::footer_magic, 8);
    std::memcpy(footer + 8, &size, 8);
    std::memcpy(footer + 16, &sum, 8);
    for (std::size_t i = 0; i < 16; ++i) footer[24 + i] = i < key.size() ? key[i] : '0';
    std::memcpy(footer + 40, detail::footer_end, 8);
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) {
      throw Error(Errc::runtime_failure, "accel jit cache: cannot open " + tmp.string() + ": " + std::strerror(errno),
                  errno);
    }
    const bool written = detail::write_all(fd, footer, sizeof footer) && ::fsync(fd) == 0;
    const int err = errno;
    ::close(fd);
    if (!written) {
      throw Error(Errc::runtime_failure, "accel jit cache: cannot write " + tmp.string() + ": " + std::strerror(err),
                  err);
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      throw Error(Errc::runtime_failure,
                  "accel jit cache: cannot rename " + tmp.string() + " to " + path.string() + ": " +
                      std::strerror(errno),
                  errno);
    }
    detail::fsync_dir(path.parent_path());
    *payload_size = bytes.size();
    if (payload != nullptr) *payload = std::move(bytes);
  }

  std::filesystem::path dir_;
};

namespace detail {

/// Toolchain::is_cached for every toolchain whose build_command() names the cache entry and its key:
/// whether that entry exists and is valid (so load() would not compile).
template <class Builder>
[[nodiscard]] bool entry_is_cached(const Builder& b) {
  const auto cmd = b.build_command();
  return JitCache::verify(cmd.output, cmd.key) == EntryState::ok;
}

}  // namespace detail

}  // namespace accel::ops
