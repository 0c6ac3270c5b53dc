// Shared by the op tests: one temporary ACCEL_CACHE_DIR per test run (so each CPU kernel is compiled
// once per run), the kernels loaded once, and small helpers.
#pragma once

#include <accel/cpu/ops.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

namespace ops_test {

/// A fresh directory under $TMPDIR, removed at exit.
inline std::filesystem::path temp_dir(const std::string& tag) {
  const std::filesystem::path base = std::filesystem::temp_directory_path();
  std::string tmpl = (base / ("accel-ops-" + tag + "-XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  static const pid_t owner = ::getpid();
  static std::vector<std::filesystem::path>* const dirs = [] {
    auto* d = new std::vector<std::filesystem::path>;
    std::atexit([] {
      if (::getpid() != owner) return;  // a forked child exits without removing the parent's dirs
      for (const auto& p : *dirs) {
        std::error_code ec;
        std::filesystem::remove_all(p, ec);
      }
    });
    return d;
  }();
  dirs->push_back(tmpl);
  return tmpl;
}

/// The run's cache directory; also exported as ACCEL_CACHE_DIR so default builders use it.
inline const std::filesystem::path& cache_dir() {
  static const std::filesystem::path dir = [] {
    auto d = temp_dir("cache");
    ::setenv("ACCEL_CACHE_DIR", d.c_str(), 1);
    return d;
  }();
  return dir;
}

inline accel::cpu::FusedAdamOp& adam() {
  static accel::cpu::FusedAdamOp op = [] {
    (void)cache_dir();
    return accel::cpu::Ops::get_op_builder<accel::ops::FusedAdam>().load();
  }();
  return op;
}

inline accel::cpu::TensorOpsOp& tensor_ops() {
  static accel::cpu::TensorOpsOp op = [] {
    (void)cache_dir();
    return accel::cpu::Ops::get_op_builder<accel::ops::TensorOps>().load();
  }();
  return op;
}

inline std::vector<float> random_floats(std::size_t n, unsigned seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

inline void write_text(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace ops_test
