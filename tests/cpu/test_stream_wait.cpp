// CPU streams: how their waiting threads wait — a worker whose queue ran dry and a host thread in
// synchronize() poll for up to ACCEL_CPU_SPIN_US (cpu/detail/stream_state.hpp: spin_budget_ns) before
// they sleep on a condition variable.
#include <accel/cpu/backend.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

using accel::cpu::Stream;
using accel::cpu::detail::StreamInternals;

namespace {

/// Sets the process's spin budget for one test case, and puts the previous one back.
class SpinBudgetForTest {
 public:
  explicit SpinBudgetForTest(std::int64_t ns) : previous_(accel::cpu::detail::spin_budget_setting().exchange(ns)) {}
  SpinBudgetForTest(const SpinBudgetForTest&) = delete;
  SpinBudgetForTest& operator=(const SpinBudgetForTest&) = delete;
  ~SpinBudgetForTest() { accel::cpu::detail::spin_budget_setting().store(previous_); }

 private:
  std::int64_t previous_;
};

/// The caller's work between two tasks (no sleep: a sleeping caller is what the poll is not for).
void busy_for_microseconds(int us) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < until) {
  }
}

/// `rounds` tasks each waited for, 200 us of the caller's work apart; returns how many times the
/// stream's worker slept meanwhile.
std::uint64_t sleeps_over_spaced_tasks(Stream& s, int rounds, std::atomic<int>& ran) {
  s.synchronize();
  const std::uint64_t before = StreamInternals::of(s).sleeps();
  for (int i = 0; i < rounds; ++i) {
    s.enqueue([&] { ran.fetch_add(1); });
    s.synchronize();
    busy_for_microseconds(200);
  }
  return StreamInternals::of(s).sleeps() - before;
}

}  // namespace

TEST_CASE("ACCEL_CPU_SPIN_US: microseconds from 0 to 1000000, anything else refused naming the variable") {
  using accel::cpu::detail::parse_spin_microseconds;
  CHECK(parse_spin_microseconds("0", "ACCEL_CPU_SPIN_US") == 0);
  CHECK(parse_spin_microseconds("50", "ACCEL_CPU_SPIN_US") == 50'000);
  CHECK(parse_spin_microseconds("1000000", "ACCEL_CPU_SPIN_US") == 1'000'000'000);
  for (const char* bad : {"", "-1", "1000001", "5us", "abc", " 5", "5 ", "1e3", "99999999999999999999"}) {
    CAPTURE(std::string(bad));
    try {
      (void)parse_spin_microseconds(bad, "ACCEL_CPU_SPIN_US");
      FAIL("accepted");
    } catch (const accel::InvalidArgumentError& e) {
      const std::string what = e.what();
      CHECK(what.find("ACCEL_CPU_SPIN_US='" + std::string(bad) + "'") != std::string::npos);
      CHECK(what.find("[0, 1000000]") != std::string::npos);
    }
  }
  // The process's setting: the variable is unset in the test's environment, so the default.
  CHECK(accel::cpu::detail::spin_budget_ns() == (std::thread::hardware_concurrency() == 1 ? 0 : 50'000));
}

TEST_CASE("a worker that polls takes work enqueued within its budget without sleeping; with none it sleeps") {
  constexpr int rounds = 40;
  std::atomic<int> ran{0};
  SUBCASE("a budget of 1 s: the caller's 200 us between tasks never lets the worker sleep") {
    const SpinBudgetForTest budget(1'000'000'000);
    Stream s;
    CHECK(sleeps_over_spaced_tasks(s, rounds, ran) == 0);
    CHECK(ran.load() == rounds);
  }
  SUBCASE("a budget of 0: the worker sleeps between tasks 200 us apart") {
    const SpinBudgetForTest budget(0);
    Stream s;
    // Each task finds the worker asleep (a descheduled worker may miss a few: at least half).
    CHECK(sleeps_over_spaced_tasks(s, rounds, ran) >= rounds / 2);
    CHECK(ran.load() == rounds);
  }
}

TEST_CASE("a polling worker still stops at once when its stream is destroyed, and its queue's work runs") {
  const SpinBudgetForTest budget(1'000'000'000);  // 1 s: longer than the destruction may take
  std::atomic<int> ran{0};
  const auto start = std::chrono::steady_clock::now();
  {
    Stream s;
    s.enqueue([&] { ran.fetch_add(1); });
    s.synchronize();  // the worker now polls for up to 1 s
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(ran.load() == 1);
  CHECK(seconds < 0.5);  // the poll ended when the destructor asked, not when the budget ran out
}

TEST_CASE("a host synchronize that polls sees work finished by a task that takes longer than the budget") {
  const SpinBudgetForTest budget(20'000);  // 20 us, then the condition variable
  Stream s;
  std::atomic<int> value{0};
  s.enqueue([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    value.store(7);
  });
  s.synchronize();
  CHECK(value.load() == 7);
  CHECK(s.query());
}
