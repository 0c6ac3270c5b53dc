// accel/comm/detail/arguments.hpp — what accel/comm's operations accept, and the checks they make at
// the call, before anything is enqueued (a bad argument is an InvalidArgumentError or NotSupportedError
// thrown by the call, never a failed collective).
//
// Ranges: a Buffer<T, B>, a std::span<T> of the stream's device memory, or any view with
// `backend_type` B, data() and size() (accel::algo::DeviceSpan<T, B>). T is one of the element types
// both engines reduce: float, double, accel::half, accel::bfloat16, int8_t, uint8_t, int32_t, int64_t —
// another type is a compile error naming them.
#pragma once

#include <accel/comm/detail/op.hpp>
#include <accel/core/dtype.hpp>
#include <accel/core/error.hpp>
#include <accel/core/reduce_op.hpp>
#include <accel/memory/buffer.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

namespace accel::comm::detail {

/// The Dtypes both engines carry and reduce.
[[nodiscard]] constexpr bool is_comm_dtype(Dtype d) noexcept {
  switch (d) {
    case Dtype::float32:
    case Dtype::float64:
    case Dtype::float16:
    case Dtype::bfloat16:
    case Dtype::int8:
    case Dtype::uint8:
    case Dtype::int32:
    case Dtype::int64: return true;
    default: return false;
  }
}

template <class T>
inline constexpr bool is_comm_type = [] {
  if constexpr (HasDtype<T>) {
    return is_comm_dtype(dtype_of<T>);
  } else {
    return false;
  }
}();

template <class T>
constexpr void check_element_type() {
  static_assert(is_comm_type<std::remove_cv_t<T>>,
                "accel::comm: the element type must be float, double, accel::half, accel::bfloat16, std::int8_t, "
                "std::uint8_t, std::int32_t or std::int64_t (the types MPI and NCCL both reduce)");
}

template <class R>
struct is_std_span : std::false_type {};
template <class T, std::size_t N>
struct is_std_span<std::span<T, N>> : std::true_type {};

/// R (any reference, cv) views memory of backend B: a Buffer<T, B>, a std::span<T>, or a view whose
/// backend_type is B.
template <class R, class B>
concept RangeOf = requires(std::remove_cvref_t<R>& r) {
  r.data();
  r.size();
} && (is_std_span<std::remove_cvref_t<R>>::value || requires {
  requires std::is_same_v<typename std::remove_cvref_t<R>::backend_type, B>;
});

/// The element type as seen through R (const for a const Buffer or a span of const).
template <class R>
using element_t = std::remove_pointer_t<decltype(std::declval<R&>().data())>;

/// A range the operation may write: elements not const (a const Buffer, or a span of const, is read-only).
template <class R, class B>
concept OutputRangeOf = RangeOf<R, B> && !std::is_const_v<element_t<R>>;

template <class R>
inline constexpr bool is_buffer = false;
template <class T, class B>
inline constexpr bool is_buffer<Buffer<T, B>> = true;

/// How an operation names itself in messages: "accel::comm::all_reduce (mpi, world, rank 1 of 3)".
/// Built on every call, so it holds no string: `describe(context)` says where ("mpi, world, rank 1 of 3")
/// only when a message needs it.
struct CallSite {
  const char* op;
  const void* context = nullptr;
  std::string (*describe)(const void*) = nullptr;

  [[nodiscard]] std::string prefix() const {
    std::string out = std::string("accel::comm::") + op;
    if (describe != nullptr) out += " (" + describe(context) + ")";
    return out;
  }
  [[noreturn, gnu::cold]] void invalid(const std::string& what) const { throw InvalidArgumentError(prefix() + ": " + what); }
};

[[nodiscard]] inline std::string elements(std::size_t n) {
  return std::to_string(n) + (n == 1 ? " element" : " elements");
}

/// A Buffer must be memory of the stream's device (a span cannot be checked here; the engines check
/// what they can).
template <class R, class S>
void check_device(const CallSite& call, const char* what, const R& range, const S& stream) {
  if constexpr (is_buffer<std::remove_cvref_t<R>>) {
    if (range.data() == nullptr) return;
    if constexpr (requires { stream.index(); range.stream().index(); }) {  // AnyBackend: the same backend first
      if (range.stream().index() != stream.index()) {
        call.invalid(std::string(what) + " is memory of the " + std::string(range.stream().backend_name()) +
                     " backend, but the stream is a " + std::string(stream.backend_name()) + " stream");
      }
    }
    const int device = range.device_index();
    if (device != stream.device_index()) {
      call.invalid(std::string(what) + " is memory of device " + std::to_string(device) + ", but the stream is on device " +
                   std::to_string(stream.device_index()));
    }
  }
}

/// Checks of the raw form, common to every engine.
inline void check_op(const CallSite& call, const Op& op, int rank, int size) {
  if (!is_comm_dtype(op.dtype)) {
    throw NotSupportedError(call.prefix() + ": dtype " + std::string(name(op.dtype)) +
                            " is not carried by accel/comm (float32, float64, float16, bfloat16, int8, uint8, int32, "
                            "int64)");
  }
  if (is_reduction(op.kind) && static_cast<unsigned>(op.reduce) > static_cast<unsigned>(ReduceOp::avg)) {
    call.invalid("reduce op " + std::to_string(static_cast<int>(op.reduce)) + " is not a ReduceOp");
  }
  if (has_root(op.kind) && (op.root < 0 || op.root >= size)) {
    call.invalid("root " + std::to_string(op.root) + " is out of range: the communicator has " + std::to_string(size) +
                 " rank(s), 0 to " + std::to_string(size - 1));
  }
  if (has_peer(op.kind) && (op.root < 0 || op.root >= size)) {
    call.invalid("peer " + std::to_string(op.root) + " is out of range: the communicator has " + std::to_string(size) +
                 " rank(s), 0 to " + std::to_string(size - 1));
  }
  if (op.count == 0) return;
  const std::size_t esize = size_of(op.dtype);
  const auto n = static_cast<std::size_t>(size);
  const bool root_here = op.root == rank;
  // Which buffers this rank reads and writes, and their extents in elements.
  std::size_t send_count = op.count, recv_count = op.count;
  bool reads = true, writes = true;
  switch (op.kind) {
    case OpKind::broadcast: reads = root_here; break;
    case OpKind::reduce: writes = root_here; break;
    case OpKind::all_gather: recv_count = op.count * n; break;
    case OpKind::reduce_scatter: send_count = op.count * n; break;
    case OpKind::all_to_all:
      send_count = op.count * n;
      recv_count = op.count * n;
      break;
    case OpKind::gather:
      recv_count = op.count * n;
      writes = root_here;
      break;
    case OpKind::scatter:
      send_count = op.count * n;
      reads = root_here;
      break;
    case OpKind::send: writes = false; break;
    case OpKind::recv: reads = false; break;
    case OpKind::barrier: return;
    default: break;
  }
  if (op.count > (std::size_t{1} << 62) / (esize * n)) call.invalid(elements(op.count) + " per rank is too many");
  if (reads && op.send == nullptr) call.invalid("the input is a null pointer with " + elements(send_count));
  if (writes && op.recv == nullptr) call.invalid("the output is a null pointer with " + elements(recv_count));
  if (!reads || !writes) return;
  // Overlap: only the in-place forms NCCL defines (the same address; for all_gather and gather the
  // input at the rank's block of the output; for reduce_scatter and scatter the output at the rank's
  // block of the input).
  const auto s = reinterpret_cast<std::uintptr_t>(op.send);
  const auto r = reinterpret_cast<std::uintptr_t>(op.recv);
  const std::size_t sb = send_count * esize, rb = recv_count * esize;
  if (s >= r + rb || r >= s + sb) return;
  const std::size_t block = op.count * esize * static_cast<std::size_t>(rank);
  bool in_place = false;
  switch (op.kind) {
    case OpKind::all_reduce:
    case OpKind::broadcast:
    case OpKind::reduce: in_place = s == r; break;
    case OpKind::all_gather:
    case OpKind::gather: in_place = s == r + block; break;
    case OpKind::reduce_scatter:
    case OpKind::scatter: in_place = r == s + block; break;
    default: break;
  }
  if (!in_place) {
    call.invalid(std::string("the input and the output overlap, other than in place (") +
                 (op.kind == OpKind::all_gather || op.kind == OpKind::gather
                      ? "the input at this rank's block of the output"
                  : op.kind == OpKind::reduce_scatter || op.kind == OpKind::scatter
                      ? "the output at this rank's block of the input"
                  : op.kind == OpKind::all_to_all ? "all_to_all has no in-place form"
                                                  : "the same address") +
                 ")");
  }
}

/// A send or recv whose peer is this rank completes only together with its matching recv or send, so
/// it must be issued with it inside an open group (both engines: MPI would block a large message,
/// ncclSend to self outside a group waits for a recv that cannot come).
inline void check_self_peer(const CallSite& call, const Op& op, int rank, bool in_group) {
  if (!has_peer(op.kind) || op.root != rank || in_group) return;
  call.invalid(std::string(op.kind == OpKind::send ? "send to" : "recv from") + " peer " + std::to_string(op.root) +
               ", this rank itself, outside a group: pair it with the matching " +
               (op.kind == OpKind::send ? "recv" : "send") + " inside group() (auto g = c.group(); c.send(...); "
               "c.recv(...); g.end();)");
}

}  // namespace accel::comm::detail
