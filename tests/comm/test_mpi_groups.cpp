// accel/comm over MPI: sub-groups (split, new_group, empty communicators for non-members), local ranks,
// and grouped operations (the RAII group guard).
#include "comm_test_support.hpp"

#include <doctest/doctest.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

using namespace comm_test;

TEST_CASE("split by parity: each half reduces among itself; ranks follow the key") {
  auto& w = world();
  Stream s;
  const int color = w.rank() % 2;
  accel::comm::MpiCommunicator half = w.split(color, -w.rank());  // key: reverse order
  REQUIRE(half.valid());
  const int members = (w.size() + 1 - color) / 2;
  CHECK(half.size() == members);
  // Reverse order by key: the highest world rank of the half is rank 0.
  int higher = 0;
  for (int r = w.rank() + 2; r < w.size(); r += 2) ++higher;
  CHECK(half.rank() == higher);
  CHECK(half.name() == "split of world (color " + std::to_string(color) + ")");
  Buf<std::int32_t> buf(3, s);
  for (std::size_t i = 0; i < 3; ++i) buf.data()[i] = w.rank();
  half.all_reduce(s, buf);
  s.synchronize();
  int expected = 0;
  for (int r = color; r < w.size(); r += 2) expected += r;
  CHECK(buf.data()[0] == expected);
}

TEST_CASE("new_group: members get a communicator in list order, the others an empty one") {
  auto& w = world();
  Stream s;
  const std::vector<int> ranks{w.size() - 1, 0};  // the last rank first
  accel::comm::MpiCommunicator g = w.new_group(ranks);
  const bool member = w.rank() == 0 || w.rank() == w.size() - 1;
  CHECK(g.valid() == member);
  if (member) {
    CHECK(g.size() == 2);
    CHECK(g.rank() == (w.rank() == 0 ? 1 : 0));
    CHECK(g.name() == "group [" + std::to_string(w.size() - 1) + ", 0] of world");
    Buf<std::int64_t> buf(2, s);
    buf.data()[0] = w.rank() + 1;
    buf.data()[1] = 100;
    g.all_reduce(s, buf, ReduceOp::prod);
    s.synchronize();
    CHECK(buf.data()[0] == static_cast<std::int64_t>(w.size()));  // 1 * size
    CHECK(buf.data()[1] == 10000);
  } else {
    CHECK(g.rank() == -1);
    CHECK(g.size() == 0);
    Buf<float> buf(1, s);
    CHECK_THROWS_WITH_AS(g.all_reduce(s, buf),
                         doctest::Contains("accel::comm::all_reduce (mpi, empty): an empty communicator (this rank is "
                                           "not in the group"),
                         accel::InvalidStateError);
  }
  const std::string where = "accel::comm::new_group (mpi, world, rank " + std::to_string(w.rank()) + " of " +
                            std::to_string(w.size()) + "): rank ";
  CHECK_THROWS_WITH_AS((void)w.new_group(std::vector<int>{0, 0}), doctest::Contains((where + "0 is listed twice").c_str()),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS((void)w.new_group(std::vector<int>{w.size()}),
                       doctest::Contains((where + std::to_string(w.size()) + " is out of range 0.." +
                                          std::to_string(w.size() - 1)).c_str()),
                       accel::InvalidArgumentError);
}

TEST_CASE("a negative color leaves the rank out") {
  auto& w = world();
  accel::comm::MpiCommunicator c = w.split(w.rank() == 0 ? -1 : 7, 0);
  CHECK(c.valid() == (w.rank() != 0));
  if (c.valid()) {
    CHECK(c.size() == w.size() - 1);
    CHECK(c.rank() == w.rank() - 1);  // the same key: the parent's order, rank 0 left out
    Stream s;
    Buf<std::int64_t> r(1, s);
    r.data()[0] = w.rank();
    c.all_reduce(s, r);  // the members' world ranks: 1 + ... + (size - 1)
    s.synchronize();
    CHECK(r.data()[0] == static_cast<std::int64_t>(w.size()) * (w.size() - 1) / 2);
  }
}

TEST_CASE("local ranks: every rank of this test runs on one node") {
  auto& w = world();
  CHECK(w.local_rank() == w.rank());
  CHECK(w.local_size() == w.size());
  const accel::comm::LaunchInfo& launch = accel::comm::launch_info();
  CHECK(launch.launcher == accel::comm::Launcher::mpi);
  CHECK(launch.rank == w.rank());
  CHECK(launch.world_size == w.size());
}

TEST_CASE("a group of operations: started together, done together, results right") {
  auto& c = world();
  Stream s;
  std::array<Buf<float>, 3> bufs{Buf<float>(5, s), Buf<float>(7, s), Buf<float>(9, s)};
  for (std::size_t k = 0; k < 3; ++k) {
    for (std::size_t i = 0; i < bufs[k].size(); ++i) bufs[k].data()[i] = static_cast<float>(k + 1);
  }
  {
    auto group = c.group();
    for (auto& b : bufs) c.all_reduce(s, b);
    {
      auto nested = c.group();  // nested groups launch with the outermost one
      Buf<float> later(1, s);
      nested.end();
    }
    CHECK(bufs[0].data()[0] == 1.0f);  // nothing ran before the group ends
    group.end();
  }
  s.synchronize();
  for (std::size_t k = 0; k < 3; ++k) CHECK(bufs[k].data()[bufs[k].size() - 1] == static_cast<float>((k + 1) * c.size()));
}

TEST_CASE("a group not ended explicitly is launched by its destructor, in stream order") {
  auto& c = world();
  Stream s;
  Buf<std::int32_t> a(4, s), b(4, s);
  for (std::size_t i = 0; i < 4; ++i) {
    a.data()[i] = 1;
    b.data()[i] = c.rank();
  }
  {
    auto group = c.group();
    c.all_reduce(s, a);
    c.all_reduce(s, b, ReduceOp::max);
  }
  s.synchronize();
  CHECK(a.data()[3] == c.size());
  CHECK(b.data()[3] == c.size() - 1);
}

TEST_CASE("the operations of one group must share a stream") {
  auto& c = world();
  Stream s1, s2;
  Buf<float> a(2, s1), b(2, s2);
  a.data()[0] = a.data()[1] = 1;
  auto group = c.group();
  c.all_reduce(s1, a);
  CHECK_THROWS_WITH_AS(c.all_reduce(s2, b), doctest::Contains("one stream"), accel::InvalidArgumentError);
  group.end();
  s1.synchronize();
  CHECK(a.data()[1] == static_cast<float>(c.size()));
  CHECK_THROWS_AS(group.end(), accel::InvalidStateError);
}

TEST_CASE("timeout(): ACCEL_COMM_TIMEOUT when a communicator is made, then its own; engine() names the engine") {
  using namespace std::chrono_literals;
  auto& w = world();
  const char* env = std::getenv("ACCEL_COMM_TIMEOUT");
  if (env == nullptr) {
    CHECK(w.timeout() == std::chrono::nanoseconds(600s));  // torch's and DeepSpeed's default
  } else if (std::string(env) == "30") {
    CHECK(w.timeout() == std::chrono::nanoseconds(30s));  // what the ctest entries set
  }
  const auto world_timeout = w.timeout();
  accel::comm::MpiCommunicator c = w.split(0, w.rank());
  CHECK(c.timeout() == world_timeout);
  c.set_timeout(7s);
  CHECK(c.timeout() == std::chrono::nanoseconds(7s));
  CHECK(w.timeout() == world_timeout);  // each communicator its own
  CHECK_THROWS_WITH_AS(c.set_timeout(0s), doctest::Contains("set_timeout: the timeout must be positive, got 0 ns"),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(c.set_timeout(-1s), doctest::Contains("set_timeout: the timeout must be positive, got -1000000000 ns"),
                       accel::InvalidArgumentError);
  CHECK(c.timeout() == std::chrono::nanoseconds(7s));  // a refused value changes nothing
  CHECK(accel::comm::MpiCommunicator::engine() == "mpi");
  const accel::comm::MpiCommunicator empty;
  CHECK_THROWS_AS((void)empty.timeout(), accel::InvalidStateError);
}
