// accel/comm/detail/op.hpp — one communication operation as the engines see it: what it is, on which
// memory, and the byte counts nccl-tests reports (algbw = S / t, busbw = algbw * factor).
#pragma once

#include <accel/core/dtype.hpp>
#include <accel/core/reduce_op.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace accel::comm::detail {

enum class OpKind : std::uint8_t {
  all_reduce,
  broadcast,
  reduce,
  all_gather,
  reduce_scatter,
  all_to_all,
  gather,
  scatter,
  send,
  recv,
  barrier,
};
inline constexpr int op_kind_count = 11;

[[nodiscard]] constexpr std::string_view name(OpKind kind) noexcept {
  switch (kind) {
    case OpKind::all_reduce: return "all_reduce";
    case OpKind::broadcast: return "broadcast";
    case OpKind::reduce: return "reduce";
    case OpKind::all_gather: return "all_gather";
    case OpKind::reduce_scatter: return "reduce_scatter";
    case OpKind::all_to_all: return "all_to_all";
    case OpKind::gather: return "gather";
    case OpKind::scatter: return "scatter";
    case OpKind::send: return "send";
    case OpKind::recv: return "recv";
    case OpKind::barrier: return "barrier";
  }
  return "unknown";
}

[[nodiscard]] constexpr bool is_reduction(OpKind kind) noexcept {
  return kind == OpKind::all_reduce || kind == OpKind::reduce || kind == OpKind::reduce_scatter;
}
[[nodiscard]] constexpr bool has_root(OpKind kind) noexcept {
  return kind == OpKind::broadcast || kind == OpKind::reduce || kind == OpKind::gather || kind == OpKind::scatter;
}
[[nodiscard]] constexpr bool has_peer(OpKind kind) noexcept { return kind == OpKind::send || kind == OpKind::recv; }

/// One operation. `count` is per rank, as NCCL counts: the elements each rank contributes to all_gather
/// and gather, receives from reduce_scatter and scatter, exchanges with each peer in all_to_all.
struct Op {
  OpKind kind = OpKind::barrier;
  Dtype dtype = Dtype::uint8;
  ReduceOp reduce = ReduceOp::sum;
  int root = -1;  // the root of broadcast/reduce/gather/scatter, the peer of send/recv, else -1
  const void* send = nullptr;
  void* recv = nullptr;
  std::size_t count = 0;
};

/// nccl-tests' S: the bytes of the per-rank buffer for all_reduce, broadcast, reduce, send/recv; of the
/// whole (size x count) buffer for all_gather, reduce_scatter, all_to_all, gather, scatter.
[[nodiscard]] constexpr double algbw_bytes(const Op& op, int size) noexcept {
  const double per_rank = static_cast<double>(op.count) * static_cast<double>(size_of(op.dtype));
  switch (op.kind) {
    case OpKind::all_gather:
    case OpKind::reduce_scatter:
    case OpKind::all_to_all:
    case OpKind::gather:
    case OpKind::scatter: return per_rank * size;
    case OpKind::barrier: return 0;
    default: return per_rank;
  }
}

/// busbw / algbw (nccl-tests doc/PERFORMANCE.md): 2(n-1)/n for all_reduce, (n-1)/n for all_gather,
/// reduce_scatter, all_to_all, gather and scatter, 1 for broadcast, reduce and point-to-point.
[[nodiscard]] constexpr double busbw_factor(OpKind kind, int size) noexcept {
  const double n = size;
  switch (kind) {
    case OpKind::all_reduce: return size > 0 ? 2.0 * (n - 1) / n : 0;
    case OpKind::all_gather:
    case OpKind::reduce_scatter:
    case OpKind::all_to_all:
    case OpKind::gather:
    case OpKind::scatter: return size > 0 ? (n - 1) / n : 0;
    case OpKind::barrier: return 0;
    default: return 1;
  }
}

/// "all_reduce #5 (1000 x float32, sum)", "recv #2 (16 x int64, from 1)", "barrier #3": how errors name `op`.
/// seq 0 (an operation refused before it took a number) is left out: "barrier", not a fake "barrier #0".
[[nodiscard]] inline std::string op_text(const Op& op, std::uint64_t seq) {
  std::string out = std::string(name(op.kind));
  if (seq != 0) out += " #" + std::to_string(seq);
  if (op.kind == OpKind::barrier) return out;
  out += " (" + std::to_string(op.count) + " x " + std::string(name(op.dtype));
  if (is_reduction(op.kind)) out += ", " + std::string(name(op.reduce));
  if (has_root(op.kind)) out += ", root " + std::to_string(op.root);
  if (op.kind == OpKind::send) out += ", to " + std::to_string(op.root);
  if (op.kind == OpKind::recv) out += ", from " + std::to_string(op.root);
  return out + ")";
}

}  // namespace accel::comm::detail
