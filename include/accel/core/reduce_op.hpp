// accel/core/reduce_op.hpp — accel::ReduceOp: how a collective combines the ranks' elements.
//
// torch.distributed.ReduceOp's names: sum, prod, min, max, avg ("avg" is the average over the ranks, in
// the element type's arithmetic, so an integer average truncates toward zero. How each engine computes
// it: MPI divides the sum by the number of ranks; NCCL's ncclAvg does so for integer types, but for
// floating types multiplies each rank's value by 1/ranks before summing, so a float average may differ
// from MPI's in the last bits). parse_reduce_op() accepts those names and torch's upper-case spellings
// ("SUM", "AVG").
#pragma once

#include <accel/core/error.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace accel {

enum class ReduceOp : std::uint8_t { sum, prod, min, max, avg };

inline constexpr std::array<ReduceOp, 5> all_reduce_ops{ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max,
                                                        ReduceOp::avg};

/// "sum", "prod", "min", "max", "avg"; "unknown" for a value that is not a ReduceOp.
[[nodiscard]] constexpr std::string_view name(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::prod: return "prod";
    case ReduceOp::min: return "min";
    case ReduceOp::max: return "max";
    case ReduceOp::avg: return "avg";
  }
  return "unknown";
}

/// Reads "sum" ... "avg" or torch's "SUM", "PRODUCT", "MIN", "MAX", "AVG"; anything else is an
/// InvalidArgumentError quoting the input and listing the valid names.
[[nodiscard]] inline ReduceOp parse_reduce_op(std::string_view text) {
  for (const ReduceOp op : all_reduce_ops) {
    if (text == name(op)) return op;
  }
  constexpr std::array<std::string_view, 5> upper{"SUM", "PRODUCT", "MIN", "MAX", "AVG"};
  for (std::size_t i = 0; i < upper.size(); ++i) {
    if (text == upper[i]) return all_reduce_ops[i];
  }
  throw InvalidArgumentError("unknown reduce op '" + std::string(text) +
                             "': expected sum, prod, min, max or avg (or torch's SUM, PRODUCT, MIN, MAX, AVG)");
}

}  // namespace accel
