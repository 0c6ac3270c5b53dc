// Runs a function in a forked child process and brings back the string it returns — for a test that
// must change what a process cannot take back (drop a capability, lower a limit, mount a file system,
// close its own stdio, become another user) without changing the test process itself.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>

namespace test_support {

/// What a child reported, and how it ended.
struct ChildReport {
  std::string text;  ///< what the function returned ("EXCEPTION: <what>" when it threw)
  int status = -1;   ///< waitpid's status; -1 when the child could not be waited for

  /// Whether the child ran to its end: exited with status 0, not killed by a signal.
  [[nodiscard]] bool completed() const noexcept { return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0; }
};

/// Forks; the child runs `f()` (returning a std::string), writes the result to a pipe and ends with
/// _exit(0), so nothing of the parent's (static destructors, the test framework's state) runs there.
/// The parent reads the whole report, then reaps the child. Throws std::runtime_error when no pipe or
/// process can be made (the caller's REQUIRE-free way of saying the test could not run).
template <class F>
ChildReport report_from_child(F&& f) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("report_from_child: pipe failed");
  std::fflush(nullptr);  // the child must not write this process's buffered output a second time
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::runtime_error("report_from_child: fork failed");
  }
  if (child == 0) {
    // The test framework's crash handlers would report the child's crash as the parent's test case:
    // the child dies of the plain signal instead, and the parent sees it in `status`.
    for (const int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, SIG_DFL);
    ::close(fds[0]);
    std::string text;
    try {
      text = f();
    } catch (const std::exception& e) {
      text = std::string("EXCEPTION: ") + e.what();
    } catch (...) {
      text = "EXCEPTION of an unknown type";
    }
    const char* p = text.data();
    for (std::size_t left = text.size(); left > 0;) {
      const ssize_t n = ::write(fds[1], p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      p += n;
      left -= static_cast<std::size_t>(n);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  ChildReport report;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    report.text.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  pid_t done;
  while ((done = ::waitpid(child, &status, 0)) < 0 && errno == EINTR) {
  }
  if (done == child) report.status = status;
  return report;
}

}  // namespace test_support
