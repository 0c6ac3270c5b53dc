// data_parallel.hpp — the engine's ranks: a backend's world communicator (MPI for the CPU, NCCL for
// CUDA, accel::comm's AnyCommunicator for AnyBackend), or one rank where the build has no accel::comm.
//
// ZeRO's partition (DeepSpeed's flat-group partitioning): the flat parameter buffer is padded to
// ranks x shard elements and rank r owns [r x shard, (r+1) x shard). The shard is a multiple of
// norm_block, so the blocks the gradient norm is summed over are the same on every rank count (what
// --deterministic needs), and of 16 (the views' alignment).
#pragma once

#include <accel/accel.hpp>
#if defined(ENGINE_HAS_COMM)
#include <accel/comm.hpp>
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "config.hpp"

namespace engine {

/// Elements of a gradient-norm block (--deterministic sums the norm per block, in block order).
inline constexpr std::int64_t norm_block = 4096;

/// The shard of `total` elements on `ranks` ranks: a multiple of norm_block.
inline std::int64_t shard_size(std::int64_t total, int ranks) {
  const std::int64_t per = (total + ranks - 1) / ranks;
  return (per + norm_block - 1) / norm_block * norm_block;
}

/// The ranks of a run: size() == 1 without a communicator. Operations are on a stream, in stream order.
template <class B>
class Ranks {
 public:
  using StreamRef = typename B::StreamRef;

  /// One rank.
  explicit Ranks(B b) : b_(b) {}

#if defined(ENGINE_HAS_COMM)
  static constexpr bool has_comm = accel::Collectives<B>;
#else
  static constexpr bool has_comm = false;
#endif

  /// The world communicator where the backend has one and the process was launched with several
  /// ranks (mpirun, or RANK/WORLD_SIZE); else one rank.
  /// Several ranks launched without a communicator for B (a build without MPI or NCCL) is an error:
  /// the ranks would each train alone and overwrite each other's checkpoints.
  /// `force` (--force-collectives): the world communicator on one rank too (a world of 1), so that
  /// every collective of the data-parallel path runs; an error where B has no communicator.
  static Ranks world(B b, bool force = false) {
    Ranks r(b);
    int launched = 1;
#if defined(ENGINE_HAS_COMM)
    launched = accel::comm::launch_info().world_size;
    if constexpr (has_comm) {
      if (launched > 1 || force) {
        r.comm_ = &accel::comm::world<B>();
        r.rank_ = r.comm_->rank();
        r.size_ = r.comm_->size();
        r.distributed_ = true;
        return r;
      }
    }
#else
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE"}) {
      if (const char* e = std::getenv(v); e != nullptr && std::atoi(e) > 1) launched = std::atoi(e);
    }
#endif
    if (launched > 1) {
      throw UsageError("launched as " + std::to_string(launched) + " ranks, but this build has no communicator for the " +
                       std::string(b.name()) + " backend (accel::comm with MPI for the CPU, NCCL for CUDA)");
    }
    if (force) {
      throw UsageError("--force-collectives runs the collectives on a world of one rank, but this build has no communicator for the " +
                       std::string(b.name()) + " backend (accel::comm with MPI for the CPU, NCCL for CUDA)");
    }
    return r;
  }

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }
  /// The data-parallel path: a communicator carries the collectives (several ranks, or one rank with
  /// --force-collectives). False: one rank, every collective a local copy or nothing.
  [[nodiscard]] bool distributed() const noexcept { return distributed_; }
  [[nodiscard]] std::string engine_name() const {
#if defined(ENGINE_HAS_COMM)
    if constexpr (has_comm) {
      if (comm_ != nullptr) return std::string(b_.communication_backend_name());
    }
#endif
    return "none";
  }

  /// Sum over the ranks of `in` (count x ranks elements), rank r's block into out (in place when
  /// out == in + r x count).
  void reduce_scatter(StreamRef s, const void* in, void* out, std::size_t count, accel::Dtype t) {
    if (!distributed_) return copy_if_needed(s, in, out, count, t);
#if defined(ENGINE_HAS_COMM)
    if constexpr (has_comm) comm_->reduce_scatter(s, in, out, count, t, accel::ReduceOp::sum);
#endif
  }
  /// Every rank's `count` elements of `in`, in rank order, into out (in place when in == out + r x count).
  void all_gather(StreamRef s, const void* in, void* out, std::size_t count, accel::Dtype t) {
    if (!distributed_) return copy_if_needed(s, in, out, count, t);
#if defined(ENGINE_HAS_COMM)
    if constexpr (has_comm) comm_->all_gather(s, in, out, count, t);
#endif
  }
  /// Block j (count elements) of `in` to rank j; out's block i from rank i.
  void all_to_all(StreamRef s, const void* in, void* out, std::size_t count, accel::Dtype t) {
    if (!distributed_) return copy_if_needed(s, in, out, count, t);
#if defined(ENGINE_HAS_COMM)
    if constexpr (has_comm) comm_->all_to_all(s, in, out, count, t);
#endif
  }
  /// Elements [begin, end) of the flat buffer, held at `data` (the flat buffer itself + begin, or a
  /// bucket's memory).
  struct FlatRange {
    void* data = nullptr;
    std::int64_t begin = 0, end = 0;
  };
  /// Sums each range over the ranks into the ranks that own its elements (rank r owns [r x shard,
  /// (r+1) x shard) and gets its part in place): one reduce per owner a range touches, all in one
  /// grouped launch. The same bytes as a reduce-scatter, for buckets that are not rank-aligned.
  void reduce_to_owners(StreamRef s, const std::vector<FlatRange>& ranges, std::int64_t shard, accel::Dtype t) {
    if (!distributed_) return;
#if defined(ENGINE_HAS_COMM)
    if constexpr (has_comm) {
      auto group = comm_->group();
      for (const auto& x : ranges) {
        for (int r = static_cast<int>(x.begin / shard); r < size_ && r * shard < x.end; ++r) {
          const std::int64_t lo = std::max(x.begin, r * shard), hi = std::min(x.end, (r + 1) * shard);
          if (hi <= lo) continue;
          void* p = static_cast<char*>(x.data) + (lo - x.begin) * static_cast<std::int64_t>(accel::size_of(t));
          comm_->reduce(s, p, p, static_cast<std::size_t>(hi - lo), t, accel::ReduceOp::sum, r);
        }
      }
      group.end();
    }
#else
    (void)s, (void)ranges, (void)shard, (void)t;  // a build without accel::comm: one rank only
#endif
  }
  /// One part of gather_group: `count` elements of `in` from every rank to rank `root`.
  struct GatherPart {
    const void* in = nullptr;
    std::size_t count = 0;
    int root = 0;
  };
  /// Gathers, one grouped launch: each part's `in` of every rank, in rank order, into the root's `out`
  /// (count x ranks elements). A rank is the root of at most one part (its `out` is written once).
  void gather_group(StreamRef s, const std::vector<GatherPart>& parts, void* out, accel::Dtype t) {
    if (!distributed_) {
      for (const auto& p : parts) copy_if_needed(s, p.in, out, p.count, t);
      return;
    }
#if defined(ENGINE_HAS_COMM)
    if constexpr (has_comm) {
      auto group = comm_->group();
      for (const auto& p : parts) comm_->gather(s, p.in, p.root == rank_ ? out : nullptr, p.count, t, p.root);
      group.end();
    }
#endif
  }
  void all_reduce_max(StreamRef s, void* buf, std::size_t count, accel::Dtype t) {
    if (!distributed_) return;
#if defined(ENGINE_HAS_COMM)
    if constexpr (has_comm) comm_->all_reduce(s, buf, buf, count, t, accel::ReduceOp::max);
#else
    (void)s, (void)buf, (void)count, (void)t;
#endif
  }

 private:
  void copy_if_needed(StreamRef s, const void* in, void* out, std::size_t count, accel::Dtype t) {
    if (in != out) b_.copy_async(s, out, in, count * accel::size_of(t));
  }

  B b_;

#if defined(ENGINE_HAS_COMM)
  struct None {};
  template <class X>
  static auto comm_ptr() {
    if constexpr (accel::Collectives<X>) {
      return static_cast<accel::communicator_t<X>*>(nullptr);
    } else {
      return static_cast<None*>(nullptr);
    }
  }
  decltype(comm_ptr<B>()) comm_ = nullptr;
#endif
  int rank_ = 0;
  int size_ = 1;
  bool distributed_ = false;
};

}  // namespace engine
