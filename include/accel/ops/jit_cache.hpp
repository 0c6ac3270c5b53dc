// accel/ops/jit_cache.hpp — accel::ops::JitCache: the on-disk cache of JIT-compiled ops.
//
// Location: $ACCEL_CACHE_DIR, else $XDG_CACHE_HOME/accel, else $HOME/.cache/accel, else
// /tmp/accel-cache-<uid> (created on first use, mode 0700). Layout: <dir>/v1/<op name>/<key>.<ext> (a
// shared object `.so`, a cubin `.cubin` or `.ptx`), <key>.lock beside it, and <key>.<ext>.deps when the
// build gave a dependency list. The key is a SHA-256 over everything that decides what the compile
// produces and is known before it runs (op_builder.hpp lists the fields), so a change of source, listed
// header, flag, compiler or architecture gives a new entry and never reuses an old one.
//
// Dependencies the key cannot cover (the host compiler's -MD list: headers a spec does not list, system
// headers) are recorded in the entry's dependency manifest, <key>.<ext>.deps (format and check:
// ops/detail/dependency_manifest.hpp): path, size, mtime and SHA-256 of each file, and the payload's
// size and checksum, which tie it to its entry. On every hit (get_or_build, verify, is_cached) each file
// is stat'ed, and hashed again only when its size or mtime moved; a file whose bytes changed, or that is
// gone, or a manifest that does not parse or names another payload, makes the entry `stale`: it is
// rebuilt under the key's lock like a missing one (counted in stats().stale and .rebuilt, logged with
// ACCEL_JIT_VERBOSE). The stale entry stays until the rebuild replaces it, never used meanwhile: a
// rebuild that fails (a header deleted: the compiler's CompileError) leaves it, and it is good again if
// the files come back as they were. An entry without a manifest (NVRTC's, an older accel's) is judged by
// its key and footer alone, as before.
//
// Trust: the cache holds code that load() runs, so <dir>, <dir>/v1 and <dir>/v1/<op> are used only
// when this user owns them and nobody else can write into them; otherwise UnsafeCacheDirError
// (ops/cache_dir.hpp), on every get_or_build, hit or miss.
//
// Entry format: the payload exactly as the compiler wrote it, followed by a 48-byte footer
//   "ACCELJT1" | payload size (u64 LE) | checksum64(payload) (u64) | first 16 hex digits of the key |
//   "ACCELEND"
// A shared object stays loadable by dlopen with the footer appended (the loader maps only what the
// ELF program headers name), so an entry is dlopen'ed in place, without a copy. On every load the
// footer is checked: a file shorter than its footer says, without its end magic (truncated), with a
// checksum or key that does not match (corrupt) is removed and rebuilt. A payload is checked before
// it is committed by the build function itself (the host toolchain dlopen's the temporary, NVRTC's
// cubin header is checked), so a compiler that exits 0 with a broken output commits nothing; an entry
// that passes its footer check but then fails to load is removed with evict() and built once more.
//
// Writes are atomic: the compiler writes <key>.<ext>.tmp.<pid>.<n> in the same directory, the footer
// is appended, the file is fsync'ed, renamed over <key>.<ext>, and the directory is fsync'ed. The
// manifest is written the same way (<key>.<ext>.deps.tmp.<pid>.<n>, fsync, rename) just before the
// entry's rename, so an entry built with a manifest is never visible without it. A compile
// that fails leaves no entry and no temporary file. Builds of one key are serialised across processes
// by flock(2) on <key>.lock: the first process compiles, the others wait, find the entry and load it —
// so N processes starting together compile once. A waiter logs "waiting for the build of <op> (lock
// <path>)" (with ACCEL_JIT_VERBOSE) and gives up with BuildLockTimeoutError, naming the lock, after
// ACCEL_JIT_LOCK_TIMEOUT seconds (default: the compile timeout, ACCEL_JIT_COMPILE_TIMEOUT, + 120 s, so a
// holder that is merely slow is waited for; 0: wait forever). A process killed mid-build releases the lock (the
// kernel drops it with the descriptor) and leaves at most a temporary file: the next build of any key
// of that op removes every temporary whose key's lock nobody holds.
//
// ACCEL_JIT_VERBOSE=1 prints each hit, compile (command and seconds) and rebuild (with why: truncated,
// corrupt, stale and which file changed) to stderr. stats() counts this process's hits, compiles, rebuilt
// entries and, of those, the stale ones (for tests and reports).
#pragma once

#include <accel/core/error.hpp>
#include <accel/ops/cache_dir.hpp>
#include <accel/ops/detail/dependency_manifest.hpp>
#include <accel/ops/detail/files.hpp>
#include <accel/ops/detail/sha256.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace accel::ops {

namespace detail {

/// Prints one "[accel jit] ..." line to stderr when ACCEL_JIT_VERBOSE is set.
inline void jit_log(const std::string& line) {
  static const bool verbose = env_flag("ACCEL_JIT_VERBOSE");
  if (verbose) std::fprintf(stderr, "[accel jit] %s\n", line.c_str());
}

/// The limit on one host compile: $ACCEL_JIT_COMPILE_TIMEOUT seconds, default 900 (0: none). Our
/// kernels build in seconds; the limit is there so that a hung compiler (a wrapper waiting on a dead
/// server, a stuck NFS mount) ends in a CompileError instead of a process that never starts.
[[nodiscard]] inline double compile_timeout_seconds() { return seconds_from_env("ACCEL_JIT_COMPILE_TIMEOUT", 900); }

/// How long a process waits for another's build of the same key: $ACCEL_JIT_LOCK_TIMEOUT seconds,
/// default the compile timeout + 120 s (0: forever).
[[nodiscard]] inline double lock_timeout_seconds() {
  const double compile = compile_timeout_seconds();
  return seconds_from_env("ACCEL_JIT_LOCK_TIMEOUT", compile > 0 ? compile + 120 : 0);
}

/// The key's build lock, waited for as lock_timeout_seconds() allows, saying so when it must wait.
[[nodiscard]] inline std::function<void()> lock_wait_logger(std::string_view op, const std::filesystem::path& lock) {
  return [op = std::string(op), lock] { jit_log("waiting for the build of " + op + " (lock " + lock.string() + ")"); };
}

[[nodiscard]] inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

inline constexpr char footer_magic[8] = {'A', 'C', 'C', 'E', 'L', 'J', 'T', '1'};
inline constexpr char footer_end[8] = {'A', 'C', 'C', 'E', 'L', 'E', 'N', 'D'};
inline constexpr std::size_t footer_size = 48;

}  // namespace detail

/// The state of a cache entry on disk.
enum class EntryState {
  ok,
  missing,
  truncated,
  corrupt,
  stale,  ///< the footer is fine, but a file its dependency manifest records changed (or the manifest is bad)
};

[[nodiscard]] constexpr std::string_view to_string(EntryState s) noexcept {
  switch (s) {
    case EntryState::ok: return "ok";
    case EntryState::missing: return "missing";
    case EntryState::truncated: return "truncated";
    case EntryState::corrupt: return "corrupt";
    case EntryState::stale: return "stale";
  }
  return "unknown";
}

/// What get_or_build found or made.
struct CacheEntry {
  std::filesystem::path path;  ///< the entry file (payload + footer)
  std::size_t payload_size = 0;
  bool compiled = false;       ///< true when this call ran the build
  std::string payload;         ///< the payload bytes, when asked for (cubins); empty otherwise
  std::uint64_t file_device = 0, file_inode = 0;  ///< which file it was (evict() removes only that one)
};

/// Counters for this process (all JitCache objects together).
struct JitCacheStats {
  std::uint64_t hits = 0;
  std::uint64_t compiles = 0;
  std::uint64_t rebuilt = 0;  ///< entries found truncated, corrupt or stale, or evicted (failed to load), and built again
  std::uint64_t stale = 0;    ///< of those, the stale ones: a file in the dependency manifest changed or is gone
};

/// What a build function may return: the files its output depends on beyond what the key covers, to be
/// recorded in the entry's dependency manifest (absolute paths; empty: none beyond the key). nullopt (or
/// a build function returning void): no manifest, the key alone decides (see the header comment).
using BuildDependencies = std::optional<std::vector<std::filesystem::path>>;

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

  /// <dir>/v1/<op>/<key>.<ext>.deps: the entry's dependency manifest (when its build gave one).
  [[nodiscard]] static std::filesystem::path manifest_path(const std::filesystem::path& entry) {
    return entry.string() + ".deps";
  }

  /// Checks an entry's footer and checksum, then its dependency manifest when it has one (stale: a
  /// recorded file changed or is gone, or the manifest is malformed). On ok, `payload` (when given)
  /// receives the payload bytes and `payload_size` its length. `why` (when given) says what is wrong
  /// otherwise.
  [[nodiscard]] static EntryState verify(const std::filesystem::path& path, std::string_view key,
                                         std::string* payload = nullptr, std::size_t* payload_size = nullptr,
                                         std::string* why = nullptr) {
    std::uint64_t checksum = 0;
    std::size_t size = 0;
    const EntryState s = verify_file(path, key, payload, &size, why, nullptr, &checksum);
    if (s != EntryState::ok) return s;
    if (detail::check_manifest(manifest_path(path), size, checksum, why) == detail::ManifestState::stale) {
      if (payload != nullptr) payload->clear();
      return EntryState::stale;
    }
    if (payload_size != nullptr) *payload_size = size;
    return EntryState::ok;
  }

  /// The state of the entry for (op, key, ext), without building anything.
  [[nodiscard]] EntryState state(std::string_view op, std::string_view key, std::string_view ext) const {
    return verify(entry_path(op, key, ext), key);
  }

  /// Returns a valid entry for (op, key, ext). When none exists (or it is truncated, corrupt or stale),
  /// takes the key's lock, checks again, and calls `build(tmp)`, which must write the payload to the file
  /// `tmp` — and check it — or throw; the footer is then appended and the file committed atomically.
  /// `build` returns void, or BuildDependencies: the files to record in the entry's dependency manifest,
  /// which is committed (atomically too) before the entry. An exception from `build` propagates after the
  /// temporary files are removed (the cache is left as it was: a stale entry stays, and stays unused).
  /// With `want_payload`, the returned entry carries the payload bytes. Throws UnsafeCacheDirError when
  /// a directory on the way fails the trust rule (see the header comment).
  template <class Build>
  CacheEntry get_or_build(std::string_view op, std::string_view key, std::string_view ext, Build&& build,
                          bool want_payload = false) {
    const std::filesystem::path path = entry_path(op, key, ext);
    const std::filesystem::path op_dir = path.parent_path();
    CacheEntry entry;
    entry.path = path;
    std::string* payload = want_payload ? &entry.payload : nullptr;
    std::string why;
    struct stat st {};
    // Fast path: no lock, no directory creation; three stat calls check the trust rule.
    EntryState s = EntryState::missing;
    if (detail::cache_dir_exists(dir_) && detail::cache_dir_exists(dir_ / "v1") && detail::cache_dir_exists(op_dir)) {
      s = verify_with_manifest(path, key, payload, &entry.payload_size, &why, &st);
    }
    if (s == EntryState::ok) {
      counters().hits.fetch_add(1, std::memory_order_relaxed);
      set_identity(entry, st);
      return entry;
    }
    detail::make_cache_dir(dir_, /*parents=*/true);
    detail::make_cache_dir(dir_ / "v1", false);
    detail::make_cache_dir(op_dir, false);
    const std::filesystem::path lock_path = op_dir / (std::string(key) + ".lock");
    detail::FileLock lock(lock_path, detail::lock_timeout_seconds(), detail::lock_wait_logger(op, lock_path));
    s = verify_with_manifest(path, key, payload, &entry.payload_size, &why, &st);
    if (s == EntryState::ok) {  // another process built it while we waited
      counters().hits.fetch_add(1, std::memory_order_relaxed);
      set_identity(entry, st);
      return entry;
    }
    remove_temporaries(op_dir, key);
    std::error_code ec;
    if (s == EntryState::stale) {
      // Kept until the rebuild replaces it: if the rebuild fails, it is still never used while stale, and
      // it is good again if the files come back as they were (a branch switched back, say).
      detail::jit_log(std::string(op) + ": cache entry " + path.string() + " is stale (" + why + "): rebuilding");
      counters().rebuilt.fetch_add(1, std::memory_order_relaxed);
      counters().stale.fetch_add(1, std::memory_order_relaxed);
    } else if (s != EntryState::missing) {
      detail::jit_log(std::string(op) + ": cache entry " + path.string() + " is " + std::string(to_string(s)) +
                      " (" + why + "): rebuilding");
      std::filesystem::remove(path, ec);
      std::filesystem::remove(manifest_path(path), ec);
      counters().rebuilt.fetch_add(1, std::memory_order_relaxed);
    }
    static std::atomic<std::uint64_t> sequence{0};
    const std::string suffix = ".tmp." + std::to_string(::getpid()) + "." + std::to_string(sequence.fetch_add(1));
    const std::filesystem::path tmp = path.string() + suffix;
    const std::filesystem::path manifest_tmp = manifest_path(path).string() + suffix;
    try {
      BuildDependencies deps;
      if constexpr (std::is_void_v<std::invoke_result_t<Build&, const std::filesystem::path&>>) {
        build(tmp);
      } else {
        deps = build(tmp);
      }
      commit(tmp, path, key, payload, &entry.payload_size, &st, deps, manifest_tmp);
    } catch (...) {
      std::filesystem::remove(tmp, ec);
      std::filesystem::remove(manifest_tmp, ec);
      throw;
    }
    counters().compiles.fetch_add(1, std::memory_order_relaxed);
    entry.compiled = true;
    set_identity(entry, st);
    return entry;
  }

  /// Removes `bad` — an entry get_or_build returned whose payload then failed to load — so that the next
  /// get_or_build builds it again. Under the key's lock, and only when the file is still the one `bad`
  /// names (another process may have replaced it meanwhile). Returns whether it removed it.
  bool evict(std::string_view op, std::string_view key, std::string_view ext, const CacheEntry& bad) {
    const std::filesystem::path path = entry_path(op, key, ext);
    if (!detail::cache_dir_exists(path.parent_path())) return false;
    const std::filesystem::path lock_path = path.parent_path() / (std::string(key) + ".lock");
    detail::FileLock lock(lock_path, detail::lock_timeout_seconds(), detail::lock_wait_logger(op, lock_path));
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return false;
    if (static_cast<std::uint64_t>(st.st_dev) != bad.file_device || static_cast<std::uint64_t>(st.st_ino) != bad.file_inode) {
      return false;
    }
    std::error_code ec;
    std::filesystem::remove(path, ec);
    if (ec) return false;
    std::error_code ignored;
    std::filesystem::remove(manifest_path(path), ignored);
    detail::fsync_dir(path.parent_path());
    counters().rebuilt.fetch_add(1, std::memory_order_relaxed);
    detail::jit_log(std::string(op) + ": evicted cache entry " + path.string() + " (it failed to load)");
    return true;
  }

  /// This process's counters.
  [[nodiscard]] static JitCacheStats stats() noexcept {
    return {counters().hits.load(), counters().compiles.load(), counters().rebuilt.load(), counters().stale.load()};
  }

 private:
  struct Counters {
    std::atomic<std::uint64_t> hits{0}, compiles{0}, rebuilt{0}, stale{0};
  };
  static Counters& counters() noexcept {
    static Counters c;
    return c;
  }

  static void set_identity(CacheEntry& entry, const struct stat& st) noexcept {
    entry.file_device = static_cast<std::uint64_t>(st.st_dev);
    entry.file_inode = static_cast<std::uint64_t>(st.st_ino);
  }

  // verify() with the file's stat in `info`: one read of the entry, then its manifest.
  [[nodiscard]] static EntryState verify_with_manifest(const std::filesystem::path& path, std::string_view key,
                                                       std::string* payload, std::size_t* payload_size,
                                                       std::string* why, struct stat* info) {
    std::uint64_t checksum = 0;
    const EntryState s = verify_file(path, key, payload, payload_size, why, info, &checksum);
    if (s != EntryState::ok) return s;
    if (detail::check_manifest(manifest_path(path), *payload_size, checksum, why) == detail::ManifestState::stale) {
      return EntryState::stale;
    }
    return EntryState::ok;
  }

  [[nodiscard]] static EntryState verify_file(const std::filesystem::path& path, std::string_view key,
                                              std::string* payload, std::size_t* payload_size, std::string* why,
                                              struct stat* info, std::uint64_t* checksum = nullptr) {
    std::string bytes;
    if (!detail::read_file(path, bytes, info)) {
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
    if (checksum != nullptr) *checksum = sum;
    if (payload != nullptr) {
      bytes.resize(size);
      *payload = std::move(bytes);
    }
    return EntryState::ok;
  }

  // Temporaries left by killed builds: those of `key` (we hold its lock, so nobody writes them), and
  // those of any other key of the op whose lock nobody holds (or whose lock file is gone) — a build
  // holds its key's lock while its temporary exists. Left alone: temporaries of builds running now.
  static void remove_temporaries(const std::filesystem::path& op_dir, std::string_view key) {
    std::error_code ec;
    std::vector<std::pair<std::string, std::filesystem::path>> found;  // (key, temporary)
    for (std::filesystem::directory_iterator it(op_dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.find(".tmp.") == std::string::npos) continue;
      found.emplace_back(name.substr(0, name.find('.')), it->path());
    }
    std::sort(found.begin(), found.end());
    for (std::size_t i = 0; i < found.size();) {
      const std::string& owner = found[i].first;
      std::size_t next = i;
      while (next < found.size() && found[next].first == owner) ++next;
      // Held while the files are removed: no build of that key can start meanwhile.
      const std::filesystem::path lock_path = op_dir / (owner + ".lock");
      const detail::FileLock probe(lock_path, detail::FileLock::TryOnly{});
      const bool free = owner == key || probe.valid() || !std::filesystem::exists(lock_path);
      for (; i < next; ++i) {
        if (!free) continue;
        std::error_code ignored;
        std::filesystem::remove(found[i].second, ignored);
        detail::jit_log("removed " + found[i].second.string() + ", left by a build that did not finish");
      }
    }
  }

  // Appends the footer to `tmp`, writes the dependency manifest (when `deps` has one) and publishes both:
  // the manifest first, so an entry built with a manifest is never visible without it. Between the two
  // renames the new manifest sits beside the old entry; its payload checksum does not match that entry,
  // so a reader then sees "stale" and waits on the key's lock, which this build holds.
  static void commit(const std::filesystem::path& tmp, const std::filesystem::path& path, std::string_view key,
                     std::string* payload, std::size_t* payload_size, struct stat* info,
                     const BuildDependencies& deps, const std::filesystem::path& manifest_tmp) {
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
    write_synced(tmp, O_APPEND, footer, sizeof footer, info);
    const std::filesystem::path manifest = manifest_path(path);
    if (deps) {
      detail::DependencyManifest m;
      m.payload_size = size;
      m.payload_checksum = sum;
      for (const auto& file : *deps) {
        std::optional<detail::RecordedDependency> d = detail::record_dependency(file);
        if (!d) {  // removed or unreadable since the compile read it: this output cannot be vouched for
          throw Error(Errc::runtime_failure, "accel jit cache: " + file.string() +
                                                 ", which the build of " + path.string() +
                                                 " read, cannot be read now (changed during the build?)");
        }
        m.files.push_back(std::move(*d));
      }
      const std::string text = detail::manifest_text(m);
      write_synced(manifest_tmp, O_CREAT | O_TRUNC | O_NOFOLLOW, text.data(), text.size());
      rename_or_throw(manifest_tmp, manifest);
    } else {
      // A build without a manifest replaces one with one: a manifest left from before would not match
      // this payload and would make the entry look stale forever.
      std::error_code ignored;
      std::filesystem::remove(manifest, ignored);
    }
    rename_or_throw(tmp, path);
    detail::fsync_dir(path.parent_path());
    *payload_size = bytes.size();
    if (payload != nullptr) *payload = std::move(bytes);
  }

  // Writes `size` bytes to `path`, opened write-only with `flags` (O_APPEND: the footer after the build's
  // output; O_CREAT | O_TRUNC: a new file), and fsyncs it (the rename that publishes it comes after);
  // `info` (when given) receives the file's stat. Throws naming the file, and a full disk as such.
  static void write_synced(const std::filesystem::path& path, int flags, const void* data, std::size_t size,
                           struct stat* info = nullptr) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | flags, 0600);
    if (fd < 0) {
      throw Error(Errc::runtime_failure,
                  std::string("accel jit cache: cannot ") + ((flags & O_CREAT) != 0 ? "create " : "open ") +
                      path.string() + ": " + std::strerror(errno),
                  errno);
    }
    const bool written = detail::write_all(fd, data, size) && ::fsync(fd) == 0;
    const int err = errno;
    if (written && info != nullptr) (void)::fstat(fd, info);
    ::close(fd);
    if (!written) {
      std::string message = "accel jit cache: cannot write " + path.string() + ": " + std::strerror(err);
      if (const std::string space = detail::disk_space_problem({path.parent_path()}, std::strerror(err)); !space.empty()) {
        message += " (" + space + ")";
      }
      throw Error(Errc::runtime_failure, message, err);
    }
  }

  static void rename_or_throw(const std::filesystem::path& from, const std::filesystem::path& to) {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      throw Error(Errc::runtime_failure,
                  "accel jit cache: cannot rename " + from.string() + " to " + to.string() + ": " + std::strerror(errno),
                  errno);
    }
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
