// Shared by the stress and failure-path tests: the load scale, a small deterministic PRNG, the
// process's thread count, and running a function in a forked child with a deadline.
#pragma once

#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <thread>

namespace accel_test {

/// ACCEL_STRESS_SCALE (default 1): multiplies every stress load, so that the sanitizer runs, which
/// are 5 to 20 times slower, hold a smaller one (scripts/ci-sanitizers.sh sets 0.05 to 0.1).
inline double stress_scale() {
  static const double scale = [] {
    const char* text = std::getenv("ACCEL_STRESS_SCALE");
    if (text == nullptr || *text == '\0') return 1.0;
    char* end = nullptr;
    const double value = std::strtod(text, &end);
    if (end == text || *end != '\0' || !(value > 0.0) || value > 100.0) {
      std::fprintf(stderr, "ACCEL_STRESS_SCALE='%s' is not a number in (0, 100]; using 1\n", text);
      return 1.0;
    }
    return value;
  }();
  return scale;
}

/// `base` scaled by ACCEL_STRESS_SCALE, at least `minimum`.
inline std::uint64_t scaled(std::uint64_t base, std::uint64_t minimum = 1) {
  const auto n = static_cast<std::uint64_t>(static_cast<double>(base) * stress_scale());
  return n < minimum ? minimum : n;
}

/// xorshift64*: deterministic per seed, cheap, good enough to pick sizes and operations.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) noexcept : state_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  std::uint64_t next() noexcept {
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return state_ * 0x2545F4914F6CDD1Dull;
  }
  /// Uniform in [0, n).
  std::uint64_t below(std::uint64_t n) noexcept { return next() % n; }
  /// Log-uniform in [lo, hi].
  std::uint64_t log_uniform(std::uint64_t lo, std::uint64_t hi) noexcept {
    int lo_bits = 0;
    while ((std::uint64_t{1} << (lo_bits + 1)) <= lo) ++lo_bits;
    int hi_bits = lo_bits;
    while ((std::uint64_t{1} << (hi_bits + 1)) <= hi) ++hi_bits;
    const int bits = lo_bits + static_cast<int>(below(static_cast<std::uint64_t>(hi_bits - lo_bits + 1)));
    std::uint64_t v = (std::uint64_t{1} << bits) + below(std::uint64_t{1} << bits);
    return v < lo ? lo : (v > hi ? hi : v);
  }

 private:
  std::uint64_t state_;
};

/// Threads of this process (/proc/self/status), or -1 when it cannot be read.
inline int thread_count() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// How a forked child ended.
struct ChildResult {
  bool exited = false;  ///< returned a code (else killed by a signal, or hung)
  int code = -1;        ///< exit code when exited
  int signal = 0;       ///< the signal when killed by one
  bool hung = false;    ///< still running at the deadline (then killed)
};

/// Runs `body()` (returning an exit code) in a forked child that ends with _exit, so nothing of the
/// parent's (static destructors, doctest's state) runs there. An exception escaping `body` is printed
/// and gives code 99. The parent waits up to `deadline` and kills a child that has not ended.
template <class Body>
ChildResult run_in_child(Body body, std::chrono::seconds deadline = std::chrono::seconds(120)) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // The parent's crash handlers (doctest's) would report a crash of the child as the parent's
    // test case: the child dies of the plain signal instead, and the parent reports it.
    for (const int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, SIG_DFL);
    int code = 98;
    try {
      code = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: uncaught exception: %s\n", e.what());
      code = 99;
    } catch (...) {
      std::fprintf(stderr, "child: uncaught exception of unknown type\n");
      code = 99;
    }
    std::fflush(nullptr);
    ::_exit(code);
  }
  ChildResult result;
  const auto until = std::chrono::steady_clock::now() + deadline;
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() > until) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      result.hung = true;
      return result;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (WIFEXITED(status)) {
    result.exited = true;
    result.code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

}  // namespace accel_test
