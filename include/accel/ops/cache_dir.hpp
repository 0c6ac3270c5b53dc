// accel/ops/cache_dir.hpp — accel::ops::UnsafeCacheDirError, and the rule a JIT cache directory follows.
//
// The cache holds shared objects that load() dlopen's: whoever can write into it can run code in every
// process that loads an op from it. So a cache directory — the root ($ACCEL_CACHE_DIR,
// $XDG_CACHE_HOME/accel, $HOME/.cache/accel or /tmp/accel-cache-<uid>) and every directory from it down
// to an entry (<root>/v1, <root>/v1/<op>) — is used only when it is owned by this process's effective
// user and not writable by its group or by others: the rule OpenSSH applies to ~/.ssh and the XDG
// base-directory spec to $XDG_RUNTIME_DIR. Otherwise UnsafeCacheDirError names the directory, its owner
// and its mode. A cache shared by a group is refused too (any member could plant code). Directories
// above the root ($HOME, /tmp) are not checked; those accel creates (the root, and missing parents of it)
// are made with mode 0700.
//
// Symbolic links are followed: a link to a directory another user owns is refused for that owner; a link
// to a directory not made yet is an error saying so (mkdir(2) does not follow links).
#pragma once

#include <accel/core/error.hpp>
#include <accel/core/source_location.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

namespace accel::ops {

/// A JIT cache directory that another account could write to (see the header comment).
class UnsafeCacheDirError : public InvalidArgumentError {
 public:
  UnsafeCacheDirError(const std::string& message, std::filesystem::path path, unsigned owner, unsigned mode,
                      source_location where = source_location::current())
      : InvalidArgumentError(message, where), path_(std::move(path)), owner_(owner), mode_(mode) {}
  /// The directory refused.
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
  /// Its owner's uid.
  [[nodiscard]] unsigned owner_uid() const noexcept { return owner_; }
  /// Its permission bits (e.g. 0777).
  [[nodiscard]] unsigned mode() const noexcept { return mode_; }

 private:
  std::filesystem::path path_;
  unsigned owner_;
  unsigned mode_;
};

namespace detail {

/// "1000 (alice)", or "1000" when the account has no name.
[[nodiscard]] inline std::string uid_text(uid_t uid) {
  std::string out = std::to_string(uid);
  struct passwd pw {};
  struct passwd* found = nullptr;
  char buffer[1024];
  if (::getpwuid_r(uid, &pw, buffer, sizeof buffer, &found) == 0 && found != nullptr && found->pw_name != nullptr) {
    out += std::string(" (") + found->pw_name + ")";
  }
  return out;
}

[[nodiscard]] inline std::string mode_text(unsigned mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", mode & 07777u);
  return text;
}

/// Throws UnsafeCacheDirError unless `dir` (which exists, `st` its stat) passes the rule.
inline void check_cache_dir(const std::filesystem::path& dir, const struct stat& st) {
  const uid_t me = ::geteuid();
  const unsigned mode = static_cast<unsigned>(st.st_mode) & 07777u;
  if (!S_ISDIR(st.st_mode)) {
    throw UnsafeCacheDirError("accel jit cache: " + dir.string() + " is not a directory", dir, st.st_uid, mode);
  }
  const bool foreign = st.st_uid != me;
  const bool shared = (mode & (S_IWGRP | S_IWOTH)) != 0;
  if (!foreign && !shared) return;
  std::string why;
  if (foreign) why = "it is owned by uid " + uid_text(st.st_uid) + ", not by this process's uid " + uid_text(me);
  if (shared) {
    if (!why.empty()) why += ", and ";
    why += std::string("its mode ") + mode_text(mode) + " lets " +
           ((mode & S_IWGRP) != 0 && (mode & S_IWOTH) != 0 ? "its group and all other users"
            : (mode & S_IWGRP) != 0                       ? "its group"
                                                          : "all other users") +
           " write into it";
  } else {
    why += " (mode " + mode_text(mode) + ")";
  }
  throw UnsafeCacheDirError(
      "accel jit cache: refusing to use " + dir.string() + ": " + why +
          ". Another account could plant a shared object there that load() would run in this process. Use a "
          "directory of your own that only you can write (ACCEL_CACHE_DIR), or fix this one: chown " +
          std::to_string(me) + " '" + dir.string() + "' && chmod 700 '" + dir.string() + "'",
      dir, st.st_uid, mode);
}

/// Whether `dir` exists; throws UnsafeCacheDirError when it exists and fails the rule.
[[nodiscard]] inline bool cache_dir_exists(const std::filesystem::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return false;
    throw Error(Errc::runtime_failure, "accel jit cache: cannot stat " + dir.string() + ": " + std::strerror(errno),
                errno);
  }
  check_cache_dir(dir, st);
  return true;
}

/// Creates `dir` with mode 0700 when missing — and, with `parents`, its missing parents, also 0700 —
/// then checks it (an existing one, or one another account created first, is checked the same way).
inline void make_cache_dir(const std::filesystem::path& dir, bool parents) {
  if (cache_dir_exists(dir)) return;
  if (parents && dir.has_parent_path() && dir.parent_path() != dir) {
    struct stat st {};
    // (Another failure than ENOENT cannot happen here: `dir`'s own stat would have met it first.)
    if (::stat(dir.parent_path().c_str(), &st) != 0) make_cache_dir(dir.parent_path(), true);
  }
  if (::mkdir(dir.c_str(), 0700) == 0) {
    (void)::chmod(dir.c_str(), 0700);  // exactly 0700, whatever the umask
  } else if (errno != EEXIST) {
    throw Error(Errc::runtime_failure, "accel jit cache: cannot create " + dir.string() + ": " + std::strerror(errno),
                errno);
  }
  if (!cache_dir_exists(dir)) {
    // mkdir(2) does not follow a symbolic link: one to a missing directory is "there" and yet no directory.
    std::error_code ec;
    if (std::filesystem::is_symlink(std::filesystem::symlink_status(dir, ec))) {
      throw Error(Errc::runtime_failure,
                  "accel jit cache: " + dir.string() + " is a symbolic link to " +
                      std::filesystem::read_symlink(dir, ec).string() +
                      ", which does not exist: create that directory (mode 0700), or remove the link",
                  ENOENT);
    }
    throw Error(Errc::runtime_failure, "accel jit cache: " + dir.string() + " vanished as it was created", ENOENT);
  }
}

}  // namespace detail

}  // namespace accel::ops
