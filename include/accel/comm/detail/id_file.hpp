// accel/comm/detail/id_file.hpp — the bytes that start a communicator (NCCL's unique id), passed from
// rank 0 to the others through a file on a path every rank sees (ACCEL_COMM_INIT_FILE): the exchange
// of a torchrun-style launch, where no MPI is there to broadcast it (torch's FileStore plays this part).
//
// Rank 0 writes a temporary file next to the path and renames it into place (readers never see half a
// file); the others poll for it. A file already there when rank 0 starts is an error (it is stale:
// another run's, and another rank may already have read it), and so is a wait past the timeout.
// Rank 0 removes the file once every rank has joined (remove_id_file). Internal; tested on the CPU.
#pragma once

#include <accel/core/error.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace accel::comm::detail {

inline constexpr char id_file_magic[8] = {'a', 'c', 'c', 'e', 'l', 'i', 'd', '1'};

/// Rank 0: publishes `bytes` at `path`. Throws InvalidStateError when the path exists or cannot be written.
inline void publish_id_file(const std::string& path, const std::vector<unsigned char>& bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    throw InvalidStateError("accel::comm: ACCEL_COMM_INIT_FILE=" + path +
                            " already exists: it is left from an earlier run (other ranks may have read it). Remove it, "
                            "or give each run its own path");
  }
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw InvalidStateError("accel::comm: cannot create " + temporary + " (for ACCEL_COMM_INIT_FILE): " +
                            std::strerror(errno));
  }
  std::vector<unsigned char> content(id_file_magic, id_file_magic + sizeof id_file_magic);
  const auto n = static_cast<std::uint32_t>(bytes.size());
  content.insert(content.end(), reinterpret_cast<const unsigned char*>(&n), reinterpret_cast<const unsigned char*>(&n) + 4);
  content.insert(content.end(), bytes.begin(), bytes.end());
  std::size_t written = 0;
  while (written < content.size()) {
    const ssize_t w = ::write(fd, content.data() + written, content.size() - written);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int e = errno;
      ::close(fd);
      ::unlink(temporary.c_str());
      throw InvalidStateError("accel::comm: writing " + temporary + ": " + std::strerror(e));
    }
    written += static_cast<std::size_t>(w);
  }
  ::fsync(fd);
  ::close(fd);
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(temporary.c_str());
    throw InvalidStateError("accel::comm: renaming " + temporary + " to " + path + ": " + std::strerror(e));
  }
}

/// Other ranks: waits (polling every 10 ms) until rank 0 published `size` bytes at `path`.
inline std::vector<unsigned char> read_id_file(const std::string& path, std::size_t size, std::chrono::nanoseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      std::vector<unsigned char> content(sizeof id_file_magic + 4 + size + 1);
      std::size_t got = 0;
      for (;;) {
        const ssize_t r = ::read(fd, content.data() + got, content.size() - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += static_cast<std::size_t>(r);
      }
      ::close(fd);
      std::uint32_t n = 0;
      if (got >= sizeof id_file_magic + 4) std::memcpy(&n, content.data() + sizeof id_file_magic, 4);
      if (got != sizeof id_file_magic + 4 + size || std::memcmp(content.data(), id_file_magic, sizeof id_file_magic) != 0 ||
          n != size) {
        throw InvalidStateError("accel::comm: ACCEL_COMM_INIT_FILE=" + path + " is not an id file of accel (" +
                                std::to_string(got) + " bytes): another program's file, or a different accel version");
      }
      return {content.begin() + sizeof id_file_magic + 4, content.begin() + static_cast<std::ptrdiff_t>(got)};
    }
    if (errno != ENOENT) {
      throw InvalidStateError("accel::comm: reading ACCEL_COMM_INIT_FILE=" + path + ": " + std::strerror(errno));
    }
    if (std::chrono::steady_clock::now() - start >= timeout) {
      throw InvalidStateError("accel::comm: rank 0 did not publish ACCEL_COMM_INIT_FILE=" + path + " within " +
                              std::to_string(std::chrono::duration<double>(timeout).count()) +
                              " s (is the path on a file system every rank sees? did rank 0 start?)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

/// Rank 0, once every rank joined: the file is no longer needed (a later run may use the path).
inline void remove_id_file(const std::string& path) noexcept { ::unlink(path.c_str()); }

}  // namespace accel::comm::detail
