// checkpoint.hpp — checkpoints as a manifest plus tensor files, written atomically.
//
// A checkpoint is a directory <save>/step_<NNNNNNNN>/ holding
//   manifest.txt     "key value" lines: format, step, config, vocabulary (hex), generator states, and
//                    one "tensor <file> <name> <dtype> <offset> <numel> <shape...>" line per view
//   params.f32       the flat fp32 parameters (the master weights when the model is bf16)
//   exp_avg.f32, exp_avg_sq.f32   Adam's moments, the same layout
// It is written under <save>/.tmp.step_<N>.<pid>, each file flushed and fsync'ed, then renamed into
// place, and <save>/latest (a symlink to the step directory) is replaced by a rename too: a reader
// sees a complete checkpoint or the previous one, never half of one. A data-parallel run later adds
// one file per shard and partitions the same table.
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
  std::vector<float> params, exp_avg, exp_avg_sq;
};

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

/// Writes `state` as <save>/step_<N> and points <save>/latest at it; returns the directory.
inline std::filesystem::path write_checkpoint(const std::filesystem::path& save, const ParamLayout& layout,
                                              const CheckpointState& state) {
  namespace fs = std::filesystem;
  fs::create_directories(save);
  const std::string name = step_dir_name(state.step);
  const fs::path final_dir = save / name;
  const fs::path tmp = save / (".tmp." + name + "." + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  try {
    std::ostringstream m;
    m << "format accel-engine-checkpoint/1\n";
    m << "step " << state.step << "\n";
    for (const auto& [k, v] : state.values) m << k << " " << v << "\n";
    m << "total " << layout.total << "\n";
    for (const auto& v : layout.views) {
      m << "tensor params.f32 " << v.name << " float32 " << v.offset << " " << v.numel;
      for (const auto d : v.shape) m << " " << d;
      m << "\n";
    }
    const std::string text = m.str();
    detail::write_file_synced(tmp / "params.f32", state.params.data(), state.params.size() * 4);
    detail::write_file_synced(tmp / "exp_avg.f32", state.exp_avg.data(), state.exp_avg.size() * 4);
    detail::write_file_synced(tmp / "exp_avg_sq.f32", state.exp_avg_sq.data(), state.exp_avg_sq.size() * 4);
    detail::write_file_synced(tmp / "manifest.txt", text.data(), text.size());  // last: its presence means complete
    detail::sync_dir(tmp);
    fs::remove_all(final_dir);  // a checkpoint of the same step (a resumed run) is replaced
    fs::rename(tmp, final_dir);
    const fs::path link_tmp = save / (".latest." + std::to_string(::getpid()));
    fs::remove(link_tmp);
    fs::create_directory_symlink(name, link_tmp);
    fs::rename(link_tmp, save / "latest");
    detail::sync_dir(save);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
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
      format_ok = value == "accel-engine-checkpoint/1";
    } else if (key == "step") {
      st.step = std::stoll(value);
    } else if (key != "tensor") {
      st.values[key] = value;
    }
  }
  if (!format_ok) throw UsageError("checkpoint: " + dir.string() + " has an unknown format");
  return st;
}

inline void read_checkpoint_tensors(const std::filesystem::path& dir, std::int64_t total, CheckpointState& st) {
  st.params = detail::read_floats(dir / "params.f32", total);
  st.exp_avg = detail::read_floats(dir / "exp_avg.f32", total);
  st.exp_avg_sq = detail::read_floats(dir / "exp_avg_sq.f32", total);
}

}  // namespace engine
