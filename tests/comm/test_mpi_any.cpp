// accel/comm through AnyBackend: the selected backend's communicator (the CPU's here: MPI), the same
// operations on AnyStreams and Buffer<T, AnyBackend>s, the concrete communicator when needed.
#include "comm_test_support.hpp"

#include <doctest/doctest.h>

#include <accel/dispatch/any_backend.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

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

TEST_CASE("AnyCommunicator forwards index, get, bool, failed, local_size, timeout, set_timeout and the flight recorder") {
  const accel::AnyBackend any;
  if (any.name() != "cpu") {
    MESSAGE("skipped: the selected backend is " << any.name() << " (this test runs the CPU's MPI)");
    return;
  }
  using AnyComm = accel::communicator_t<accel::AnyBackend>;
  auto& w = accel::comm::world<accel::AnyBackend>();
  const int n = w.size();
  CHECK(w.index() == any.index());
  CHECK(static_cast<bool>(w));
  CHECK_FALSE(w.failed());
  CHECK(w.local_size() == world().local_size());
  CHECK(w.local_size() == n);  // mpirun starts every rank on this machine
  CHECK(w.timeout() == world().timeout());
#if defined(ACCEL_HAS_NCCL) && defined(ACCEL_HAS_CUDA)
  CHECK_THROWS_WITH_AS((void)w.get<accel::CudaBackend>(),
                       doctest::Contains("accel::comm::AnyCommunicator::get<cuda>(): the communicator is cpu"),
                       accel::InvalidArgumentError);
#endif

  AnyComm own = w.split(0, w.rank());  // a communicator of its own, whose timeout this test may change
  own.set_timeout(std::chrono::seconds(7));
  CHECK(own.timeout() == std::chrono::seconds(7));
  CHECK(own.get<accel::CpuBackend>().timeout() == std::chrono::seconds(7));
  CHECK_THROWS_WITH_AS(own.set_timeout(std::chrono::nanoseconds(0)),
                       doctest::Contains("accel::comm::MpiCommunicator::set_timeout: the timeout must be positive, got 0 ns"),
                       accel::InvalidArgumentError);
  accel::AnyBackend::Stream s = any.create_stream();
  accel::Buffer<std::int32_t, accel::AnyBackend> one(1, s);
  one.data()[0] = 1;
  own.all_reduce(s, one);
  s.synchronize();
  CHECK(one.data()[0] == n);
  const accel::comm::FlightRecorder& recorder = own.flight_recorder();
  CHECK(&recorder == &own.get<accel::CpuBackend>().flight_recorder());
  const auto entries = recorder.entries();
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].seq == 1);
  CHECK(entries[0].op() == "all_reduce");

  // failed(): a communicator whose operation failed says so through AnyCommunicator too. Ranks 0 and 1
  // of their own communicator: rank 1 receives 8 elements where rank 0 sent 5.
  Stream cs;
  accel::comm::MpiCommunicator pair = world().split(w.rank() < 2 ? 0 : -1, 0);
  if (pair.valid() && pair.rank() == 0) {
    Buf<std::int32_t> five(5, cs);
    std::fill(five.data(), five.data() + 5, 9);
    pair.send(cs, five, 1);
    cs.synchronize();
  } else if (pair.valid()) {
    Buf<std::int32_t> eight(8, cs);
    CHECK_THROWS_WITH_AS(pair.recv(cs, eight, 0), doctest::Contains("received 5 element(s) from rank 0, but expected 8"),
                         accel::comm::CommError);
  }
  const AnyComm wrapped(std::move(pair));
  CHECK(wrapped.valid() == (w.rank() < 2));
  CHECK(static_cast<bool>(wrapped) == (w.rank() < 2));
  CHECK(wrapped.failed() == (w.rank() == 1));
}

TEST_CASE("an empty AnyCommunicator: each call that needs a communicator names itself") {
  using AnyComm = accel::communicator_t<accel::AnyBackend>;
  AnyComm empty;
  CHECK_FALSE(static_cast<bool>(empty));
  CHECK_FALSE(empty.valid());
  CHECK_FALSE(empty.failed());
  CHECK(empty.rank() == -1);
  CHECK(empty.size() == 0);
  CHECK(empty.local_rank() == -1);
  CHECK(empty.local_size() == 0);
  CHECK(empty.name() == "empty");
  const auto refused = [](const char* call) {
    return std::string("accel::comm::AnyCommunicator::") + call + "(): an empty communicator";
  };
  CHECK_THROWS_WITH_AS((void)empty.group(), doctest::Contains(refused("group").c_str()), accel::InvalidStateError);
  CHECK_THROWS_WITH_AS((void)empty.index(), doctest::Contains(refused("index").c_str()), accel::InvalidStateError);
  CHECK_THROWS_WITH_AS((void)empty.timeout(), doctest::Contains(refused("timeout").c_str()), accel::InvalidStateError);
  CHECK_THROWS_WITH_AS(empty.set_timeout(std::chrono::seconds(1)), doctest::Contains(refused("set_timeout").c_str()),
                       accel::InvalidStateError);
  CHECK_THROWS_WITH_AS((void)empty.flight_recorder(), doctest::Contains(refused("flight_recorder").c_str()),
                       accel::InvalidStateError);
  CHECK_THROWS_WITH_AS((void)empty.split(0, 0), doctest::Contains(refused("split").c_str()), accel::InvalidStateError);
  CHECK_THROWS_WITH_AS((void)empty.get<accel::CpuBackend>(),
                       doctest::Contains("accel::comm::AnyCommunicator::get<cpu>(): the communicator is empty"),
                       accel::InvalidArgumentError);
}

TEST_CASE("AnyCommunicator: the backend's own refusals and call sites come through; another backend's stream is refused") {
  const accel::AnyBackend any;
  if (any.name() != "cpu") {
    MESSAGE("skipped: the selected backend is " << any.name() << " (this test runs the CPU's MPI)");
    return;
  }
  using AnyComm = accel::communicator_t<accel::AnyBackend>;
  auto& w = accel::comm::world<accel::AnyBackend>();
  const std::string site = "(mpi, world, rank " + std::to_string(w.rank()) + " of " + std::to_string(w.size()) + ")";
  accel::AnyBackend::Stream s = any.create_stream();
#if defined(ACCEL_HAS_CUDA)  // AnyBackend holds CudaBackend only where accel has CUDA
  // A CUDA stream on the CPU's communicator: a view made as the CUDA backend makes its own (no GPU needed;
  // nothing of CUDA runs before the refusal).
  struct CudaStreamView : accel::CudaBackend::StreamRef {
    CudaStreamView() : accel::CudaBackend::StreamRef(nullptr, 1, 0) {}
  };
  const accel::AnyBackend::StreamRef cuda_stream(accel::CudaBackend::StreamRef(CudaStreamView{}));
  CHECK_THROWS_WITH_AS(w.barrier(cuda_stream),
                       ("accel::comm::barrier " + site + ": the stream is a cuda stream, but the communicator is cpu's").c_str(),
                       accel::InvalidArgumentError);
#endif
  // An argument error names the concrete communicator's call site, word for word as the concrete one.
  accel::Buffer<std::int32_t, accel::AnyBackend> six(6, s), five(5, s);
  const std::string expected = "accel::comm::all_gather " + site +
                               ": mismatched sizes: out holds 5 elements but must hold in's 6 elements x " +
                               std::to_string(w.size()) + " ranks = " + std::to_string(6 * w.size());
  CHECK_THROWS_WITH_AS(w.all_gather(s, six, five), expected.c_str(), accel::InvalidArgumentError);
  Stream cs;
  Buf<std::int32_t> concrete_six(6, cs), concrete_five(5, cs);
  CHECK_THROWS_WITH_AS(world().all_gather(cs, concrete_six, concrete_five), expected.c_str(), accel::InvalidArgumentError);
  // A communicator this rank is not in, wrapped: the backend's own refusal, not a launch on nothing.
  AnyComm outside(world().split(w.rank() == 0 ? 0 : -1, 0));
  if (w.rank() == 0) {
    outside.barrier(s);  // a world of one: returns at once
    s.synchronize();
    CHECK(outside.size() == 1);
  } else {
    CHECK_FALSE(outside.valid());
    CHECK_THROWS_WITH_AS(outside.barrier(s),
                         "accel::comm::barrier (mpi, empty): an empty communicator (this rank is not in the group, or it "
                         "was moved from)",
                         accel::InvalidStateError);
    // ... before its arguments are looked at (a size of 0 ranks would make any output "mismatched").
    CHECK_THROWS_WITH_AS(outside.all_gather(s, six, five),
                         "accel::comm::all_gather (mpi, empty): an empty communicator (this rank is not in the group, or "
                         "it was moved from)",
                         accel::InvalidStateError);
  }
}
