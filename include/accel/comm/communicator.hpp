// accel/comm/communicator.hpp — accel::comm::CommunicatorOps: the operations every communicator offers,
// written once over an engine (MpiCommunicator, NcclCommunicator derive from it).
//
// Stream first; the call returns once the operation is enqueued on the stream, and it runs in stream
// order: after the work enqueued before it, before the work enqueued after it (recorded, not run, while
// the stream captures a graph). Counts come from the ranges; in the raw forms they are per rank, as NCCL
// counts them (concepts/comm.hpp). Every rank of the communicator must issue the same collectives in the
// same order. Each operation gets a sequence number on this rank (the flight recorder's): sends and
// receives are numbered only on the ranks that issue them, so one collective's sequence number may
// differ between ranks; its collective number (CommError::collective(), MPI) is the same on every rank.
//
//   all_reduce(s, buf [, op])            in place                     (torch's all_reduce)
//   all_reduce(s, in, out [, op])        out.size() == in.size()
//   broadcast(s, buf, root)              in place; broadcast(s, in, out, root): root's in into every out
//   reduce(s, buf, root [, op])          in place at root; reduce(s, in, out, root [, op]): into root's out
//   all_gather(s, in, out)               out.size() == in.size() * size()   (all_gather_into_tensor)
//   reduce_scatter(s, in, out [, op])    in.size() == out.size() * size()   (reduce_scatter_tensor)
//   all_to_all(s, in, out)               in.size() == out.size(), a multiple of size()  (all_to_all_single)
//   gather(s, in, out, root)             root's out.size() == in.size() * size(); out unused elsewhere
//   scatter(s, in, out, root)            root's in.size() == out.size() * size(); in unused elsewhere
//   send(s, buf, peer), recv(s, buf, peer)
//   barrier(s)
// Ranges are Buffer<T, B>s, std::spans of the stream's device memory, or views of B's memory
// (accel::algo::DeviceSpan); an input may be const. ReduceOp avg (core/reduce_op.hpp): MPI divides the
// sum by size() in T's arithmetic; NCCL (ncclAvg) does so for integer types but multiplies each rank's
// value by 1/size() before summing for floating types, so float results may differ in the last bits.
// Checked at the call (InvalidArgumentError naming the argument, nothing enqueued): sizes
// that do not match, a root or peer out of range, a Buffer of another device than the stream's, null
// memory, inputs and outputs that overlap other than in place, a send or recv to this rank itself
// outside a group, more elements per rank than the engine carries (MPI: 2^31 - 1); a dtype no engine
// carries is a compile error for the typed forms and a NotSupportedError for the raw ones. A refused
// call takes no sequence number. What one rank cannot see — another
// rank passing a different count — is the engine's error (a CommError) or a timeout.
#pragma once

#include <accel/comm/detail/arguments.hpp>
#include <accel/comm/detail/op.hpp>
#include <accel/core/dtype.hpp>
#include <accel/core/reduce_op.hpp>

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

namespace accel::comm {

template <class Derived, class B>
class CommunicatorOps {
 public:
  using backend_type = B;
  using StreamRef = typename B::StreamRef;

  // ---- raw forms: memory of the stream's device, `count` elements of `dtype` per rank ------------

  void all_reduce(StreamRef s, const void* in, void* out, std::size_t count, Dtype dtype, ReduceOp op = ReduceOp::sum) {
    run(s, {detail::OpKind::all_reduce, dtype, op, -1, in, out, count});
  }
  void broadcast(StreamRef s, const void* in, void* out, std::size_t count, Dtype dtype, int root) {
    run(s, {detail::OpKind::broadcast, dtype, ReduceOp::sum, root, in, out, count});
  }
  void reduce(StreamRef s, const void* in, void* out, std::size_t count, Dtype dtype, ReduceOp op, int root) {
    run(s, {detail::OpKind::reduce, dtype, op, root, in, out, count});
  }
  void all_gather(StreamRef s, const void* in, void* out, std::size_t count, Dtype dtype) {
    run(s, {detail::OpKind::all_gather, dtype, ReduceOp::sum, -1, in, out, count});
  }
  void reduce_scatter(StreamRef s, const void* in, void* out, std::size_t count, Dtype dtype,
                      ReduceOp op = ReduceOp::sum) {
    run(s, {detail::OpKind::reduce_scatter, dtype, op, -1, in, out, count});
  }
  void all_to_all(StreamRef s, const void* in, void* out, std::size_t count, Dtype dtype) {
    run(s, {detail::OpKind::all_to_all, dtype, ReduceOp::sum, -1, in, out, count});
  }
  void gather(StreamRef s, const void* in, void* out, std::size_t count, Dtype dtype, int root) {
    run(s, {detail::OpKind::gather, dtype, ReduceOp::sum, root, in, out, count});
  }
  void scatter(StreamRef s, const void* in, void* out, std::size_t count, Dtype dtype, int root) {
    run(s, {detail::OpKind::scatter, dtype, ReduceOp::sum, root, in, out, count});
  }
  void send(StreamRef s, const void* in, std::size_t count, Dtype dtype, int peer) {
    run(s, {detail::OpKind::send, dtype, ReduceOp::sum, peer, in, nullptr, count});
  }
  void recv(StreamRef s, void* out, std::size_t count, Dtype dtype, int peer) {
    run(s, {detail::OpKind::recv, dtype, ReduceOp::sum, peer, nullptr, out, count});
  }
  void barrier(StreamRef s) { run(s, {detail::OpKind::barrier, Dtype::uint8, ReduceOp::sum, -1, nullptr, nullptr, 0}); }

  // ---- typed forms over Buffers and spans ----------------------------------------------------------

  template <class R>
    requires detail::OutputRangeOf<R, B>
  void all_reduce(StreamRef s, R&& buf, ReduceOp op = ReduceOp::sum) {
    const auto call = check_one<R>("all_reduce", "the buffer", buf, s);
    run(s, typed_op<R>(detail::OpKind::all_reduce, op, -1, buf.data(), buf.data(), buf.size()), call);
  }
  template <class In, class Out>
    requires detail::RangeOf<In, B> && detail::OutputRangeOf<Out, B>
  void all_reduce(StreamRef s, const In& in, Out&& out, ReduceOp op = ReduceOp::sum) {
    const auto call = check_two<In, Out>("all_reduce", in, out, s);
    same_size(call, out.size(), in.size(), "out", "in");
    run(s, typed_op<Out>(detail::OpKind::all_reduce, op, -1, in.data(), out.data(), in.size()), call);
  }

  template <class R>
    requires detail::OutputRangeOf<R, B>
  void broadcast(StreamRef s, R&& buf, int root) {
    const auto call = check_one<R>("broadcast", "the buffer", buf, s);
    run(s, typed_op<R>(detail::OpKind::broadcast, ReduceOp::sum, root, buf.data(), buf.data(), buf.size()), call);
  }
  template <class In, class Out>
    requires detail::RangeOf<In, B> && detail::OutputRangeOf<Out, B>
  void broadcast(StreamRef s, const In& in, Out&& out, int root) {
    const auto call = check_two<In, Out>("broadcast", in, out, s);
    if (root == self().rank()) same_size(call, out.size(), in.size(), "out", "in");
    run(s, typed_op<Out>(detail::OpKind::broadcast, ReduceOp::sum, root, in.data(), out.data(), out.size()), call);
  }

  template <class R>
    requires detail::OutputRangeOf<R, B>
  void reduce(StreamRef s, R&& buf, int root, ReduceOp op = ReduceOp::sum) {
    const auto call = check_one<R>("reduce", "the buffer", buf, s);
    run(s, typed_op<R>(detail::OpKind::reduce, op, root, buf.data(), buf.data(), buf.size()), call);
  }
  template <class In, class Out>
    requires detail::RangeOf<In, B> && detail::OutputRangeOf<Out, B>
  void reduce(StreamRef s, const In& in, Out&& out, int root, ReduceOp op = ReduceOp::sum) {
    const auto call = check_two<In, Out>("reduce", in, out, s);
    if (root == self().rank()) same_size(call, out.size(), in.size(), "out", "in");
    run(s, typed_op<Out>(detail::OpKind::reduce, op, root, in.data(), out.data(), in.size()), call);
  }

  template <class In, class Out>
    requires detail::RangeOf<In, B> && detail::OutputRangeOf<Out, B>
  void all_gather(StreamRef s, const In& in, Out&& out) {
    const auto call = check_two<In, Out>("all_gather", in, out, s);
    times_size(call, out.size(), in.size(), "out", "in");
    run(s, typed_op<Out>(detail::OpKind::all_gather, ReduceOp::sum, -1, in.data(), out.data(), in.size()), call);
  }

  template <class In, class Out>
    requires detail::RangeOf<In, B> && detail::OutputRangeOf<Out, B>
  void reduce_scatter(StreamRef s, const In& in, Out&& out, ReduceOp op = ReduceOp::sum) {
    const auto call = check_two<In, Out>("reduce_scatter", in, out, s);
    times_size(call, in.size(), out.size(), "in", "out");
    run(s, typed_op<Out>(detail::OpKind::reduce_scatter, op, -1, in.data(), out.data(), out.size()), call);
  }

  template <class In, class Out>
    requires detail::RangeOf<In, B> && detail::OutputRangeOf<Out, B>
  void all_to_all(StreamRef s, const In& in, Out&& out) {
    const auto call = check_two<In, Out>("all_to_all", in, out, s);
    same_size(call, out.size(), in.size(), "out", "in");
    const auto n = static_cast<std::size_t>(self().size());
    if (in.size() % n != 0) {
      call.invalid("in holds " + detail::elements(in.size()) + ", not a multiple of the " + std::to_string(n) +
                   " ranks (all_to_all sends an equal block to each)");
    }
    run(s, typed_op<Out>(detail::OpKind::all_to_all, ReduceOp::sum, -1, in.data(), out.data(), in.size() / n), call);
  }

  template <class In, class Out>
    requires detail::RangeOf<In, B> && detail::OutputRangeOf<Out, B>
  void gather(StreamRef s, const In& in, Out&& out, int root) {
    const auto call = check_two<In, Out>("gather", in, out, s);
    if (root == self().rank()) times_size(call, out.size(), in.size(), "out", "in");
    run(s, typed_op<Out>(detail::OpKind::gather, ReduceOp::sum, root, in.data(), out.data(), in.size()), call);
  }

  template <class In, class Out>
    requires detail::RangeOf<In, B> && detail::OutputRangeOf<Out, B>
  void scatter(StreamRef s, const In& in, Out&& out, int root) {
    const auto call = check_two<In, Out>("scatter", in, out, s);
    if (root == self().rank()) times_size(call, in.size(), out.size(), "in", "out");
    run(s, typed_op<Out>(detail::OpKind::scatter, ReduceOp::sum, root, in.data(), out.data(), out.size()), call);
  }

  template <class R>
    requires detail::RangeOf<R, B>
  void send(StreamRef s, const R& buf, int peer) {
    const auto call = check_one<R>("send", "the buffer", buf, s);
    run(s, typed_op<R>(detail::OpKind::send, ReduceOp::sum, peer, buf.data(), nullptr, buf.size()), call);
  }
  template <class R>
    requires detail::OutputRangeOf<R, B>
  void recv(StreamRef s, R&& buf, int peer) {
    const auto call = check_one<R>("recv", "the buffer", buf, s);
    run(s, typed_op<R>(detail::OpKind::recv, ReduceOp::sum, peer, nullptr, buf.data(), buf.size()), call);
  }

 protected:
  CommunicatorOps() = default;

 private:
  Derived& self() noexcept { return static_cast<Derived&>(*this); }
  const Derived& self() const noexcept { return static_cast<const Derived&>(*this); }

  template <class R>
  static detail::Op typed_op(detail::OpKind kind, ReduceOp op, int root, const void* in, void* out, std::size_t count) {
    using T = std::remove_cv_t<detail::element_t<R>>;
    return {kind, dtype_of<T>, op, root, in, out, count};
  }
  template <class R>
  static detail::Op typed_op(detail::OpKind kind, ReduceOp op, int root, const void* in, std::nullptr_t,
                             std::size_t count) {
    using T = std::remove_cv_t<detail::element_t<R>>;
    return {kind, dtype_of<T>, op, root, in, nullptr, count};
  }

  template <class R>
  detail::CallSite check_one(const char* op, const char* what, const R& range, StreamRef s) const {
    detail::check_element_type<detail::element_t<R>>();
    detail::CallSite call = self().call_site(op);
    self().require_valid(call);
    detail::check_device(call, what, range, s);
    return call;
  }
  template <class In, class Out>
  detail::CallSite check_two(const char* op, const In& in, const Out& out, StreamRef s) const {
    using TI = std::remove_cv_t<detail::element_t<In>>;
    using TO = std::remove_cv_t<detail::element_t<Out>>;
    detail::check_element_type<TI>();
    detail::check_element_type<TO>();
    static_assert(std::is_same_v<TI, TO>, "accel::comm: the input and output element types differ");
    detail::CallSite call = self().call_site(op);
    self().require_valid(call);
    detail::check_device(call, "in", in, s);
    detail::check_device(call, "out", out, s);
    return call;
  }
  static void same_size(const detail::CallSite& call, std::size_t a, std::size_t b, const char* an, const char* bn) {
    if (a != b) {
      call.invalid(std::string("mismatched sizes: ") + an + " holds " + detail::elements(a) + " and " + bn + " " +
                   detail::elements(b));
    }
  }
  void times_size(const detail::CallSite& call, std::size_t big, std::size_t small, const char* bn,
                  const char* sn) const {
    const auto n = static_cast<std::size_t>(self().size());
    if (big != small * n) {
      call.invalid(std::string("mismatched sizes: ") + bn + " holds " + detail::elements(big) + " but must hold " + sn +
                   "'s " + detail::elements(small) + " x " + std::to_string(n) + " ranks = " + std::to_string(small * n));
    }
  }

  void run(StreamRef s, const detail::Op& op) { run(s, op, self().call_site(detail::name(op.kind).data())); }
  void run(StreamRef s, const detail::Op& op, const detail::CallSite& call) {
    self().require_valid(call);
    detail::check_op(call, op, self().rank(), self().size());
    self().launch(s, op, call);
  }
};

}  // namespace accel::comm
