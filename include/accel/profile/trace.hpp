// accel/profile/trace.hpp — accel::profile::TraceRecorder: a Chrome trace (the JSON chrome://tracing
// and Perfetto open) of what a process did, on any backend.
//
//   accel::profile::TraceRecorder trace;          starts recording (one recorder at a time)
//   b.range_push("step"); ... b.range_pop();      host ranges: every range_push/range_pop of any thread
//   trace.span_begin(b, stream, "forward");       stream spans: when the stream ran the work enqueued
//   ... enqueue work on stream ...                  between begin and end (timed events recorded on the
//   trace.span_end(b, stream);                      stream: the device's own clock, GPU or CPU worker)
//   trace.mark("checkpoint");                     an instant on the calling thread
//   trace.mark(b, stream, "loss ready");          an instant at the point the stream reaches
//   trace.write("out.json");                      stops, waits for the recorded events, writes (atomically)
//
// Recording ends at stop(), events(), json() or write(): later range_push/range_pop are not recorded, and
// span_begin, span_end and mark are an InvalidStateError (a span or mark that could not be in the trace
// is refused, not dropped). A stream span still open at events() is closed at the host time events()
// resolved it, not on its stream — the stream may be gone by then — and carries "args": {"left_open":
// true}. The stream of a span or mark must be of the backend passed with it (InvalidArgumentError).
// Names are written as JSON strings: control characters, quotes and backslashes escaped, bytes that are
// not valid UTF-8 replaced by U+FFFD (one per maximal invalid sequence, as the Unicode standard advises).
//
// Tracks: one per host thread (process "host"), one per stream (process "<backend>:<device>", thread
// "stream <id>"). A stream's times are placed on the host's clock by one anchor event per stream
// (recorded and waited for at the stream's first span, so the first span_begin on a stream blocks until
// the stream is idle) and the timed events' elapsed_time from one event to the next on that stream.
// Stream spans and marks are timed events, so they are not for use inside a graph capture (record
// them around the replay). B is any backend, AnyBackend included: only StreamApi is used.
//
// Cost when no recorder is active: range_push/range_pop load one atomic pointer. While recording: a
// host range takes a lock and an append; a stream span records two timed events.
#pragma once

#include <accel/core/error.hpp>
#include <accel/profile/ranges.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace accel::profile {

/// One event of a trace, as it is written: phase 'X' (a span: ts and dur), 'i' (an instant), on the
/// track (pid, tid). Times in microseconds since the recorder started.
struct TraceEvent {
  std::string name;
  std::string category;  // "range" (+ the domain), "stream", "mark"
  char phase = 'X';
  double ts_us = 0;
  double dur_us = 0;
  int pid = 0;
  std::uint64_t tid = 0;
  bool left_open = false;  ///< a stream span still open at events(), closed at that call's host time
};

namespace detail {

// Host ranges of every thread, from the hook in range_push/range_pop. Process-wide and never
// destroyed: a thread in the hook may outlive the recorder that stopped meanwhile.
struct TraceHostLog {
  struct Entry {
    std::string name;
    std::string domain;
    bool push;
    double ts_us;
    std::uint64_t tid;
  };
  std::mutex mutex;
  bool active = false;
  std::chrono::steady_clock::time_point origin;
  std::vector<Entry> entries;
};

inline TraceHostLog& trace_host_log() {
  static auto* log = new TraceHostLog;
  return *log;
}

inline double trace_us_since(std::chrono::steady_clock::time_point origin) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - origin).count();
}

/// A small, stable number per host thread (1, 2, ... in order of first use).
inline std::uint64_t trace_thread_id() {
  static std::atomic<std::uint64_t> next{1};
  thread_local const std::uint64_t id = next.fetch_add(1, std::memory_order_relaxed);
  return id;
}

inline void trace_range_hook(bool push, std::string_view message, std::string_view domain) noexcept {
  TraceHostLog& log = trace_host_log();
  try {
    const std::lock_guard lock(log.mutex);
    if (!log.active) return;
    log.entries.push_back({std::string(message), std::string(domain), push,  // a pop's message is empty
                           trace_us_since(log.origin), trace_thread_id()});
  } catch (...) {  // out of memory while tracing: the range is missing from the trace, the program goes on
  }
}

/// Bytes of the well-formed UTF-8 sequence at s[i], or 0 when there is none; `*bad` is then the length
/// of its maximal invalid subpart (the bytes one U+FFFD replaces). Ranges of RFC 3629 / Unicode table 3-7:
/// no overlong forms, no surrogates, nothing past U+10FFFF.
inline std::size_t utf8_sequence(std::string_view s, std::size_t i, std::size_t* bad) noexcept {
  const auto byte = [&](std::size_t j) { return static_cast<unsigned char>(s[j]); };
  const unsigned char c = byte(i);
  std::size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong below
    if (c == 0xED) hi = 0x9F;  // surrogates above
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;  // overlong below
    if (c == 0xF4) hi = 0x8F;  // past U+10FFFF above
  }
  std::size_t n = 1;
  if (len != 0 && i + 1 < s.size() && byte(i + 1) >= lo && byte(i + 1) <= hi) {
    n = 2;
    while (n < len && i + n < s.size() && byte(i + n) >= 0x80 && byte(i + n) <= 0xBF) ++n;
    if (n == len) return len;
  }
  *bad = n;
  return 0;
}

/// `s` as a JSON string: quotes, backslashes and control characters escaped, invalid UTF-8 as U+FFFD.
inline void json_string(std::string& out, std::string_view s) {
  out += '"';
  for (std::size_t i = 0; i < s.size();) {
    const char c = s[i];
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x80) {
      std::size_t bad = 0;
      if (const std::size_t len = utf8_sequence(s, i, &bad); len != 0) {
        out.append(s.substr(i, len));
        i += len;
      } else {
        out += "\\ufffd";
        i += bad;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (u < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(u));
          out += buf;
        } else {
          out += c;
        }
    }
    ++i;
  }
  out += '"';
}

/// A stream's track: its timed events, resolved to host-clock times in stream order.
struct TraceTrack {
  virtual ~TraceTrack() = default;
  virtual void record(std::string name, char phase) = 0;
  /// Waits for every recorded event and appends the resolved spans and instants to `out`.
  virtual void resolve(std::vector<TraceEvent>& out) = 0;
  /// Resolves the events already done (keeps memory bounded on long runs); never blocks.
  virtual void resolve_done(std::vector<TraceEvent>& out) = 0;
  /// After resolve(): the spans begun and never ended, closed at `now_us` (host clock) as left open.
  /// Nothing is recorded on the stream, which may have been destroyed.
  virtual void close_left_open(std::vector<TraceEvent>& out, double now_us) = 0;
  [[nodiscard]] virtual std::size_t pending() const noexcept = 0;

  std::string process;  // "cpu:0"
  std::uint64_t stream_id = 0;
  int pid = 0;
  int open = 0;  // spans begun and not ended
};

template <class B>
class TraceTrackOf final : public TraceTrack {
 public:
  using Event = typename B::Event;

  TraceTrackOf(typename B::StreamRef s, std::chrono::steady_clock::time_point origin) : stream_(s) {
    last_.record(stream_);
    last_.synchronize();  // the anchor: done now, so "now" is (just after) its time on the host clock
    last_us_ = trace_us_since(origin);
  }

  void record(std::string name, char phase) override {
    Point p{std::move(name), phase, Event(true)};
    p.event.record(stream_);
    points_.push_back(std::move(p));
  }
  void resolve(std::vector<TraceEvent>& out) override {
    while (!points_.empty()) take(out);
  }
  void resolve_done(std::vector<TraceEvent>& out) override {
    while (!points_.empty() && points_.front().event.query()) take(out);
  }
  [[nodiscard]] std::size_t pending() const noexcept override { return points_.size(); }
  void close_left_open(std::vector<TraceEvent>& out, double now_us) override {
    while (!begun_.empty()) {
      auto [name, start] = std::move(begun_.back());
      begun_.pop_back();
      // max: the anchor's host time is read just after it completed, so a span begun a moment ago may be
      // placed a few microseconds after now.
      out.push_back({std::move(name), "stream", 'X', start, std::max(now_us - start, 0.0), pid, stream_id, true});
    }
  }

 private:
  struct Point {
    std::string name;
    char phase;  // 'B', 'E', 'i'
    Event event;
  };
  void take(std::vector<TraceEvent>& out) {
    Point p = std::move(points_.front());
    points_.pop_front();
    p.event.synchronize();
    last_us_ += 1000.0 * static_cast<double>(last_.elapsed_time(p.event));  // consecutive: small, exact floats
    last_ = std::move(p.event);
    if (p.phase == 'B') {
      begun_.emplace_back(std::move(p.name), last_us_);
    } else if (p.phase == 'E') {
      auto [name, start] = std::move(begun_.back());
      begun_.pop_back();
      out.push_back({std::move(name), "stream", 'X', start, last_us_ - start, pid, stream_id});
    } else {
      out.push_back({std::move(p.name), "mark", 'i', last_us_, 0, pid, stream_id});
    }
  }

  typename B::StreamRef stream_;
  Event last_{true};
  double last_us_ = 0;
  std::deque<Point> points_;
  std::vector<std::pair<std::string, double>> begun_;
};

}  // namespace detail

/// Records host ranges, stream spans and marks while it lives; write() turns them into a Chrome trace.
class TraceRecorder {
 public:
  /// Starts recording. InvalidStateError while another recorder is recording.
  TraceRecorder() : origin_(std::chrono::steady_clock::now()) {
    detail::TraceHostLog& log = detail::trace_host_log();
    {
      const std::lock_guard lock(log.mutex);
      if (log.active) throw InvalidStateError("TraceRecorder: another recorder is already recording");
      log.active = true;
      log.origin = origin_;  // entries are empty: stop() took them, and the hook adds none while inactive
    }
    detail::range_hook().store(&detail::trace_range_hook, std::memory_order_release);
    recording_ = true;
  }
  TraceRecorder(const TraceRecorder&) = delete;
  TraceRecorder& operator=(const TraceRecorder&) = delete;
  ~TraceRecorder() {
    try {
      stop();
    } catch (...) {  // destructors never throw
    }
  }

  [[nodiscard]] bool recording() const noexcept { return recording_.load(std::memory_order_acquire); }

  /// Stops recording: host ranges are no longer recorded, and span_begin, span_end and mark are an
  /// InvalidStateError from now on (stream events already recorded are kept). Idempotent.
  void stop() {
    {
      // Under mutex_: a span_begin either records before this or is refused after it.
      const std::lock_guard span_lock(mutex_);
      if (!recording_.load(std::memory_order_relaxed)) return;
      recording_.store(false, std::memory_order_release);
    }
    detail::range_hook().store(nullptr, std::memory_order_release);
    detail::TraceHostLog& log = detail::trace_host_log();
    const std::lock_guard lock(log.mutex);
    log.active = false;
    host_ = std::move(log.entries);
    log.entries.clear();
    stopped_us_ = detail::trace_us_since(origin_);
  }

  /// An instant on the calling thread's track.
  void mark(std::string_view name) {
    const std::lock_guard lock(mutex_);
    require_recording("mark");
    resolved_.push_back({std::string(name), "mark", 'i', detail::trace_us_since(origin_), 0, host_pid,
                         detail::trace_thread_id()});
  }

  /// Opens a span on stream s: it starts when s reaches this point.
  template <class B>
  void span_begin(const B& b, typename B::StreamRef s, std::string_view name) {
    const std::lock_guard lock(mutex_);
    require_recording("span_begin");
    require_same_backend("span_begin", b, s);
    detail::TraceTrack& t = track(b, s);
    if (t.pending() >= 4096) t.resolve_done(resolved_);
    t.record(std::string(name), 'B');
    ++t.open;
  }
  /// Closes the innermost open span of stream s. InvalidStateError when none is open.
  template <class B>
  void span_end(const B& b, typename B::StreamRef s) {
    const std::lock_guard lock(mutex_);
    require_recording("span_end");
    require_same_backend("span_end", b, s);
    // Looked up, not created: a stream without a span has no track (creating one would block for
    // its anchor event and add an empty track to the trace).
    const std::string process = process_name(b, s);
    detail::TraceTrack* t = find_track(process, s.id());
    if (t == nullptr || t->open == 0) {
      throw InvalidStateError("TraceRecorder::span_end: no open span on " + process + " stream " +
                              std::to_string(s.id()));
    }
    t->record(std::string(), 'E');
    --t->open;
  }
  /// An instant at the point stream s reaches.
  template <class B>
  void mark(const B& b, typename B::StreamRef s, std::string_view name) {
    const std::lock_guard lock(mutex_);
    require_recording("mark");
    require_same_backend("mark", b, s);
    track(b, s).record(std::string(name), 'i');
  }

  /// Stops, waits for the streams' recorded events and returns every event. A host range left open
  /// ends when recording stopped; a stream span left open ends at the host time events() resolved its
  /// stream's events (left_open: nothing is recorded on a stream that may have been destroyed since).
  [[nodiscard]] std::vector<TraceEvent> events() {
    stop();
    const std::lock_guard lock(mutex_);
    for (auto& t : tracks_) {
      t->resolve(resolved_);
      t->close_left_open(resolved_, detail::trace_us_since(origin_));
    }
    std::vector<TraceEvent> out = resolved_;
    append_host_ranges(out);
    return out;
  }

  /// The Chrome trace JSON ({"traceEvents": [...]}) of events(), with the tracks' names.
  [[nodiscard]] std::string json() {
    const std::vector<TraceEvent> ev = events();
    std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
    bool first = true;
    const auto sep = [&] {
      if (!first) out += ",\n";
      first = false;
    };
    const auto meta = [&](const char* what, int pid, std::uint64_t tid, std::string_view name) {
      sep();
      out += "{\"ph\": \"M\", \"name\": \"";
      out += what;
      out += "\", \"pid\": " + std::to_string(pid) + ", \"tid\": " + std::to_string(tid) + ", \"args\": {\"name\": ";
      detail::json_string(out, name);
      out += "}}";
    };
    meta("process_name", host_pid, 0, "host");
    std::vector<std::uint64_t> threads;
    for (const auto& e : ev) {
      if (e.pid == host_pid && std::find(threads.begin(), threads.end(), e.tid) == threads.end()) threads.push_back(e.tid);
    }
    std::sort(threads.begin(), threads.end());
    for (const auto tid : threads) meta("thread_name", host_pid, tid, "thread " + std::to_string(tid));
    {
      const std::lock_guard lock(mutex_);
      std::vector<int> named;
      for (const auto& t : tracks_) {
        if (std::find(named.begin(), named.end(), t->pid) == named.end()) {
          meta("process_name", t->pid, 0, t->process);
          named.push_back(t->pid);
        }
        meta("thread_name", t->pid, t->stream_id, "stream " + std::to_string(t->stream_id));
      }
    }
    char num[64];
    for (const auto& e : ev) {
      sep();
      out += "{\"name\": ";
      detail::json_string(out, e.name);
      out += ", \"cat\": ";
      detail::json_string(out, e.category);
      out += ", \"ph\": \"";
      out += e.phase;
      std::snprintf(num, sizeof num, "\", \"ts\": %.3f", e.ts_us);
      out += num;
      if (e.phase == 'X') {
        std::snprintf(num, sizeof num, ", \"dur\": %.3f", e.dur_us);
        out += num;
      } else {
        out += ", \"s\": \"t\"";
      }
      out += ", \"pid\": " + std::to_string(e.pid) + ", \"tid\": " + std::to_string(e.tid);
      if (e.left_open) out += ", \"args\": {\"left_open\": true}";
      out += "}";
    }
    out += "\n]}\n";
    return out;
  }

  /// Writes json() to `path`: a temporary file beside it (path + ".tmp"), renamed into place (no
  /// half-written trace). Error naming `path` and the system's reason when it cannot be written.
  void write(const std::filesystem::path& path) {
    const std::string text = json();
    const std::filesystem::path tmp = path.string() + ".tmp";
    const auto fail = [&](const std::string& why) {
      throw Error(Errc::runtime_failure, "TraceRecorder::write: cannot write the trace to " + path.string() + ": " + why);
    };
    errno = 0;
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (f == nullptr) fail(std::string(std::strerror(errno)) + " (creating " + tmp.string() + ")");
    const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    const int write_errno = errno;
    if (std::fclose(f) != 0 || !ok) {
      const int err = ok ? errno : write_errno;
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      fail(std::string(std::strerror(err)) + " (writing " + tmp.string() + ")");
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
      const std::string why = ec.message();
      std::filesystem::remove(tmp, ec);
      fail(why + " (renaming " + tmp.string() + " to it)");
    }
  }

  static constexpr int host_pid = 1;

 private:
  void require_recording(const char* call) const {
    if (!recording_.load(std::memory_order_relaxed)) {
      throw InvalidStateError(std::string("TraceRecorder::") + call +
                              ": the recorder has stopped (stop(), events(), json() or write() ends recording)");
    }
  }

  /// AnyBackend: the stream must be of the backend's active alternative (the track is named after it and
  /// its events are that backend's), as everywhere a backend and a stream are passed together.
  template <class B>
  static void require_same_backend(const char* call, const B& b, const typename B::StreamRef& s) {
    if constexpr (requires { b.index(); s.index(); s.backend_name(); }) {
      if (b.index() != s.index()) {
        throw InvalidArgumentError(std::string("TraceRecorder::") + call + ": the stream is a " +
                                   std::string(s.backend_name()) + " stream, but the backend passed with it is " +
                                   std::string(b.name()) + "; handles of different backends do not mix");
      }
    }
  }

  template <class B>
  static std::string process_name(const B& b, const typename B::StreamRef& s) {
    return std::string(b.name()) + ":" + std::to_string(s.device_index());
  }

  detail::TraceTrack* find_track(const std::string& process, std::uint64_t id) {
    for (auto& t : tracks_) {
      if (t->stream_id == id && t->process == process) return t.get();
    }
    return nullptr;
  }

  template <class B>
  detail::TraceTrack& track(const B& b, typename B::StreamRef s) {
    const std::string process = process_name(b, s);
    const std::uint64_t id = s.id();
    if (detail::TraceTrack* t = find_track(process, id)) return *t;
    auto t = std::make_unique<detail::TraceTrackOf<B>>(s, origin_);
    t->process = process;
    t->stream_id = id;
    int pid = host_pid + 1;
    for (const auto& o : tracks_) {
      if (o->process == process) {
        pid = o->pid;
        break;
      }
      pid = std::max(pid, o->pid + 1);
    }
    t->pid = pid;
    tracks_.push_back(std::move(t));
    return *tracks_.back();
  }

  // The host ranges as spans: B and E matched per thread and domain; an E without its B (the range
  // was open when recording started) is dropped, a B without its E ends when recording stopped.
  void append_host_ranges(std::vector<TraceEvent>& out) const {
    struct Open {
      std::uint64_t tid;
      std::string domain;
      std::vector<std::pair<std::string, double>> stack;
    };
    std::vector<Open> open;
    const auto find = [&](std::uint64_t tid, const std::string& domain) -> Open& {
      for (auto& o : open) {
        if (o.tid == tid && o.domain == domain) return o;
      }
      return open.emplace_back(Open{tid, domain, {}});
    };
    const auto category = [](const std::string& domain) { return domain.empty() ? std::string("range") : "range," + domain; };
    for (const auto& e : host_) {
      Open& o = find(e.tid, e.domain);
      if (e.push) {
        o.stack.emplace_back(e.name, e.ts_us);
      } else if (!o.stack.empty()) {
        out.push_back({o.stack.back().first, category(e.domain), 'X', o.stack.back().second,
                       e.ts_us - o.stack.back().second, host_pid, e.tid});
        o.stack.pop_back();
      }
    }
    for (auto& o : open) {
      while (!o.stack.empty()) {
        out.push_back({o.stack.back().first, category(o.domain), 'X', o.stack.back().second,
                       stopped_us_ - o.stack.back().second, host_pid, o.tid});
        o.stack.pop_back();
      }
    }
  }

  std::chrono::steady_clock::time_point origin_;
  std::atomic<bool> recording_{false};  // written under mutex_; read without it by recording()
  double stopped_us_ = 0;
  std::mutex mutex_;
  std::vector<std::unique_ptr<detail::TraceTrack>> tracks_;
  std::vector<TraceEvent> resolved_;
  std::vector<detail::TraceHostLog::Entry> host_;
};

}  // namespace accel::profile
