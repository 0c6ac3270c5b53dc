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
