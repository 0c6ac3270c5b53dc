// What a small collective's bookkeeping costs on this CPU, one call at a time in a loop of 5 M: a
// steady_clock read (what the flight recorder and the timeout read), the TSC read alone, and an
// uncontended std::mutex lock + unlock. Exploratory (RESULTS.md, "Two clock reads fewer per operation"):
//
//   g++ -O2 -std=c++20 -pthread benchmarks/comm/explore/clock_cost.cpp -o /tmp/clock_cost && /tmp/clock_cost
#include <chrono>
#include <cstdio>
#include <mutex>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

int main() {
  constexpr int n = 5'000'000;
  volatile unsigned long long sink = 0;
  const auto ns = [](auto a, auto b) { return std::chrono::duration<double, std::nano>(b - a).count() / n; };
  for (int round = 0; round < 5; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) sink = sink + std::chrono::steady_clock::now().time_since_epoch().count();
    const auto t1 = std::chrono::steady_clock::now();
#if defined(__x86_64__)
    for (int i = 0; i < n; ++i) sink = sink + __rdtsc();
#endif
    const auto t2 = std::chrono::steady_clock::now();
    std::mutex m;
    for (int i = 0; i < n; ++i) {
      const std::lock_guard<std::mutex> lock(m);
      sink = sink + i;
    }
    const auto t3 = std::chrono::steady_clock::now();
    std::printf("round %d: steady_clock::now %.1f ns, rdtsc %.1f ns, mutex lock+unlock %.1f ns\n", round, ns(t0, t1),
                ns(t1, t2), ns(t2, t3));
  }
}
