// checkpoint_leftovers.hpp — telling a crashed save's temporary directory from a live one, and removing it.
//
// A checkpoint is written in <save>/.tmp.step_N.<pid>.<random> and then published (checkpoint.hpp). A
// writer killed before publishing leaves that directory behind: a whole checkpoint's worth of disk,
// once per preemption. A pid cannot tell whether its writer is still at work (it may run on another
// node, or the pid may have been reused), so each writer holds a lock instead: rank 0 creates
// <tmp>.lock beside its temporary directory and holds flock(LOCK_EX) on it from before the directory
// exists until the directory is published or removed. The kernel drops the lock when the process dies,
// however it dies, so a later save that can take it knows the writer is gone and removes its directory.
//
// Beside the directory rather than inside it: inside, the lock file would be published with the
// checkpoint, or would have to leave it before the rename, and the `.old.step_N.<pid>.<random>` aside
// directory (the same suffix) would be unguarded; beside, one lock guards both names for the writer's
// whole life, and a published step directory never holds it.
//
// Races. The scan runs under <save>/.lock (SaveLock), and a writer creates its lock file, locks it and
// only then creates its directory, under that same lock: a scan never sees a directory whose lock
// file is not yet held. A leftover is deleted while the scan holds the leftover's lock, so two scans
// never delete the same directory at once and a writer never loses its directory to a scan. A writer
// unlinks its lock file after its directory is gone (the scan checks that the file it locked is still
// the one under that name, so it never acts on a finished writer's unlinked file).
//
// NFS: Linux emulates flock on NFS with POSIX byte-range locks (hence the file is opened read-write),
// which other clients see on NFSv4 (and on NFSv3 through NLM); a dead client's lock is released when
// its lease expires, so another node's leftover is removed by a save after that. A mount with
// local_lock=flock (or =all) keeps flocks local to one node: there, as for SaveLock, two nodes must not
// save into one directory at once.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace engine::detail {

/// The lock file that guards a temporary checkpoint directory: "<tmp>.lock", beside it.
inline std::filesystem::path writer_lock_path(const std::filesystem::path& tmp) { return tmp.string() + ".lock"; }

/// Rank 0's flock(LOCK_EX) on its temporary directory's lock file, from before the directory is created
/// until it is published or removed (the destructor; declare it before any code that removes the
/// directory, so that it is released after). While held, no other save removes the directory.
class WriterLock {
 public:
  WriterLock() = default;
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;
  ~WriterLock() { release(); }

  /// Creates and locks writer_lock_path(dir), a name nobody else uses (it must not exist yet). Call it
  /// under SaveLock, before creating `dir`: scans hold SaveLock too, so the lock cannot be taken first.
  void acquire(const std::filesystem::path& dir) {
    path_ = writer_lock_path(dir);
    dir_ = dir;
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd_ < 0) throw std::runtime_error("checkpoint: cannot create " + path_.string() + ": " + std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int e = errno;
      ::unlink(path_.c_str());
      ::close(fd_);
      fd_ = -1;
      throw std::runtime_error("checkpoint: cannot lock " + path_.string() + ": " + std::strerror(e));
    }
  }

  /// Unlinks the lock file, then drops the lock. Where the directory is still there (its removal
  /// failed), the file stays: the lock is dropped all the same, and the next save removes both.
  void release() {
    if (fd_ < 0) return;
    struct stat st {};
    if (::lstat(dir_.c_str(), &st) != 0 && errno == ENOENT) ::unlink(path_.c_str());
    ::close(fd_);
    fd_ = -1;
  }

 private:
  std::filesystem::path path_, dir_;
  int fd_ = -1;
};

/// The bytes of the regular files under `dir` (symbolic links neither counted nor followed).
inline std::uintmax_t tree_bytes(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::uintmax_t bytes = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e;
    if (fs::is_regular_file(it->symlink_status(e))) {
      const auto n = it->file_size(e);
      if (!e) bytes += n;
    }
  }
  return bytes;
}

inline std::string bytes_text(std::uintmax_t bytes) {
  static const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes) / 1024;
  int u = 0;
  for (; v >= 1024 && u < 3; ++u) v /= 1024;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

/// Removes from `save` the temporary directories of saves whose writer is gone: each `.tmp.step_*`
/// whose lock file nobody holds, and each `.old.step_*` aside directory whose step exists complete
/// under its own name (else it may be the only copy of that step: kept); and each `.latest.*` link
/// (`latest`'s replacement, which a writer killed before renaming it leaves), and each `.pruned.step_*`
/// directory (a step --keep-last removed, its removal cut short). A directory without a lock
/// file was written by an engine before lock files, and its writer may still be at work: kept. Says on
/// stderr, in one line, what it removed (and how much), and names what it keeps once per process.
/// Other entries that are symbolic links are not touched; nothing is followed out of `save`. Never throws: a
/// leftover that cannot be removed costs disk space only, never the save (a warning says so).
/// Rank 0 calls it under SaveLock, before it creates its own temporary directory.
inline void remove_leftovers(const std::filesystem::path& save) noexcept {
  namespace fs = std::filesystem;
  try {
    struct Found {
      bool tmp = false, old = false, lock = false;
    };
    std::map<std::string, Found> found;  // by suffix: "step_N.<pid>.<random>"
    std::vector<fs::path> latest_links, pruned;
    std::error_code ec;
    for (fs::directory_iterator it(save, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string n = it->path().filename().string();
      if (n.rfind(".latest.", 0) == 0) {
        // `latest`'s replacement: a writer makes this link and renames it over `latest` under SaveLock,
        // which this scan holds, so one still here is a crashed writer's (a directory or file of that
        // name is not the engine's: kept).
        std::error_code e;
        if (fs::is_symlink(it->symlink_status(e))) latest_links.push_back(it->path());
        continue;
      }
      if (n.rfind(".pruned.step_", 0) == 0) {
        // A step --keep-last removed (checkpoint_space.hpp): renamed under SaveLock, then deleted under
        // it, so one still here was cut short. Nobody reads or writes it.
        std::error_code e;
        if (fs::is_directory(it->symlink_status(e))) pruned.push_back(it->path());
        continue;
      }
      const bool tmp = n.rfind(".tmp.step_", 0) == 0, old = n.rfind(".old.step_", 0) == 0;
      if (!tmp && !old) continue;
      std::error_code e;
      const fs::file_status st = it->symlink_status(e);
      if (tmp && n.size() > 15 && n.ends_with(".lock")) {
        if (fs::is_regular_file(st)) found[n.substr(5, n.size() - 10)].lock = true;
      } else if (fs::is_directory(st)) {  // not a symlink: symlink_status does not follow it
        (tmp ? found[n.substr(5)].tmp : found[n.substr(5)].old) = true;
      }
    }
    if (ec) {
      std::fprintf(stderr, "checkpoint: warning: cannot list %s for leftovers of interrupted saves: %s\n",
                   save.c_str(), ec.message().c_str());
      return;
    }
    std::vector<std::string> removed, kept;
    const auto remove_dir = [&](const fs::path& dir) {
      const std::uintmax_t bytes = tree_bytes(dir);
      std::error_code e;
      fs::remove_all(dir, e);  // removes links inside, never what they point to
      if (e) {
        std::fprintf(stderr, "checkpoint: warning: cannot remove %s, the leftover of an interrupted save: %s\n",
                     dir.c_str(), e.message().c_str());
      } else {
        removed.push_back(dir.filename().string() + " (" + bytes_text(bytes) + ")");
      }
    };
    const auto step_complete = [&](const std::string& key) {
      const fs::path step = save / key.substr(0, key.find('.'));
      std::error_code e;
      return fs::is_directory(fs::symlink_status(step, e)) && fs::is_regular_file(fs::symlink_status(step / "manifest.txt", e));
    };
    for (const fs::path& link : latest_links) {
      std::error_code e;
      const fs::path target = fs::read_symlink(link, e);
      fs::remove(link, e);  // the link, never what it points to
      if (e) {
        std::fprintf(stderr, "checkpoint: warning: cannot remove %s, the leftover of an interrupted save: %s\n",
                     link.c_str(), e.message().c_str());
      } else {
        removed.push_back(link.filename().string() + " (a link to " + target.string() + ")");
      }
    }
    for (const fs::path& dir : pruned) remove_dir(dir);
    for (const auto& entry : found) {
      const std::string& key = entry.first;
      const Found& f = entry.second;
      const fs::path tmp = save / (".tmp." + key), old = save / (".old." + key), lock = save / (".tmp." + key + ".lock");
      int fd = -1;
      if (f.lock) {
        fd = ::open(lock.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
          if (errno != ENOENT) {  // ENOENT: its writer finished since the listing
            std::fprintf(stderr, "checkpoint: warning: cannot open %s: %s\n", lock.c_str(), std::strerror(errno));
          }
          continue;
        }
        if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {  // held: its writer is at work
          if (errno != EWOULDBLOCK) {
            std::fprintf(stderr, "checkpoint: warning: cannot lock %s: %s\n", lock.c_str(), std::strerror(errno));
          }
          ::close(fd);
          continue;
        }
        struct stat mine {}, named {};
        if (::fstat(fd, &mine) != 0 || ::lstat(lock.c_str(), &named) != 0 || mine.st_dev != named.st_dev ||
            mine.st_ino != named.st_ino) {  // its writer finished and unlinked it after we opened it
          ::close(fd);
          continue;
        }
      }
      // Here the writer is gone (we hold its lock), or there is no lock file.
      if (f.tmp) {
        if (fd >= 0) {
          remove_dir(tmp);
        } else {
          kept.push_back(tmp.filename().string() + " (no lock file: an older engine's, whose writer may be at work; " +
                         "delete it once no job writes to " + save.string() + ")");
        }
      }
      if (f.old) {
        // Outside SaveLock an aside directory is garbage its writer has yet to delete, or the only copy
        // of its step (a publication that failed and could not put it back): the step's own directory
        // tells which, whoever wrote it.
        if (step_complete(key)) {
          remove_dir(old);
        } else {
          kept.push_back(old.filename().string() + " (" + key.substr(0, key.find('.')) +
                         " is missing: it may be the only copy of that step)");
        }
      }
      if (fd >= 0) {
        std::error_code e;
        if (!fs::exists(fs::symlink_status(tmp, e))) ::unlink(lock.c_str());  // else kept for the next save to retry
        ::close(fd);
      }
    }
    // What is kept is named once per process, not at every save.
    static std::mutex mutex;
    static std::set<std::string> named;
    std::string keep_text;
    {
      const std::lock_guard<std::mutex> guard(mutex);
      for (const auto& k : kept) {
        if (named.insert((save / k).string()).second) keep_text += (keep_text.empty() ? "" : ", ") + k;
      }
    }
    if (removed.empty() && keep_text.empty()) return;
    std::string line = "checkpoint: " + save.string() + ":";
    if (!removed.empty()) {
      line += " removed the leftovers of interrupted saves:";
      for (std::size_t i = 0; i < removed.size(); ++i) line += (i ? ", " : " ") + removed[i];
    }
    if (!keep_text.empty()) {
      line += std::string(removed.empty() ? "" : ";") + " kept " + keep_text;
    }
    std::fprintf(stderr, "%s\n", line.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "checkpoint: warning: looking for leftovers of interrupted saves in %s: %s\n", save.c_str(),
                 e.what());
  }
}

}  // namespace engine::detail
