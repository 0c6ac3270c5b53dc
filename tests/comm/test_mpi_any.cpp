// accel/comm through AnyBackend: the selected backend's communicator (the CPU's here: MPI), the same
// operations on AnyStreams and Buffer<T, AnyBackend>s, the concrete communicator when needed.
#include "comm_test_support.hpp"

#include <doctest/doctest.h>

#include <accel/dispatch/any_backend.hpp>

using namespace comm_test;

static_assert(accel::Collectives<accel::AnyBackend>);
static_assert(accel::Communicator<accel::communicator_t<accel::AnyBackend>>);

TEST_CASE("AnyBackend: world() is the selected backend's; operations forward to it") {
  const accel::AnyBackend any;
  if (any.name() != "cpu") {
    MESSAGE("skipped: the selected backend is " << any.name() << " (this test runs the CPU's MPI)");
    return;
  }
  auto& w = accel::comm::world<accel::AnyBackend>();
  CHECK(w.valid());
  CHECK(w.size() == world().size());
  CHECK(w.rank() == world().rank());
  CHECK(w.name() == "world");
  accel::AnyBackend::Stream s = any.create_stream();
  accel::Buffer<std::int32_t, accel::AnyBackend> buf(6, s);
  for (std::size_t i = 0; i < 6; ++i) buf.data()[i] = w.rank() + 1;
  w.all_reduce(s, buf, ReduceOp::sum);
  accel::Buffer<std::int32_t, accel::AnyBackend> all(6 * static_cast<std::size_t>(w.size()), s);
  w.all_gather(s, buf, all);
  {
    auto g = w.group();
    w.broadcast(s, buf, 0);
    g.end();
  }
  s.synchronize();
  const int n = w.size();
  CHECK(buf.data()[5] == n * (n + 1) / 2);
  CHECK(all.data()[6 * static_cast<std::size_t>(n) - 1] == n * (n + 1) / 2);
  accel::comm::MpiCommunicator& mpi = w.get<accel::CpuBackend>();
  CHECK(mpi.size() == n);
  auto half = w.split(w.rank() % 2, 0);
  CHECK(half.valid());
  CHECK(half.size() == (n + 1 - w.rank() % 2) / 2);
  accel::communicator_t<accel::AnyBackend> empty;
  CHECK_FALSE(empty.valid());
  CHECK_THROWS_AS(empty.barrier(s), accel::InvalidStateError);
}

TEST_CASE("AnyBackend: reduce, reduce_scatter, all_to_all, gather, scatter, send/recv, barrier and new_group forward") {
  const accel::AnyBackend any;
  if (any.name() != "cpu") {
    MESSAGE("skipped: the selected backend is " << any.name() << " (this test runs the CPU's MPI)");
    return;
  }
  using AnyBuf = accel::Buffer<std::int32_t, accel::AnyBackend>;
  auto& w = accel::comm::world<accel::AnyBackend>();
  const int n = w.size(), r = w.rank();
  const auto nz = static_cast<std::size_t>(n);
  const auto rz = static_cast<std::size_t>(r);
  CHECK(w.local_rank() == world().local_rank());
  CHECK(w.local_rank() >= 0);
  accel::AnyBackend::Stream s = any.create_stream();
  const std::size_t block = 5;
  // Element i of rank q's block j: q * 1000 + j * 10 + i.
  const auto value = [](int q, std::size_t j, std::size_t i) { return static_cast<std::int32_t>(q * 1000 + j * 10 + i); };

  AnyBuf reduced(block, s);
  for (std::size_t i = 0; i < block; ++i) reduced.data()[i] = value(r, 0, i);
  w.reduce(s, reduced, 0, ReduceOp::sum);

  AnyBuf rs_in(block * nz, s), rs_out(block, s);
  for (std::size_t j = 0; j < nz; ++j) {
    for (std::size_t i = 0; i < block; ++i) rs_in.data()[j * block + i] = value(r, j, i);
  }
  w.reduce_scatter(s, rs_in, rs_out, ReduceOp::sum);

  AnyBuf a2a_out(block * nz, s);
  w.all_to_all(s, rs_in, a2a_out);

  AnyBuf mine(block, s), gathered(r == 0 ? block * nz : 0, s);
  for (std::size_t i = 0; i < block; ++i) mine.data()[i] = value(r, 0, i);
  w.gather(s, mine, gathered, 0);

  AnyBuf scattered(block, s);
  w.scatter(s, rs_in, scattered, n - 1);  // the last rank's blocks: block j to rank j

  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  AnyBuf from_prev(block, s);
  {
    auto g = w.group();
    w.send(s, mine, next);
    w.recv(s, from_prev, prev);
    g.end();
  }
  w.barrier(s);
  s.synchronize();

  std::int32_t sum_of_ranks = 0;
  for (int q = 0; q < n; ++q) sum_of_ranks += q;
  for (std::size_t i = 0; i < block; ++i) {
    CAPTURE(i);
    if (r == 0) CHECK(reduced.data()[i] == sum_of_ranks * 1000 + n * static_cast<std::int32_t>(i));
    CHECK(rs_out.data()[i] == sum_of_ranks * 1000 + n * value(0, rz, i));
    CHECK(scattered.data()[i] == value(n - 1, rz, i));
    CHECK(from_prev.data()[i] == value(prev, 0, i));
    for (std::size_t j = 0; j < nz; ++j) {
      CHECK(a2a_out.data()[j * block + i] == value(static_cast<int>(j), rz, i));  // block r of rank j
      if (r == 0) CHECK(gathered.data()[j * block + i] == value(static_cast<int>(j), 0, i));
    }
  }

  const std::vector<int> members{n - 1, 0};
  auto pair = w.new_group(members);
  CHECK(pair.valid() == (r == 0 || r == n - 1));
  if (pair.valid()) {
    CHECK(pair.size() == 2);
    CHECK(pair.rank() == (r == 0 ? 1 : 0));
    AnyBuf one(1, s);
    one.data()[0] = r + 1;
    pair.all_reduce(s, one, ReduceOp::sum);
    s.synchronize();
    CHECK(one.data()[0] == n + 1);  // ranks 0 and n - 1: 1 + n
  }
}
