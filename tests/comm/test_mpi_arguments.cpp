// accel/comm over MPI: bad arguments are refused at the call (nothing enqueued, the communicator
// stays usable), and what one rank cannot see — another rank's different count — is a CommError.
#include "comm_test_support.hpp"
#include "support/sanitizer_build.hpp"

#include <doctest/doctest.h>

#include <sys/resource.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

using namespace comm_test;

TEST_CASE("a root or peer out of range is an InvalidArgumentError naming it") {
  auto& c = world();
  Stream s;
  Buf<float> buf(4, s), out(4 * static_cast<std::size_t>(c.size()), s);
  const int bad = c.size() + 3;
  CHECK_THROWS_WITH_AS(c.broadcast(s, buf, bad), doctest::Contains(("root " + std::to_string(bad) + " is out of range").c_str()),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(c.reduce(s, buf, -1), doctest::Contains("root -1 is out of range"), accel::InvalidArgumentError);
  const std::string range = " is out of range: the communicator has " + std::to_string(c.size()) + " rank(s), 0 to " +
                            std::to_string(c.size() - 1);
  CHECK_THROWS_WITH_AS(c.gather(s, buf, out, bad),
                       doctest::Contains(("accel::comm::gather (mpi, world, rank " + std::to_string(c.rank()) + " of " +
                                          std::to_string(c.size()) + "): root " + std::to_string(bad) + range).c_str()),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(c.scatter(s, out, buf, bad), doctest::Contains(("root " + std::to_string(bad) + range).c_str()),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(c.send(s, buf, bad), doctest::Contains(("peer " + std::to_string(bad) + range).c_str()),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(c.recv(s, buf, -2), doctest::Contains(("accel::comm::recv (mpi, world, rank " + std::to_string(c.rank()) +
                                                              " of " + std::to_string(c.size()) + "): peer -2" + range).c_str()),
                       accel::InvalidArgumentError);
  // Nothing was enqueued: the communicator and the stream are fine.
  for (std::size_t i = 0; i < 4; ++i) buf.data()[i] = 2;
  c.all_reduce(s, buf);
  s.synchronize();
  CHECK(buf.data()[0] == 2.0f * static_cast<float>(c.size()));
}

TEST_CASE("mismatched sizes are refused, saying what was expected") {
  auto& c = world();
  Stream s;
  const auto n = static_cast<std::size_t>(c.size());
  Buf<float> in(6, s), small(6 * n - 1, s), out(5, s);
  CHECK_THROWS_WITH_AS(c.all_gather(s, in, small),
                       doctest::Contains(("out holds " + std::to_string(6 * n - 1) + " elements but must hold in's 6 "
                                          "elements x " + std::to_string(n) + " ranks").c_str()),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(c.reduce_scatter(s, small, in),
                       doctest::Contains(("mismatched sizes: in holds " + std::to_string(6 * n - 1) + " elements but must "
                                          "hold out's 6 elements x " + std::to_string(n) + " ranks = " +
                                          std::to_string(6 * n)).c_str()),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(c.all_reduce(s, in, out), doctest::Contains("mismatched sizes: out holds 5 elements and in 6"),
                       accel::InvalidArgumentError);
  Buf<float> odd(n * 2 + 1, s), odd_out(n * 2 + 1, s);
  CHECK_THROWS_WITH_AS(c.all_to_all(s, odd, odd_out), doctest::Contains("not a multiple"), accel::InvalidArgumentError);
}

TEST_CASE("a buffer of another device than the stream's is refused") {
  if (B::device_count() < 2) {
    MESSAGE("skipped: needs ACCEL_CPU_DEVICE_COUNT=2 (the CTest entries set it)");
    return;
  }
  auto& c = world();
  Stream s0(0), s1(1);
  Buf<float> on1(8, s1), on0(8, s0);
  CHECK_THROWS_WITH_AS(c.all_reduce(s0, on1), doctest::Contains("memory of device 1, but the stream is on device 0"),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(c.all_reduce(s0, on0, on1), doctest::Contains("out is memory of device 1"),
                       accel::InvalidArgumentError);
}

TEST_CASE("raw forms: a dtype no engine carries, null memory, overlap other than in place") {
  auto& c = world();
  Stream s;
  Buf<std::uint8_t> buf(64, s);
  CHECK_THROWS_WITH_AS(c.all_reduce(s, buf.data(), buf.data(), 8, accel::Dtype::boolean, ReduceOp::sum),
                       doctest::Contains("dtype bool is not carried"), accel::NotSupportedError);
  CHECK_THROWS_WITH_AS(c.broadcast(s, buf.data(), buf.data(), 8, accel::Dtype::float8_e4m3, 0),
                       doctest::Contains("dtype float8_e4m3fn is not carried by accel/comm"), accel::NotSupportedError);
  CHECK_THROWS_WITH_AS(c.all_reduce(s, nullptr, buf.data(), 4, accel::Dtype::float32, ReduceOp::sum),
                       doctest::Contains("the input is a null pointer with 4 elements"), accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(c.all_reduce(s, buf.data(), buf.data() + 4, 4, accel::Dtype::float32, ReduceOp::sum),
                       doctest::Contains("overlap"), accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(c.all_to_all(s, buf.data(), buf.data(), 1, accel::Dtype::float32),
                       doctest::Contains("all_to_all has no in-place form"), accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(c.all_reduce(s, buf.data(), buf.data(), 1, accel::Dtype::float32, static_cast<ReduceOp>(9)),
                       doctest::Contains("reduce op 9 is not a ReduceOp"), accel::InvalidArgumentError);
}

TEST_CASE("a recv of another count than the send is a CommError; the communicator then refuses work") {
  auto& w = world();
  accel::comm::MpiCommunicator c = w.split(0, w.rank());
  Stream s;
  if (c.rank() == 0) {
    Buf<std::int32_t> five(5, s);
    for (std::size_t i = 0; i < 5; ++i) five.data()[i] = 9;
    c.send(s, five, 1);
    s.synchronize();
  } else if (c.rank() == 1) {
    Buf<std::int32_t> eight(8, s);
    try {
      c.recv(s, eight, 0);
      FAIL("the recv of 8 elements completed with 5 sent");
    } catch (const accel::comm::CommError& e) {
      const std::string what = e.what();
      CHECK(what.find("recv #1") != std::string::npos);
      CHECK(what.find("received 5 element(s) from rank 0, but expected 8") != std::string::npos);
      CHECK(e.info().rank == 1);
      CHECK(e.info().peer == 0);
      CHECK(e.info().seq == 1);
      CHECK(e.info().dtype == accel::Dtype::int32);
      CHECK_FALSE(e.timed_out());
    }
    CHECK(c.failed());
    // Refused at the call, before it took a number: the message gives it none (not a fake "#0").
    CHECK_THROWS_WITH_AS(c.barrier(s),
                         doctest::Contains(("rank 1 of " + std::to_string(c.size()) + "): barrier refused (not numbered): "
                                            "this communicator failed at operation #1 and cannot be used again").c_str()),
                         accel::comm::CommError);
  }
  w.barrier(s);  // world is still fine
  s.synchronize();
}

TEST_CASE("ranks passing different counts to accel's ring and recursive doubling: a CommError on each rank") {
  auto& w = world();
  Stream s;
  const std::size_t small = 4, large = 8;  // float32: one message per step
  if (!accel::comm::detail::doubling_selected(2, large * sizeof(float)) ||
      !accel::comm::detail::ring_selected(2, 2 * large * sizeof(float))) {
    // ACCEL_COMM_MPI_TUNING=0: MPI's own collectives, whose behaviour on mismatched counts is undefined.
    MESSAGE("skipped: accel's schedules are off (ACCEL_COMM_MPI_TUNING=0)");
    return;
  }
  // Ranks 0 and the last, alone: the schedules' only step is one exchange, so each rank sees the other's
  // message — the smaller count a truncation, the larger a short message (which MPI completes silently).
  const std::vector<int> members{0, w.size() - 1};
  for (const char* kind : {"all_reduce", "all_gather"}) {
    CAPTURE(kind);
    accel::comm::MpiCommunicator pair = w.new_group(members);
    if (pair.valid()) {
      const bool first = pair.rank() == 0;
      const std::size_t count = first ? small : large;
      Buf<float> in(large, s), out(2 * large, s);
      for (std::size_t i = 0; i < large; ++i) in.data()[i] = 1;
      const std::string schedule = std::string(kind) == "all_reduce" ? "recursive doubling" : "ring";
      const std::string expected =
          std::string(kind) + " #1 (" + std::to_string(count) + " x float32" +
          (std::string(kind) == "all_reduce" ? ", sum" : "") + ") failed: the ranks' counts differ: in step 0 of " +
          schedule + ", the message from " +
          (first ? (w.size() == 2 ? std::string("rank 1") : "rank 1 (world rank " + std::to_string(w.size() - 1) + ")")
                 : std::string("rank 0")) +
          " was " +
          (first ? "truncated: longer than the 4 element(s) this rank expected (MPI_ERR_TRUNCATE)"
                 : "short: 4 element(s) where this rank expected 8");
      std::string what;
      std::uint64_t seq = 0, collective = 0;
      try {
        if (std::string(kind) == "all_reduce") {
          pair.all_reduce(s, in.data(), in.data(), count, accel::Dtype::float32, ReduceOp::sum);
        } else {
          pair.all_gather(s, in.data(), out.data(), count, accel::Dtype::float32);
        }
        s.synchronize();
      } catch (const accel::comm::CommError& e) {
        what = e.what();
        seq = e.seq();
        collective = e.collective();
        CHECK_FALSE(e.timed_out());
      }
      CAPTURE(what);
      CHECK(what.find(expected) != std::string::npos);
      CHECK(seq == 1);
      CHECK(collective == 1);
      CHECK(pair.failed());
    }
    w.barrier(s);  // world is still fine
    s.synchronize();
  }
}

TEST_CASE("a call refused inside a group takes no number: the ranks' next collectives still meet") {
  auto& w = world();
  accel::comm::MpiCommunicator c = w.split(0, w.rank());
  Stream s1, s2;
  const auto n = static_cast<std::size_t>(c.size());
  Buf<std::int32_t> a(4, s1), b(4, s2);
  for (std::size_t i = 0; i < 4; ++i) a.data()[i] = b.data()[i] = c.rank() + 1;
  {
    auto g = c.group();
    c.all_reduce(s1, a);
    if (c.rank() == 0) {  // only rank 0 makes the mistake: its numbers must not move
      CHECK_THROWS_WITH_AS(c.all_reduce(s2, b),
                           doctest::Contains(("the operations of a group run on one stream: this one is on stream " +
                                              std::to_string(s2.id()) + ", the group's on stream " +
                                              std::to_string(s1.id()))
                                                 .c_str()),
                           accel::InvalidArgumentError);
      // Nor do the engine's limit and a send to itself, refused at the call inside the group too.
      CHECK_THROWS_AS(c.all_reduce(s1, a.data(), a.data(), std::size_t{1} << 31, accel::Dtype::int32, ReduceOp::sum),
                      accel::InvalidArgumentError);
    }
    g.end();
  }
  // accel's ring (all_gather at every size while tuning is on) tags its messages by the collective
  // number: a number taken by the refused call on rank 0 alone would leave the ranks' tags apart.
  Buf<std::int32_t> in(1024, s1), out(1024 * n, s1);
  for (std::size_t i = 0; i < 1024; ++i) in.data()[i] = c.rank() * 10000 + static_cast<std::int32_t>(i);
  c.all_gather(s1, in, out);
  s1.synchronize();
  const std::int32_t sum = static_cast<std::int32_t>(n * (n + 1) / 2);
  CHECK(std::vector<std::int32_t>(a.data(), a.data() + 4) == std::vector<std::int32_t>(4, sum));
  CHECK(std::vector<std::int32_t>(b.data(), b.data() + 4) == std::vector<std::int32_t>(4, c.rank() + 1));
  std::size_t wrong = 0;
  for (std::size_t r = 0; r < n; ++r) {
    for (std::size_t i = 0; i < 1024; ++i) {
      wrong += out.data()[r * 1024 + i] != static_cast<std::int32_t>(r * 10000 + i) ? 1 : 0;
    }
  }
  CHECK(wrong == 0);
  // The recorder holds the two operations that ran, #1 and #2, on every rank.
  const auto entries = c.flight_recorder().entries();
  REQUIRE(entries.size() == 2);
  CHECK(entries[0].seq == 1);
  CHECK(entries[1].seq == 2);
}

TEST_CASE("more elements per rank than MPI's int count: an InvalidArgumentError at the call, nothing numbered") {
  auto& w = world();
  accel::comm::MpiCommunicator c = w.split(0, w.rank());
  Stream s;
  Buf<float> one(1, s);
  one.data()[0] = 1;
  const std::size_t too_many = std::size_t{1} << 31;  // INT_MAX + 1; the memory is never touched
  const std::string limit = "count 2147483648 exceeds the MPI engine's limit of 2147483647 elements per rank";
  CHECK_THROWS_WITH_AS(c.all_reduce(s, one.data(), one.data(), too_many, accel::Dtype::float32, ReduceOp::sum),
                       doctest::Contains(limit.c_str()), accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(c.send(s, one.data(), too_many, accel::Dtype::float32, (c.rank() + 1) % c.size()),
                       doctest::Contains(limit.c_str()), accel::InvalidArgumentError);
  {
    // In a group the valid operation still runs; the refused one was never part of it.
    auto g = c.group();
    c.all_reduce(s, one);
    CHECK_THROWS_WITH_AS(c.broadcast(s, one.data(), one.data(), too_many, accel::Dtype::float32, 0),
                         doctest::Contains(limit.c_str()), accel::InvalidArgumentError);
    g.end();
  }
  s.synchronize();
  CHECK(one.data()[0] == static_cast<float>(c.size()));
  const auto entries = c.flight_recorder().entries();
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].seq == 1);
  CHECK_FALSE(c.failed());
}

TEST_CASE("send and recv to this rank itself: refused outside a group, exact inside one") {
  auto& c = world();
  Stream s;
  const std::size_t count = 64 * 1024;  // above MPI's eager limit: outside a group it would wait forever
  Buf<float> a(count, s), b(count, s);
  for (std::size_t i = 0; i < count; ++i) {
    a.data()[i] = static_cast<float>(i % 1000) + 0.5f;
    b.data()[i] = -1;
  }
  const std::string me = std::to_string(c.rank());
  CHECK_THROWS_WITH_AS(c.send(s, a, c.rank()),
                       doctest::Contains(("send to peer " + me + ", this rank itself, outside a group: pair it with "
                                          "the matching recv inside group()").c_str()),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(c.recv(s, b.data(), count, accel::Dtype::float32, c.rank()),
                       doctest::Contains(("recv from peer " + me + ", this rank itself, outside a group: pair it "
                                          "with the matching send inside group()").c_str()),
                       accel::InvalidArgumentError);
  {
    auto g = c.group();
    c.send(s, a, c.rank());
    c.recv(s, b, c.rank());
    g.end();
  }
  s.synchronize();
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) wrong += b.data()[i] != static_cast<float>(i % 1000) + 0.5f ? 1 : 0;
  CHECK(wrong == 0);
}

#ifndef ACCEL_TEST_SANITIZED
namespace {
/// This process's address space (VmSize), in bytes; 0 when /proc does not say.
std::size_t address_space_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmSize:") {
      std::size_t kib = 0;
      status >> kib;
      return kib * 1024;
    }
    status.ignore(4096, '\n');
  }
  return 0;
}
}  // namespace
#endif

TEST_CASE("scratch the ring cannot allocate is a CommError naming the bytes; nothing was sent, the buffers are unchanged") {
#ifdef ACCEL_TEST_SANITIZED
  MESSAGE("skipped: the sanitizers reserve address space of their own (RLIMIT_AS cannot limit it)");
#else
  // Every rank lowers its address-space limit to just above what it uses, so the in-place
  // reduce_scatter's scratch (one 128 MiB block on 2 ranks, two on more: larger than any free block the
  // heap may hold from earlier tests) cannot be allocated: every rank fails alike, before posting a
  // message, and nobody waits for anybody.
  auto& w = world();
  accel::comm::MpiCommunicator c = w.split(0, w.rank());
  Stream s;
  const auto n = static_cast<std::size_t>(c.size());
  const auto me = static_cast<std::size_t>(c.rank());
  const std::size_t count = 32 * 1024 * 1024;  // 128 MiB of int32 per rank's block
  const std::size_t scratch = (n == 2 ? 1 : 2) * count * sizeof(std::int32_t);
  Buf<std::int32_t> data(count * n, s), one(1, s);
  for (std::size_t i = 0; i < count * n; ++i) data.data()[i] = static_cast<std::int32_t>(i % 1000003) + 7;
  one.data()[0] = 1;
  c.all_reduce(s, one);  // the stream's worker and MPI's paths exist before the limit
  s.synchronize();
  REQUIRE(one.data()[0] == static_cast<std::int32_t>(n));
  rlimit before{};
  REQUIRE(getrlimit(RLIMIT_AS, &before) == 0);
  const std::size_t used = address_space_bytes();
  REQUIRE(used > 0);
  rlimit tight = before;
  tight.rlim_cur = static_cast<rlim_t>(used + 8 * 1024 * 1024);  // room for the error's strings, not the scratch
  REQUIRE(setrlimit(RLIMIT_AS, &tight) == 0);
  std::string what;
  bool threw = false, timed_out = true;
  int rank = -1;
  try {
    c.reduce_scatter(s, data.data(), data.data() + count * me, count, accel::Dtype::int32, ReduceOp::sum);
    s.synchronize();
  } catch (const accel::comm::CommError& e) {
    threw = true;
    what = e.what();
    timed_out = e.timed_out();
    rank = e.info().rank;
  }
  REQUIRE(setrlimit(RLIMIT_AS, &before) == 0);
  REQUIRE(threw);
  CAPTURE(what);
  CHECK(what.find("reduce_scatter #2") != std::string::npos);
  CHECK_FALSE(timed_out);
  CHECK(rank == c.rank());
  CHECK(c.failed());  // the ranks may no longer agree on what ran: the communicator refuses work
  if (!accel::comm::detail::ring_selected(c.size(), count * n * sizeof(std::int32_t))) {
    // ACCEL_COMM_MPI_TUNING=0: MPI's own MPI_Ireduce_scatter_block fails as it can, with a text either way.
    CHECK(what.find("failed: MPI_Ireduce_scatter_block: ") != std::string::npos);
    CHECK(what.find("MPI_Ireduce_scatter_block: .") == std::string::npos);
    w.barrier(s);
    s.synchronize();
    return;
  }
  CHECK(what.find("could not allocate " + std::to_string(scratch) + " bytes (" + std::to_string(scratch >> 20) +
                  " MiB) for the ring's partial sums") != std::string::npos);
  CHECK(what.find("nothing was sent and the buffers are unchanged") != std::string::npos);
  std::size_t changed = 0;
  for (std::size_t i = 0; i < count * n; ++i) changed += data.data()[i] != static_cast<std::int32_t>(i % 1000003) + 7 ? 1 : 0;
  CHECK(changed == 0);
  w.barrier(s);  // world is still fine
  s.synchronize();
#endif
}
