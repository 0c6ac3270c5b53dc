// writable.hpp — whether a file or directory can be created in a directory, found by trying.
//
// access(W_OK) answers for the permission bits only: root passes it everywhere, yet nothing can be
// created in /proc or /sys, nor on a read-only or full file system. The engine checks its outputs
// before anything is allocated (a failure after an hour of training loses the hour), so it makes a
// probe there and removes it at once.
#pragma once

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace engine {

/// Why a file (directory == false) or a directory cannot be created in dir, or "" when one can; the
/// probe it makes (a name of its own: .engine-probe-<pid>-<n>) is removed.
inline std::string creation_error(const std::filesystem::path& dir, bool directory) {
  static int serial = 0;
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::filesystem::path probe =
        dir / (".engine-probe-" + std::to_string(::getpid()) + "-" + std::to_string(serial++));
    if (directory) {
      if (::mkdir(probe.c_str(), 0700) == 0) {
        ::rmdir(probe.c_str());
        return "";
      }
    } else {
      const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (fd >= 0) {
        ::close(fd);
        ::unlink(probe.c_str());
        return "";
      }
    }
    if (errno != EEXIST) return std::strerror(errno);
  }
  return "no free probe name";
}

/// Why an existing file cannot be written, or "": it is opened for writing (appending), not written.
inline std::string write_error(const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return std::strerror(errno);
  ::close(fd);
  return "";
}

}  // namespace engine
