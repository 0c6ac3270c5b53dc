// CPU streams and events against what a programmer would write by hand, measured in the same run:
//   - enqueue of a no-op (and of a 40-byte capture) on a worker stream vs a std::mutex +
//     std::condition_variable + std::deque<std::function<void()>> queue drained by a std::thread;
//   - enqueue on the inline default stream vs calling a std::function directly;
//   - enqueue + synchronize round trip vs the same on the raw queue;
//   - event record + query vs a marker task that sets a std::atomic<bool> on the raw queue (for a timed
//     event: a marker that also reads steady_clock);
//   - std::chrono::steady_clock::now(), the floor of a timed event.
// Prints Google Benchmark's table of the first round, then each figure's median and range over the
// interleaved rounds (--rounds=N, default 5) and its ratio to its baseline, round by round; --smoke: one
// short round.
#include <accel/cpu/event.hpp>
#include <accel/cpu/stream.hpp>

#include "../bench_support.hpp"

#include <benchmark/benchmark.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

/// The hand-written baseline: one mutex, one condition variable, a deque of std::function, a thread.
class RawQueue {
 public:
  RawQueue() : worker_([this] { run(); }) {}
  RawQueue(const RawQueue&) = delete;
  RawQueue& operator=(const RawQueue&) = delete;
  ~RawQueue() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    work_cv_.notify_one();
    worker_.join();
  }

  void push(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(fn));
      ++submitted_;
    }
    work_cv_.notify_one();
  }

  void drain() {
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, [&] { return completed_ == submitted_; });
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      std::function<void()> fn = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      fn();
      lock.lock();
      if (++completed_ == submitted_) done_cv_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::deque<std::function<void()>> queue_;
  std::uint64_t submitted_ = 0;
  std::uint64_t completed_ = 0;
  bool stop_ = false;
  std::thread worker_;
};

using Capture40 = std::array<std::uint64_t, 5>;  // 40 bytes: beyond std::function's small buffer

// ---- enqueue -------------------------------------------------------------------------------

void raw_enqueue_noop(benchmark::State& state) {
  RawQueue q;
  for (auto _ : state) q.push([] {});
  q.drain();
}

void accel_enqueue_noop(benchmark::State& state) {
  accel::cpu::Stream s;
  for (auto _ : state) s.enqueue([] {});
  s.synchronize();
}

void raw_enqueue_capture40(benchmark::State& state) {
  RawQueue q;
  Capture40 data{1, 2, 3, 4, 5};
  for (auto _ : state) q.push([data] { benchmark::DoNotOptimize(data[4]); });
  q.drain();
}

void accel_enqueue_capture40(benchmark::State& state) {
  accel::cpu::Stream s;
  Capture40 data{1, 2, 3, 4, 5};
  for (auto _ : state) s.enqueue([data] { benchmark::DoNotOptimize(data[4]); });
  s.synchronize();
}

void raw_call_noop(benchmark::State& state) {
  std::function<void()> fn = [] {};
  for (auto _ : state) {
    benchmark::DoNotOptimize(fn);
    fn();
  }
}

void accel_default_stream_enqueue_noop(benchmark::State& state) {
  const accel::cpu::StreamRef d = accel::cpu::Streams::default_stream();
  for (auto _ : state) d.enqueue([] {});
}

// ---- round trip: enqueue, then wait for it -----------------------------------------------------

void raw_roundtrip(benchmark::State& state) {
  RawQueue q;
  for (auto _ : state) {
    q.push([] {});
    q.drain();
  }
}

void accel_roundtrip(benchmark::State& state) {
  accel::cpu::Stream s;
  for (auto _ : state) {
    s.enqueue([] {});
    s.synchronize();
  }
}

// ---- events --------------------------------------------------------------------------------

void raw_marker_record_query(benchmark::State& state) {
  RawQueue q;
  std::atomic<bool> flag{false};
  for (auto _ : state) {
    flag.store(false, std::memory_order_relaxed);
    q.push([&flag] { flag.store(true, std::memory_order_release); });
    benchmark::DoNotOptimize(flag.load(std::memory_order_acquire));
  }
  q.drain();
}

void raw_timed_marker_record_query(benchmark::State& state) {
  RawQueue q;
  std::atomic<bool> flag{false};
  std::int64_t stamp = 0;
  for (auto _ : state) {
    flag.store(false, std::memory_order_relaxed);
    q.push([&flag, &stamp] {
      stamp = std::chrono::steady_clock::now().time_since_epoch().count();
      flag.store(true, std::memory_order_release);
    });
    benchmark::DoNotOptimize(flag.load(std::memory_order_acquire));
  }
  q.drain();
  benchmark::DoNotOptimize(stamp);
}

void accel_event_record_query(benchmark::State& state) {
  accel::cpu::Stream s;
  accel::cpu::Event e;
  for (auto _ : state) {
    e.record(s);
    benchmark::DoNotOptimize(e.query());
  }
  s.synchronize();
}

void accel_timed_event_record_query(benchmark::State& state) {
  accel::cpu::Stream s;
  accel::cpu::Event e(true);
  for (auto _ : state) {
    e.record(s);
    benchmark::DoNotOptimize(e.query());
  }
  s.synchronize();
}

void accel_event_query(benchmark::State& state) {
  accel::cpu::Stream s;
  accel::cpu::Event e;
  e.record(s);
  e.synchronize();
  for (auto _ : state) benchmark::DoNotOptimize(e.query());
}

void raw_flag_load(benchmark::State& state) {
  std::atomic<bool> flag{true};
  for (auto _ : state) benchmark::DoNotOptimize(flag.load(std::memory_order_acquire));
}

void steady_clock_now(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(std::chrono::steady_clock::now());
}

/// Keeps each benchmark's time per iteration (the median when repetitions are asked for).
}  // namespace

BENCHMARK(raw_enqueue_noop);
BENCHMARK(accel_enqueue_noop);
BENCHMARK(raw_enqueue_capture40);
BENCHMARK(accel_enqueue_capture40);
BENCHMARK(raw_call_noop);
BENCHMARK(accel_default_stream_enqueue_noop);
BENCHMARK(raw_roundtrip);
BENCHMARK(accel_roundtrip);
BENCHMARK(raw_marker_record_query);
BENCHMARK(accel_event_record_query);
BENCHMARK(raw_timed_marker_record_query);
BENCHMARK(accel_timed_event_record_query);
BENCHMARK(raw_flag_load);
BENCHMARK(accel_event_query);
BENCHMARK(steady_clock_now);

int main(int argc, char** argv) {
  accel_bench::Report report("stream_event", argc, argv);
  const int rounds = accel_bench::take_rounds(argc, argv, 5);
  const bool smoke = accel_bench::initialize(argc, argv);
  report.print_header();
  accel_bench::Recorder recorder;
  report.set_rounds(accel_bench::run_rounds(recorder, smoke ? 1 : rounds));
  benchmark::Shutdown();

  std::printf("\nmedian (min-max) of %d interleaved rounds, wall ns; ratio = accel / baseline, round by round "
              "(lower is better; 1.00 = same cost)\n",
              smoke ? 1 : rounds);
  std::set<std::string> recorded;  // a baseline shared by two rows is one point
  const auto row = [&](const char* what, const std::string& measured, const std::string& baseline) {
    if (!recorder.has(measured) || !recorder.has(baseline)) return;  // filtered out
    const auto m = recorder.real_ns(measured);
    const auto b = recorder.real_ns(baseline);
    const auto r = accel_bench::ratio_per_round(recorder.values(measured, "real_ns"), recorder.values(baseline, "real_ns"));
    std::printf("  %-46s %s ns  vs %s ns  ratio %s\n", what, accel_bench::fmt(m, 1).c_str(),
                accel_bench::fmt(b, 1).c_str(), accel_bench::fmt(r).c_str());
    for (const auto& [name, figure] : {std::pair{measured, m}, std::pair{baseline, b}}) {
      if (recorded.insert(name).second) report.point(name, "", 0, "ns", figure);
    }
    report.ratio(measured, baseline, "cost ratio (accel / baseline)", 0, r);
  };
  row("worker-stream enqueue, no-op / raw queue", "accel_enqueue_noop", "raw_enqueue_noop");
  row("worker-stream enqueue, 40 B capture / raw", "accel_enqueue_capture40", "raw_enqueue_capture40");
  row("default-stream enqueue / std::function call", "accel_default_stream_enqueue_noop", "raw_call_noop");
  row("enqueue + synchronize / raw push + drain", "accel_roundtrip", "raw_roundtrip");
  row("event record + query / raw marker + flag", "accel_event_record_query", "raw_marker_record_query");
  row("timed event record + query / raw timed marker", "accel_timed_event_record_query",
      "raw_timed_marker_record_query");
  row("event query (completed) / atomic load", "accel_event_query", "raw_flag_load");
  row("timed event record + query / steady_clock::now", "accel_timed_event_record_query", "steady_clock_now");
  report.write();
  return 0;
}
