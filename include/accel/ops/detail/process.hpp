// accel/ops/detail/process.hpp — POSIX helpers for the JIT: run a compiler, lock a file, write durably.
//
//   run_process(argv)        posix_spawnp with stdout+stderr captured into one log (no shell: arguments
//                            are passed as they are, nothing is re-split or expanded)
//   FileLock                 an exclusive flock(2) on a lock file, released when destroyed (or when the
//                            process dies: the kernel drops flocks with the last descriptor)
//   read_file / fsync_path / fsync_dir / find_on_path (shell_quote, join_command, env_string and
//   env_flag are in environment.hpp, which the op builder types use without the rest)
#pragma once

#include <accel/core/error.hpp>
#include <accel/ops/detail/environment.hpp>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace accel::ops::detail {

/// The first executable `name` in $PATH (or `name` itself when it contains a '/' and is executable).
[[nodiscard]] inline std::filesystem::path find_on_path(const std::string& name) {
  if (name.empty()) return {};
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? std::filesystem::path(name) : std::filesystem::path();
  const std::string path = env_string("PATH");
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t end = std::min(path.find(':', start), path.size());
    const std::string dir = end > start ? path.substr(start, end - start) : std::string(".");
    const std::string candidate = dir + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    start = end + 1;
  }
  return {};
}

/// Whole file as bytes; false when it cannot be opened or read.
inline bool read_file(const std::filesystem::path& path, std::string& out) {
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
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  out.resize(done);
  return true;
}

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

/// An exclusive advisory lock (flock) on `path`, created if missing. Blocks until granted.
class FileLock {
 public:
  explicit FileLock(const std::filesystem::path& path) {
    fd_ = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      throw Error(Errc::runtime_failure,
                  "accel jit cache: cannot open lock file " + path.string() + ": " + std::strerror(errno), errno);
    }
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd_);
      throw Error(Errc::runtime_failure,
                  "accel jit cache: cannot lock " + path.string() + ": " + std::strerror(err), err);
    }
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock() {
    if (fd_ >= 0) {
      (void)::flock(fd_, LOCK_UN);
      ::close(fd_);
    }
  }

 private:
  int fd_ = -1;
};

struct ProcessResult {
  int exit_code = -1;  ///< the exit status, or 128 + signal, or -1 when the program could not start
  std::string log;     ///< stdout and stderr, interleaved as written
};

/// Runs argv[0] (looked up in PATH) with argv, waits, and returns its exit status and output.
/// `log_path` is a scratch file for the output (removed afterwards).
inline ProcessResult run_process(const std::vector<std::string>& argv, const std::filesystem::path& log_path) {
  ProcessResult result;
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    result.log = "cannot start " + argv[0] + ": " + std::strerror(rc);
    std::error_code ec;
    std::filesystem::remove(log_path, ec);
    return result;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) break;
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_code = 128 + WTERMSIG(status);
  }
  (void)read_file(log_path, result.log);
  std::error_code ec;
  std::filesystem::remove(log_path, ec);
  return result;
}

}  // namespace accel::ops::detail
