// checkpoint.hpp — checkpoints as a manifest plus tensor files, written atomically.
//
// A checkpoint is a directory <save>/step_<NNNNNNNN>/ holding
//   manifest.txt     "key value" lines: format, step, ranks, shard, total, config, vocabulary (hex),
//                    generator states, and one "tensor <file> <name> <dtype> <offset> <numel> <shape...>"
//                    line per view
//   params.f32       the whole model's flat fp32 weights (the master weights when the model is bf16),
//                    consolidated: what --zero-to-fp32 and torch_gpt.py read
//   zero_rank_<RRRRR>.f32   rank r's ZeRO shard (DeepSpeed's per-rank optimizer files): the fp32
//                    master weights, exp_avg and exp_avg_sq of elements [r x shard, (r+1) x shard) of
//                    the flat buffer padded to ranks x shard, one after the other
// Every rank writes its own shard; rank 0 the weights and, after every shard is on disk, the manifest,
// which records an FNV-1a-64 checksum of each tensor file ("checksum <file> fnv1a64:<16 hex>"),
// verified when the file is read (a checkpoint without checksum lines predates them and is read
// unverified). It is written under <save>/.tmp.<step_N>.<pid>.<random> (the ranks agree on the name:
// rank 0's), each file flushed and fsync'ed, then published under <save>/.lock (flock): a new step
// directory is renamed into place; a step that already exists (a resumed run saving the step it
// resumed from) is swapped with it atomically (renameat2 RENAME_EXCHANGE; where the filesystem lacks
// it, the old directory is renamed aside first and put back if the publishing rename fails) and the
// old copy is deleted only once the new one and `latest` are in place. <save>/latest (a symlink to
// the step directory) is replaced by a rename too: a reader sees a complete checkpoint or the
// previous one, never half of one. Rank 0 holds a lock on <tmp>.lock for as long as its temporary
// directory exists, and before creating it removes those of writers that are gone
// (checkpoint_leftovers.hpp). A run on another rank count reads the ranges of its shards from
// the old shards (re-partitioning). Format 1 (one rank: params.f32, exp_avg.f32, exp_avg_sq.f32) is
// still read.
#pragma once

#include "checkpoint_leftovers.hpp"
#include "config.hpp"
#include "layout.hpp"
#include "writable.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <sys/file.h>
#include <unistd.h>

namespace engine {

struct CheckpointState {
  std::int64_t step = 0;
  std::map<std::string, std::string> values;  // the manifest's scalar entries
  std::vector<float> params, exp_avg, exp_avg_sq;  // one rank's shard (fp32 master weights, Adam's moments)
  int ranks = 1, rank = 0;                         // the ranks that wrote it / this shard's
  std::int64_t shard = 0;                          // elements per rank
  int format = 2;
  std::map<std::string, std::uint64_t> checksums;  // tensor file -> FNV-1a-64 (empty: predates checksums)
  std::map<std::string, std::string> decoded;      // the hex values (data_rng, device_rng, vocabulary) as bytes
};

/// A collective barrier over the ranks that also agrees: true on every rank when every rank passed
/// true (on one rank: its own flag).
using Barrier = std::function<bool(bool)>;
/// Collective: rank 0's two values (each >= 0) on every rank (on one rank: its own).
using ShareFromRank0 = std::function<std::array<int, 2>(std::array<int, 2>)>;

namespace detail {

inline std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (const char c : bytes) {
    out += digits[(static_cast<unsigned char>(c) >> 4) & 15];
    out += digits[static_cast<unsigned char>(c) & 15];
  }
  return out;
}

/// A manifest's hex value (two lower-case digits a byte, as hex() writes) as bytes; `bytes`: the length
/// it must decode to (0: any). Else UsageError naming the file, the key and what is wrong (the value
/// quoted when short: a vocabulary's runs to kilobytes).
inline std::string manifest_hex(const std::filesystem::path& manifest, const std::string& key, const std::string& value,
                                std::size_t bytes) {
  const auto refuse = [&](const std::string& why) {
    const std::string shown = value.size() <= 64 ? " '" + value + "'" : " (" + std::to_string(value.size()) + " characters)";
    throw UsageError("checkpoint " + manifest.string() + ": bad '" + key + "' value" + shown + ": " + why);
  };
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (std::size_t i = 0; i < value.size(); ++i) {
    if (digit(value[i]) < 0) refuse("character " + std::to_string(i + 1) + " is not a hex digit (0-9, a-f)");
  }
  if (value.size() % 2 != 0) refuse("an odd number of hex digits (" + std::to_string(value.size()) + ")");
  if (bytes != 0 && value.size() != 2 * bytes) {
    refuse(std::to_string(value.size()) + " hex digits, expected " + std::to_string(2 * bytes) + " (" +
           std::to_string(bytes) + " bytes)");
  }
  std::string out;
  for (std::size_t i = 0; i < value.size(); i += 2) out += static_cast<char>(digit(value[i]) * 16 + digit(value[i + 1]));
  return out;
}

/// FNV-1a, 64 bits: cheap, and enough to catch a flipped or overwritten byte in a tensor file.
inline std::uint64_t fnv1a64(const void* data, std::size_t bytes, std::uint64_t h = 14695981039346656037ULL) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

inline std::string checksum_text(std::uint64_t h) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "fnv1a64:%016llx", static_cast<unsigned long long>(h));
  return buf;
}

/// A manifest's integer value: the whole text a decimal number in [lo, hi], else UsageError naming the
/// file, the key and the value (std::stoll accepted "2x" as 2 and threw a bare "stoll" on "abc").
inline std::int64_t manifest_int(const std::filesystem::path& manifest, const std::string& key, const std::string& value,
                                 std::int64_t lo, std::int64_t hi) {
  std::int64_t v = 0;
  const char* end = value.data() + value.size();
  const auto [at, ec] = std::from_chars(value.data(), end, v);
  std::string why;
  if (ec == std::errc::result_out_of_range) {
    why = "out of range";
  } else if (ec != std::errc() || at != end) {
    why = "not a whole decimal number";
  } else if (v < lo || v > hi) {
    why = "out of range";
  }
  if (!why.empty()) {
    throw UsageError("checkpoint " + manifest.string() + ": bad '" + key + "' value '" + value + "': " + why +
                     " (expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "])");
  }
  return v;
}

/// The rename calls of a checkpoint's publication, replaceable by the tests to make one fail
/// (flags: 0, or RENAME_EXCHANGE). Returns 0, or -1 with errno set, as renameat2.
using RenameFn = int (*)(const char* from, const char* to, unsigned flags);
inline int system_rename(const char* from, const char* to, unsigned flags) {
  return ::renameat2(AT_FDCWD, from, AT_FDCWD, to, flags);
}
inline RenameFn& rename_fn() {
  static RenameFn fn = &system_rename;
  return fn;
}

inline void rename_or_throw(const std::filesystem::path& from, const std::filesystem::path& to) {
  if (rename_fn()(from.c_str(), to.c_str(), 0) != 0) {
    throw std::runtime_error("checkpoint: cannot rename " + from.string() + " to " + to.string() + ": " + std::strerror(errno));
  }
}

/// A name no other writer uses at the same time: the pid and 40 random bits (threads of one process
/// share the pid).
inline std::array<int, 2> unique_token() {
  static thread_local std::mt19937_64 gen{std::random_device{}() ^ (static_cast<std::uint64_t>(::getpid()) << 32)};
  return {static_cast<int>(::getpid() & 0x7fffffff), static_cast<int>(gen() & 0x7fffffff)};
}

/// Holds flock(LOCK_EX) on <save>/.lock while checkpoints are published there, so that two writers'
/// renames of the same step and of `latest` do not interleave.
class SaveLock {
 public:
  explicit SaveLock(const std::filesystem::path& save) {
    const auto path = save / ".lock";
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw std::runtime_error("checkpoint: cannot open " + path.string() + ": " + std::strerror(errno));
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd_);
      throw std::runtime_error("checkpoint: cannot lock " + path.string() + ": " + std::strerror(e));
    }
  }
  SaveLock(const SaveLock&) = delete;
  SaveLock& operator=(const SaveLock&) = delete;
  ~SaveLock() { ::close(fd_); }  // releases the lock

 private:
  int fd_ = -1;
};

inline void write_file_synced(const std::filesystem::path& path, const void* data, std::size_t bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("checkpoint: cannot create " + path.string() + ": " + std::strerror(errno));
  const char* p = static_cast<const char*>(data);
  std::size_t left = bytes;
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      throw std::runtime_error("checkpoint: cannot write " + path.string() + ": " + std::strerror(errno));
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    throw std::runtime_error("checkpoint: cannot flush " + path.string() + ": " + std::strerror(errno));
  }
}

inline void sync_dir(const std::filesystem::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    (void)::fsync(fd);
    ::close(fd);
  }
}

/// count floats at element `at` of a file (UsageError if it is shorter).
inline void read_floats_at(const std::filesystem::path& path, std::int64_t at, float* out, std::int64_t count) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("checkpoint: cannot read " + path.string());
  in.seekg(at * 4);
  in.read(reinterpret_cast<char*>(out), static_cast<std::streamsize>(count * 4));
  if (!in || in.gcount() != count * 4) {
    throw UsageError("checkpoint: " + path.string() + " is too short (no floats " + std::to_string(at) + " to " +
                     std::to_string(at + count) + ")");
  }
}

inline std::string shard_file_name(int rank) {
  char name[40];
  std::snprintf(name, sizeof name, "zero_rank_%05d.f32", rank);
  return name;
}

inline std::vector<float> read_floats(const std::filesystem::path& path, std::int64_t count) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("checkpoint: cannot read " + path.string());
  std::vector<float> v(static_cast<std::size_t>(count));
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(count * 4));
  if (in.gcount() != count * 4 || in.peek() != std::char_traits<char>::eof()) {
    throw UsageError("checkpoint: " + path.string() + " does not hold " + std::to_string(count) + " floats");
  }
  return v;
}

}  // namespace detail

namespace detail {

/// The step of a step directory's name ("step_00000042": 42), or nullopt for any other name.
inline std::optional<std::int64_t> step_of_dir_name(const std::string& name) {
  if (name.size() < 6 || name.rfind("step_", 0) != 0) return std::nullopt;
  std::int64_t step = 0;
  const char* first = name.data() + 5;
  const char* last = name.data() + name.size();
  if (!std::all_of(first, last, [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  const auto [ptr, ec] = std::from_chars(first, last, step);
  if (ec != std::errc() || ptr != last) return std::nullopt;
  return step;
}

}  // namespace detail

/// The checkpoint directory name of a step.
inline std::string step_dir_name(std::int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step_%08lld", static_cast<long long>(step));
  return name;
}

/// Writes a checkpoint as <save>/step_<N> and points <save>/latest at it; returns the directory.
/// Collective over the ranks (`barrier`, `share`): each passes its shard in `state`; rank 0 also
/// `full_params` (the whole model's fp32 weights, layout.total of them).
inline std::filesystem::path write_checkpoint(const std::filesystem::path& save, const ParamLayout& layout,
                                              const CheckpointState& state, const std::vector<float>& full_params,
                                              const Barrier& barrier = {}, const ShareFromRank0& share = {}) {
  namespace fs = std::filesystem;
  const auto sync = [&](bool ok) { return barrier ? barrier(ok) : ok; };
  const std::string name = step_dir_name(state.step);
  const fs::path final_dir = save / name;
  // Rank 0's unique name, on every rank: two jobs saving into one directory (or the leftovers of a
  // crashed one) never write into, or delete, each other's temporary directory.
  std::array<int, 2> token = state.rank == 0 ? detail::unique_token() : std::array<int, 2>{0, 0};
  if (share) token = share(token);
  char suffix[40];
  std::snprintf(suffix, sizeof suffix, "%d.%08x", token[0], static_cast<unsigned>(token[1]));
  const fs::path tmp = save / (".tmp." + name + "." + suffix);
  bool ok = true;
  std::string failure;
  // Held by rank 0 from before tmp exists until it is published or removed: declared before every
  // removal below, so released after it. A save that can take it knows this writer is gone.
  detail::WriterLock writer;
  if (state.rank == 0) {
    try {
      fs::create_directories(save);
      // The leftovers of crashed saves go first, before this one needs the disk space they hold (a disk
      // they filled would fail the very save that came to clean it), under SaveLock: a writer creates
      // and locks its lock file there before its directory, so the scan never sees one half made (a
      // removal holds up other writers' publication meanwhile: once per crash, not per save).
      const detail::SaveLock lock(save);
      detail::remove_leftovers(save);
      writer.acquire(tmp);
      if (!fs::create_directory(tmp)) throw std::runtime_error("checkpoint: " + tmp.string() + " already exists");
    } catch (const std::exception& e) {
      ok = false;
      failure = e.what();
    }
  }
  if (!sync(ok)) {  // the directory exists for every rank, or none goes on
    throw std::runtime_error(ok ? "checkpoint: rank 0 could not create " + tmp.string() : failure);
  }
  const std::string shard_name = detail::shard_file_name(state.rank);
  std::uint64_t params_sum = 0;
  try {
    std::vector<float> shard(state.params);
    shard.insert(shard.end(), state.exp_avg.begin(), state.exp_avg.end());
    shard.insert(shard.end(), state.exp_avg_sq.begin(), state.exp_avg_sq.end());
    detail::write_file_synced(tmp / shard_name, shard.data(), shard.size() * 4);
    // Rank 0 puts every shard's checksum in the manifest: each rank leaves its own beside its shard.
    const std::string sum = detail::checksum_text(detail::fnv1a64(shard.data(), shard.size() * 4)) + "\n";
    detail::write_file_synced(tmp / (shard_name + ".checksum"), sum.data(), sum.size());
    if (state.rank == 0) {
      detail::write_file_synced(tmp / "params.f32", full_params.data(), full_params.size() * 4);
      params_sum = detail::fnv1a64(full_params.data(), full_params.size() * 4);
    }
  } catch (const std::exception& e) {
    ok = false;
    failure = e.what();
  }
  // Every shard is on disk, or some rank failed: then no rank publishes (the previous checkpoint stays
  // `latest`) and each throws.
  const bool all_ok = sync(ok);
  if (!ok || !all_ok) {
    if (state.rank == 0) {
      std::error_code ec;
      fs::remove_all(tmp, ec);
    }
    if (!ok) throw std::runtime_error(failure);
    throw std::runtime_error("checkpoint: another rank could not write its shard of " + final_dir.string());
  }
  bool published = true;
  if (state.rank == 0) {
    fs::path old;  // the replaced copy of this step, deleted once the new one is in place
    bool tmp_is_new = true;  // what a failure must delete: tmp while it holds the new checkpoint
    try {
      std::ostringstream m;
      m << "format accel-engine-checkpoint/2\n";
      m << "step " << state.step << "\n";
      m << "ranks " << state.ranks << "\n";
      m << "shard " << state.shard << "\n";
      for (const auto& [k, v] : state.values) m << k << " " << v << "\n";
      m << "total " << layout.total << "\n";
      for (const auto& v : layout.views) {
        m << "tensor params.f32 " << v.name << " float32 " << v.offset << " " << v.numel;
        for (const auto d : v.shape) m << " " << d;
        m << "\n";
      }
      m << "checksum params.f32 " << detail::checksum_text(params_sum) << "\n";
      for (int r = 0; r < state.ranks; ++r) {
        const fs::path f = tmp / (detail::shard_file_name(r) + ".checksum");
        std::ifstream in(f);
        std::string sum;
        if (!(in >> sum) || sum.size() != 24 || sum.rfind("fnv1a64:", 0) != 0) {
          throw std::runtime_error("checkpoint: rank " + std::to_string(r) + "'s checksum " + f.string() + " is missing or unreadable");
        }
        in.close();
        fs::remove(f);
        m << "checksum " << detail::shard_file_name(r) << " " << sum << "\n";
      }
      const std::string text = m.str();
      detail::write_file_synced(tmp / "manifest.txt", text.data(), text.size());  // last: its presence means complete
      detail::sync_dir(tmp);
      const detail::SaveLock lock(save);
      if (detail::rename_fn()(tmp.c_str(), final_dir.c_str(), 0) != 0) {
        if (errno != EEXIST && errno != ENOTEMPTY) {
          throw std::runtime_error("checkpoint: cannot rename " + tmp.string() + " to " + final_dir.string() + ": " +
                                   std::strerror(errno));
        }
        // This step exists (a resumed run saving the step it resumed from): swap the two at once, so
        // that a failure anywhere leaves one complete copy under the name `latest` points to.
        if (detail::rename_fn()(tmp.c_str(), final_dir.c_str(), RENAME_EXCHANGE) == 0) {
          old = tmp;
          tmp_is_new = false;
        } else if (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP) {  // a filesystem without the exchange
          const fs::path aside = save / (".old." + name + "." + suffix);
          detail::rename_or_throw(final_dir, aside);
          if (detail::rename_fn()(tmp.c_str(), final_dir.c_str(), 0) != 0) {
            const std::string why = std::strerror(errno);
            const bool restored = detail::rename_fn()(aside.c_str(), final_dir.c_str(), 0) == 0;
            throw std::runtime_error("checkpoint: cannot rename " + tmp.string() + " to " + final_dir.string() + ": " + why +
                                     (restored ? "; the previous " + final_dir.string() + " is kept"
                                               : "; the previous checkpoint is in " + aside.string()));
          }
          old = aside;
        } else {
          throw std::runtime_error("checkpoint: cannot replace " + final_dir.string() + " with " + tmp.string() + ": " +
                                   std::strerror(errno));
        }
      }
      const fs::path link_tmp = save / (".latest." + std::string(suffix));
      fs::remove(link_tmp);
      fs::create_directory_symlink(name, link_tmp);  // a crash from here to the rename leaves it: removed by the next save
      detail::rename_or_throw(link_tmp, save / "latest");
      detail::sync_dir(save);
    } catch (const std::exception& e) {
      if (tmp_is_new) {
        std::error_code ec;
        fs::remove_all(tmp, ec);
      }
      published = false;
      failure = e.what();
    }
    if (!old.empty()) {
      std::error_code ec;
      fs::remove_all(old, ec);  // a leftover costs disk space only: never a reason to fail the save
    }
  }
  if (!sync(published)) {  // the checkpoint is complete before any rank goes on
    throw std::runtime_error(published ? "checkpoint: rank 0 could not publish " + final_dir.string() : failure);
  }
  return final_dir;
}

/// The newest step_* directory of `base` holding a manifest ("" if none).
inline std::filesystem::path newest_complete_checkpoint(const std::filesystem::path& base) {
  namespace fs = std::filesystem;
  fs::path best;
  std::int64_t best_step = -1;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(base, ec)) {
    const auto step = detail::step_of_dir_name(e.path().filename().string());  // by number: step_100000000 > step_99999999
    if (step && *step > best_step && fs::exists(e.path() / "manifest.txt")) {
      best = e.path();
      best_step = *step;
    }
  }
  return best;
}

/// Resolves --resume: a checkpoint directory, or "latest" in `save` (default "checkpoints").
/// A `latest` whose step directory is gone (deleted by hand, or a write interrupted by an older
/// engine) is an error that says so and names the newest complete checkpoint to resume instead:
/// silently training on from an older step than the user asked for would lose steps unnoticed.
/// `asked`: how the user named it, for the messages (default "--resume " + resume).
inline std::filesystem::path resolve_resume(const std::string& resume, const std::string& save, std::string asked = "") {
  namespace fs = std::filesystem;
  if (asked.empty()) asked = "--resume " + resume;
  fs::path dir = resume;
  if (resume == "latest") {
    const fs::path base = save.empty() ? fs::path("checkpoints") : fs::path(save);
    dir = base / "latest";
    if (fs::is_symlink(dir) && !fs::exists(dir)) {
      const fs::path newest = newest_complete_checkpoint(base);
      throw UsageError(asked + ": " + dir.string() + " is a dangling link (it points to " +
                       fs::read_symlink(dir).string() + ", which does not exist)" +
                       (newest.empty() ? "; " + base.string() + " holds no complete checkpoint"
                                       : "; the newest complete checkpoint is " + newest.string() + ": give " +
                                             asked.substr(0, asked.find(' ')) + " " + newest.string()));
    }
    if (!fs::exists(dir)) throw UsageError(asked + ": no checkpoint in " + base.string() + " (" + dir.string() + " does not exist)");
    dir = fs::canonical(dir);
  }
  if (!fs::exists(dir / "manifest.txt")) {
    throw UsageError(asked + ": " + dir.string() + " is not a checkpoint (no manifest.txt)");
  }
  return dir;
}

/// The largest step, rank count and element counts a manifest may hold: far beyond any run, small
/// enough that products of them cannot overflow.
inline constexpr std::int64_t max_checkpoint_step = 1'000'000'000'000'000;
inline constexpr std::int64_t max_checkpoint_ranks = 1 << 20;
inline constexpr std::int64_t max_checkpoint_elements = 1LL << 40;
/// The bytes of a generator's state (data_rng, device_rng): accel::Generator::State's.
inline constexpr std::size_t generator_state_bytes = 16;

/// Reads a checkpoint's manifest (values, step, checksums); the tensors with read_checkpoint_tensors.
/// A malformed value is a UsageError naming the file, the key and the value; so is a step that is not
/// the one the directory's name (step_<N>) says.
inline CheckpointState read_checkpoint_manifest(const std::filesystem::path& dir) {
  const std::filesystem::path file = dir / "manifest.txt";
  std::ifstream in(file);
  if (!in) throw UsageError("checkpoint: cannot read " + file.string());
  CheckpointState st;
  std::string line;
  bool format_ok = false, has_step = false;
  while (std::getline(in, line)) {
    const auto sp = line.find(' ');
    if (sp == std::string::npos) continue;
    const std::string key = line.substr(0, sp), value = line.substr(sp + 1);
    if (key == "format") {
      format_ok = value == "accel-engine-checkpoint/1" || value == "accel-engine-checkpoint/2";
      st.format = value.back() - '0';
    } else if (key == "step") {
      st.step = detail::manifest_int(file, key, value, 0, max_checkpoint_step);
      has_step = true;
    } else if (key == "ranks") {
      st.ranks = static_cast<int>(detail::manifest_int(file, key, value, 1, max_checkpoint_ranks));
    } else if (key == "shard") {
      st.shard = detail::manifest_int(file, key, value, 1, max_checkpoint_elements);
    } else if (key == "total") {
      (void)detail::manifest_int(file, key, value, 1, max_checkpoint_elements);
      st.values[key] = value;
    } else if (key == "checksum") {  // "<file> fnv1a64:<16 hex digits>"
      const auto at = value.find(" fnv1a64:");
      std::uint64_t h = 0;
      const char* digits = value.data() + (at == std::string::npos ? 0 : at + 9);
      const char* end = value.data() + value.size();
      const auto [p, ec] = std::from_chars(digits, end, h, 16);
      if (at == std::string::npos || at == 0 || end - digits != 16 || ec != std::errc() || p != end) {
        throw UsageError("checkpoint " + file.string() + ": bad 'checksum' value '" + value +
                         "': expected '<file> fnv1a64:<16 hex digits>'");
      }
      st.checksums[value.substr(0, at)] = h;
    } else if (key == "data_rng" || key == "device_rng" || key == "vocabulary") {
      // Decoded here, before anything is allocated: the engine restores them after allocating.
      st.decoded[key] = detail::manifest_hex(file, key, value, key == "vocabulary" ? 0 : generator_state_bytes);
      st.values[key] = value;
    } else if (key != "tensor") {
      st.values[key] = value;
    }
  }
  if (!format_ok) throw UsageError("checkpoint: " + dir.string() + " has an unknown format");
  if (!has_step) throw UsageError("checkpoint " + file.string() + ": no 'step'");
  // A directory named for a step must hold that step (a copied or edited manifest would resume the
  // schedule, the data and the generators at another step than the name says).
  std::string name = dir.filename().string();
  if (name.empty()) name = dir.parent_path().filename().string();  // "…/step_00000002/"
  if (const auto named = detail::step_of_dir_name(name); named && *named != st.step) {
    throw UsageError("checkpoint " + file.string() + ": 'step' is " + std::to_string(st.step) + " but the directory is " + name);
  }
  return st;
}

namespace detail {

/// Compares a tensor file with the manifest's checksum of it (a checkpoint without checksums predates
/// them: read as it is).
inline void verify_checksum(const std::filesystem::path& dir, const CheckpointState& st, const std::string& file) {
  if (st.checksums.empty()) return;
  const auto it = st.checksums.find(file);
  if (it == st.checksums.end()) {
    throw UsageError("checkpoint " + (dir / "manifest.txt").string() + ": no checksum for " + file);
  }
  const std::filesystem::path path = dir / file;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("checkpoint: cannot read " + path.string());
  std::uint64_t h = fnv1a64(nullptr, 0);
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h = fnv1a64(buf.data(), static_cast<std::size_t>(in.gcount()), h);
  }
  if (h != it->second) {
    throw UsageError("checkpoint: " + path.string() + " is corrupt: its checksum is " + checksum_text(h) +
                     ", the manifest records " + checksum_text(it->second));
  }
}

}  // namespace detail

/// This rank's shard of a checkpoint (master weights, exp_avg, exp_avg_sq: elements [rank x shard,
/// (rank + 1) x shard) of the flat buffer), read from the shards of whatever rank count wrote it: the
/// re-partition is a range read across the old shard files (padding reads as zeros). The files it
/// reads are checked against the manifest's checksums first.
inline void read_checkpoint_tensors(const std::filesystem::path& dir, std::int64_t total, CheckpointState& st,
                                    int rank, std::int64_t shard) {
  if (st.format == 1) {
    st.ranks = 1;
    st.shard = total;
  }
  if (st.ranks < 1 || st.shard < 1 || st.shard * st.ranks < total) {
    throw UsageError("checkpoint: " + dir.string() + " has an inconsistent partition (ranks " + std::to_string(st.ranks) +
                     ", shard " + std::to_string(st.shard) + ", total " + std::to_string(total) + ")");
  }
  static const char* v1_files[3] = {"params.f32", "exp_avg.f32", "exp_avg_sq.f32"};
  if (st.format == 1) {  // the files hold exactly the model
    for (int k = 0; k < 3; ++k) {
      const auto f = dir / v1_files[k];
      if (!std::filesystem::exists(f) || std::filesystem::file_size(f) != static_cast<std::uintmax_t>(total) * 4) {
        throw UsageError("checkpoint: " + f.string() + " does not hold " + std::to_string(total) + " floats");
      }
    }
  } else {
    for (int i = 0; i < st.ranks; ++i) {
      const auto f = dir / detail::shard_file_name(i);
      if (!std::filesystem::exists(f) || std::filesystem::file_size(f) != static_cast<std::uintmax_t>(3 * st.shard) * 4) {
        throw UsageError("checkpoint: " + f.string() + " is missing or does not hold 3 x " + std::to_string(st.shard) + " floats");
      }
    }
  }
  const std::int64_t lo = static_cast<std::int64_t>(rank) * shard;
  const std::int64_t end = std::min(lo + shard, st.format == 1 ? total : st.shard * st.ranks);
  if (st.format != 1) {  // the old shards this rank's range reads from
    for (std::int64_t i = lo / st.shard; i * st.shard < end; ++i) detail::verify_checksum(dir, st, detail::shard_file_name(static_cast<int>(i)));
  }
  std::vector<float>* out[3] = {&st.params, &st.exp_avg, &st.exp_avg_sq};
  for (int k = 0; k < 3; ++k) {
    std::vector<float>& v = *out[k];
    v.assign(static_cast<std::size_t>(shard), 0.0f);
    for (std::int64_t x = lo; x < end;) {
      if (st.format == 1) {
        detail::read_floats_at(dir / v1_files[k], x, v.data() + (x - lo), end - x);
        x = end;
      } else {
        const std::int64_t i = x / st.shard, in_shard = x - i * st.shard;
        const std::int64_t n = std::min(end, (i + 1) * st.shard) - x;
        detail::read_floats_at(dir / detail::shard_file_name(static_cast<int>(i)), k * st.shard + in_shard,
                               v.data() + (x - lo), n);
        x += n;
      }
    }
  }
}

/// DeepSpeed's zero_to_fp32: the whole model's fp32 weights from the ranks' shards (not params.f32),
/// `total` elements of the flat layout.
inline std::vector<float> consolidate_fp32(const std::filesystem::path& dir, std::int64_t total) {
  CheckpointState st = read_checkpoint_manifest(dir);
  read_checkpoint_tensors(dir, total, st, 0, st.format == 1 ? total : st.shard * st.ranks);
  st.params.resize(static_cast<std::size_t>(total));
  return st.params;
}

/// --zero-to-fp32 CHECKPOINT OUT: the consolidated fp32 weights (from the shards) into OUT, the flat
/// layout of the manifest's tensor lines (copied to OUT.index: name dtype offset numel shape...).
/// Returns the exit status.
inline int zero_to_fp32(const std::string& checkpoint, const std::string& out) {
  namespace fs = std::filesystem;
  // CHECKPOINT: a checkpoint, or a --save directory whose latest is taken.
  const fs::path dir = fs::exists(fs::path(checkpoint) / "manifest.txt")
                           ? fs::path(checkpoint)
                           : resolve_resume("latest", checkpoint, "--zero-to-fp32 " + checkpoint);
  // OUT and OUT.index, before anything is read: files that can be written (each is renamed into place,
  // so a file must be creatable in OUT's directory), not inside the checkpoint.
  const auto refuse = [&](const std::string& why) { throw UsageError("--zero-to-fp32 " + checkpoint + " " + out + ": " + why); };
  const fs::path out_abs = fs::absolute(out), index_abs = out_abs.string() + ".index";
  if (const std::string why = output_file_error(out_abs); !why.empty()) refuse(why);
  if (const std::string why = output_file_error(index_abs); !why.empty()) refuse(index_abs.string() + ": " + why);
  if (const std::string why = creation_error(out_abs.parent_path(), false); !why.empty()) {
    refuse("cannot create a file in " + out_abs.parent_path().string() + ": " + why);
  }
  std::error_code ec;
  const fs::path ck = fs::weakly_canonical(fs::absolute(dir), ec);
  if (path_within(fs::weakly_canonical(out_abs, ec), ck)) refuse("it is inside the checkpoint it reads (" + ck.string() + ")");
  const CheckpointState st = read_checkpoint_manifest(dir);
  const auto it = st.values.find("total");
  if (it == st.values.end()) throw UsageError("checkpoint: " + dir.string() + "'s manifest has no 'total'");
  const std::int64_t total = detail::manifest_int(dir / "manifest.txt", "total", it->second, 1, max_checkpoint_elements);
  const std::vector<float> w = consolidate_fp32(dir, total);
  std::ifstream m(dir / "manifest.txt");
  std::string index;
  std::int64_t tensors = 0;
  for (std::string line; std::getline(m, line);) {
    if (line.rfind("tensor params.f32 ", 0) == 0) {
      index += line.substr(18) + "\n";
      ++tensors;
    }
  }
  // Both files written beside their names, then renamed over them (the weights first): an interrupted
  // or failed export leaves the previous OUT and OUT.index (or none), never a truncated file a loader
  // would read as weights, nor a new index beside old weights.
  const auto token = detail::unique_token();
  const std::string suffix = ".tmp." + std::to_string(token[0]) + "." + std::to_string(token[1]);
  const std::string index_path = out + ".index";
  try {
    detail::write_file_synced(index_path + suffix, index.data(), index.size());
    detail::write_file_synced(out + suffix, w.data(), w.size() * 4);
    detail::rename_or_throw(out + suffix, out);
    detail::rename_or_throw(index_path + suffix, index_path);
  } catch (...) {
    std::error_code ignored;
    fs::remove(index_path + suffix, ignored);
    fs::remove(out + suffix, ignored);
    throw;
  }
  detail::sync_dir(fs::absolute(fs::path(out)).parent_path());
  std::printf("zero_to_fp32: %s (%d rank%s) -> %s: %lld fp32 values, %lld tensors (%s.index)\n", dir.string().c_str(),
              st.format == 1 ? 1 : st.ranks, (st.format == 1 ? 1 : st.ranks) > 1 ? "s" : "", out.c_str(),
              static_cast<long long>(total), static_cast<long long>(tensors), out.c_str());
  return 0;
}

}  // namespace engine
