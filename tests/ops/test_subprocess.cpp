// accel/detail/subprocess.hpp: exit statuses, signals, programs that cannot start, output through a
// pipe, timeouts that kill the whole process group, SIGCHLD ignored by the host, descriptors the child
// must not inherit, several threads at once, and functions run in a child; a caller with signals
// blocked, unwritten stdio or stdin and stdout closed; a supervisor killed; the program's PATH lookup.
#include <accel/detail/subprocess.hpp>

#include <doctest/doctest.h>

#include "jit_reliability_support.hpp"
#include "support/child_report.hpp"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using accel::detail::run_in_child;
using accel::detail::run_program;
using accel::detail::SubprocessOptions;
using accel::detail::SubprocessOutcome;

using jit_test::contains;

}  // namespace

TEST_CASE("subprocess: the exit status and the output, stdout and stderr interleaved as written") {
  const auto r = run_program({"sh", "-c", "echo one; echo two >&2; echo three; exit 3"});
  CHECK(r.outcome == SubprocessOutcome::exited);
  CHECK(r.exit_code == 3);
  CHECK_FALSE(r.ok());
  CHECK(r.output == "one\ntwo\nthree\n");
  CHECK(r.describe() == "exited with status 3");
  const auto ok = run_program({"sh", "-c", "printf 'a b'"});
  CHECK(ok.ok());
  CHECK(ok.output == "a b");
  // Arguments are passed as they are: no shell re-splits or expands them.
  const auto args = run_program({"printf", "%s|", "two words", "$HOME", "*"});
  CHECK(args.output == "two words|$HOME|*|");
}

TEST_CASE("subprocess: stdin is /dev/null, and stderr may stay the caller's") {
  const auto r = run_program({"cat"});
  CHECK(r.ok());
  CHECK(r.output.empty());
  // With capture_stderr off, the child's stderr is this process's fd 2 (pointed at a file for the test).
  const auto file = ops_test::temp_dir("subprocess-stderr") / "stderr.txt";
  const int sink = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  REQUIRE(sink >= 0);
  std::fflush(stderr);
  const int saved = ::dup(2);
  ::dup2(sink, 2);
  SubprocessOptions o;
  o.capture_stderr = false;
  const auto split = run_program({"sh", "-c", "echo out; echo to-stderr >&2"}, o);
  ::dup2(saved, 2);
  ::close(saved);
  ::close(sink);
  CHECK(split.output == "out\n");
  CHECK(ops_test::read_text(file) == "to-stderr\n");
}

TEST_CASE("subprocess: a signal, a missing program, one that cannot be executed") {
  const auto killed = run_program({"sh", "-c", "kill -9 $$"});
  CHECK(killed.outcome == SubprocessOutcome::signaled);
  CHECK(killed.signal == SIGKILL);
  CHECK(contains(killed.describe(), "was killed by signal 9"));

  const auto missing = run_program({"accel-no-such-program"});
  CHECK(missing.outcome == SubprocessOutcome::not_started);
  CHECK(missing.error == ENOENT);
  CHECK(contains(missing.describe(), "could not be started"));

  // Executable bits but no format execve knows: the child reports execve's errno through the pipe.
  const auto dir = ops_test::temp_dir("subprocess");
  const auto junk = dir / "junk";
  ops_test::write_text(junk, "\x01\x02\x03\x04 not a program");
  ::chmod(junk.c_str(), 0755);
  const auto bad = run_program({junk.string()});
  CHECK(bad.outcome == SubprocessOutcome::not_started);
  CHECK(bad.error == ENOEXEC);
  CHECK(std::string(bad.failed_step) == "execve");
  CHECK(contains(bad.describe(), "execve: Exec format error"));
}

TEST_CASE("subprocess: a timeout kills the child and everything it started") {
  SubprocessOptions o;
  o.timeout_seconds = 0.3;
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run_program({"sh", "-c", "sleep 30 & echo $!; wait"}, o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(r.outcome == SubprocessOutcome::timed_out);
  CHECK(r.describe() == "did not finish within 0.3 s and was killed");
  CHECK(seconds < 5.0);
  const pid_t grandchild = static_cast<pid_t>(std::stol(r.output));
  REQUIRE(grandchild > 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!jit_test::process_gone(grandchild) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(jit_test::process_gone(grandchild));
}

TEST_CASE("subprocess: large output does not block the child, and max_output keeps the start") {
  const auto big = run_program({"sh", "-c", "head -c 1000000 /dev/zero | tr '\\0' x"});
  CHECK(big.ok());
  CHECK(big.output.size() == 1000000);
  CHECK(big.output.find_first_not_of('x') == std::string::npos);
  SubprocessOptions o;
  o.max_output = 1000;
  const auto cut = run_program({"sh", "-c", "head -c 300000 /dev/zero | tr '\\0' y; exit 4"}, o);
  CHECK(cut.exit_code == 4);  // read to the end (the child is never blocked on a full pipe)
  CHECK(cut.output == std::string(1000, 'y'));
  CHECK(cut.output_truncated);
}

TEST_CASE("subprocess: with SIGCHLD ignored the status still arrives, and the disposition is kept") {
  struct sigaction saved {}, ignore {}, after {};
  ignore.sa_handler = SIG_IGN;
  ::sigemptyset(&ignore.sa_mask);
  REQUIRE(::sigaction(SIGCHLD, &ignore, &saved) == 0);
  const auto r = run_program({"sh", "-c", "echo failing; exit 7"});
  const auto f = [] { return 9; };
  const auto c = run_in_child(f);
  REQUIRE(::sigaction(SIGCHLD, nullptr, &after) == 0);
  REQUIRE(::sigaction(SIGCHLD, &saved, nullptr) == 0);
  CHECK(r.outcome == SubprocessOutcome::exited);
  CHECK(r.exit_code == 7);
  CHECK(r.output == "failing\n");
  CHECK(c.exit_code == 9);
  const bool still_ignored = after.sa_handler == SIG_IGN;
  CHECK(still_ignored);
}

TEST_CASE("subprocess: the child inherits no descriptor of the caller but stdio") {
  const int leaked = ::open("/dev/null", O_RDONLY);  // not close-on-exec, as a careless host might leave it
  REQUIRE(leaked >= 0);
  const auto r = run_program({"sh", "-c", "ls /proc/$$/fd"});
  ::close(leaked);
  CHECK(r.ok());
  std::vector<std::string> fds;
  std::string word;
  for (const char c : r.output + "\n") {
    if (c == '\n' || c == ' ') {
      if (!word.empty()) fds.push_back(word);
      word.clear();
    } else {
      word += c;
    }
  }
  CHECK(fds == std::vector<std::string>{"0", "1", "2"});
}

TEST_CASE("subprocess: a function in a child returns its status and output; a crash is reported") {
  const int value = 1234;
  const auto f = [&] {
    const std::string text = "value=" + std::to_string(value);
    return ::write(1, text.data(), text.size()) == static_cast<ssize_t>(text.size()) ? 17 : 1;
  };
  const auto r = run_in_child(f);
  CHECK(r.outcome == SubprocessOutcome::exited);
  CHECK(r.exit_code == 17);
  CHECK(r.output == "value=1234");
  const auto dies = [] {
    ::raise(SIGKILL);
    return 0;
  };
  const auto d = run_in_child(dies);
  CHECK(d.outcome == SubprocessOutcome::signaled);
  CHECK(d.signal == SIGKILL);
  const auto throws = []() -> int { throw std::runtime_error("in the child"); };
  CHECK(run_in_child(throws).exit_code == 125);
  SubprocessOptions o;
  o.timeout_seconds = 0.2;
  const auto hangs = [] {
    ::pause();
    return 0;
  };
  const auto h = run_in_child(hangs, o);
  CHECK(h.outcome == SubprocessOutcome::timed_out);
  CHECK(h.seconds < 5.0);
}

TEST_CASE("subprocess: several threads at once each get their own child's status and output") {
  constexpr int threads = 4, rounds = 5;
  std::vector<std::string> errors(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([t, &errors] {
      for (int i = 0; i < rounds; ++i) {
        const std::string tag = std::to_string(t) + "-" + std::to_string(i);
        // A slow child in one thread must not delay another's (no lifeline is shared).
        const auto r = run_program({"sh", "-c", "echo " + tag + "; sleep 0.0$1; exit $1", "sh", std::to_string(t + 1)});
        if (r.exit_code != t + 1 || r.output != tag + "\n") {
          errors[static_cast<std::size_t>(t)] += tag + ": " + r.describe() + " [" + r.output + "] ";
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  for (const auto& e : errors) CHECK(e.empty());
}

TEST_CASE("subprocess: what describe() says of each ending") {
  accel::detail::SubprocessResult r;
  r.outcome = SubprocessOutcome::signaled;
  r.signal = SIGKILL;
  CHECK(r.describe() == "was killed by signal 9 (Killed)");
  r.outcome = SubprocessOutcome::not_started;
  r.failed_step = "execve";
  r.error = EACCES;
  CHECK(r.describe() == "could not be started (execve: Permission denied)");
  r.outcome = SubprocessOutcome::timed_out;
  r.timeout_seconds = 2.5;
  CHECK(r.describe() == "did not finish within 2.5 s and was killed");
  r.timeout_seconds = 900;
  CHECK(r.describe() == "did not finish within 900 s and was killed");
  r.outcome = SubprocessOutcome::lost;
  CHECK(r.describe() == "was lost: its supervising process died before reporting a status");
}

TEST_CASE("subprocess: the child's signals are unblocked, whatever the caller had blocked") {
  sigset_t term, old;
  ::sigemptyset(&term);
  ::sigaddset(&term, SIGTERM);
  REQUIRE(::pthread_sigmask(SIG_BLOCK, &term, &old) == 0);
  const auto r = run_program({"sh", "-c", "kill -TERM $$; echo survived"});
  (void)::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  CHECK(r.outcome == SubprocessOutcome::signaled);
  CHECK(r.signal == SIGTERM);
  CHECK(r.output.empty());
}

TEST_CASE("subprocess: the caller's unwritten stdio buffer is not written again by the child") {
  std::printf("[test_subprocess: this text is written once, by the test itself]");  // no newline: still buffered
  const auto f = [] {
    std::fflush(stdout);  // what the child's copy of the buffer held would go to its stdout, the pipe
    return ::write(1, "child", 5) == 5 ? 0 : 1;
  };
  const auto r = run_in_child(f);
  std::printf("\n");
  std::fflush(stdout);
  CHECK(r.ok());
  CHECK(r.output == "child");
}

TEST_CASE("subprocess: with the caller's stdin and stdout closed, the child's stdout is still the pipe") {
  // In a forked copy, so that this test's own stdio stays as it is; the copy reports through a pipe made
  // before it closes 0 and 1 (the run's pipes then get those numbers first).
  const test_support::ChildReport copy = test_support::report_from_child([] {
    ::close(0);
    ::close(1);
    const auto r = run_program({"sh", "-c", "echo hi; cat"});
    return r.describe() + "|" + r.output;
  });
  CHECK(copy.completed());
  const std::string& out = copy.text;
  CHECK(out == "exited with status 0|hi\n");  // cat read /dev/null, not a pipe end left at 0
}

TEST_CASE("subprocess: the program is looked up as a shell does; what cannot be run is said before any fork") {
  using accel::detail::find_executable;
  const std::filesystem::path dir = ops_test::temp_dir("path-lookup");
  ops_test::write_text(dir / "tool", "#!/bin/sh\necho tool\n");
  ops_test::write_text(dir / "plain", "not executable\n");
  REQUIRE(::chmod((dir / "tool").c_str(), 0755) == 0);
  std::filesystem::create_directory(dir / "sh");  // a directory named like a program is not one
  REQUIRE(::chmod((dir / "sh").c_str(), 0755) == 0);
  {
    const ScopedEnv env{{"PATH", (dir.string() + ":/usr/bin:/bin").c_str()}};
    CHECK(find_executable("tool") == (dir / "tool").string());
    CHECK(find_executable("sh") == "/usr/bin/sh");
    CHECK(find_executable("plain").empty());  // not executable
    CHECK(find_executable("").empty());
  }
  {
    const std::string relative = ":" + std::string("/nonexistent");  // an empty entry is the current directory
    const ScopedEnv env{{"PATH", relative.c_str()}};
    const auto here = std::filesystem::current_path();
    std::filesystem::current_path(dir);
    const std::string found = find_executable("tool");
    std::filesystem::current_path(here);
    CHECK(found == "./tool");
  }
  {
    const ScopedEnv env{{"PATH", nullptr}};  // unset: the usual directories
    CHECK(find_executable("sh") == "/usr/bin/sh");
  }
  CHECK(find_executable((dir / "tool").string()) == (dir / "tool").string());  // a path is taken as it is
  CHECK(find_executable((dir / "plain").string()).empty());
  const auto not_executable = run_program({(dir / "plain").string()});
  CHECK(not_executable.describe() == "could not be started (PATH lookup: Permission denied)");
  const auto missing = run_program({(dir / "missing").string()});
  CHECK(missing.describe() == "could not be started (PATH lookup: No such file or directory)");
  const auto empty = run_program({});
  CHECK(empty.describe() == "could not be started (empty command: Invalid argument)");
}

TEST_CASE("subprocess: a supervisor killed before it reports is a lost run, not a timeout") {
  const auto kills_supervisor = [] {
    (void)::kill(::getppid(), SIGKILL);  // the child's parent is the supervisor
    ::pause();                           // ended by its parent-death signal
    return 0;
  };
  const auto r = run_in_child(kills_supervisor);
  CHECK(r.outcome == SubprocessOutcome::lost);
  CHECK(r.describe() == "was lost: its supervising process died before reporting a status");
}
