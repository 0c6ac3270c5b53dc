// accel/detail/subprocess.hpp — run a program, or a function in a forked child, and get back its real
// exit status and output whatever the host program does with signals, with a bounded wait, and
// without leaving anything running behind. Used by the JIT (the host compiler) and by CUDA detection
// (cuInit in a short-lived child).
//
//   run_program(argv, options)   argv[0] looked up in $PATH, run with argv (no shell); stdout and
//                                stderr captured through a pipe (never a file: a full disk loses
//                                nothing), stdin /dev/null
//   run_in_child(f, options)     int f() in a forked child; what it writes to fd 1 is the output, its
//                                return value the exit status
//
// The process tree, and why:
//
//   caller ──fork──> supervisor ──fork──> child (exec argv, or f)
//     │  ^               │ own process group; the child and everything it starts are in it
//     │  └── status ─────┘ (a pipe: exit status, signal, or exec's errno)
//     └──── lifeline ───>  (a pipe the caller never writes: it closes when the caller dies or gives up)
//
//   - The status comes through a pipe, not from waitpid in the caller: with SIGCHLD set to SIG_IGN
//     (servers, daemons) or a SIGCHLD handler that reaps every child, waitpid in the caller fails with
//     ECHILD and the status is lost. The caller's signal dispositions are never changed.
//   - The supervisor watches the lifeline: when the caller dies (even by SIGKILL) or its timeout
//     expires, it kills its whole process group — the compiler driver and the cc1plus/as/ld it
//     started — with SIGKILL. PR_SET_PDEATHSIG alone is not enough: it fires when the *thread* that
//     forked exits, and only for the direct child. (The child also has PR_SET_PDEATHSIG on the
//     supervisor, in case the supervisor itself is killed.)
//   - The supervisor resets signal handlers to their defaults (a handler of the host program must not
//     run in it), closes every descriptor it does not need (the lifeline must not be held open by
//     another supervisor, and the compiler inherits nothing of the host: sockets, lock files), and the
//     child gets an empty signal mask, SIGCHLD, SIGPIPE and SIGXFSZ at their defaults and SIGTTOU
//     ignored. Being in its own process group, the child does not get the terminal's Ctrl-C: the
//     caller does, and if that ends the caller, the supervisor ends the child.
//   - The caller's fork() runs the host's pthread_atfork handlers (accel's lock its allocators for
//     the instant of the fork); the supervisor's children skip them where glibc has _Fork.
//   - Between fork and exec only async-signal-safe calls are made; everything that allocates is
//     prepared in the caller. The caller blocks all signals of its thread around fork() so that no
//     handler runs in the supervisor before it resets them.
// Each call costs one fork() of the caller (copy-on-write: page tables only) and one of the small
// supervisor; there is no shared state, so calls from several threads at once are independent.
#pragma once

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <cstdio>

#include <fcntl.h>
#include <poll.h>
#include <stdio_ext.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace accel::detail {

/// How a run_program / run_in_child call may behave.
struct SubprocessOptions {
  double timeout_seconds = 0;             ///< > 0: the child's process group is killed after this long
  std::size_t max_output = 8u << 20;      ///< output beyond this many bytes is read and dropped
  bool capture_stderr = true;             ///< false: the child writes its stderr to the caller's
};

/// How the child ended.
enum class SubprocessOutcome {
  exited,       ///< exit_code holds its status
  signaled,     ///< killed by `signal`
  not_started,  ///< `error` (an errno) says why: not found, not executable, fork failed...
  timed_out,    ///< SubprocessOptions::timeout_seconds passed; the child's process group was killed
  lost,         ///< the supervisor died before reporting (killed from outside)
};

struct SubprocessResult {
  SubprocessOutcome outcome = SubprocessOutcome::lost;
  int exit_code = -1;         ///< exited: the exit status
  int signal = 0;             ///< signaled: the signal number
  int error = 0;              ///< not_started: errno of `failed_step`
  const char* failed_step = "";  ///< not_started: "execve", "fork", "pipe", "PATH lookup", ...
  std::string output;         ///< stdout (and stderr unless capture_stderr is false), as written
  bool output_truncated = false;
  double seconds = 0;         ///< wall time, start to end
  double timeout_seconds = 0; ///< the timeout that applied (for describe())

  /// Exited with status 0.
  [[nodiscard]] bool ok() const noexcept { return outcome == SubprocessOutcome::exited && exit_code == 0; }

  /// "exited with status 1", "was killed by signal 9 (Killed)", "could not be started (execve: Permission
  /// denied)", "did not finish within 2 s and was killed", ...
  [[nodiscard]] std::string describe() const {
    switch (outcome) {
      case SubprocessOutcome::exited: return "exited with status " + std::to_string(exit_code);
      case SubprocessOutcome::signaled: {
        std::string out = "was killed by signal " + std::to_string(signal);
        if (const char* name = ::strsignal(signal); name != nullptr) out += std::string(" (") + name + ")";
        return out;
      }
      case SubprocessOutcome::not_started:
        return std::string("could not be started (") + failed_step + ": " + std::strerror(error) + ")";
      case SubprocessOutcome::timed_out: {
        std::string limit = std::to_string(timeout_seconds);
        limit.erase(limit.find_last_not_of('0') + 1);
        if (!limit.empty() && limit.back() == '.') limit.pop_back();
        return "did not finish within " + limit + " s and was killed";
      }
      case SubprocessOutcome::lost: return "was lost: its supervising process died before reporting a status";
    }
    return "ended in an unknown way";
  }
};

namespace subprocess_detail {

// One status record, written by the supervisor (or by the child when execve fails). 8 bytes: a write
// below PIPE_BUF is atomic, so records never interleave.
struct Record {
  std::int32_t kind;
  std::int32_t value;
};
inline constexpr std::int32_t record_exited = 1;
inline constexpr std::int32_t record_signaled = 2;
inline constexpr std::int32_t record_exec_failed = 3;
inline constexpr std::int32_t record_fork_failed = 4;
inline constexpr std::int32_t record_setup_failed = 5;

// What the children run, prepared by the caller (nothing is allocated after fork).
struct Plan {
  const char* path = nullptr;  // run_program: the resolved program
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  int (*function)(void*) = nullptr;  // run_in_child
  void* context = nullptr;
  bool capture_stderr = true;
};

inline void write_record(int fd, std::int32_t kind, std::int32_t value) noexcept {
  const Record r{kind, value};
  while (::write(fd, &r, sizeof r) < 0 && errno == EINTR) {
  }
}

// close_range(2) where the kernel has it (5.9+), else one close per descriptor up to RLIMIT_NOFILE.
inline void close_from(int first, int last) noexcept {
  if (first > last) return;
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, static_cast<unsigned>(first), static_cast<unsigned>(last), 0u) == 0) return;
#endif
  struct rlimit limit {};
  long top = 65536;
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) top = static_cast<long>(limit.rlim_cur);
  for (long fd = first; fd <= last && fd < top; ++fd) (void)::close(static_cast<int>(fd));
}

// Closes every descriptor >= 3 except a < b < c.
inline void close_all_but(int a, int b, int c) noexcept {
  int keep[3] = {a, b, c};
  for (int i = 0; i < 3; ++i) {
    for (int j = i + 1; j < 3; ++j) {
      if (keep[j] < keep[i]) std::swap(keep[i], keep[j]);
    }
  }
  int next = 3;
  for (const int k : keep) {
    close_from(next, k - 1);
    next = k + 1;
  }
  close_from(next, 0x7fffffff);
}

// fork() without the host program's pthread_atfork handlers where glibc offers it (_Fork, 2.34+), for
// a child that only makes system calls before execve: the handlers (allocator locks, ...) are of no use
// to it.
inline pid_t plain_fork() noexcept {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  return ::_Fork();
#else
  return ::fork();
#endif
}

// The child, in the supervisor's process group: stdio, signals, then exec or the function.
[[noreturn]] inline void child_main(const Plan& plan, pid_t supervisor, int out_w, int status_w, int lifeline_r) noexcept {
  (void)::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != supervisor) ::_exit(127);  // the supervisor died before prctl
  const int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd >= 0) (void)::dup2(null_fd, 0);
  (void)::dup2(out_w, 1);  // dup2 clears FD_CLOEXEC on the copy
  if (plan.capture_stderr) (void)::dup2(out_w, 2);
  // In its own process group the child is in the background of a terminal: with `stty tostop`, a write
  // to the terminal (stderr left to the caller) would stop it. Ignored, the write proceeds.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  ::sigemptyset(&ignore.sa_mask);
  (void)::sigaction(SIGTTOU, &ignore, nullptr);
  sigset_t none;
  ::sigemptyset(&none);
  (void)::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (plan.function != nullptr) {
    (void)::close(status_w);
    (void)::close(lifeline_r);
    int rc = 125;
    try {
      rc = plan.function(plan.context);
    } catch (...) {
      rc = 125;
    }
    ::_exit(rc);  // its low 8 bits are the status
  }
  ::execve(plan.path, plan.argv, plan.envp);
  write_record(status_w, record_exec_failed, errno);
  ::_exit(127);
}

// The supervisor: runs the child, reports how it ended, kills the group when the caller goes away.
[[noreturn]] inline void supervisor_main(const Plan& plan, int out_w, int status_w, int lifeline_r) noexcept {
  // The host's unwritten stdio buffers were copied by fork: drop them, so that nothing that flushes at
  // exit here or in the child (a sanitizer's _exit does) writes the host's output a second time.
  ::__fpurge(stdout);
  ::__fpurge(stderr);
  // A handler of the host program must not run here; the child gets the defaults of these three too.
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    struct sigaction current {};
    if (::sigaction(sig, nullptr, &current) != 0) continue;
    const bool reset_ignored = sig == SIGCHLD || sig == SIGPIPE || sig == SIGXFSZ;
    if (current.sa_handler == SIG_DFL || (current.sa_handler == SIG_IGN && !reset_ignored)) continue;
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigemptyset(&dfl.sa_mask);
    (void)::sigaction(sig, &dfl, nullptr);
  }
  // Its own process group, which the child and all it starts inherit: one kill(0, ...) ends them.
  if (::setpgid(0, 0) != 0) {
    write_record(status_w, record_setup_failed, errno);
    ::_exit(1);
  }
  close_all_but(out_w, status_w, lifeline_r);
  // Every signal is blocked (the caller blocked them before fork); SIGCHLD is read from a signalfd.
  sigset_t chld;
  ::sigemptyset(&chld);
  ::sigaddset(&chld, SIGCHLD);
  const int sfd = ::signalfd(-1, &chld, SFD_CLOEXEC);
  if (sfd < 0) {
    write_record(status_w, record_setup_failed, errno);
    ::_exit(1);
  }
  const pid_t self = ::getpid();
  // A function child runs ordinary code (it may allocate): a full fork(). An exec child only makes
  // system calls before execve.
  const pid_t child = plan.function != nullptr ? ::fork() : plain_fork();
  if (child < 0) {
    write_record(status_w, record_fork_failed, errno);
    ::_exit(1);
  }
  if (child == 0) child_main(plan, self, out_w, status_w, lifeline_r);
  (void)::close(out_w);
  for (;;) {
    struct pollfd fds[2] = {{lifeline_r, POLLIN, 0}, {sfd, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[1].revents != 0) {
      struct signalfd_siginfo info {};
      (void)!::read(sfd, &info, sizeof info);
      int status = 0;
      const pid_t done = ::waitpid(child, &status, WNOHANG);
      if (done == child) {
        if (WIFEXITED(status)) {
          write_record(status_w, record_exited, WEXITSTATUS(status));
        } else {
          write_record(status_w, record_signaled, WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        }
        ::_exit(0);
      }
    }
    if (fds[0].revents != 0) break;  // the caller died or gave up: nothing of this run may outlive it
  }
  (void)::kill(0, SIGKILL);  // this process group: the child, what it started, and this process
  ::_exit(1);
}

// A descriptor closed when it goes out of scope.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) noexcept : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  [[nodiscard]] int get() const noexcept { return fd_; }
  void reset() noexcept {
    if (fd_ >= 0) (void)::close(fd_);
    fd_ = -1;
  }
  int* out() noexcept { return &fd_; }

 private:
  int fd_ = -1;
};

// A close-on-exec pipe whose ends are both >= 3 (0-2 may be closed in the host program; the child's
// dup2 onto 0-2 must not clobber them).
inline bool make_pipe(Fd& read_end, Fd& write_end) noexcept {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return false;
  for (int& fd : fds) {
    if (fd < 3) {
      const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
      (void)::close(fd);
      fd = moved;
    }
  }
  *read_end.out() = fds[0];
  *write_end.out() = fds[1];
  return fds[0] >= 0 && fds[1] >= 0;
}

inline SubprocessResult not_started(const char* step, int error) {
  SubprocessResult r;
  r.outcome = SubprocessOutcome::not_started;
  r.failed_step = step;
  r.error = error;
  return r;
}

inline SubprocessResult supervise(const Plan& plan, const SubprocessOptions& options) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  Fd out_r, out_w, status_r, status_w, life_r, life_w;
  if (!make_pipe(out_r, out_w) || !make_pipe(status_r, status_w) || !make_pipe(life_r, life_w)) {
    return not_started("pipe", errno);
  }
  sigset_t all, old;
  ::sigfillset(&all);
  (void)::pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t supervisor = ::fork();
  if (supervisor == 0) supervisor_main(plan, out_w.get(), status_w.get(), life_r.get());
  const int fork_error = errno;
  (void)::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (supervisor < 0) return not_started("fork", fork_error);
  out_w.reset();
  status_w.reset();
  life_r.reset();

  SubprocessResult result;
  result.timeout_seconds = options.timeout_seconds;
  const auto append = [&](const char* data, std::size_t n) {
    const std::size_t size = result.output.size();
    const std::size_t room = options.max_output - size;  // size <= max_output: never more is kept
    if (n > room) result.output_truncated = true;
    result.output.append(data, n < room ? n : room);
  };
  Record final{0, 0};      // the first exited / signaled / *_failed record
  Record exec_error{0, 0};  // execve's failure outranks the exit status 127 that follows it
  auto deadline = clock::time_point::max();
  if (options.timeout_seconds > 0) {
    deadline = start + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(options.timeout_seconds));
  }
  bool timed_out = false, gave_up = false;
  char buffer[65536];
  Record record{};
  std::size_t record_fill = 0;
  for (bool status_open = true; status_open;) {
    int wait_ms = -1;
    if (deadline != clock::time_point::max()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count() + 1;
      wait_ms = left > 0 ? static_cast<int>(left < 0x7fffffff ? left : 0x7fffffff) : 0;
    }
    struct pollfd fds[2] = {{status_r.get(), POLLIN, 0}, {out_r.get(), POLLIN, 0}};  // fd -1 is skipped
    const int ready = ::poll(fds, 2, wait_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      gave_up = true;
      break;
    }
    if (ready == 0) {
      if (timed_out) {  // the supervisor did not go within 10 s of being told to: stop waiting
        gave_up = true;
        break;
      }
      // Out of time: closing the lifeline makes the supervisor kill its group. No signal is sent from
      // here, so a recycled process id can never be hit. The status pipe then closes.
      timed_out = true;
      life_w.reset();
      deadline = clock::now() + std::chrono::seconds(10);
      continue;
    }
    if (fds[1].revents != 0) {
      const ssize_t n = ::read(out_r.get(), buffer, sizeof buffer);
      if (n > 0) {
        append(buffer, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        out_r.reset();
      }
    }
    if (fds[0].revents != 0) {
      const ssize_t n = ::read(status_r.get(), reinterpret_cast<char*>(&record) + record_fill, sizeof record - record_fill);
      if (n > 0) {
        record_fill += static_cast<std::size_t>(n);
        if (record_fill == sizeof record) {
          if (record.kind == record_exec_failed) exec_error = record;
          if (final.kind == 0) final = record;
          record_fill = 0;
        }
      } else if (n == 0 || errno != EINTR) {
        status_open = false;  // the supervisor, the last holder of the write end, is gone
      }
    }
  }
  // The child has exited, so what it wrote is in the pipe: read it without waiting for writers that
  // may remain (a daemon it started, holding its stdout).
  if (out_r.get() >= 0) {
    (void)::fcntl(out_r.get(), F_SETFL, ::fcntl(out_r.get(), F_GETFL) | O_NONBLOCK);
    for (;;) {
      const ssize_t n = ::read(out_r.get(), buffer, sizeof buffer);
      if (n > 0) {
        append(buffer, static_cast<std::size_t>(n));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        break;
      }
    }
  }
  life_w.reset();
  // Reap the supervisor. With SIGCHLD ignored, or a handler that reaps every child, this fails with
  // ECHILD: the status came through the pipe, so nothing is lost.
  int ignored = 0;
  while (::waitpid(supervisor, &ignored, gave_up ? WNOHANG : 0) < 0 && errno == EINTR) {
  }
  if (exec_error.kind != 0) {
    result.outcome = SubprocessOutcome::not_started;
    result.failed_step = "execve";
    result.error = exec_error.value;
  } else if (final.kind == record_exited) {
    result.outcome = SubprocessOutcome::exited;
    result.exit_code = final.value;
  } else if (final.kind == record_signaled) {
    result.outcome = SubprocessOutcome::signaled;
    result.signal = final.value;
  } else if (final.kind == record_fork_failed || final.kind == record_setup_failed) {
    result.outcome = SubprocessOutcome::not_started;
    result.failed_step = final.kind == record_fork_failed ? "fork" : "supervisor setup";
    result.error = final.value;
  } else {
    result.outcome = timed_out ? SubprocessOutcome::timed_out : SubprocessOutcome::lost;
  }
  result.seconds = std::chrono::duration<double>(clock::now() - start).count();
  return result;
}

}  // namespace subprocess_detail

/// The value of $PATH's first directory holding an executable regular file `name` (or `name` itself when
/// it contains a '/' and is executable); empty when there is none.
[[nodiscard]] inline std::string find_executable(const std::string& name) {
  const auto executable = [](const std::string& candidate) {
    struct stat st {};
    return ::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0;
  };
  if (name.empty()) return {};
  if (name.find('/') != std::string::npos) return executable(name) ? name : std::string();
  const char* env_path = std::getenv("PATH");
  const std::string path = env_path != nullptr ? env_path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    const std::string dir = end > start ? path.substr(start, end - start) : std::string(".");
    if (std::string candidate = dir + "/" + name; executable(candidate)) return candidate;
    start = end + 1;
  }
  return {};
}

/// Runs argv[0] (looked up in $PATH) with argv and waits for it (see the header comment).
[[nodiscard]] inline SubprocessResult run_program(const std::vector<std::string>& argv,
                                                  const SubprocessOptions& options = {}) {
  if (argv.empty()) return subprocess_detail::not_started("empty command", EINVAL);
  const std::string path = find_executable(argv[0]);
  if (path.empty()) {
    const int error = argv[0].find('/') != std::string::npos && ::access(argv[0].c_str(), F_OK) == 0 ? EACCES : ENOENT;
    return subprocess_detail::not_started("PATH lookup", error);
  }
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  subprocess_detail::Plan plan;
  plan.path = path.c_str();
  plan.argv = args.data();
  plan.envp = environ;
  plan.capture_stderr = options.capture_stderr;
  return subprocess_detail::supervise(plan, options);
}

/// Runs `f()` (returning int: the exit status) in a forked child and waits for it. What f writes to
/// file descriptor 1 is the output. f runs in a copy of the process forked from a thread of it: it should
/// do little (other threads' locks may be held there; the timeout bounds a deadlock).
template <class F>
[[nodiscard]] SubprocessResult run_in_child(F& f, const SubprocessOptions& options = {}) {
  subprocess_detail::Plan plan;
  plan.function = [](void* context) -> int { return (*static_cast<F*>(context))(); };
  plan.context = const_cast<void*>(static_cast<const void*>(&f));
  plan.capture_stderr = options.capture_stderr;
  return subprocess_detail::supervise(plan, options);
}

}  // namespace accel::detail
