// The engine's CPU thread count when --threads is not given (examples/engine/cpu_threads.hpp):
// OMP_NUM_THREADS as OpenMP reads it, the CPUs of the affinity mask, their sharing among the ranks of
// one machine, and a cgroup's CPU quota (read by accel's cpu/detail/cgroup.hpp: tests/cpu/test_cgroup.cpp).
#include "config.hpp"
#include "cpu_threads.hpp"

#include <doctest/doctest.h>

#include <sched.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

constexpr std::size_t mask_words = CPU_SETSIZE / 64;
constexpr std::size_t header = engine::detail::placement_header;

/// One rank's placement_words(): machine `machine`, CPUs [first, first + count), and a CPU quota
/// (`quota` CPUs, 0: none) set by cgroup `group`.
std::vector<std::uint64_t> placed(std::uint64_t machine, int first, int count, double quota = 0, std::uint64_t group = 0) {
  std::vector<std::uint64_t> w(header + mask_words, 0);
  w[0] = machine;
  w[1] = static_cast<std::uint64_t>(quota * 1e6);
  w[2] = group;
  for (int c = first; c < first + count; ++c) {
    w[header + static_cast<std::size_t>(c / 64)] |= std::uint64_t{1} << (c % 64);
  }
  return w;
}

std::vector<std::uint64_t> joined(const std::vector<std::vector<std::uint64_t>>& ranks) {
  std::vector<std::uint64_t> all;
  for (const auto& r : ranks) all.insert(all.end(), r.begin(), r.end());
  return all;
}

engine::CpuThreads threads_of(const std::vector<std::vector<std::uint64_t>>& ranks, int me, int fallback = 64) {
  return engine::detail::threads_from_placements(joined(ranks), static_cast<int>(ranks.size()), me, fallback);
}

}  // namespace

TEST_CASE("engine threads: OMP_NUM_THREADS read as OpenMP reads it, anything else refused naming it") {
  using engine::detail::parse_omp_num_threads;
  CHECK(parse_omp_num_threads("1") == 1);
  CHECK(parse_omp_num_threads("16") == 16);
  CHECK(parse_omp_num_threads(" 3 ") == 3);
  CHECK(parse_omp_num_threads("4,2") == 4);  // nested levels: the outer count
  CHECK(parse_omp_num_threads("4096") == 4096);
  for (const char* bad : {"", "x", "0", "-1", "2.5", "4x", "4097", ",2", "99999999999999999999"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(parse_omp_num_threads(bad), doctest::Contains("OMP_NUM_THREADS='"), engine::UsageError);
  }
  CHECK_THROWS_WITH_AS(parse_omp_num_threads("abc"),
                       "OMP_NUM_THREADS='abc' is not a thread count (a positive integer up to 4096, or a list such as 4,2 "
                       "whose first entry is taken); unset it, or give --threads N",
                       engine::UsageError);
}

TEST_CASE("engine threads: a rank's CPUs shared among the ranks of its machine whose CPUs overlap them") {
  SUBCASE("one process: all of its CPUs") {
    const auto t = threads_of({placed(7, 0, 16)}, 0);
    CHECK(t.count == 16);
    CHECK(t.why == "the 16 CPUs this process may run on");
    CHECK(threads_of({placed(7, 3, 1)}, 0).why == "the 1 CPU this process may run on");
  }
  SUBCASE("unbound ranks on one machine (mpirun --bind-to none): an equal share each") {
    const std::vector<std::vector<std::uint64_t>> r(4, placed(7, 0, 16));
    for (int me = 0; me < 4; ++me) CHECK(threads_of(r, me).count == 4);
    CHECK(threads_of(r, 0).why == "the 16 CPUs this rank may run on, shared by 4 ranks on this machine");
    // more ranks than CPUs: one thread each, never zero
    CHECK(threads_of(std::vector<std::vector<std::uint64_t>>(3, placed(7, 0, 2)), 1).count == 1);
  }
  SUBCASE("ranks bound to their own cores: each all of its own") {
    const std::vector<std::vector<std::uint64_t>> r = {placed(7, 0, 4), placed(7, 4, 4), placed(7, 8, 2)};
    CHECK(threads_of(r, 0).count == 4);
    CHECK(threads_of(r, 2).count == 2);
    CHECK(threads_of(r, 2).why == "the 2 CPUs this process may run on");
  }
  SUBCASE("two ranks bound to each socket: half a socket each") {
    const std::vector<std::vector<std::uint64_t>> r = {placed(7, 0, 32), placed(7, 0, 32), placed(7, 32, 32),
                                                       placed(7, 32, 32)};
    for (int me = 0; me < 4; ++me) CHECK(threads_of(r, me).count == 16);
  }
  SUBCASE("the same CPU numbers on other machines are not shared") {
    const std::vector<std::vector<std::uint64_t>> r = {placed(1, 0, 8), placed(2, 0, 8), placed(1, 0, 8)};
    CHECK(threads_of(r, 0).count == 4);  // ranks 0 and 2 share machine 1
    CHECK(threads_of(r, 1).count == 8);
  }
  SUBCASE("CPUs past the first 64 count") {
    const std::vector<std::vector<std::uint64_t>> r = {placed(7, 60, 10), placed(7, 100, 10)};
    CHECK(threads_of(r, 0).count == 10);
    CHECK(threads_of(r, 1).count == 10);
  }
  SUBCASE("a mask that could not be read: the fallback count, shared with every rank of the machine") {
    const std::vector<std::vector<std::uint64_t>> r = {placed(7, 0, 0), placed(7, 0, 8)};
    CHECK(threads_of(r, 0, 12).count == 6);
    CHECK(threads_of(r, 1, 12).count == 4);
  }
}

TEST_CASE("engine threads: the CPUs counted are the affinity mask's, not the machine's") {
  cpu_set_t before;
  CPU_ZERO(&before);
  REQUIRE(sched_getaffinity(0, sizeof before, &before) == 0);
  const int all = CPU_COUNT(&before);
  CHECK(engine::detail::usable_cpus() == all);
  CHECK(engine::detail::popcount(engine::detail::affinity_mask()) == all);
  const auto words = engine::detail::placement_words();
  REQUIRE(words.size() == header + mask_words);
  CHECK(words[0] == engine::detail::machine_key());
  CHECK(words[0] != 0);
  // This thread bound to its first CPU (taskset -c N, a launcher's binding): one CPU.
  int first = 0;
  while (!CPU_ISSET(first, &before)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
  const int bound = engine::detail::usable_cpus();
  const auto bound_words = engine::detail::placement_words();
  REQUIRE(sched_setaffinity(0, sizeof before, &before) == 0);  // restored before any check can stop the case
  CHECK(bound == 1);
  CHECK(bound_words[header + static_cast<std::size_t>(first / 64)] == std::uint64_t{1} << (first % 64));
  CHECK(engine::detail::usable_cpus() == all);
}

TEST_CASE("engine threads: no more than the cgroup's CPU quota, shared by the ranks in that cgroup") {
  SUBCASE("a quota below the CPUs: its CPUs, rounded up") {
    const auto t = threads_of({placed(7, 0, 64, 4.0, 11)}, 0);
    CHECK(t.count == 4);
    CHECK(t.why == "its cgroup's CPU quota of 4 CPUs (the 64 CPUs this process may run on)");
    CHECK(threads_of({placed(7, 0, 64, 1.5, 11)}, 0).count == 2);
    CHECK(threads_of({placed(7, 0, 64, 0.2, 11)}, 0).count == 1);
    CHECK(threads_of({placed(7, 0, 64, 1.0, 11)}, 0).why == "its cgroup's CPU quota of 1 CPU (the 64 CPUs this process may run on)");
  }
  SUBCASE("a quota above the CPUs changes nothing") {
    const auto t = threads_of({placed(7, 0, 4, 8.0, 11)}, 0);
    CHECK(t.count == 4);
    CHECK(t.why == "the 4 CPUs this process may run on");
  }
  SUBCASE("ranks in one cgroup (one container) share its quota; ranks in their own (pods) do not") {
    const std::vector<std::vector<std::uint64_t>> one(4, placed(7, 0, 64, 8.0, 11));
    CHECK(threads_of(one, 2).count == 2);
    CHECK(threads_of(one, 2).why == "its cgroup's CPU quota of 8 CPUs, shared by 4 ranks (the 64 CPUs this process may run on)");
    const std::vector<std::vector<std::uint64_t>> pods = {placed(7, 0, 64, 8.0, 11), placed(7, 0, 64, 8.0, 12),
                                                          placed(7, 0, 64, 8.0, 13), placed(7, 0, 64, 8.0, 14)};
    CHECK(threads_of(pods, 2).count == 8);  // the node's 64 CPUs shared by 4: 16, the pod's quota: 8
  }
}

TEST_CASE("engine threads: more threads than the rank's share of the CPUs is warned, naming both") {
  using engine::detail::oversubscription_warning;
  const auto alone = threads_of({placed(7, 0, 2)}, 0);
  CHECK(oversubscription_warning("--threads 2", 2, alone).empty());
  CHECK(oversubscription_warning("--threads 1", 1, alone).empty());
  CHECK(oversubscription_warning("--threads 4", 4, alone) ==
        "--threads 4 runs 4 threads where this rank has 2 CPUs (the 2 CPUs this process may run on): they will take "
        "turns on the cores; leave it out to run one per CPU");
  const auto shared = threads_of(std::vector<std::vector<std::uint64_t>>(2, placed(7, 0, 2)), 1);
  CHECK(oversubscription_warning("OMP_NUM_THREADS=2", 2, shared) ==
        "OMP_NUM_THREADS=2 runs 2 threads where this rank has 1 CPU (the 2 CPUs this rank may run on, shared by 2 ranks "
        "on this machine): they will take turns on the cores; leave it out to run one per CPU");
}
