// accel/ops/detail/files.hpp — POSIX file helpers for the JIT: lock a file, read and write whole files
// durably, say why a disk is full. (Running the compiler is accel/detail/subprocess.hpp's job;
// shell_quote, join_command, env_string and env_flag are in environment.hpp, which the op builder types
// use without the rest.)
//
//   FileLock                 an exclusive flock(2) on a lock file, released when destroyed (or when the
//                            process dies: the kernel drops flocks with the last descriptor); a wait for
//                            it can be bounded (BuildLockTimeoutError names the lock)
//   read_file / write_all / fsync_dir / find_on_path / disk_space_problem / noexec_problem
//   seconds_from_env         a duration in seconds from an environment variable (ACCEL_JIT_*_TIMEOUT)
#pragma once

#include <accel/core/error.hpp>
#include <accel/detail/subprocess.hpp>
#include <accel/ops/detail/environment.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

namespace accel::ops {

/// A wait for another process's build of the same op (its key's lock file) that passed its deadline
/// (ACCEL_JIT_LOCK_TIMEOUT, ops/jit_cache.hpp). The holder may be hung, or slower than the limit allows.
class BuildLockTimeoutError : public Error {
 public:
  BuildLockTimeoutError(const std::string& message, std::filesystem::path lock, double seconds,
                        source_location where = source_location::current())
      : Error(Errc::runtime_failure, message, 0, where), lock_(std::move(lock)), seconds_(seconds) {}
  /// The lock file waited on.
  [[nodiscard]] const std::filesystem::path& lock_path() const noexcept { return lock_; }
  /// How long it waited.
  [[nodiscard]] double seconds() const noexcept { return seconds_; }

 private:
  std::filesystem::path lock_;
  double seconds_;
};

}  // namespace accel::ops

namespace accel::ops::detail {

/// The value of `name` as seconds (a decimal number; 0 = no limit), `fallback` when unset or empty.
/// Anything else is an InvalidArgumentError naming the variable: a typo must not silently mean "no limit".
[[nodiscard]] inline double seconds_from_env(const char* name, double fallback) {
  const std::string v = env_string(name);
  if (v.empty()) return fallback;
  char* end = nullptr;
  errno = 0;
  const double s = std::strtod(v.c_str(), &end);
  if (errno != 0 || *end != '\0' || !(s >= 0) || s > 1e9) {  // v is not empty: nothing read leaves *end set
    throw InvalidArgumentError(std::string(name) + "='" + v + "' is not a number of seconds (0 means no limit)");
  }
  return s;
}

/// The first executable `name` in $PATH (or `name` itself when it contains a '/' and is executable).
[[nodiscard]] inline std::filesystem::path find_on_path(const std::string& name) {
  return accel::detail::find_executable(name);
}

/// Whole file as bytes; false when it cannot be opened or read (a read error, or a directory, is not a
/// short file: its bytes so far would hash and parse as if they were all). `info` (when given) receives
/// its fstat.
inline bool read_file(const std::filesystem::path& path, std::string& out, struct stat* info) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return false;
  }
  out.resize(static_cast<std::size_t>(st.st_size));
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return false;
    }
    if (n == 0) break;  // the file shrank since fstat
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  out.resize(done);
  if (info != nullptr) *info = st;
  return true;
}

inline bool read_file(const std::filesystem::path& path, std::string& out) { return read_file(path, out, nullptr); }

/// Writes all of `data` to fd (retrying short writes); false on error.
inline bool write_all(int fd, const void* data, std::size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

/// fsync of a directory, so a rename inside it survives a crash. Best effort.
inline void fsync_dir(const std::filesystem::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

/// An exclusive advisory lock (flock) on `path`, created if missing (mode 0600). Blocks until granted —
/// or, with `timeout_seconds` > 0, throws BuildLockTimeoutError once that long has passed. `on_wait`
/// (when given) is called once when the lock is found held, before waiting.
class FileLock {
 public:
  struct TryOnly {};
  explicit FileLock(const std::filesystem::path& path, double timeout_seconds = 0,
                    const std::function<void()>& on_wait = {}) {
    fd_ = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd_ < 0) {
      throw Error(Errc::runtime_failure,
                  "accel jit cache: cannot open lock file " + path.string() + ": " + std::strerror(errno), errno);
    }
    if (try_lock(path)) return;  // the common case: nobody builds this key
    if (on_wait) on_wait();
    const auto start = std::chrono::steady_clock::now();
    // flock has no timed form: poll, backing off to 50 ms (a waiter is late by at most that much).
    auto pause = std::chrono::milliseconds(1);
    while (!try_lock(path)) {
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (timeout_seconds > 0 && waited >= timeout_seconds) {
        ::close(fd_);
        fd_ = -1;
        throw BuildLockTimeoutError("accel jit cache: gave up after " + std::to_string(static_cast<long long>(waited)) +
                                        " s waiting for the lock " + path.string() +
                                        ", held by another process building the same op (a hung compile, or "
                                        "one slower than ACCEL_JIT_LOCK_TIMEOUT allows)",
                                    path, waited);
      }
      ::usleep(static_cast<useconds_t>(std::chrono::microseconds(pause).count()));
      pause = std::min(pause * 2, std::chrono::milliseconds(50));
    }
  }
  /// Takes the lock only if nobody holds it; valid() says whether it did. A missing lock file is not
  /// created (nobody can be building under it).
  FileLock(const std::filesystem::path& path, TryOnly) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd_ < 0) return;
    while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno == EINTR) continue;
      ::close(fd_);
      fd_ = -1;
      return;
    }
  }
  [[nodiscard]] bool valid() const noexcept { return fd_ >= 0; }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock() {
    if (fd_ >= 0) {
      (void)::flock(fd_, LOCK_UN);
      ::close(fd_);
    }
  }

 private:
  // true: granted; false: held by someone else; throws on any other failure.
  bool try_lock(const std::filesystem::path& path) {
    for (;;) {
      if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return true;
      if (errno == EINTR) continue;
      if (errno == EWOULDBLOCK) return false;
      const int err = errno;
      ::close(fd_);
      fd_ = -1;
      throw Error(Errc::runtime_failure, "accel jit cache: cannot lock " + path.string() + ": " + std::strerror(err), err);
    }
  }

  int fd_ = -1;
};

/// Free bytes for an unprivileged writer in the file system holding `dir` (-1 when unknown).
[[nodiscard]] inline long long free_bytes(const std::filesystem::path& dir) {
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) != 0) return -1;
  return static_cast<long long>(fs.f_bavail) * static_cast<long long>(fs.f_frsize);
}

/// Why a failed build may have run out of space, or empty: a directory of `dirs` with less than 1 MiB
/// free (or no free inode), or the compiler's log saying "No space left on device" / "Disk quota
/// exceeded" (then the free space of each directory is given, for the user to judge).
[[nodiscard]] inline std::string disk_space_problem(const std::vector<std::filesystem::path>& dirs, std::string_view log) {
  constexpr long long low = 1 << 20;
  std::string full;
  std::string sizes;
  for (const auto& dir : dirs) {
    struct statvfs fs {};
    if (dir.empty() || ::statvfs(dir.c_str(), &fs) != 0) continue;
    const long long bytes = static_cast<long long>(fs.f_bavail) * static_cast<long long>(fs.f_frsize);
    const bool no_inode = fs.f_files > 0 && fs.f_favail == 0;
    if (bytes < low || no_inode) {
      if (!full.empty()) full += "; ";
      full += dir.string() + " is full (" + std::to_string(bytes) + " bytes free" + (no_inode ? ", no free inode" : "") + ")";
    }
    if (!sizes.empty()) sizes += ", ";
    sizes += dir.string() + ": " + std::to_string(bytes) + " bytes free";
  }
  const bool enospc = log.find("No space left on device") != std::string_view::npos;
  const bool quota = log.find("Disk quota exceeded") != std::string_view::npos;
  if (!full.empty()) return "out of disk space: " + full;
  if (enospc) return "out of disk space: the compiler reported 'No space left on device' (" + sizes + ")";
  if (quota) return "out of disk quota: the compiler reported 'Disk quota exceeded' (" + sizes + ")";
  return {};
}

/// Why `dir`'s file system cannot hold loadable code (mounted noexec: dlopen fails to map it), or empty.
/// A directory not made yet is judged by the nearest one above it that exists (where it would be made).
[[nodiscard]] inline std::string noexec_problem(const std::filesystem::path& dir) {
  struct statvfs fs {};
  std::filesystem::path at = dir;
  while (::statvfs(at.c_str(), &fs) != 0) {
    if (errno != ENOENT || !at.has_parent_path() || at.parent_path() == at) return {};
    at = at.parent_path();
  }
  if ((fs.f_flag & ST_NOEXEC) == 0) return {};
  return "the JIT cache directory " + dir.string() +
         " is on a file system mounted noexec, so no shared object in it can be loaded; set ACCEL_CACHE_DIR to a "
         "directory on a file system that allows execution";
}

/// The directory the host compiler writes its intermediate files to: $TMPDIR, else /tmp.
[[nodiscard]] inline std::filesystem::path compiler_temp_dir() {
  const std::string t = env_string("TMPDIR");
  return t.empty() ? std::filesystem::path("/tmp") : std::filesystem::path(t);
}

}  // namespace accel::ops::detail
