// Stress: concurrent first calls of get_accelerator(). Each round forks a child in which nothing has
// called get_accelerator() yet (this binary makes no other call, so the child's call is really the
// first) and starts eight threads that call it at the same moment; all must see the same backend and
// the same selection record. ACCEL_STRESS_SCALE scales the number of rounds.
#include "stress/stress_support.hpp"

#include <accel/dispatch/select.hpp>

#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace {
using accel_test::scaled;
using Clock = std::chrono::steady_clock;
}  // namespace

// ---- concurrent first get_accelerator() ------

TEST_CASE("stress: concurrent first calls of get_accelerator() agree, in fresh processes") {
  const int forks = static_cast<int>(scaled(20, 3));
  constexpr int threads = 8;
  const auto start = Clock::now();
  for (int f = 0; f < forks; ++f) {
    // In the child nothing has called get_accelerator() (this binary never calls it before this
    // case), so the eight threads race for the very first selection.
    const accel_test::ChildResult r = accel_test::run_in_child([] {
      std::atomic<int> ready{0};
      std::atomic<bool> go{false};
      struct Seen {
        std::size_t index = 99;
        std::string name;
        const accel::BackendSelection* selection = nullptr;
        bool available = false;
      };
      std::array<Seen, threads> seen;
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
          ready.fetch_add(1);
          while (!go.load(std::memory_order_acquire)) {
          }
          const accel::AnyBackend backend = accel::get_accelerator();
          seen[t].index = backend.index();
          seen[t].name = std::string(backend.name());
          seen[t].selection = &accel::accelerator_selection();
          seen[t].available = backend.is_available();
        });
      }
      while (ready.load() < threads) {
      }
      go.store(true, std::memory_order_release);
      for (auto& th : pool) th.join();
      for (const Seen& s : seen) {
        if (s.index != seen[0].index || s.name != seen[0].name || s.selection != seen[0].selection) return 2;
        if (!s.available || s.name.empty()) return 3;
      }
      return 0;
    });
    INFO("fork " << f << ": exited=" << r.exited << " code=" << r.code << " signal=" << r.signal << " hung=" << r.hung);
    REQUIRE(r.exited);
    REQUIRE(r.code == 0);
  }
  MESSAGE("get_accelerator first calls: " << forks << " processes x " << threads << " threads in "
                                          << accel_test::seconds_since(start) << " s");
}

