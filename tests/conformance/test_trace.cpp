// profile::TraceRecorder on every backend: host ranges from range_push/range_pop, stream spans timed
// on the stream, marks, the Chrome-trace JSON, and the refusals.
#include "backends.hpp"

#include <accel/profile/scoped_range.hpp>
#include <accel/profile/trace.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace {

using accel::profile::TraceEvent;

std::vector<TraceEvent> named(const std::vector<TraceEvent>& ev, const std::string& name) {
  std::vector<TraceEvent> out;
  for (const auto& e : ev) {
    if (e.name == name) out.push_back(e);
  }
  return out;
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

}  // namespace

TEST_CASE_TEMPLATE_DEFINE("profile: a trace holds the ranges, the stream's spans at the stream's times, and marks", B, trace) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  typename B::Stream s;
  b.range_push("before");  // open before recording: not in the trace
  std::vector<TraceEvent> ev;
  {
    accel::profile::TraceRecorder rec;
    CHECK(rec.recording());
    CHECK(b.range_push("step") == 2);
    rec.span_begin(b, typename B::StreamRef(s), "work");
    s.enqueue([] { sleep_ms(20); });  // the span is the stream's 20 ms, not the host's enqueue
    rec.span_end(b, typename B::StreamRef(s));
    rec.mark(b, typename B::StreamRef(s), "work done");
    CHECK(b.range_push("comm", "nccl") == 1);
    CHECK(b.range_pop("nccl") == 0);
    rec.mark("host mark");
    CHECK(b.range_pop() == 1);
    std::thread([&] {
      b.range_push("other thread");
      b.range_pop();
    }).join();
    ev = rec.events();
    CHECK_FALSE(rec.recording());
    b.range_push("after");  // stopped: not in the trace
    b.range_pop();
  }
  b.range_pop();

  const auto step = named(ev, "step");
  REQUIRE(step.size() == 1);
  CHECK(step[0].phase == 'X');
  CHECK(step[0].category == "range");
  CHECK(step[0].pid == accel::profile::TraceRecorder::host_pid);
  const auto comm = named(ev, "comm");
  REQUIRE(comm.size() == 1);
  CHECK(comm[0].category == "range,nccl");
  CHECK(comm[0].tid == step[0].tid);
  CHECK(comm[0].ts_us >= step[0].ts_us);
  CHECK(comm[0].ts_us + comm[0].dur_us <= step[0].ts_us + step[0].dur_us);
  const auto other = named(ev, "other thread");
  REQUIRE(other.size() == 1);
  CHECK(other[0].tid != step[0].tid);
  CHECK(named(ev, "before").empty());
  CHECK(named(ev, "after").empty());

  const auto work = named(ev, "work");
  REQUIRE(work.size() == 1);
  CHECK(work[0].phase == 'X');
  CHECK(work[0].category == "stream");
  CHECK(work[0].pid != accel::profile::TraceRecorder::host_pid);
  CHECK(work[0].tid == typename B::StreamRef(s).id());
  CHECK(work[0].dur_us >= 19000.0);  // the stream's sleep (timer granularity aside)
  CHECK(work[0].dur_us < 5e6);
  const auto done = named(ev, "work done");
  REQUIRE(done.size() == 1);
  CHECK(done[0].phase == 'i');
  CHECK(done[0].tid == work[0].tid);
  CHECK(done[0].ts_us >= work[0].ts_us + work[0].dur_us - 1.0);
  const auto mark = named(ev, "host mark");
  REQUIRE(mark.size() == 1);
  CHECK(mark[0].phase == 'i');
  CHECK(mark[0].pid == accel::profile::TraceRecorder::host_pid);
  CHECK(ev.size() == 6);  // step, comm, other thread, work, work done, host mark
}

TEST_CASE_TEMPLATE_DEFINE("profile: the trace's JSON names its tracks and escapes names; one recorder at a time", B,
                          trace_json) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  typename B::Stream s;
  accel::profile::TraceRecorder rec;
  CHECK_THROWS_AS(accel::profile::TraceRecorder(), accel::InvalidStateError);
  CHECK_THROWS_AS(rec.span_end(b, typename B::StreamRef(s)), accel::InvalidStateError);
  b.range_push("say \"hi\"\n");
  b.range_pop();
  rec.span_begin(b, typename B::StreamRef(s), "left open");  // closed by events() at the stream's point
  const auto path = std::filesystem::temp_directory_path() / ("accel-trace-" + std::to_string(::getpid()) + ".json");
  rec.write(path);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string j = text.str();
  std::filesystem::remove(path);
  CHECK(j.rfind("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [", 0) == 0);
  CHECK(j.find("\"say \\\"hi\\\"\\n\"") != std::string::npos);
  CHECK(j.find("{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 1, \"tid\": 0, \"args\": {\"name\": \"host\"}}") !=
        std::string::npos);
  const std::string track = "\"args\": {\"name\": \"stream " + std::to_string(typename B::StreamRef(s).id()) + "\"}";
  CHECK(j.find(track) != std::string::npos);
  CHECK(j.find("\"name\": \"left open\", \"cat\": \"stream\", \"ph\": \"X\"") != std::string::npos);
  CHECK(j.find("\"process_name\", \"pid\": 2, \"tid\": 0, \"args\": {\"name\": \"" + std::string(b.name()) + ":") !=
        std::string::npos);
  CHECK_FALSE(std::filesystem::exists(path.string() + ".tmp"));
  // Stopped: a new recorder may start.
  accel::profile::TraceRecorder next;
  CHECK(next.recording());
  CHECK_THROWS_AS(next.write("/nonexistent-dir/trace.json"), accel::Error);
}

TEST_CASE("profile: ScopedRange pushes when made and pops when its scope ends, an exception's end included") {
  std::vector<TraceEvent> ev;
  {
    accel::profile::TraceRecorder rec;
    {
      const accel::profile::ScopedRange outer{"outer"};
      try {
        const accel::profile::ScopedRange inner{"inner", "io"};
        // Each domain nests on its own: the default one holds outer, "io" holds inner.
        CHECK(accel::profile::range_push("probe") == 2);
        CHECK(accel::profile::range_pop() == 1);
        CHECK(accel::profile::range_push("probe", "io") == 2);
        CHECK(accel::profile::range_pop("io") == 1);
        throw std::runtime_error("leave the scope early");
      } catch (const std::runtime_error&) {
      }
      CHECK(accel::profile::range_push("probe", "io") == 1);  // inner closed by the exception
      CHECK(accel::profile::range_pop("io") == 0);
      CHECK(accel::profile::range_push("probe") == 2);  // outer still open
      CHECK(accel::profile::range_pop() == 1);
    }
    CHECK_THROWS_AS(accel::profile::range_pop(), accel::InvalidStateError);  // nothing left open
    ev = rec.events();
  }
  CHECK(named(ev, "probe").size() == 4);
  const auto outer = named(ev, "outer");
  const auto inner = named(ev, "inner");
  REQUIRE(outer.size() == 1);
  REQUIRE(inner.size() == 1);
  CHECK(outer[0].phase == 'X');
  CHECK(inner[0].category == "range,io");
  CHECK(inner[0].ts_us >= outer[0].ts_us);
  CHECK(inner[0].ts_us + inner[0].dur_us <= outer[0].ts_us + outer[0].dur_us);
}

TEST_CASE_TEMPLATE_APPLY(trace, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(trace_json, ConformanceBackends);
