// accel/cuda/detail/host_task.hpp — host functions on CUDA streams, and the failures they leave.
//
// StreamRef::enqueue(fn) moves fn into a heap HostTask and launches it with cudaLaunchHostFunc; the
// CUDA driver runs it on its own thread when the stream reaches it, then it is deleted. An exception
// thrown by fn is caught there and stored under the stream's id; the next synchronize() of that stream
// or of its device throws it as accel::TaskError and clears it — the CPU backend's semantics. A stream
// destroyed with an unreported failure writes it to stderr.
//
// The failure table is process-wide, guarded by a mutex, created on first use and never destroyed;
// an atomic count keeps synchronize() lock-free when nothing failed. Internal to the CUDA backend.
#pragma once

#include <accel/core/error.hpp>
#include <accel/core/source_location.hpp>
#include <accel/cuda/detail/cuda_api.hpp>
#include <accel/detail/describe_exception.hpp>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

namespace accel::cuda::detail {

/// "cuda:0 stream 7" — how messages name a stream.
[[nodiscard]] inline std::string stream_name(int device, std::uint64_t id, bool is_default) {
  std::string name = "cuda:" + std::to_string(device);
  return is_default ? name + " default stream" : name + " stream " + std::to_string(id);
}

class TaskFailures {
 public:
  struct Failure {
    int device = 0;
    bool is_default = false;
    std::uint64_t seq = 0;  // orders failures across streams: the oldest is reported first
    std::exception_ptr error;
    std::uint64_t more = 0;  // later failures on the same stream since the last report
  };

  void record(std::uint64_t stream, int device, bool is_default, std::exception_ptr error) noexcept {
    try {
      const std::lock_guard lock(mutex_);
      auto [it, inserted] = failures_.try_emplace(stream);
      if (inserted) {
        it->second = Failure{device, is_default, ++seq_, std::move(error), 0};
        count_.fetch_add(1, std::memory_order_release);
      } else {
        ++it->second.more;
      }
    } catch (...) {
      std::fprintf(stderr, "accel: a task on %s failed and could not be recorded\n",
                   stream_name(device, stream, is_default).c_str());
    }
  }

  /// Throws the stream's stored failure as TaskError and clears it; returns when there is none.
  void rethrow(std::uint64_t stream, source_location where) {
    if (count_.load(std::memory_order_acquire) == 0) [[likely]] return;
    Failure failure;
    {
      const std::lock_guard lock(mutex_);
      const auto it = failures_.find(stream);
      if (it == failures_.end()) return;
      failure = std::move(it->second);
      failures_.erase(it);
      count_.fetch_sub(1, std::memory_order_release);
    }
    throw_failure(stream, failure, where);
  }

  /// Throws the oldest stored failure of any stream of `device` and clears it.
  void rethrow_device(int device, source_location where) {
    if (count_.load(std::memory_order_acquire) == 0) [[likely]] return;
    std::uint64_t stream = 0;
    Failure failure;
    {
      const std::lock_guard lock(mutex_);
      auto oldest = failures_.end();
      for (auto it = failures_.begin(); it != failures_.end(); ++it) {
        if (it->second.device == device && (oldest == failures_.end() || it->second.seq < oldest->second.seq)) {
          oldest = it;
        }
      }
      if (oldest == failures_.end()) return;
      stream = oldest->first;
      failure = std::move(oldest->second);
      failures_.erase(oldest);
      count_.fetch_sub(1, std::memory_order_release);
    }
    throw_failure(stream, failure, where);
  }

  /// Drops the stream's failure, writing it to stderr (the stream is being destroyed).
  void discard(std::uint64_t stream) noexcept {
    if (count_.load(std::memory_order_acquire) == 0) return;
    try {
      const std::lock_guard lock(mutex_);
      const auto it = failures_.find(stream);
      if (it == failures_.end()) return;
      std::fprintf(stderr, "accel: %s destroyed with an unreported task failure: %s\n",
                   stream_name(it->second.device, stream, it->second.is_default).c_str(),
                   accel::detail::describe_exception(it->second.error).c_str());
      failures_.erase(it);
      count_.fetch_sub(1, std::memory_order_release);
    } catch (...) {
    }
  }

 private:
  [[noreturn]] static void throw_failure(std::uint64_t stream, const Failure& failure, source_location where) {
    std::string message = stream_name(failure.device, stream, failure.is_default) +
                          ": task failed: " + accel::detail::describe_exception(failure.error);
    if (failure.more != 0) {
      message += " (and " + std::to_string(failure.more) + " later task failure(s) on this stream)";
    }
    throw TaskError(message, failure.error, where);
  }

  std::mutex mutex_;
  std::unordered_map<std::uint64_t, Failure> failures_;
  std::uint64_t seq_ = 0;
  std::atomic<std::size_t> count_{0};
};

inline TaskFailures& task_failures() {
  static TaskFailures* const table = new TaskFailures();  // leaked: host tasks may run during exit
  return *table;
}

/// A host function in flight: what it runs and which stream it belongs to.
struct HostTaskBase {
  HostTaskBase(std::uint64_t s, int d, bool def) noexcept : stream(s), device(d), is_default(def) {}
  HostTaskBase(const HostTaskBase&) = delete;
  HostTaskBase& operator=(const HostTaskBase&) = delete;
  virtual ~HostTaskBase() = default;
  virtual void run() = 0;
  std::uint64_t stream;
  int device;
  bool is_default;
};

template <class F>
struct HostTask final : HostTaskBase {
  template <class G>
  HostTask(G&& f, std::uint64_t s, int d, bool def) : HostTaskBase(s, d, def), fn(std::forward<G>(f)) {}
  void run() override { std::invoke(fn); }
  F fn;
};

/// The cudaHostFn_t of a task captured into a graph: runs it at every replay and records a failure;
/// the graph owns the task and deletes it when it is reset or destroyed.
inline void CUDART_CB run_captured_host_task(void* data) noexcept {
  auto* task = static_cast<HostTaskBase*>(data);
  try {
    task->run();
  } catch (...) {
    task_failures().record(task->stream, task->device, task->is_default, std::current_exception());
  }
}

/// The cudaHostFn_t every enqueued task goes through: runs it, records a failure, deletes it.
inline void CUDART_CB run_host_task(void* data) noexcept {
  run_captured_host_task(data);
  delete static_cast<HostTaskBase*>(data);
}

}  // namespace accel::cuda::detail
