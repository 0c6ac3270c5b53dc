// Shared by accel/comm's multi-rank tests: the element types, what each rank contributes, and the
// reference results computed here from every rank's contribution (small integers, so that sums,
// products and averages are exact in every type, and the engines' reduction order cannot matter).
#pragma once

#include <accel/comm.hpp>
#include <accel/cpu/backend.hpp>
#include <accel/memory/buffer.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <type_traits>
#include <unistd.h>
#include <vector>

#define COMM_TYPES float, double, accel::half, accel::bfloat16, std::int8_t, std::uint8_t, std::int32_t, std::int64_t

namespace comm_test {

using accel::ReduceOp;
using B = accel::CpuBackend;
using Stream = accel::cpu::Stream;
template <class T>
using Buf = accel::Buffer<T, B>;

inline accel::comm::MpiCommunicator& world() { return accel::comm::world<B>(); }

template <class T>
T from_int(int v) {
  if constexpr (std::is_same_v<T, accel::half> || std::is_same_v<T, accel::bfloat16>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

/// Rank r's element i: 1 or 2 for prod (products stay <= 8 on 3 ranks), 1..5 otherwise.
inline int contribution_value(int rank, std::size_t i, ReduceOp op) {
  if (op == ReduceOp::prod) return (static_cast<std::size_t>(rank) + i) % 3 == 0 ? 2 : 1;
  return static_cast<int>((static_cast<std::size_t>(rank) * 3 + i * 7) % 5) + 1;
}

template <class T>
std::vector<T> contribution(std::size_t count, int rank, ReduceOp op) {
  std::vector<T> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = from_int<T>(contribution_value(rank, i, op));
  return v;
}

template <class T>
Buf<T> filled(std::size_t count, int rank, ReduceOp op, accel::cpu::StreamRef s) {
  Buf<T> b(count, s);
  const std::vector<T> v = contribution<T>(count, rank, op);
  std::copy(v.begin(), v.end(), b.data());
  return b;
}

template <class T>
T combine(T a, T b, ReduceOp op) {
  if constexpr (std::is_same_v<T, accel::half> || std::is_same_v<T, accel::bfloat16>) {
    const float x = static_cast<float>(a), y = static_cast<float>(b);
    switch (op) {
      case ReduceOp::prod: return T(x * y);
      case ReduceOp::min: return T(x < y ? x : y);
      case ReduceOp::max: return T(x > y ? x : y);
      default: return T(x + y);
    }
  } else {
    switch (op) {
      case ReduceOp::prod: return static_cast<T>(a * b);
      case ReduceOp::min: return a < b ? a : b;
      case ReduceOp::max: return a > b ? a : b;
      default: return static_cast<T>(a + b);
    }
  }
}

/// op over every rank's contribution; avg = the sum divided by the rank count in T's arithmetic.
template <class T>
std::vector<T> reduced(ReduceOp op, std::size_t count, int ranks) {
  std::vector<T> acc = contribution<T>(count, 0, op);
  for (int r = 1; r < ranks; ++r) {
    const std::vector<T> next = contribution<T>(count, r, op);
    for (std::size_t i = 0; i < count; ++i) acc[i] = combine(acc[i], next[i], op);
  }
  if (op == ReduceOp::avg) {
    for (T& x : acc) {
      if constexpr (std::is_same_v<T, accel::half> || std::is_same_v<T, accel::bfloat16>) {
        x = T(static_cast<float>(x) / static_cast<float>(ranks));
      } else {
        x = static_cast<T>(x / static_cast<T>(ranks));
      }
    }
  }
  return acc;
}

/// Element bit patterns, for exact comparisons (and readable doctest output).
template <class T>
std::vector<std::uint64_t> bits(const T* data, std::size_t n) {
  std::vector<std::uint64_t> out(n, 0);
  for (std::size_t i = 0; i < n; ++i) std::memcpy(&out[i], data + i, sizeof(T));
  return out;
}
template <class T>
std::vector<std::uint64_t> bits(const std::vector<T>& v) {
  return bits(v.data(), v.size());
}
template <class T>
std::vector<std::uint64_t> bits(const Buf<T>& b) {
  return bits(b.data(), b.size());
}

/// A directory every rank sees (the same machine): rank 0 creates it and broadcasts its name.
inline std::string shared_tmp_dir(accel::comm::MpiCommunicator& c, accel::cpu::StreamRef s) {
  Buf<std::uint8_t> name(64, s);
  std::memset(name.data(), 0, 64);
  if (c.rank() == 0) {
    char templ[] = "/tmp/accel-comm-test-XXXXXX";
    if (::mkdtemp(templ) == nullptr) std::abort();
    std::memcpy(name.data(), templ, std::strlen(templ));
  }
  c.broadcast(s, name, 0);
  s.synchronize();
  return std::string(reinterpret_cast<const char*>(name.data()));
}

inline void write_file(const std::string& path, const std::string& text) { std::ofstream(path) << text; }
inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace comm_test
