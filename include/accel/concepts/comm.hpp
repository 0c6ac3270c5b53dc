// accel/concepts/comm.hpp — accel::Communicator and accel::Collectives<B>: collectives across ranks.
//
// Optional, outside accel::Accelerator: not every backend has a communication engine. A backend B has
// one when accel/comm specialises communicator_traits<B> (MPI for CpuBackend, NCCL for CudaBackend), so
// backends never name MPI or NCCL types and accel/comm stays a floor above them. Include
// <accel/comm.hpp> (target accel::comm) to get the specialisations.
//
// For a communicator C (move-only; C::backend_type is its backend, C::StreamRef that backend's stream
// ref), a stream s, device memory `in`/`out` of the stream's device holding `count` elements of
// `dtype` per rank (as NCCL counts them), ReduceOp op and a rank `root`/`peer`:
//   c.rank(), c.size(), c.local_rank()         this rank, the number of ranks, the rank on this node
//   c.all_reduce(s, in, out, count, dtype, op)        every rank gets op over all ranks' `in`
//   c.broadcast(s, in, out, count, dtype, root)       root's `in` into every rank's `out`
//   c.reduce(s, in, out, count, dtype, op, root)      op over all ranks into root's `out`
//   c.all_gather(s, in, out, count, dtype)            `out` = every rank's `in`, rank order (count * size)
//   c.reduce_scatter(s, in, out, count, dtype, op)    rank r gets block r of op over `in` (count * size)
//   c.all_to_all(s, in, out, count, dtype)            block j of `in` goes to rank j; `out` block i came from i
//   c.gather(s, in, out, count, dtype, root)          root's `out` = every rank's `in` (count * size)
//   c.scatter(s, in, out, count, dtype, root)         block r of root's `in` into rank r's `out`
//   c.send(s, in, count, dtype, peer), c.recv(s, out, count, dtype, peer)
//   c.barrier(s)
//   c.split(color, key) -> C, c.new_group(ranks) -> C   sub-groups (collective over c); a rank outside
//                                                      the new group gets an empty communicator
//   c.group() -> a guard: operations issued while it lives run as one launch when it ends
// Every operation is enqueued on s, stream first, and runs in stream order; typed overloads over
// accel::Buffer<T, B> and spans exist in accel/comm. in == out is the in-place form.
#pragma once

#include <accel/core/dtype.hpp>
#include <accel/core/reduce_op.hpp>

#include <concepts>
#include <cstddef>
#include <span>

namespace accel {

/// Specialised in accel/comm for each backend that has a communication engine:
/// `template <> struct communicator_traits<CpuBackend> { using type = comm::MpiCommunicator; };`
template <class B>
struct communicator_traits {};

template <class C>
concept Communicator =
    std::movable<C> && !std::copyable<C> &&
    requires(C& c, const C& cc, typename C::StreamRef s, const void* in, void* out, std::size_t n, Dtype t,
             ReduceOp op, int rank, std::span<const int> ranks) {
      typename C::backend_type;
      { cc.rank() } -> std::same_as<int>;
      { cc.size() } -> std::same_as<int>;
      { cc.local_rank() } -> std::same_as<int>;
      c.all_reduce(s, in, out, n, t, op);
      c.broadcast(s, in, out, n, t, rank);
      c.reduce(s, in, out, n, t, op, rank);
      c.all_gather(s, in, out, n, t);
      c.reduce_scatter(s, in, out, n, t, op);
      c.all_to_all(s, in, out, n, t);
      c.gather(s, in, out, n, t, rank);
      c.scatter(s, in, out, n, t, rank);
      c.send(s, in, n, t, rank);
      c.recv(s, out, n, t, rank);
      c.barrier(s);
      { c.split(rank, rank) } -> std::same_as<C>;
      { c.new_group(ranks) } -> std::same_as<C>;
      c.group();
    };

/// B has a communicator: accel/comm specialised communicator_traits<B> with a Communicator of B.
template <class B>
concept Collectives = requires { typename communicator_traits<B>::type; } &&
                      Communicator<typename communicator_traits<B>::type> &&
                      std::same_as<typename communicator_traits<B>::type::backend_type, B>;

/// The communicator type of backend B (accel::comm::MpiCommunicator for CpuBackend, ...).
template <class B>
  requires Collectives<B>
using communicator_t = typename communicator_traits<B>::type;

}  // namespace accel
