// accel/cpu/detail/StreamState.hpp — the state behind a CPU StreamRef, shared by stream.hpp and
// event.hpp, and the points (stream, ticket) that order work across streams.
//
// A worker stream is a mutex-protected queue of stream_tasks (StreamQueue) that its own thread drains
// a whole chain at a time; the default stream of a device runs tasks inline in the enqueuing thread.
// Every piece of work — tasks, timed-event markers, waits — enters through StreamState::submit, the
// one place where graph capture diverts tasks into a GraphRecording instead of queueing them.
//
// Counters order everything: `submitted_` (written under the queue mutex) numbers the tasks, and
// `completed_` (written by the worker only, after a task ran and was destroyed) says how many have
// run. A StreamPoint — (stream, ticket) — is "the first `ticket` tasks of the stream"; it is done
// when completed_ >= ticket. Stream synchronization, event completion and cross-stream waits are all
// stream_points, so they agree: once an event recorded on s completed, s.query() sees that work too.
// A task that throws is recorded, not propagated; the next stream or device synchronization reports it.
//
// Waiting: a thread that waits on a stream — a host thread in synchronize() or an event's wait, a
// worker whose queue ran dry — polls for up to spin_budget_ns() (ACCEL_CPU_SPIN_US, default 50 us)
// before it sleeps on a condition variable. An enqueue + synchronize through two sleeping threads costs
// 6-45 us on an idle 2-vCPU VM (their vCPUs halted; benchmarks/RESULTS.md, "The CPU stream's wait"),
// polled 0.3 us; a producer that finds the worker polling does not notify. The poll yields the core
// between checks, so that a machine with more busy threads than cores loses little to it. Each side's
// poll adapts (cpu/detail/adaptive_spin.hpp): waits longer than the budget — a synchronize on a whole
// training step, a worker idle between steps — shrink it to none, and the first short wait that slept
// restores it; so long waits cost no CPU time polling and short ones keep their 0.3 us.
//
// Inline runs (run_inline_if_idle): a caller may run one piece of work itself, in stream order, when
// the stream is idle, saving the hand-off to the worker.
// It claims a ticket under the queue mutex only when every submitted task has completed and no capture
// is in progress; while the claim lasts the worker takes no new task (work enqueued meanwhile by other
// threads waits behind it, as it would behind a queued task), and releasing it completes the ticket and
// wakes the worker if work arrived. completed_ then has two writers that never overlap: the claim is
// only granted when the worker has stored its last completion, and the worker takes tasks only while
// no claim is held, both under the mutex.
//
// A task that blocks on another stream (synchronize, an event's synchronize, a stream wait) may close
// a cycle of waits — a task of A waits for B while a task of B waits for A, or A -> B -> C -> A — that
// would never return. Each worker thread that blocks registers its edge in the wait-for graph
// (WaitEdge) under one process-wide mutex, after the short spin; the wait that would close a cycle
// throws InvalidStateError naming the streams instead (reported as the task's TaskError). Host
// threads never register: nothing waits for them, so they cannot be part of a cycle, and their waits
// — the common path — take no extra lock.
//
// fork(): a child inherits the created streams without their worker threads (orphan_after_fork).
// Their counters stay as they were at the fork, so a point whose work had run is done and one whose
// work had not is never done. The backend's own bookkeeping (internal waits, the allocator, device
// synchronize) treats the latter as done — that work belongs to the parent — while the calls that
// answer users (synchronize(), query(), an event's query, synchronize or wait) throw
// InvalidStateError: never a silent success. Both checks sit on the not-done path only, so a
// query of finished work costs what it did.
//
// Lifetime: states are reference counted (the owning Stream, its worker thread, stream_points held by
// events and waits, a device synchronization in progress). The registry of devices, their default and
// live streams (cpu/detail/StreamRegistry.hpp) is created on first use and never destroyed.
// Internal to the CPU backend.
#pragma once

#include <accel/core/error.hpp>
#include <accel/core/source_location.hpp>
#include <accel/cpu/detail/adaptive_spin.hpp>
#include <accel/cpu/detail/graph_recording.hpp>
#include <accel/cpu/detail/steady_now.hpp>
#include <accel/cpu/detail/stream_queue.hpp>
#include <accel/cpu/detail/stream_task.hpp>
#include <accel/cpu/device.hpp>
#include <accel/detail/describe_exception.hpp>

#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <pthread.h>
#endif

namespace accel::cpu::detail {

inline std::atomic<std::uint64_t> next_stream_id{0};     // ids are never reused
inline std::atomic<std::uint64_t> next_failure_seq{1};   // orders failures across streams (0 = none)

inline void cpu_pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// ACCEL_CPU_SPIN_US's text as nanoseconds: microseconds, an integer in [0, 1000000]; `name` names the
/// variable in the InvalidArgumentError for anything else.
[[nodiscard]] inline std::int64_t parse_spin_microseconds(std::string_view text, std::string_view name) {
  std::int64_t us = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), us);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || us < 0 || us > 1'000'000) {
    throw InvalidArgumentError(std::string(name) + "='" + std::string(text.substr(0, 40)) +
                               "' is not a spin time (expected microseconds, an integer in [0, 1000000]; 0: sleep "
                               "at once)");
  }
  return us * 1000;
}

/// How long a thread waiting on a CPU stream polls before it sleeps, in nanoseconds: ACCEL_CPU_SPIN_US
/// (read once per process), else 50 us — 0 on a machine with one logical CPU, where the thread polled
/// for holds the only core. A settable atomic, so that tests can vary it.
[[nodiscard]] inline std::atomic<std::int64_t>& spin_budget_setting() {
  static std::atomic<std::int64_t> budget([] {
    const char* value = std::getenv("ACCEL_CPU_SPIN_US");
    if (value != nullptr) return parse_spin_microseconds(value, "ACCEL_CPU_SPIN_US");
    return std::thread::hardware_concurrency() == 1 ? std::int64_t{0} : std::int64_t{50'000};
  }());
  return budget;
}
[[nodiscard]] inline std::int64_t spin_budget_ns() { return spin_budget_setting().load(std::memory_order_relaxed); }

/// Checks `ready` between 32 pauses (about 0.1 to 1.5 us depending on the CPU): true once it holds.
template <class Ready>
[[nodiscard]] inline bool pause_until(Ready&& ready) noexcept {
  for (int i = 0; i < 32; ++i) {
    if (ready()) return true;
    cpu_pause();
  }
  return ready();
}

/// Polls `ready` until it holds (true) or `budget_ns` passed (false, unless it holds by then):
/// pause_until first, then a yield of the core between checks, so that a thread the core is wanted for
/// runs first (the poll costs a machine with more busy threads than cores little), with the clock read
/// every 8 yields. `started_ns`: the clock when the pauses did not suffice (0 when they did) — the start
/// of the poll, and of the wait's length should it sleep next (AdaptiveSpin).
template <class Ready>
[[nodiscard]] inline bool spin_until(Ready&& ready, std::int64_t budget_ns, std::int64_t& started_ns) noexcept {
  started_ns = 0;
  if (pause_until(ready)) return true;
  started_ns = steady_now_ns();
  if (budget_ns <= 0) return ready();
  const std::int64_t deadline = started_ns + budget_ns;
  for (;;) {
    for (int i = 0; i < 8; ++i) {
      if (ready()) return true;
      std::this_thread::yield();
    }
    if (steady_now_ns() >= deadline) return ready();
  }
}

class StreamState;
class StreamPoint;

/// Guards the wait-for graph: every StreamState's waiting_for_ and waiting_target_. Created on first
/// use and never destroyed, so usable from static destructors and exiting threads.
inline std::mutex& wait_graph_mutex() {
  static std::mutex* const mutex = new std::mutex();
  return *mutex;
}

/// The stream whose worker is the calling thread, if any (to refuse self-deadlocking waits).
inline StreamState*& running_stream() noexcept {
  thread_local StreamState* running = nullptr;
  return running;
}

class StreamState {
 public:
  /// A device's default stream: runs tasks inline, never destroyed.
  StreamState(int device, int priority, bool is_default)
      : device_(device),
        priority_(priority),
        default_(is_default),
        id_(next_stream_id.fetch_add(1, std::memory_order_relaxed)) {}

  StreamState(const StreamState&) = delete;
  StreamState& operator=(const StreamState&) = delete;

  /// A created stream with its worker thread; the caller owns one reference.
  static StreamState* create_worker(int device, int priority) {
    (void)spin_budget_ns();  // an invalid ACCEL_CPU_SPIN_US is refused here, in the creating call
    std::unique_ptr<StreamState> state(new StreamState(device, priority, false));
    state->refs_.store(2, std::memory_order_relaxed);  // the caller's and the worker's
    state->worker_ = std::thread([s = state.get()] { s->run_worker(); });
    return state.release();
  }

  [[nodiscard]] int device() const noexcept { return device_; }
  [[nodiscard]] int priority() const noexcept { return priority_; }
  [[nodiscard]] bool is_default() const noexcept { return default_; }
  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }
  [[nodiscard]] std::string name() const {
    return "cpu:" + std::to_string(device_) + " stream " + std::to_string(id_);
  }

  void retain() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() noexcept {
    if (!default_ && refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  /// The single entry point of all work on the stream. Returns the task's ticket: the stream has run
  /// it once completed() >= ticket (0 on the default stream, where it already ran).
  std::uint64_t submit(StreamTask&& task) {
    if (orphaned_) throw_orphaned();
    if (default_) {  // never captures (begin_capture refuses it)
      run_one(task);
      return 0;
    }
    bool wake = false;
    std::uint64_t ticket = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (capture_) {  // capturing: recorded into the graph, not run; the ticket stays where it is
        capture_->append(std::move(task));
        return submitted_.load(std::memory_order_relaxed);
      }
      queue_.push(std::move(task));
      ticket = submitted_.load(std::memory_order_relaxed) + 1;
      submitted_.store(ticket, std::memory_order_release);
      if (idle_) {  // one wakeup per sleep
        idle_ = false;
        wake = true;
        work_arrived_ns_ = steady_now_ns();  // the end of the worker's idle time (AdaptiveSpin)
        retain();  // once the lock is released, the task may destroy the stream: keep it until notified
      }
    }
    if (wake) {
      work_cv_.notify_one();
      release();
    }
    return ticket;
  }

  /// Claims the stream for work the caller runs itself, in stream order: true when the stream is idle
  /// (every submitted task ran, nothing captures, no other claim) — then end_inline() must follow —
  /// and always on the default stream, whose work runs in its callers. False: submit() the work.
  [[nodiscard]] bool try_begin_inline() {
    if (orphaned_) throw_orphaned();
    if (default_) return true;
    // Unlocked pre-checks keep a busy stream's callers off the mutex.
    if (capturing_.load(std::memory_order_acquire) ||
        completed_.load(std::memory_order_acquire) != submitted_.load(std::memory_order_acquire)) {
      return false;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    const std::uint64_t submitted = submitted_.load(std::memory_order_relaxed);
    if (capture_ || inline_ || completed_.load(std::memory_order_relaxed) != submitted) return false;
    inline_ = true;
    submitted_.store(submitted + 1, std::memory_order_release);
    return true;
  }

  /// Ends a claim of try_begin_inline: the claimed ticket completes, and work enqueued meanwhile runs.
  void end_inline() noexcept {
    if (default_) return;
    std::lock_guard<std::mutex> lock(mutex_);
    inline_ = false;
    const std::uint64_t done = completed_.load(std::memory_order_relaxed) + 1;
    completed_.store(done, std::memory_order_seq_cst);
    if (done >= wake_at_.load(std::memory_order_seq_cst)) wake_waiters();
    if (idle_ && !queue_.empty()) {
      idle_ = false;
      work_arrived_ns_ = steady_now_ns();
      work_cv_.notify_one();
    }
  }

  /// Later work on this stream runs after `point` (on the default stream: the caller blocks).
  inline void wait_for(const StreamPoint& point);

  /// Later work on this stream runs after everything enqueued on `other` so far.
  inline void wait_for_stream(StreamState& other);

  /// How many times the worker went to sleep for lack of work (after its poll found none): the
  /// wakeups its producers paid for. Diagnostics and tests.
  [[nodiscard]] std::uint64_t sleeps() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return sleeps_;
  }

  /// The polls of this stream's waiting host threads and of its worker, as they have adapted.
  /// Diagnostics and tests.
  [[nodiscard]] const AdaptiveSpin& wait_spin() const noexcept { return wait_spin_; }
  [[nodiscard]] const AdaptiveSpin& idle_spin() const noexcept { return idle_spin_; }

  /// Tasks enqueued so far (the ticket of the latest one).
  [[nodiscard]] std::uint64_t submitted() const noexcept { return submitted_.load(std::memory_order_acquire); }
  /// Tasks that have run (and whose callables were destroyed).
  [[nodiscard]] std::uint64_t completed() const noexcept { return completed_.load(std::memory_order_acquire); }

  /// True when everything enqueued so far has run. Never blocks.
  [[nodiscard]] bool query() const noexcept {
    return completed_.load(std::memory_order_acquire) >= submitted_.load(std::memory_order_acquire);
  }

  /// query() for users: InvalidStateError in a child process when work of a stream inherited across
  /// fork() had not run at the fork (refuse_unless_ran_before_fork); `call` names the call.
  [[nodiscard]] bool query_checked(const char* call) const {
    const bool done_now = query();
    if (!done_now) [[unlikely]] refuse_if_lost_in_fork(submitted(), call);
    return done_now;
  }

  /// Blocks until the first `target` tasks have run (polling for up to the adapted spin budget, then a
  /// condition variable). InvalidStateError when the calling thread is a stream's worker and the wait
  /// would never return: the stream is its own, or the wait closes a cycle of waits between streams.
  void wait_until(std::uint64_t target) {
    const auto reached = [&] { return completed_.load(std::memory_order_seq_cst) >= target; };
    if (pause_until(reached)) return;
    if (orphaned_) return;  // the rest runs only in the parent: done, for the backend's own waits
    StreamState* const waiter = running_stream();
    if (waiter == this) {
      throw InvalidStateError(name() + ": synchronizing a stream from one of its own tasks would never return");
    }
    const std::int64_t full = spin_budget_ns();
    std::int64_t start = 0;
    if (spin_until(reached, wait_spin_.budget_ns(full), start)) return;
    const WaitEdge edge(waiter, *this, target);  // nothing for a host thread; throws on a cycle
    std::unique_lock<std::mutex> lock(mutex_);
    bool slept = false;
    for (;;) {
      // Publish the target before checking the counter (the worker stores the counter before
      // reading wake_at_): one of the two sees the other, so the wakeup cannot be lost.
      if (target < wake_at_.load(std::memory_order_seq_cst)) wake_at_.store(target, std::memory_order_seq_cst);
      if (reached()) break;
      done_cv_.wait(lock);
      slept = true;
    }
    // How long the wait lasted, to the wake-up's stamp: the time the work took, not the sleeper's wake-up.
    if (slept) wait_spin_.slept((woken_ns_ > start ? woken_ns_ : start) - start, full);
  }

  // ---- graph capture ---------------------------------------------------------------------------

  /// Diverts later submits into `recording` (InvalidStateError if already capturing).
  void begin_capture(std::shared_ptr<GraphRecording> recording) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (capture_) throw InvalidStateError(name() + " is already capturing a graph (one capture per stream at a time)");
    capture_ = std::move(recording);
    capturing_.store(true, std::memory_order_release);
  }
  /// Stops capturing; returns the recording (null when none), marked as ended.
  std::shared_ptr<GraphRecording> end_capture() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    capturing_.store(false, std::memory_order_release);
    if (capture_) capture_->mark_ended();
    return std::move(capture_);
  }
  [[nodiscard]] bool is_capturing() const noexcept { return capturing_.load(std::memory_order_acquire); }
  /// The capture in progress, if any.
  [[nodiscard]] std::shared_ptr<GraphRecording> capture() const {
    if (!is_capturing()) return nullptr;
    std::lock_guard<std::mutex> lock(mutex_);
    return capture_;
  }
  /// Throws InvalidStateError (and invalidates the capture) when `operation` is called on this stream
  /// while it captures: its recorded work never runs, so waiting for it would be meaningless.
  void refuse_while_capturing(const char* operation) const {
    if (!is_capturing()) return;
    const std::shared_ptr<GraphRecording> recording = capture();
    if (!recording) return;
    const std::string message = name() + ": " + operation +
                                "() while the stream is capturing a graph (work enqueued during a capture is "
                                "recorded, not run; end the capture first)";
    recording->invalidate(message);
    throw InvalidStateError(message + "; the capture is invalidated");
  }

  /// Blocks until all work enqueued before the call has run; then reports a stored task failure.
  void synchronize(source_location where) {
    refuse_while_capturing("synchronize");
    if (orphaned_) {
      refuse_unless_ran_before_fork(submitted(), "synchronize()");
    } else if (!default_) {
      wait_until(submitted());
    }
    rethrow_failure(where);
  }

  /// Sequence number of the oldest unreported failure (0 when none).
  [[nodiscard]] std::uint64_t failure_seq() const noexcept { return failure_seq_.load(std::memory_order_acquire); }

  /// Throws the stored failure as TaskError and clears it; returns when there is none.
  void rethrow_failure(source_location where) {
    if (failure_seq() == 0) return;
    std::exception_ptr error;
    std::uint64_t more = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      error = std::exchange(failure_, nullptr);
      more = std::exchange(more_failures_, 0);
      failure_seq_.store(0, std::memory_order_release);
    }
    if (!error) return;  // another thread reported it first
    std::string message = name() + ": task failed: " + accel::detail::describe_exception(error);
    if (more != 0) message += " (and " + std::to_string(more) + " later task failure(s) on this stream)";
    throw TaskError(message, error, where);
  }

  /// In a child process after fork(): the worker thread was not copied. The queued work belongs to the
  /// parent: the counters stay as they were (completed() is what had run at the fork), the backend's
  /// own waits treat the rest as done, and the missing thread is never joined.
  void orphan_after_fork() noexcept {
    // A lock or wait held by the parent's worker at the fork means nothing in the child.
    new (&mutex_) std::mutex();
    new (&work_cv_) std::condition_variable();
    new (&done_cv_) std::condition_variable();
    orphaned_ = true;
    waiting_for_ = nullptr;  // the parent's worker was waiting, not this process
    // The std::thread names a thread of the parent: keep it from being joined or destroyed joinable.
    new std::thread(std::move(worker_));  // NOLINT: leaked on purpose, one handle per inherited stream
  }

  /// True in a child process for a stream created before fork() (its worker is in the parent only).
  [[nodiscard]] bool orphaned() const noexcept { return orphaned_; }

  /// Throws InvalidStateError when this stream was inherited across fork() and its first `ticket`
  /// tasks had not all run at the fork: that work runs only in the parent, so no answer about it
  /// (done, or a wait that returns) would be true here. `call` names the call, made by `caller` when
  /// it is a stream's operation.
  void refuse_unless_ran_before_fork(std::uint64_t ticket, const char* call,
                                     const StreamState* caller = nullptr) const {
    const std::uint64_t ran = completed();  // frozen at the fork in a child
    if (!orphaned_ || ticket <= ran) return;
    throw InvalidStateError((caller != nullptr ? caller->name() + ": " : std::string()) + call + ": " + name() +
                            " was created before fork() and " + std::to_string(ticket - ran) +
                            " of its tasks had not run when this process forked; they run only in the parent "
                            "(its worker thread does not exist here), so their completion cannot be known or "
                            "waited for in the child. Create streams and events in the child");
  }

  /// For a check for users whose work is not done: refuse_unless_ran_before_fork. Out of line, so
  /// that the done path of the check stays as short as the plain query.
  [[gnu::noinline, gnu::cold]] void refuse_if_lost_in_fork(std::uint64_t ticket, const char* call) const {
    refuse_unless_ran_before_fork(ticket, call);
  }

  /// Drains the queue and stops the worker. Run once, by the owning Stream's destructor.
  void shutdown() noexcept {
    if (orphaned_) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      stop_requested_.store(true, std::memory_order_relaxed);  // ends a poll for work early
    }
    work_cv_.notify_one();
    if (worker_.get_id() == std::this_thread::get_id()) {
      worker_.detach();  // a task destroyed its own stream: the worker drains and exits by itself
    } else {
      worker_.join();
    }
  }

 private:
  ~StreamState() = default;
  friend struct std::default_delete<StreamState>;

  /// A worker thread's edge in the wait-for graph while it blocks in wait_until: `waiter` waits for
  /// `target`'s first `ticket` tasks. Refuses (throws) an edge that would close a cycle. Waits of host
  /// threads (waiter == nullptr) are not recorded.
  class WaitEdge {
   public:
    WaitEdge(StreamState* waiter, StreamState& target, std::uint64_t ticket) : waiter_(waiter) {
      if (waiter_ == nullptr) return;
      const std::lock_guard<std::mutex> lock(wait_graph_mutex());
      // Follow the waits that still block: `s` blocks its waiter while it has not run `t` tasks, and
      // it cannot run them while its own worker is blocked in turn. Reaching the waiter is a cycle.
      // The graph never holds a blocking cycle (each closing edge is refused), so the walk ends; the
      // bound only guards against a broken invariant.
      const StreamState* s = &target;
      std::uint64_t t = ticket;
      for (int hops = 0; s != nullptr && hops < 1'000'000; ++hops) {
        if (s->completed() >= t) break;  // that wait is satisfied: no cycle through it
        if (s == waiter_) throw_cycle(target);
        t = s->waiting_target_;
        s = s->waiting_for_;
      }
      waiter_->waiting_for_ = &target;
      waiter_->waiting_target_ = ticket;
    }
    WaitEdge(const WaitEdge&) = delete;
    WaitEdge& operator=(const WaitEdge&) = delete;
    ~WaitEdge() {
      if (waiter_ == nullptr) return;
      const std::lock_guard<std::mutex> lock(wait_graph_mutex());
      waiter_->waiting_for_ = nullptr;
    }

   private:
    // With wait_graph_mutex held: the cycle waiter_ -> target -> ... -> waiter_, named stream by stream.
    [[noreturn]] void throw_cycle(const StreamState& target) const {
      std::string cycle = waiter_->name();
      for (const StreamState* s = &target; s != nullptr && s != waiter_; s = s->waiting_for_) {
        cycle += " -> " + s->name();
      }
      cycle += " -> " + waiter_->name();
      throw InvalidStateError(waiter_->name() + ": a task waiting for " + target.name() +
                              " would never return: the waits of tasks form a cycle (" + cycle +
                              "; each stream's running task waits for the next stream)");
    }

    StreamState* waiter_;
  };

  [[noreturn, gnu::cold]] void throw_orphaned() const {
    throw InvalidStateError(name() + " was created before fork(): its worker thread does not exist in this "
                            "process; create a new stream in the child");
  }

  void run_one(StreamTask& task) noexcept {
    try {
      task();
    } catch (...) {
      record_failure(std::current_exception());
    }
  }

  void record_failure(std::exception_ptr error) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_) {
      ++more_failures_;
    } else {
      failure_ = std::move(error);
      failure_seq_.store(next_failure_seq.fetch_add(1, std::memory_order_relaxed), std::memory_order_release);
    }
  }

  void wake_waiters() noexcept {  // with mutex_ held
    woken_ns_ = steady_now_ns();  // when the awaited work finished (AdaptiveSpin)
    wake_at_.store(std::numeric_limits<std::uint64_t>::max(), std::memory_order_seq_cst);
    done_cv_.notify_all();
  }

  void run_worker() noexcept {
    running_stream() = this;
#if defined(__linux__)
    const std::string thread_name = ("accel-cpu" + std::to_string(device_) + "-s" + std::to_string(id_)).substr(0, 15);
    pthread_setname_np(pthread_self(), thread_name.c_str());
#endif
    std::unique_lock<std::mutex> lock(mutex_);
    bool polled = false;  // the queue ran dry and the worker already polled for more: sleep next
    std::int64_t dry_ns = 0;  // when the queue ran dry (0: not measured), for idle_spin_
    for (;;) {
      if (queue_.empty() || inline_) {  // nothing to run, or a caller runs the stream's work (end_inline wakes)
        if (stopping_ && queue_.empty()) break;
        if (!polled && !inline_) {
          // Poll before sleeping: work enqueued meanwhile (submitted_ moves; idle_ stays false, so its
          // producer does not notify) is taken without a wakeup. An inline claim moves submitted_ too;
          // the loop then finds inline_ set and sleeps.
          const std::uint64_t seen = submitted_.load(std::memory_order_relaxed);
          lock.unlock();
          (void)spin_until(
              [&] {
                return submitted_.load(std::memory_order_acquire) != seen ||
                       stop_requested_.load(std::memory_order_relaxed);
              },
              idle_spin_.budget_ns(spin_budget_ns()), dry_ns);
          lock.lock();
          polled = true;
          continue;
        }
        polled = false;
        ++sleeps_;
        idle_ = true;
        work_cv_.wait(lock);
        idle_ = false;
        // Woken by work (not by shutdown, nor spuriously): the idle time, to the producer's stamp.
        if (dry_ns != 0 && !queue_.empty()) {
          idle_spin_.slept((work_arrived_ns_ > dry_ns ? work_arrived_ns_ : dry_ns) - dry_ns, spin_budget_ns());
        }
        dry_ns = 0;
        continue;
      }
      polled = false;
      StreamQueue::Block* const chain = queue_.take_all();
      lock.unlock();
      for (StreamQueue::Block* b = chain; b != nullptr; b = b->next) {
        for (std::uint32_t i = 0; i < b->count; ++i) {
          run_one((*b)[i]);
          (*b)[i].~StreamTask();  // what the task captured is released before synchronize() returns
          const std::uint64_t done = completed_.load(std::memory_order_relaxed) + 1;
          completed_.store(done, std::memory_order_seq_cst);
          // Wake waiters whose target is reached; after the last task of the batch, that is done
          // below, under the lock the loop takes anyway.
          const bool last = b->next == nullptr && i + 1 == b->count;
          if (!last && done >= wake_at_.load(std::memory_order_seq_cst)) {
            std::lock_guard<std::mutex> guard(mutex_);
            wake_waiters();
          }
        }
      }
      lock.lock();
      queue_.recycle(chain);
      if (completed_.load(std::memory_order_relaxed) >= wake_at_.load(std::memory_order_seq_cst)) wake_waiters();
    }
    lock.unlock();
    if (failure_seq() != 0) {  // nobody synchronized after the failure: say so rather than lose it
      std::lock_guard<std::mutex> guard(mutex_);
      if (failure_) {
        std::fprintf(stderr, "accel: %s destroyed with an unreported task failure: %s\n", name().c_str(),
                     accel::detail::describe_exception(failure_).c_str());
      }
    }
    release();
  }

  // Grouped by writer, one cache line per group, so producers, the worker and reference counting
  // do not slow each other down through false sharing.
  static constexpr std::size_t line = 64;

  const int device_;
  const int priority_;
  const bool default_;
  const std::uint64_t id_;
  std::atomic<std::uint64_t> failure_seq_{0};  // read by every synchronize, written on failures
  std::thread worker_;
  bool orphaned_ = false;  // inherited by a child process (set single-threaded, in the atfork handler)

  alignas(line) std::atomic<std::uint32_t> refs_{1};

  // producers (under mutex_)
  // mutex_ guards queue_, idle_, stopping_, inline_, failure_, more_failures_, capture_, work_arrived_ns_, woken_ns_
  alignas(line) mutable std::mutex mutex_;
  StreamQueue queue_;
  std::shared_ptr<GraphRecording> capture_;  // the graph being captured, if any
  std::atomic<bool> capturing_{false};
  std::atomic<std::uint64_t> submitted_{0};
  bool idle_ = false;
  bool stopping_ = false;
  bool inline_ = false;  // a caller runs work in stream order (try_begin_inline)
  std::atomic<bool> stop_requested_{false};  // stopping_, for the worker's poll outside the lock
  std::uint64_t sleeps_ = 0;                 // times the worker slept for lack of work (sleeps())
  std::int64_t work_arrived_ns_ = 0;         // when a producer last woke the sleeping worker
  std::condition_variable work_cv_;

  // the worker
  alignas(line) std::atomic<std::uint64_t> completed_{0};
  std::atomic<std::uint64_t> wake_at_{std::numeric_limits<std::uint64_t>::max()};  // least waited-for count
  StreamState* waiting_for_ = nullptr;  // the stream a task of this one is blocked on (wait_graph_mutex)
  std::uint64_t waiting_target_ = 0;     // ... and its ticket (wait_graph_mutex)
  AdaptiveSpin idle_spin_;               // the worker's poll for work
  std::int64_t woken_ns_ = 0;            // when waiters were last woken (mutex_)

  alignas(line) AdaptiveSpin wait_spin_;  // the polls of threads that wait for this stream's work

  alignas(line) std::condition_variable done_cv_;
  std::exception_ptr failure_;
  std::uint64_t more_failures_ = 0;
};

/// "The first `ticket` tasks of a stream": what an event captures and what a wait waits for. Holds a
/// reference to the stream's state, so it stays valid after the Stream is destroyed (then it is done).
class StreamPoint {
 public:
  StreamPoint() noexcept = default;
  StreamPoint(StreamState& s, std::uint64_t ticket) noexcept : stream_(&s), ticket_(ticket) { s.retain(); }
  StreamPoint(StreamPoint&& other) noexcept
      : stream_(std::exchange(other.stream_, nullptr)), ticket_(std::exchange(other.ticket_, 0)) {}
  StreamPoint& operator=(StreamPoint&& other) noexcept {
    if (this != &other) {
      if (stream_ != nullptr) stream_->release();
      stream_ = std::exchange(other.stream_, nullptr);
      ticket_ = std::exchange(other.ticket_, 0);
    }
    return *this;
  }
  StreamPoint(const StreamPoint&) = delete;
  StreamPoint& operator=(const StreamPoint&) = delete;
  ~StreamPoint() {
    if (stream_ != nullptr) stream_->release();
  }

  /// Points at `ticket` of `s`: on the stream it already points into, without the reference count's
  /// two atomic operations.
  void move_to(StreamState& s, std::uint64_t ticket) noexcept {
    if (stream_ == &s) {
      ticket_ = ticket;
    } else {
      *this = StreamPoint(s, ticket);
    }
  }

  [[nodiscard]] StreamPoint share() const noexcept {
    return stream_ != nullptr ? StreamPoint(*stream_, ticket_) : StreamPoint();
  }
  [[nodiscard]] StreamState* stream() const noexcept { return stream_; }
  /// One atomic load.
  [[nodiscard]] bool done() const noexcept { return stream_ == nullptr || stream_->completed() >= ticket_; }
  /// done() for users: InvalidStateError in a child process when this point's work had not run at
  /// fork() (StreamState::refuse_unless_ran_before_fork); `call` names the call. Done: one load.
  [[nodiscard]] bool done_checked(const char* call) const {
    const bool done_now = done();
    if (!done_now) [[unlikely]] stream_->refuse_if_lost_in_fork(ticket_, call);
    return done_now;
  }
  /// done() for the backend's own bookkeeping (the allocator): work lost in a fork counts as done.
  [[nodiscard]] bool done_or_lost_in_fork() const noexcept { return done() || stream_->orphaned(); }
  /// The same check alone, before a wait; `caller` is the stream that waits, if any.
  void refuse_unless_ran_before_fork(const char* call, const StreamState* caller = nullptr) const {
    if (stream_ != nullptr && stream_->orphaned()) stream_->refuse_unless_ran_before_fork(ticket_, call, caller);
  }
  /// Blocks until done (short spin, then a condition variable).
  void wait() const {
    if (stream_ != nullptr) stream_->wait_until(ticket_);
  }

 private:
  StreamState* stream_ = nullptr;
  std::uint64_t ticket_ = 0;
};

/// The task a wait enqueues: the stream's later tasks run after `point`.
struct StreamWait {
  StreamPoint point;
  void operator()() const { point.wait(); }
};

inline void StreamState::wait_for(const StreamPoint& point) {
  if (point.stream() == this || point.done_or_lost_in_fork()) return;  // in stream order already, or satisfied
  submit(StreamTask(StreamWait{point.share()}));
}

inline void StreamState::wait_for_stream(StreamState& other) {
  if (&other == this || other.default_) return;  // the default stream's tasks ran inline
  if (other.orphaned_) other.refuse_unless_ran_before_fork(other.submitted(), "wait_stream()", this);
  wait_for(StreamPoint(other, other.submitted()));
}

}  // namespace accel::cpu::detail
