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
// Every rank writes its own shard; rank 0 the weights and, after every shard is on disk, the manifest.
// It is written under <save>/.tmp.step_<N>, each file flushed and fsync'ed, then renamed into place,
// and <save>/latest (a symlink to the step directory) is replaced by a rename too: a reader sees a
// complete checkpoint or the previous one, never half of one. A run on another rank count reads the
// ranges of its shards from the old shards (re-partitioning). Format 1 (one rank: params.f32,
// exp_avg.f32, exp_avg_sq.f32) is still read.
#pragma once

#include "config.hpp"
#include "layout.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

namespace engine {

struct CheckpointState {
  std::int64_t step = 0;
  std::map<std::string, std::string> values;  // the manifest's scalar entries
  std::vector<float> params, exp_avg, exp_avg_sq;  // one rank's shard (fp32 master weights, Adam's moments)
  int ranks = 1, rank = 0;                         // the ranks that wrote it / this shard's
  std::int64_t shard = 0;                          // elements per rank
  int format = 2;
};

/// A collective barrier over the ranks that also agrees: true on every rank when every rank passed
/// true (on one rank: its own flag).
using Barrier = std::function<bool(bool)>;

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

inline std::string unhex(const std::string& text) {
  std::string out;
  const auto val = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw UsageError("checkpoint: bad hex digit in the manifest");
  };
  if (text.size() % 2 != 0) throw UsageError("checkpoint: bad hex string in the manifest");
  for (std::size_t i = 0; i < text.size(); i += 2) out += static_cast<char>(val(text[i]) * 16 + val(text[i + 1]));
  return out;
}

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

/// The checkpoint directory name of a step.
inline std::string step_dir_name(std::int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step_%08lld", static_cast<long long>(step));
  return name;
}

/// Writes a checkpoint as <save>/step_<N> and points <save>/latest at it; returns the directory.
/// Collective over the ranks (`barrier`): each passes its shard in `state`; rank 0 also `full_params`
/// (the whole model's fp32 weights, layout.total of them).
inline std::filesystem::path write_checkpoint(const std::filesystem::path& save, const ParamLayout& layout,
                                              const CheckpointState& state, const std::vector<float>& full_params,
                                              const Barrier& barrier = {}) {
  namespace fs = std::filesystem;
  const auto sync = [&](bool ok) { return barrier ? barrier(ok) : ok; };
  const std::string name = step_dir_name(state.step);
  const fs::path final_dir = save / name;
  const fs::path tmp = save / (".tmp." + name);
  if (state.rank == 0) {
    fs::create_directories(save);
    fs::remove_all(tmp);
    fs::create_directories(tmp);
  }
  (void)sync(true);  // the directory exists for every rank
  bool ok = true;
  std::string failure;
  try {
    std::vector<float> shard(state.params);
    shard.insert(shard.end(), state.exp_avg.begin(), state.exp_avg.end());
    shard.insert(shard.end(), state.exp_avg_sq.begin(), state.exp_avg_sq.end());
    detail::write_file_synced(tmp / detail::shard_file_name(state.rank), shard.data(), shard.size() * 4);
    if (state.rank == 0) detail::write_file_synced(tmp / "params.f32", full_params.data(), full_params.size() * 4);
  } catch (const std::exception& e) {
    ok = false;
    failure = e.what();
  }
  // Every shard is on disk, or some rank failed: then no rank publishes (the temporary stays behind,
  // the previous checkpoint stays `latest`) and each throws.
  const bool all_ok = sync(ok);
  if (!ok) throw std::runtime_error(failure);
  if (!all_ok) throw std::runtime_error("checkpoint: another rank could not write its shard of " + final_dir.string());
  bool published = true;
  if (state.rank == 0) {
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
      const std::string text = m.str();
      detail::write_file_synced(tmp / "manifest.txt", text.data(), text.size());  // last: its presence means complete
      detail::sync_dir(tmp);
      fs::remove_all(final_dir);  // a checkpoint of the same step (a resumed run) is replaced
      fs::rename(tmp, final_dir);
      const fs::path link_tmp = save / (".latest." + std::to_string(::getpid()));
      fs::remove(link_tmp);
      fs::create_directory_symlink(name, link_tmp);
      fs::rename(link_tmp, save / "latest");
      detail::sync_dir(save);
    } catch (const std::exception& e) {
      std::error_code ec;
      fs::remove_all(tmp, ec);
      published = false;
      failure = e.what();
    }
  }
  if (!sync(published)) {  // the checkpoint is complete before any rank goes on
    throw std::runtime_error(published ? "checkpoint: rank 0 could not publish " + final_dir.string() : failure);
  }
  return final_dir;
}

/// Resolves --resume: a checkpoint directory, or "latest" in `save` (default "checkpoints").
inline std::filesystem::path resolve_resume(const std::string& resume, const std::string& save) {
  namespace fs = std::filesystem;
  fs::path dir = resume;
  if (resume == "latest") {
    const fs::path base = save.empty() ? fs::path("checkpoints") : fs::path(save);
    dir = base / "latest";
    if (!fs::exists(dir)) throw UsageError("--resume latest: no checkpoint in " + base.string() + " (" + dir.string() + " does not exist)");
    dir = fs::canonical(dir);
  }
  if (!fs::exists(dir / "manifest.txt")) {
    throw UsageError("--resume " + resume + ": " + dir.string() + " is not a checkpoint (no manifest.txt)");
  }
  return dir;
}

/// Reads a checkpoint's manifest (values and step); the tensors with read_checkpoint_tensors.
inline CheckpointState read_checkpoint_manifest(const std::filesystem::path& dir) {
  std::ifstream in(dir / "manifest.txt");
  if (!in) throw UsageError("checkpoint: cannot read " + (dir / "manifest.txt").string());
  CheckpointState st;
  std::string line;
  bool format_ok = false;
  while (std::getline(in, line)) {
    const auto sp = line.find(' ');
    if (sp == std::string::npos) continue;
    const std::string key = line.substr(0, sp), value = line.substr(sp + 1);
    if (key == "format") {
      format_ok = value == "accel-engine-checkpoint/1" || value == "accel-engine-checkpoint/2";
      st.format = value.back() - '0';
    } else if (key == "step") {
      st.step = std::stoll(value);
    } else if (key == "ranks") {
      st.ranks = std::stoi(value);
    } else if (key == "shard") {
      st.shard = std::stoll(value);
    } else if (key != "tensor") {
      st.values[key] = value;
    }
  }
  if (!format_ok) throw UsageError("checkpoint: " + dir.string() + " has an unknown format");
  return st;
}

/// This rank's shard of a checkpoint (master weights, exp_avg, exp_avg_sq: elements [rank x shard,
/// (rank + 1) x shard) of the flat buffer), read from the shards of whatever rank count wrote it: the
/// re-partition is a range read across the old shard files (padding reads as zeros).
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
  const std::int64_t lo = static_cast<std::int64_t>(rank) * shard;
  std::vector<float>* out[3] = {&st.params, &st.exp_avg, &st.exp_avg_sq};
  static const char* v1_files[3] = {"params.f32", "exp_avg.f32", "exp_avg_sq.f32"};
  for (int k = 0; k < 3; ++k) {
    std::vector<float>& v = *out[k];
    v.assign(static_cast<std::size_t>(shard), 0.0f);
    const std::int64_t end = std::min(lo + shard, st.format == 1 ? total : st.shard * st.ranks);
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
  if (st.format == 1) {  // the same checks as before: the files hold exactly the model
    for (int k = 0; k < 3; ++k) {
      if (std::filesystem::file_size(dir / v1_files[k]) != static_cast<std::uintmax_t>(total) * 4) {
        throw UsageError("checkpoint: " + (dir / v1_files[k]).string() + " does not hold " + std::to_string(total) + " floats");
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
  const fs::path dir = fs::exists(fs::path(checkpoint) / "manifest.txt") ? fs::path(checkpoint) : resolve_resume("latest", checkpoint);
  const CheckpointState st = read_checkpoint_manifest(dir);
  const auto it = st.values.find("total");
  if (it == st.values.end()) throw UsageError("checkpoint: " + dir.string() + "'s manifest has no 'total'");
  const std::int64_t total = std::stoll(it->second);
  const std::vector<float> w = consolidate_fp32(dir, total);
  detail::write_file_synced(out, w.data(), w.size() * 4);
  std::ifstream m(dir / "manifest.txt");
  std::ofstream index(out + ".index", std::ios::trunc);
  std::int64_t tensors = 0;
  for (std::string line; std::getline(m, line);) {
    if (line.rfind("tensor params.f32 ", 0) == 0) {
      index << line.substr(18) << "\n";
      ++tensors;
    }
  }
  std::printf("zero_to_fp32: %s (%d rank%s) -> %s: %lld fp32 values, %lld tensors (%s.index)\n", dir.string().c_str(),
              st.format == 1 ? 1 : st.ranks, (st.format == 1 ? 1 : st.ranks) > 1 ? "s" : "", out.c_str(),
              static_cast<long long>(total), static_cast<long long>(tensors), out.c_str());
  return 0;
}

}  // namespace engine
