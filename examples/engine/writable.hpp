// writable.hpp — whether the engine's outputs can be written, found by trying.
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

/// The path as the file system resolves it (symbolic links and ".." followed as far as it exists),
/// so that two spellings of one file compare equal; lexically normalized where that fails.
inline std::filesystem::path canonical_path(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path a = std::filesystem::absolute(path, ec);
  const std::filesystem::path c = std::filesystem::weakly_canonical(a, ec);
  return ec ? a.lexically_normal() : c;
}

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

/// A file type in words, for messages ("a directory", "a FIFO", ...).
inline const char* file_kind(std::filesystem::file_type t) {
  switch (t) {
    case std::filesystem::file_type::regular: return "a file";
    case std::filesystem::file_type::directory: return "a directory";
    case std::filesystem::file_type::character: return "a character device";
    case std::filesystem::file_type::block: return "a block device";
    case std::filesystem::file_type::fifo: return "a FIFO";
    case std::filesystem::file_type::socket: return "a socket";
    default: return "not a regular file";
  }
}

/// Whether p is dir or below it (both absolute and normalised).
inline bool path_within(const std::filesystem::path& p, const std::filesystem::path& dir) {
  auto d = dir.begin(), q = p.begin();
  for (; d != dir.end() && q != p.end(); ++d, ++q) {
    if (*d != *q) return false;
  }
  return d == dir.end();
}

/// Why an output file at `path` (absolute) cannot be written, or "": an existing one must be a
/// regular file that opens for writing; a new one needs its directory, where a file can be created.
inline std::string output_file_error(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (fs::exists(st)) {
    if (!fs::is_regular_file(st)) return std::string("it is ") + file_kind(st.type()) + ", not a file";
    if (const std::string why = write_error(path); !why.empty()) return "cannot write it: " + why;
    return "";
  }
  const fs::path dir = path.parent_path();
  const auto ds = fs::status(dir, ec);
  if (!fs::exists(ds)) return "the directory " + dir.string() + " does not exist";
  if (!fs::is_directory(ds)) return dir.string() + " is " + file_kind(ds.type()) + ", not a directory";
  if (const std::string why = creation_error(dir, false); !why.empty()) return "cannot create a file in " + dir.string() + ": " + why;
  return "";
}

}  // namespace engine
