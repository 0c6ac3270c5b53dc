// accel/comm over MPI, run by every rank (mpirun -np 2 and -np 3): every operation x every element
// type x every reduce op against a reference computed here from what each rank contributes.
#include "comm_test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <span>
#include <type_traits>
#include <string>
#include <vector>

using namespace comm_test;
using namespace std::chrono_literals;

TEST_CASE_TEMPLATE("all_reduce in place and out of place, every reduce op, Buffers and spans", T, COMM_TYPES) {
  auto& c = world();
  Stream s;
  // 40009 elements: at least 16 KiB in every type, where 3 ranks take libnbc's ring (mpi_tuning.hpp), and
  // 2 ranks too from 160 KB (4-byte types and wider; smaller ones, accel's recursive doubling).
  for (const std::size_t count : {std::size_t{1}, std::size_t{37}, std::size_t{4099}, std::size_t{40009}}) {
    for (const ReduceOp op : accel::all_reduce_ops) {
      CAPTURE(count);
      CAPTURE(accel::name(op));
      const std::vector<T> expected = reduced<T>(op, count, c.size());
      Buf<T> buf = filled<T>(count, c.rank(), op, s);
      c.all_reduce(s, buf, op);
      Buf<T> in = filled<T>(count, c.rank(), op, s);
      Buf<T> out(count, s);
      c.all_reduce(s, std::span<const T>(in.data(), in.size()), std::span<T>(out.data(), out.size()), op);
      s.synchronize();
      CHECK(bits(buf) == bits(expected));
      CHECK(bits(out) == bits(expected));
      CHECK(bits(in) == bits(contribution<T>(count, c.rank(), op)));  // the input is not written
    }
  }
}

/// Per-rank counts around accel's recursive doubling (mpi_tuning.hpp: doubling_selected, up to 8 KiB
/// per rank, 128 KiB on 2 ranks): one element; whole messages up to 3 KiB, eager-sized pieces to 8 KiB
/// (ring_pieces), the last piece of one element; whole again above 8 KiB; the largest count it
/// serves, and one more (MPI_Iallreduce).
template <class T>
std::vector<std::size_t> doubling_edge_counts(int ranks) {
  namespace d = accel::comm::detail;
  const std::size_t most = (ranks == 2 ? d::doubling_max_bytes_two_ranks : d::doubling_max_bytes) / sizeof(T);
  constexpr std::size_t piece = d::ring_piece_bytes / sizeof(T);
  std::vector<std::size_t> counts{1, 3 * 1024 / sizeof(T), 3 * 1024 / sizeof(T) + 1, 2 * piece + 1};
  if (8 * 1024 / sizeof(T) + 1 < most) counts.push_back(8 * 1024 / sizeof(T) + 1);
  counts.push_back(most);
  counts.push_back(most + 1);
  return counts;
}

TEST_CASE_TEMPLATE("all_reduce up to and just above 8 KiB (128 KiB on 2 ranks: accel's recursive doubling), every reduce op", T,
                   COMM_TYPES) {
  auto& c = world();
  Stream s;
  for (const std::size_t count : doubling_edge_counts<T>(c.size())) {
    for (const ReduceOp op : accel::all_reduce_ops) {
      CAPTURE(count);
      CAPTURE(accel::name(op));
      CAPTURE(accel::comm::detail::doubling_selected(c.size(), count * sizeof(T)));
      const std::vector<T> expected = reduced<T>(op, count, c.size());
      Buf<T> buf = filled<T>(count, c.rank(), op, s);
      c.all_reduce(s, buf, op);
      Buf<T> in = filled<T>(count, c.rank(), op, s);
      Buf<T> out(count, s);
      c.all_reduce(s, in, out, op);
      s.synchronize();
      CHECK(bits(buf) == bits(expected));
      CHECK(bits(out) == bits(expected));
      CHECK(bits(in) == bits(contribution<T>(count, c.rank(), op)));
    }
  }
}

TEST_CASE("all_reduce of values whose sum depends on the order: every rank holds the same bits") {
  auto& c = world();
  Stream s;
  // Magnitudes 2^-20 to 2^20, different on every rank: float sums round differently in every order,
  // so a rank that added in another order than its partner would differ in the last bits.
  for (const std::size_t count : {std::size_t{1}, std::size_t{100}, std::size_t{2048}, std::size_t{2049}}) {
    CAPTURE(count);
    Buf<float> v(count, s);
    for (std::size_t i = 0; i < count; ++i) {
      const int e = static_cast<int>((i * 13 + static_cast<std::size_t>(c.rank()) * 7) % 41) - 20;
      v.data()[i] = std::ldexp(1.0f + 0.1234567f * static_cast<float>(c.rank() + 1), e);
    }
    c.all_reduce(s, v);
    Buf<float> all(count * static_cast<std::size_t>(c.size()), s);
    c.all_gather(s, v, all);
    s.synchronize();
    std::size_t differ = 0;
    for (int r = 1; r < c.size(); ++r) {
      differ += bits(all.data() + count * static_cast<std::size_t>(r), count) == bits(all.data(), count) ? 0 : 1;
    }
    CHECK(differ == 0);
    double worst = 0;  // and it is the sum, to float's precision
    for (std::size_t i = 0; i < count; ++i) {
      double exact = 0;
      for (int r = 0; r < c.size(); ++r) {
        const int e = static_cast<int>((i * 13 + static_cast<std::size_t>(r) * 7) % 41) - 20;
        exact += std::ldexp(1.0 + static_cast<double>(0.1234567f * static_cast<float>(r + 1)), e);
      }
      worst = std::max(worst, std::abs(static_cast<double>(v.data()[i]) - exact) / std::abs(exact));
    }
    CHECK(worst < 1e-6);
  }
}

TEST_CASE("recursive doubling's schedule, 2 to 33 ranks: every send meets its receive, every rank ends with every input once") {
  using accel::comm::detail::doubling_step;
  for (int n = 2; n <= 33; ++n) {
    CAPTURE(n);
    // have[r]: how many times rank r's running result holds each rank's input (a sum of counts).
    std::vector<std::vector<int>> have(static_cast<std::size_t>(n), std::vector<int>(static_cast<std::size_t>(n), 0));
    for (int r = 0; r < n; ++r) have[static_cast<std::size_t>(r)][static_cast<std::size_t>(r)] = 1;
    std::vector<int> step(static_cast<std::size_t>(n), 0);
    std::vector<bool> done(static_cast<std::size_t>(n), false);
    int finished = 0, rounds = 0;
    bool matched = true;
    while (finished < n && rounds++ < 4 * 64 && matched) {
      // A rank's step completes when its send and its receive are both matched by the peers' current
      // steps (MPI could let a send complete early; requiring both is the stricter order).
      std::vector<std::vector<int>> next = have;
      std::vector<int> advance;
      for (int r = 0; r < n; ++r) {
        if (done[static_cast<std::size_t>(r)]) continue;
        const auto mine = doubling_step(n, r, step[static_cast<std::size_t>(r)]);
        const auto ready = [&](int peer, bool they_send) {
          if (peer < 0) return true;
          if (done[static_cast<std::size_t>(peer)]) return false;
          const auto theirs = doubling_step(n, peer, step[static_cast<std::size_t>(peer)]);
          return they_send ? theirs.send_to == r : theirs.recv_from == r;
        };
        if (!ready(mine.send_to, false) || !ready(mine.recv_from, true)) continue;
        advance.push_back(r);
        if (mine.recv_from >= 0) {
          const auto& got = have[static_cast<std::size_t>(mine.recv_from)];
          auto& result = next[static_cast<std::size_t>(r)];
          for (int q = 0; q < n; ++q) {
            result[static_cast<std::size_t>(q)] = (mine.reduce ? result[static_cast<std::size_t>(q)] : 0) + got[static_cast<std::size_t>(q)];
          }
        }
      }
      matched = !advance.empty();
      have = next;
      for (const int r : advance) {
        const auto mine = doubling_step(n, r, step[static_cast<std::size_t>(r)]);
        if (mine.last) {
          done[static_cast<std::size_t>(r)] = true;
          ++finished;
        } else {
          ++step[static_cast<std::size_t>(r)];
        }
      }
    }
    CHECK(matched);
    REQUIRE(finished == n);
    std::size_t wrong = 0;
    for (int r = 0; r < n; ++r) {
      for (int q = 0; q < n; ++q) wrong += have[static_cast<std::size_t>(r)][static_cast<std::size_t>(q)] == 1 ? 0 : 1;
    }
    CHECK(wrong == 0);
    int p2 = 1, log2 = 0;
    while (p2 * 2 <= n) {
      p2 *= 2;
      ++log2;
    }
    CHECK(rounds == log2 + (n == p2 ? 0 : 2));  // the latency: one exchange per doubling, two more to fold
  }
}

TEST_CASE("collectives after sends and receives that only some ranks issued: their messages still meet") {
  // Sends and receives take sequence numbers on the ranks that issue them only, so the ranks' numbers
  // differ afterwards; accel's own schedules (ring, recursive doubling) tag their messages by the
  // collectives' own numbers, which stay alike (mpi_engine.hpp: ring_tag).
  auto& w = world();
  accel::comm::MpiCommunicator c = w.split(0, w.rank());
  c.set_timeout(20s);
  Stream s;
  const auto n = static_cast<std::size_t>(c.size());
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    if (c.rank() < 2) {  // rank 0 sends rank 1 `round + 1` messages; the others do nothing
      Buf<std::int32_t> m(4, s);
      for (int k = 0; k <= round; ++k) {
        if (c.rank() == 0) {
          std::fill(m.data(), m.data() + 4, k);
          c.send(s, m, 1);
        } else {
          c.recv(s, m, 0);
        }
      }
      s.synchronize();
      CHECK(m.data()[3] == round);
    }
    Buf<float> small = filled<float>(5, c.rank(), ReduceOp::sum, s);  // recursive doubling
    c.all_reduce(s, small);
    const std::size_t count = 16 * 1024 / (n * sizeof(float));  // S = 16 KiB: the ring
    Buf<float> g_in = filled<float>(count, c.rank(), ReduceOp::sum, s);
    Buf<float> g_out(count * n, s);
    c.all_gather(s, g_in, g_out);
    Buf<float> r_in = filled<float>(count * n, c.rank(), ReduceOp::max, s);
    Buf<float> r_out(count, s);
    c.reduce_scatter(s, r_in, r_out, ReduceOp::max);
    s.synchronize();
    CHECK(bits(small) == bits(reduced<float>(ReduceOp::sum, 5, c.size())));
    for (int r = 0; r < c.size(); ++r) {
      CHECK(bits(g_out.data() + count * static_cast<std::size_t>(r), count) ==
            bits(contribution<float>(count, r, ReduceOp::sum)));
    }
    const std::vector<float> all = reduced<float>(ReduceOp::max, count * n, c.size());
    const auto me = static_cast<std::size_t>(c.rank());
    CHECK(bits(r_out) == bits(std::vector<float>(all.begin() + static_cast<std::ptrdiff_t>(count * me),
                                                 all.begin() + static_cast<std::ptrdiff_t>(count * (me + 1)))));
  }
}

TEST_CASE_TEMPLATE("reduce to every root, in place and out of place", T, COMM_TYPES) {
  auto& c = world();
  Stream s;
  const std::size_t count = 29;
  for (const ReduceOp op : accel::all_reduce_ops) {
    for (int root = 0; root < c.size(); ++root) {
      CAPTURE(accel::name(op));
      CAPTURE(root);
      const std::vector<T> expected = reduced<T>(op, count, c.size());
      Buf<T> buf = filled<T>(count, c.rank(), op, s);
      c.reduce(s, buf, root, op);
      Buf<T> in = filled<T>(count, c.rank(), op, s);
      Buf<T> out(c.rank() == root ? count : 0, s);
      c.reduce(s, in, out, root, op);
      s.synchronize();
      if (c.rank() == root) {
        CHECK(bits(buf) == bits(expected));
        CHECK(bits(out) == bits(expected));
      } else {  // another rank's buffer is only its input: not written, not even by avg's division
        CHECK(bits(buf) == bits(contribution<T>(count, c.rank(), op)));
      }
      CHECK(bits(in) == bits(contribution<T>(count, c.rank(), op)));
    }
  }
}

TEST_CASE_TEMPLATE("reduce_scatter out of place and in place (the output at the rank's block)", T, COMM_TYPES) {
  auto& c = world();
  Stream s;
  const std::size_t block = 13;
  const auto n = static_cast<std::size_t>(c.size());
  for (const ReduceOp op : accel::all_reduce_ops) {
    CAPTURE(accel::name(op));
    const std::vector<T> all = reduced<T>(op, block * n, c.size());
    const std::vector<T> mine(all.begin() + static_cast<std::ptrdiff_t>(block * static_cast<std::size_t>(c.rank())),
                              all.begin() + static_cast<std::ptrdiff_t>(block * static_cast<std::size_t>(c.rank() + 1)));
    Buf<T> in = filled<T>(block * n, c.rank(), op, s);
    Buf<T> out(block, s);
    c.reduce_scatter(s, in, out, op);
    Buf<T> inplace = filled<T>(block * n, c.rank(), op, s);
    T* my_block = inplace.data() + block * static_cast<std::size_t>(c.rank());
    c.reduce_scatter(s, inplace.data(), my_block, block, accel::dtype_of<T>, op);
    s.synchronize();
    CHECK(bits(out) == bits(mine));
    CHECK(bits(std::vector<T>(my_block, my_block + block)) == bits(mine));
  }
}

TEST_CASE_TEMPLATE("broadcast from every root, in place and out of place", T, COMM_TYPES) {
  auto& c = world();
  Stream s;
  const std::size_t count = 41;
  for (int root = 0; root < c.size(); ++root) {
    CAPTURE(root);
    const std::vector<T> expected = contribution<T>(count, root, ReduceOp::sum);
    Buf<T> buf = filled<T>(count, c.rank(), ReduceOp::sum, s);
    c.broadcast(s, buf, root);
    Buf<T> in = filled<T>(count, c.rank(), ReduceOp::sum, s);
    Buf<T> out(count, s);
    c.broadcast(s, in, out, root);
    s.synchronize();
    CHECK(bits(buf) == bits(expected));
    CHECK(bits(out) == bits(expected));
  }
}

TEST_CASE_TEMPLATE("all_gather into one buffer, out of place and in place", T, COMM_TYPES) {
  auto& c = world();
  Stream s;
  const std::size_t count = 17;
  const auto n = static_cast<std::size_t>(c.size());
  std::vector<T> expected;
  for (int r = 0; r < c.size(); ++r) {
    const std::vector<T> part = contribution<T>(count, r, ReduceOp::sum);
    expected.insert(expected.end(), part.begin(), part.end());
  }
  Buf<T> in = filled<T>(count, c.rank(), ReduceOp::sum, s);
  Buf<T> out(count * n, s);
  c.all_gather(s, in, out);
  Buf<T> inplace(count * n, s);
  const std::vector<T> mine = contribution<T>(count, c.rank(), ReduceOp::sum);
  T* my_block = inplace.data() + count * static_cast<std::size_t>(c.rank());
  std::copy(mine.begin(), mine.end(), my_block);
  c.all_gather(s, my_block, inplace.data(), count, accel::dtype_of<T>);
  s.synchronize();
  CHECK(bits(out) == bits(expected));
  CHECK(bits(inplace) == bits(expected));
}

/// Per-rank counts for accel's ring (mpi_tuning.hpp: ring_selected, S = count x ranks x sizeof(T)): one
/// element; around 8 KiB, where a step's block is sent as eager pieces (ring_pieces) or whole; blocks of
/// three pieces (the last of one element) and four, and one element more; for float and bfloat16 also
/// at and just above 512 KiB, where reduce_scatter's ring stopped before it served every size (the
/// reductions do not depend on the size: the big cases stay few, for the sanitizer runs).
template <class T>
std::vector<std::size_t> ring_edge_counts(int ranks) {
  const std::size_t per = static_cast<std::size_t>(ranks) * sizeof(T);
  const std::size_t lo = (8 * 1024 + per - 1) / per, hi = 512 * 1024 / per;
  std::vector<std::size_t> counts{1, lo - 1, lo, (3 * lo) | 1};
  constexpr std::size_t piece = accel::comm::detail::ring_piece_bytes / sizeof(T);
  for (const std::size_t c : {2 * piece + 1, 4 * piece, 4 * piece + 1}) {
    if (accel::comm::detail::ring_selected(ranks, c * per)) counts.push_back(c);
  }
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, accel::bfloat16>) {
    counts.push_back(hi);
    counts.push_back(hi + 1);
  }
  return counts;
}

TEST_CASE_TEMPLATE("all_gather and reduce_scatter from one element to just above 512 KiB (accel's ring), in and out of place",
                   T, COMM_TYPES) {
  auto& c = world();
  Stream s;
  const auto n = static_cast<std::size_t>(c.size());
  const auto me = static_cast<std::size_t>(c.rank());
  for (const std::size_t count : ring_edge_counts<T>(c.size())) {
    CAPTURE(count);
    const std::size_t bytes = count * n * sizeof(T);
    const bool ring = accel::comm::detail::ring_selected(c.size(), bytes);
    CAPTURE(bytes);
    CAPTURE(ring);
    // all_gather: every rank's contribution, in rank order.
    std::vector<T> gathered;
    for (int r = 0; r < c.size(); ++r) {
      const std::vector<T> part = contribution<T>(count, r, ReduceOp::sum);
      gathered.insert(gathered.end(), part.begin(), part.end());
    }
    Buf<T> in = filled<T>(count, c.rank(), ReduceOp::sum, s);
    Buf<T> out(count * n, s);
    c.all_gather(s, in, out);
    Buf<T> inplace(count * n, s);
    std::copy(in.data(), in.data() + count, inplace.data() + count * me);
    c.all_gather(s, inplace.data() + count * me, inplace.data(), count, accel::dtype_of<T>);
    s.synchronize();
    CHECK(bits(out) == bits(gathered));
    CHECK(bits(inplace) == bits(gathered));
    // reduce_scatter: this rank's block of the reduction, for every reduce op.
    for (const ReduceOp op : accel::all_reduce_ops) {
      CAPTURE(accel::name(op));
      const std::vector<T> all = reduced<T>(op, count * n, c.size());
      const std::vector<T> mine(all.begin() + static_cast<std::ptrdiff_t>(count * me),
                                all.begin() + static_cast<std::ptrdiff_t>(count * (me + 1)));
      Buf<T> rs_in = filled<T>(count * n, c.rank(), op, s);
      Buf<T> rs_out(count, s);
      c.reduce_scatter(s, rs_in, rs_out, op);
      Buf<T> rs_inplace = filled<T>(count * n, c.rank(), op, s);
      T* my_block = rs_inplace.data() + count * me;
      c.reduce_scatter(s, rs_inplace.data(), my_block, count, accel::dtype_of<T>, op);
      s.synchronize();
      CHECK(bits(rs_out) == bits(mine));
      CHECK(bits(std::vector<T>(my_block, my_block + count)) == bits(mine));
      // The input is read, never written (out of place).
      CHECK(bits(rs_in) == bits(contribution<T>(count * n, c.rank(), op)));
    }
  }
}

TEST_CASE("all_gather at and above 32 MiB (accel's ring at every size), in and out of place: every rank's block") {
  auto& c = world();
  Stream s;
  const auto n = static_cast<std::size_t>(c.size());
  const auto me = static_cast<std::size_t>(c.rank());
  const std::size_t edge = 32 * 1024 * 1024 / (n * sizeof(std::int32_t));  // where the ring once stopped
  for (const std::size_t count : {edge, edge + 1, 40 * 1024 * 1024 / (n * sizeof(std::int32_t))}) {
    CAPTURE(count);
    CAPTURE(accel::comm::detail::ring_selected(c.size(), count * n * sizeof(std::int32_t)));
    const auto value = [](std::size_t rank, std::size_t i) { return static_cast<std::int32_t>(rank << 28 | i); };
    Buf<std::int32_t> in(count, s);
    for (std::size_t i = 0; i < count; ++i) in.data()[i] = value(me, i);
    Buf<std::int32_t> out(count * n, s), inplace(count * n, s);
    std::fill(inplace.data(), inplace.data() + count * n, -1);
    std::copy(in.data(), in.data() + count, inplace.data() + count * me);
    c.all_gather(s, in, out);
    c.all_gather(s, inplace.data() + count * me, inplace.data(), count, accel::Dtype::int32);
    s.synchronize();
    std::size_t wrong = 0, wrong_in_place = 0;
    for (std::size_t r = 0; r < n; ++r) {
      for (std::size_t i = 0; i < count; ++i) {
        wrong += out.data()[r * count + i] != value(r, i) ? 1 : 0;
        wrong_in_place += inplace.data()[r * count + i] != value(r, i) ? 1 : 0;
      }
    }
    CHECK(wrong == 0);
    CHECK(wrong_in_place == 0);
  }
}

TEST_CASE("ring-sized all_gather and reduce_scatter inside one group, beside an MPI collective: each gets its own data") {
  auto& c = world();
  Stream s;
  const auto n = static_cast<std::size_t>(c.size());
  const auto me = static_cast<std::size_t>(c.rank());
  const std::size_t count = 40 * 1024 / (n * sizeof(float)) + 1;  // S ~ 40 KiB: the ring
  Buf<float> g_in = filled<float>(count, c.rank(), ReduceOp::sum, s);
  Buf<float> g_out(count * n, s);
  Buf<float> g2_in = filled<float>(count, c.rank() + 1, ReduceOp::sum, s);
  Buf<float> g2_out(count * n, s);
  Buf<float> r_in = filled<float>(count * n, c.rank(), ReduceOp::max, s);
  Buf<float> r_out(count, s);
  Buf<float> small = filled<float>(5, c.rank(), ReduceOp::sum, s);  // MPI's own all_reduce
  {
    auto group = c.group();
    c.all_gather(s, g_in, g_out);
    c.reduce_scatter(s, r_in, r_out, ReduceOp::max);
    c.all_reduce(s, small);
    c.all_gather(s, g2_in, g2_out);
    group.end();
  }
  s.synchronize();
  for (int r = 0; r < c.size(); ++r) {
    CAPTURE(r);
    const std::vector<float> a = contribution<float>(count, r, ReduceOp::sum);
    const std::vector<float> b = contribution<float>(count, r + 1, ReduceOp::sum);
    CHECK(bits(g_out.data() + count * static_cast<std::size_t>(r), count) == bits(a));
    CHECK(bits(g2_out.data() + count * static_cast<std::size_t>(r), count) == bits(b));
  }
  const std::vector<float> all = reduced<float>(ReduceOp::max, count * n, c.size());
  CHECK(bits(r_out) == bits(std::vector<float>(all.begin() + static_cast<std::ptrdiff_t>(count * me),
                                               all.begin() + static_cast<std::ptrdiff_t>(count * (me + 1)))));
  CHECK(bits(small) == bits(reduced<float>(ReduceOp::sum, 5, c.size())));
}

TEST_CASE_TEMPLATE("all_to_all: block j goes to rank j", T, COMM_TYPES) {
  auto& c = world();
  Stream s;
  const std::size_t block = 7;
  const auto n = static_cast<std::size_t>(c.size());
  // Element i of block j on rank r is r * 100 + j * 10 + i % 10 (small enough for every type).
  const auto value = [](int r, std::size_t j, std::size_t i) {
    return static_cast<int>((static_cast<std::size_t>(r) * 30 + j * 10 + i % 10) % 100);
  };
  Buf<T> in(block * n, s), out(block * n, s);
  std::vector<T> expected(block * n);
  for (std::size_t j = 0; j < n; ++j) {
    for (std::size_t i = 0; i < block; ++i) {
      in.data()[j * block + i] = from_int<T>(value(c.rank(), j, i));
      expected[j * block + i] = from_int<T>(value(static_cast<int>(j), static_cast<std::size_t>(c.rank()), i));
    }
  }
  c.all_to_all(s, in, out);
  s.synchronize();
  CHECK(bits(out) == bits(expected));
}

TEST_CASE_TEMPLATE("gather and scatter with every root, and their in-place forms", T, COMM_TYPES) {
  auto& c = world();
  Stream s;
  const std::size_t count = 11;
  const auto n = static_cast<std::size_t>(c.size());
  std::vector<T> everyone;
  for (int r = 0; r < c.size(); ++r) {
    const std::vector<T> part = contribution<T>(count, r, ReduceOp::sum);
    everyone.insert(everyone.end(), part.begin(), part.end());
  }
  for (int root = 0; root < c.size(); ++root) {
    CAPTURE(root);
    const bool is_root = c.rank() == root;
    Buf<T> in = filled<T>(count, c.rank(), ReduceOp::sum, s);
    Buf<T> gathered(is_root ? count * n : 0, s);
    c.gather(s, in, gathered, root);
    // Scatter root's `everyone` back: rank r gets block r.
    Buf<T> source(is_root ? count * n : 0, s);
    if (is_root) std::copy(everyone.begin(), everyone.end(), source.data());
    Buf<T> part(count, s);
    c.scatter(s, source, part, root);
    // In place at the root: its own block stays where it is.
    Buf<T> g2(count * n, s);
    T* own = g2.data() + count * static_cast<std::size_t>(c.rank());
    const std::vector<T> mine = contribution<T>(count, c.rank(), ReduceOp::sum);
    std::copy(mine.begin(), mine.end(), own);
    c.gather(s, own, g2.data(), count, accel::dtype_of<T>, root);
    // Scatter in place at the root: its output is its own block of the input, which stays where it is;
    // the other ranks pass no input.
    Buf<T> s2(count * n, s), part2(count, s);
    if (is_root) std::copy(everyone.begin(), everyone.end(), s2.data());
    std::fill(part2.data(), part2.data() + count, from_int<T>(0));  // no contribution is 0
    c.scatter(s, is_root ? s2.data() : nullptr, is_root ? s2.data() + count * static_cast<std::size_t>(c.rank()) : part2.data(),
              count, accel::dtype_of<T>, root);
    s.synchronize();
    CHECK(bits(part) == bits(contribution<T>(count, c.rank(), ReduceOp::sum)));
    if (is_root) {
      CHECK(bits(gathered) == bits(everyone));
      CHECK(bits(g2) == bits(everyone));
      CHECK(bits(s2) == bits(everyone));
    } else {
      CHECK(bits(part2) == bits(contribution<T>(count, c.rank(), ReduceOp::sum)));
    }
  }
}

TEST_CASE_TEMPLATE("send and recv: pairs in order, and a ring inside a group", T, COMM_TYPES) {
  auto& c = world();
  Stream s;
  const std::size_t count = 23;
  // Pairs (0, 1): 0 sends then receives, 1 receives then sends.
  if (c.rank() < 2) {
    const int peer = 1 - c.rank();
    Buf<T> mine = filled<T>(count, c.rank(), ReduceOp::sum, s);
    Buf<T> theirs(count, s);
    if (c.rank() == 0) {
      c.send(s, mine, peer);
      c.recv(s, theirs, peer);
    } else {
      c.recv(s, theirs, peer);
      c.send(s, mine, peer);
    }
    s.synchronize();
    CHECK(bits(theirs) == bits(contribution<T>(count, peer, ReduceOp::sum)));
  }
  // A ring: everyone sends to the next rank and receives from the previous one, in one group.
  const int next = (c.rank() + 1) % c.size(), prev = (c.rank() + c.size() - 1) % c.size();
  Buf<T> out = filled<T>(count, c.rank(), ReduceOp::sum, s);
  Buf<T> in(count, s);
  {
    auto group = c.group();
    c.send(s, out, next);
    c.recv(s, in, prev);
    group.end();
  }
  s.synchronize();
  CHECK(bits(in) == bits(contribution<T>(count, prev, ReduceOp::sum)));
}

TEST_CASE("barrier orders the ranks: what a rank wrote before it is seen after it") {
  auto& c = world();
  Stream s;
  // Each rank writes its file, the barrier, then each reads everyone's (shared memory through files).
  const std::string dir = shared_tmp_dir(c, s);
  write_file(dir + "/rank" + std::to_string(c.rank()), std::to_string(c.rank() * 7));
  c.barrier(s);
  s.synchronize();
  for (int r = 0; r < c.size(); ++r) CHECK(read_file(dir + "/rank" + std::to_string(r)) == std::to_string(r * 7));
  c.barrier(s);
  s.synchronize();
  if (c.rank() == 0) std::filesystem::remove_all(dir);  // every rank has read every file
}

TEST_CASE("reduce_scatter of 40 MiB (accel's ring at every size), in and out of place: this rank's block of the sum") {
  auto& c = world();
  Stream s;
  const auto n = static_cast<std::size_t>(c.size());
  const auto me = static_cast<std::size_t>(c.rank());
  const std::size_t count = 40 * 1024 * 1024 / (n * sizeof(std::int32_t));  // per-rank block
  CAPTURE(accel::comm::detail::ring_selected(c.size(), count * n * sizeof(std::int32_t)));
  // Rank r's element i: exact in int32, and so are sums over 3 ranks.
  const auto value = [](std::size_t rank, std::size_t i) { return static_cast<std::int32_t>(rank << 26 | (i % 999983)); };
  Buf<std::int32_t> in(count * n, s), inplace(count * n, s);
  for (std::size_t i = 0; i < count * n; ++i) in.data()[i] = inplace.data()[i] = value(me, i);
  Buf<std::int32_t> out(count, s);
  c.reduce_scatter(s, in, out, ReduceOp::sum);
  std::int32_t* my_block = inplace.data() + count * me;
  c.reduce_scatter(s, inplace.data(), my_block, count, accel::Dtype::int32, ReduceOp::sum);
  s.synchronize();
  std::size_t wrong = 0, wrong_in_place = 0, input_changed = 0;
  for (std::size_t j = 0; j < count; ++j) {
    std::int32_t sum = 0;
    for (std::size_t r = 0; r < n; ++r) sum += value(r, count * me + j);
    wrong += out.data()[j] != sum ? 1 : 0;
    wrong_in_place += my_block[j] != sum ? 1 : 0;
  }
  for (std::size_t i = 0; i < count * n; ++i) input_changed += in.data()[i] != value(me, i) ? 1 : 0;
  CHECK(wrong == 0);
  CHECK(wrong_in_place == 0);
  CHECK(input_changed == 0);
}

TEST_CASE("in-place reduce_scatter again and again, growing and shrinking, on two streams at once: each call its own sum") {
  // Every call needs the ring's scratch (in place: the output is part of the input); the communicator
  // keeps the largest block for the next call, which a smaller call reuses and a larger one replaces,
  // while a call on another stream in flight at the same time takes one of its own.
  auto& c = world();
  Stream s1, s2;
  const auto n = static_cast<std::size_t>(c.size());
  const auto me = static_cast<std::size_t>(c.rank());
  const auto value = [](std::size_t call, std::size_t rank, std::size_t i) {
    return static_cast<std::int32_t>((call << 24) + (rank << 20) + (i % 65521));
  };
  const std::size_t counts[] = {256 * 1024, 4096, 1024 * 1024, 3, 256 * 1024, 1024 * 1024 + 7};
  std::size_t call = 0;
  for (const std::size_t count : counts) {
    Buf<std::int32_t> a(count * n, s1), b(count * n, s2);
    for (std::size_t i = 0; i < count * n; ++i) {
      a.data()[i] = value(call, me, i);
      b.data()[i] = value(call + 1, me, i);
    }
    c.reduce_scatter(s1, a.data(), a.data() + count * me, count, accel::Dtype::int32, ReduceOp::sum);
    c.reduce_scatter(s2, b.data(), b.data() + count * me, count, accel::Dtype::int32, ReduceOp::sum);
    s1.synchronize();
    s2.synchronize();
    std::size_t wrong_a = 0, wrong_b = 0;
    for (std::size_t j = 0; j < count; ++j) {
      std::int32_t sum_a = 0, sum_b = 0;
      for (std::size_t r = 0; r < n; ++r) {
        sum_a += value(call, r, count * me + j);
        sum_b += value(call + 1, r, count * me + j);
      }
      wrong_a += a.data()[count * me + j] != sum_a ? 1 : 0;
      wrong_b += b.data()[count * me + j] != sum_b ? 1 : 0;
    }
    CAPTURE(count);
    CHECK(wrong_a == 0);
    CHECK(wrong_b == 0);
    call += 2;
  }
}

TEST_CASE("accel's own ring serves all_gather and reduce_scatter at every size on 2 ranks or more") {
  using accel::comm::detail::ring_selected;
  const bool on = std::getenv("ACCEL_COMM_MPI_TUNING") == nullptr || std::string(std::getenv("ACCEL_COMM_MPI_TUNING")) != "0";
  // all_reduce: recursive doubling up to 8 KiB per rank.
  using accel::comm::detail::doubling_selected;
  CHECK(doubling_selected(2, 4) == on);
  CHECK(doubling_selected(3, 8 * 1024) == on);
  CHECK(doubling_selected(5, 1) == on);
  CHECK(doubling_selected(2, 128 * 1024) == on);
  CHECK_FALSE(doubling_selected(2, 128 * 1024 + 1));
  CHECK_FALSE(doubling_selected(3, 8 * 1024 + 1));
  CHECK_FALSE(doubling_selected(4, 8 * 1024 + 1));
  CHECK_FALSE(doubling_selected(2, 0));
  CHECK_FALSE(doubling_selected(1, 64));
  CHECK(ring_selected(2, 8 * 1024) == on);
  CHECK(ring_selected(3, 512 * 1024) == on);
  CHECK(ring_selected(2, 4) == on);
  CHECK(ring_selected(2, 512 * 1024 + 1) == on);
  CHECK(ring_selected(4, std::size_t{1} << 40) == on);
  CHECK_FALSE(ring_selected(2, 0));
  CHECK_FALSE(ring_selected(1, 64 * 1024));
  CHECK(ring_selected(2, 32 * 1024 * 1024 + 1) == on);
  CHECK(ring_selected(3, std::size_t{256} << 20) == on);
  // A step's block: whole up to 3 KiB and above 8 KiB, else pieces of 2 KiB (eager-sized).
  using accel::comm::detail::ring_pieces;
  CHECK(ring_pieces(3 * 1024) == 1);
  CHECK(ring_pieces(3 * 1024 + 4) == 2);
  CHECK(ring_pieces(4 * 1024) == 2);
  CHECK(ring_pieces(4 * 1024 + 2) == 3);
  CHECK(ring_pieces(8 * 1024) == 4);
  CHECK(ring_pieces(8 * 1024 + 4) == 1);
}

TEST_CASE("the ring's tags: from 0x4ad0 (above the engine's fixed tags) up to MPI_TAG_UB, cycling with the sequence number") {
  using namespace accel::comm::detail;
  int* tag_ub = nullptr;
  int found = 0;
  REQUIRE(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found) == MPI_SUCCESS);
  REQUIRE(found != 0);
  CHECK(*tag_ub >= 32767);  // the standard's least
  MPI_Comm comm = MPI_COMM_NULL, monitor = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);  // collective: every rank runs this case
  MPI_Comm_dup(MPI_COMM_WORLD, &monitor);
  const MpiState st(comm, monitor, "tags", 0);  // frees both
  CHECK(st.ring_tags == static_cast<std::uint64_t>(*tag_ub) - 0x4ad0 + 1);
  CHECK(ring_tag_base > abort_ack_tag);
  CHECK(ring_tag_base > p2p_tag);
  CHECK(ring_tag(st, 0) == 0x4ad0);
  CHECK(ring_tag(st, 1) == 0x4ad1);
  CHECK(ring_tag(st, st.ring_tags - 1) == *tag_ub);  // the last usable tag
  CHECK(ring_tag(st, st.ring_tags) == 0x4ad0);        // then round again
  CHECK(ring_tag(st, 3 * st.ring_tags + 5) == 0x4ad5);
}

TEST_CASE("Open MPI: accel may select libnbc's ring for 2 or 3 ranks (mpi_tuning.hpp); elsewhere it does not") {
  const std::string version = B{}.communication_backend_version();
  const bool open_mpi = version.rfind("Open MPI", 0) == 0;
  const char* tuning = std::getenv("ACCEL_COMM_MPI_TUNING");
  const bool allowed = tuning == nullptr || std::string(tuning) != "0";
  CHECK(accel::comm::detail::iallreduce_tuning().usable() == (open_mpi && allowed));
  CHECK(accel::comm::detail::IallreduceTuning::min_bytes == 16 * 1024);
}

TEST_CASE("raw forms of broadcast, reduce, scatter, all_to_all, send and recv give exact values") {
  auto& c = world();
  Stream s;
  using I = std::int32_t;
  const int n = c.size(), r = c.rank(), root = n - 1;
  const auto nz = static_cast<std::size_t>(n), rz = static_cast<std::size_t>(r);
  const std::size_t count = 6;
  // Element i of rank q's block j: q * 1000 + j * 10 + i.
  const auto value = [](int q, std::size_t j, std::size_t i) { return static_cast<I>(q * 1000 + j * 10 + i); };
  const auto fill = [&](Buf<I>& b, const auto& f) {
    for (std::size_t k = 0; k < b.size(); ++k) b.data()[k] = f(k);
  };
  Buf<I> b_in(count, s), b_out(count, s), r_in(count, s), r_out(count, s), s_in(count * nz, s), s_out(count, s),
      a_in(count * nz, s), a_out(count * nz, s), p2p(count, s);
  fill(b_in, [&](std::size_t i) { return value(r, 0, i); });
  fill(r_in, [&](std::size_t i) { return value(r, 0, i); });
  fill(s_in, [&](std::size_t k) { return value(r, k / count, k % count); });
  fill(a_in, [&](std::size_t k) { return value(r, k / count, k % count); });
  fill(p2p, [&](std::size_t i) { return r == 0 ? value(0, 7, i) : I{-1}; });
  for (Buf<I>* b : {&b_out, &r_out, &s_out, &a_out}) fill(*b, [](std::size_t) { return I{-1}; });
  // Off the root, broadcast and scatter take no input and reduce no output.
  c.broadcast(s, r == root ? b_in.data() : nullptr, b_out.data(), count, accel::Dtype::int32, root);
  c.reduce(s, r_in.data(), r == root ? r_out.data() : nullptr, count, accel::Dtype::int32, ReduceOp::sum, root);
  c.scatter(s, r == root ? s_in.data() : nullptr, s_out.data(), count, accel::Dtype::int32, root);
  c.all_to_all(s, a_in.data(), a_out.data(), count, accel::Dtype::int32);
  if (r == 0) c.send(s, p2p.data(), count, accel::Dtype::int32, 1);
  if (r == 1) c.recv(s, p2p.data(), count, accel::Dtype::int32, 0);
  s.synchronize();
  I sum_of_ranks = 0;
  for (int q = 0; q < n; ++q) sum_of_ranks += q;
  std::vector<I> broadcast, reduced, scattered, exchanged, received;
  for (std::size_t i = 0; i < count; ++i) {
    broadcast.push_back(value(root, 0, i));
    reduced.push_back(sum_of_ranks * 1000 + n * static_cast<I>(i));
    scattered.push_back(value(root, rz, i));
    received.push_back(r <= 1 ? value(0, 7, i) : I{-1});
  }
  for (std::size_t k = 0; k < count * nz; ++k) exchanged.push_back(value(static_cast<int>(k / count), rz, k % count));
  CHECK(std::vector<I>(b_out.data(), b_out.data() + count) == broadcast);
  CHECK(std::vector<I>(r_out.data(), r_out.data() + count) == (r == root ? reduced : std::vector<I>(count, -1)));
  CHECK(std::vector<I>(s_out.data(), s_out.data() + count) == scattered);
  CHECK(std::vector<I>(a_out.data(), a_out.data() + count * nz) == exchanged);
  CHECK(std::vector<I>(p2p.data(), p2p.data() + count) == received);
}

TEST_CASE("MpiCommunicator::from_native copies a program's communicator; native_handle is MPI's; is_initialized") {
  CHECK(accel::comm::is_initialized());
  auto& w = world();
  int congruent = -1;
  MPI_Comm_compare(w.native_handle(), MPI_COMM_WORLD, &congruent);
  CHECK(congruent == MPI_CONGRUENT);  // a copy of MPI_COMM_WORLD, not the same handle
  CHECK(accel::comm::MpiCommunicator().native_handle() == MPI_COMM_NULL);
  accel::comm::MpiCommunicator mine = accel::comm::MpiCommunicator::from_native(MPI_COMM_WORLD, "the program's");
  CHECK(mine.name() == "the program's");
  CHECK(mine.size() == w.size());
  CHECK(mine.rank() == w.rank());
  CHECK(mine.native_handle() != w.native_handle());
  MPI_Comm_compare(mine.native_handle(), MPI_COMM_WORLD, &congruent);
  CHECK(congruent == MPI_CONGRUENT);
  Stream s;
  Buf<std::int64_t> x(2, s);
  x.data()[0] = w.rank() + 1;
  x.data()[1] = 10;
  mine.all_reduce(s, x);
  s.synchronize();
  CHECK(x.data()[0] == static_cast<std::int64_t>(w.size()) * (w.size() + 1) / 2);
  CHECK(x.data()[1] == 10 * static_cast<std::int64_t>(w.size()));

  // accel reports MPI's errors as CommErrors, so its copy returns them, even of a communicator whose
  // errors are fatal (MPI's default, which a copy would otherwise inherit).
  MPI_Comm fatal = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &fatal);
  MPI_Comm_set_errhandler(fatal, MPI_ERRORS_ARE_FATAL);
  {
    const accel::comm::MpiCommunicator copy = accel::comm::MpiCommunicator::from_native(fatal, "fatal");
    MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
    MPI_Comm_get_errhandler(copy.native_handle(), &handler);
    CHECK(handler == MPI_ERRORS_RETURN);
    MPI_Errhandler_free(&handler);
  }
  MPI_Comm_free(&fatal);
}
