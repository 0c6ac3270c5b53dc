// CPU streams: how their waiting threads wait — a worker whose queue ran dry and a host thread in
// synchronize() poll for up to ACCEL_CPU_SPIN_US (cpu/detail/stream_state.hpp: spin_budget_ns) before
// they sleep on a condition variable; each side's poll shrinks to none after waits longer than the
// budget and comes back after a short one (cpu/detail/adaptive_spin.hpp).
#include <accel/cpu/backend.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

using accel::cpu::Stream;
using accel::cpu::detail::AdaptiveSpin;
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

TEST_CASE("AdaptiveSpin: halves after each long wait down to none, back to the full budget after one short") {
  constexpr std::int64_t full = 50'000;
  AdaptiveSpin spin;
  CHECK(spin.budget_ns(full) == full);
  spin.slept(10'000, full);  // slept, but within the full budget: a poll would have saved the wake-up
  CHECK(spin.budget_ns(full) == full);
  const std::int64_t expected[] = {25'000, 12'500, 6'250, 3'125, 1'562, 0, 0, 0};
  for (const std::int64_t e : expected) {
    spin.slept(full + 1, full);  // longer than the whole budget: the poll was wasted
    CHECK(spin.budget_ns(full) == e);
  }
  CHECK(spin.halvings() == AdaptiveSpin::none);
  CHECK(spin.budget_ns(full) == 0);
  spin.slept(full, full);  // exactly the budget still counts as short
  CHECK(spin.halvings() == 0);
  CHECK(spin.budget_ns(full) == full);
  // The process's budget scales what is left: half of 0 is 0, and a setting changed later applies at once.
  spin.slept(full + 1, full);
  CHECK(spin.budget_ns(8'000) == 4'000);
  CHECK(spin.budget_ns(0) == 0);
}

// The two cases below run real threads on what may be a loaded 2-core machine (CI runs them under
// TSan beside other suites), where a thread can wait several milliseconds for a core. So the budget is
// 30 ms: long waits are 60 ms sleeps (a sleep only measures longer), short ones about 1 ms, and a delay
// short of 29 ms cannot turn one into the other. Where a delay still could, the rounds are counted up
// to a bound instead of assumed.
constexpr std::int64_t test_budget_ns = 30'000'000;
constexpr auto long_wait = std::chrono::milliseconds(60);

TEST_CASE("a host thread's poll stops after synchronizes longer than the budget and returns after a short one") {
  const SpinBudgetForTest budget(test_budget_ns);
  Stream s;
  const AdaptiveSpin& spin = StreamInternals::of(s).wait_spin();
  CHECK(spin.halvings() == 0);
  // Each 60 ms wait polls (30 ms, then less), sleeps, and measures longer than 30 ms: one halving each.
  // (A host descheduled between enqueue and synchronize could see one end while it polls — no change —
  // or measure it short — a restart: so count the rounds up to a bound.)
  int rounds = 0;
  for (int last = 0; spin.halvings() < AdaptiveSpin::none && rounds < 40; ++rounds) {
    s.enqueue([] { std::this_thread::sleep_for(long_wait); });
    s.synchronize();
    CHECK((spin.halvings() == last + 1 || spin.halvings() == last || spin.halvings() == 0));
    last = spin.halvings();
  }
  CHECK(spin.halvings() == AdaptiveSpin::none);
  CHECK(rounds <= 2 * AdaptiveSpin::none + 2);  // room for one round measured short, and a restart
  CHECK(spin.budget_ns(accel::cpu::detail::spin_budget_ns()) == 0);
  // Now a wait of 1 ms sleeps at once (no poll) and, being shorter than the budget, restores it. A try
  // that does not count changes nothing (the poll is none already), so allow a few.
  int tries = 0;
  for (; spin.halvings() != 0 && tries < 5; ++tries) {
    s.enqueue([] { busy_for_microseconds(1000); });
    s.synchronize();
    CHECK((spin.halvings() == 0 || spin.halvings() == AdaptiveSpin::none));
  }
  CHECK(tries >= 1);
  CHECK(spin.halvings() == 0);
  // An event's synchronize waits the same way (the same stream's poll).
  accel::cpu::Event e;
  s.enqueue([] { std::this_thread::sleep_for(long_wait); });
  e.record(s);
  e.synchronize();
  CHECK(spin.halvings() == 1);
}

TEST_CASE("a worker idle longer than the budget stops polling, and polls again after one short idle time") {
  const SpinBudgetForTest budget(test_budget_ns);
  Stream s;
  const AdaptiveSpin& spin = StreamInternals::of(s).idle_spin();
  std::atomic<int> ran{0};
  s.enqueue([&] { ran.fetch_add(1); });
  s.synchronize();
  // Each 60 ms idle time: the worker polls 30 ms (then less), sleeps, and measures 60 ms when the next
  // task wakes it — before it runs that task, so the synchronize sees the halving. (A worker descheduled
  // past the whole gap never slept and measured nothing: count the rounds up to a bound.)
  int rounds = 0;
  for (int last = 0; spin.halvings() < AdaptiveSpin::none && rounds < 40; ++rounds) {
    std::this_thread::sleep_for(long_wait);
    s.enqueue([&] { ran.fetch_add(1); });
    s.synchronize();
    CHECK((spin.halvings() == last + 1 || spin.halvings() == last));
    last = spin.halvings();
  }
  CHECK(spin.halvings() == AdaptiveSpin::none);
  CHECK(rounds <= 2 * AdaptiveSpin::none + 2);  // room for rounds in which the worker never slept
  // No poll now: a task 1 ms after the last finds the worker asleep (only a sleep measures an idle time),
  // and that short idle time restores the budget. A try that does not count — the worker descheduled
  // until the task came never slept — changes nothing, the poll being none already: allow a few.
  int tries = 0;
  for (; spin.halvings() != 0 && tries < 5; ++tries) {
    busy_for_microseconds(1000);
    s.enqueue([&] { ran.fetch_add(1); });
    s.synchronize();
    CHECK((spin.halvings() == 0 || spin.halvings() == AdaptiveSpin::none));
  }
  CHECK(tries >= 1);
  CHECK(spin.halvings() == 0);
  // Polling again for 30 ms: tasks 200 us apart find it awake (sleeping at once, it would sleep at each
  // of the 20; a gap stretched past 30 ms by a busy machine would not).
  CHECK(sleeps_over_spaced_tasks(s, 20, ran) <= 2);
  CHECK(ran.load() == rounds + 1 + tries + 20);
}
