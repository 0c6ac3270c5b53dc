// Cycles of cross-stream waits (issue 19, item 10): a task of one stream that blocks on another while
// that one's task blocks on the first (or longer: A -> B -> C -> A) would never return. The wait that
// closes the cycle throws InvalidStateError naming the streams, reported as that task's TaskError at
// the next synchronize; the other waits of the cycle then return. Waits that form no cycle are left
// alone.
//
// Every case is bounded: a regression into a deadlock ends the process with a message after a
// deadline (deadlocked workers could never be joined, so the test could not fail any other way).
#include <accel/cpu/event.hpp>
#include <accel/cpu/stream.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

using accel::cpu::Event;
using accel::cpu::Stream;
using accel::cpu::StreamRef;
using namespace std::chrono_literals;

namespace {

// Generous: TSan runs these 5-15x slower, and each case needs milliseconds when it works.
constexpr auto deadline = 60s;

// Returns once every stream ran everything enqueued on it; past the deadline, the streams are
// deadlocked: report it and end the process (it could neither return nor destroy the streams).
void require_idle_within_deadline(std::initializer_list<StreamRef> streams, const char* what) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  for (;;) {
    bool idle = true;
    for (const StreamRef s : streams) idle = idle && s.query();
    if (idle) return;
    if (std::chrono::steady_clock::now() > until) {
      std::fprintf(stderr, "FATAL: %s: the streams are still busy after %lld s: a cycle of waits deadlocked\n", what,
                   static_cast<long long>(deadline.count()));
      std::fflush(stderr);
      std::_Exit(3);
    }
    std::this_thread::sleep_for(1ms);
  }
}

void wait_for_flags(std::initializer_list<const std::atomic<bool>*> flags) {
  for (const std::atomic<bool>* f : flags) {
    while (!f->load()) std::this_thread::yield();
  }
}

// How the waits inside the tasks ended. The wait that closes a cycle throws InvalidStateError; the
// others return once it failed — a stream synchronize then reports the failed task of the stream it
// waited for (a TaskError), as any synchronize does.
struct Outcomes {
  std::atomic<int> refused{0};   // threw InvalidStateError
  std::atomic<int> returned{0};  // returned, or reported the other task's failure
  std::atomic<int> other{0};

  template <class Wait>
  void run(Wait&& wait) {
    try {
      wait();
      returned.fetch_add(1);
    } catch (const accel::InvalidStateError&) {
      refused.fetch_add(1);
      throw;
    } catch (const accel::TaskError&) {
      returned.fetch_add(1);
      throw;
    } catch (...) {
      other.fetch_add(1);
      throw;
    }
  }
};

// What synchronizing each stream reported: the innermost exceptions of their TaskErrors (a TaskError
// may hold another stream's TaskError, reported by a synchronize inside a task).
struct Reports {
  std::vector<std::string> cycle_errors;  // innermost InvalidStateErrors
  int other_errors = 0;
};

Reports synchronize_all(std::initializer_list<StreamRef> streams) {
  Reports r;
  for (const StreamRef s : streams) {
    try {
      s.synchronize();
    } catch (const accel::TaskError& e) {
      std::exception_ptr inner = e.original();
      for (;;) {
        try {
          std::rethrow_exception(inner);
        } catch (const accel::TaskError& nested) {
          inner = nested.original();
          continue;
        } catch (const accel::InvalidStateError& original) {
          r.cycle_errors.emplace_back(original.what());
          // The TaskError the user sees carries the cycle's message.
          CHECK(std::string(e.what()).find(original.what()) != std::string::npos);
        } catch (...) {
          ++r.other_errors;
        }
        break;
      }
    }
  }
  return r;
}

// "cpu:0 stream 7 -> ": the stream as one link of the cycle the message spells out.
std::string link(const Stream& s) { return "stream " + std::to_string(s.id()) + " -> "; }

}  // namespace

TEST_CASE("cycle of two: a task of A synchronizes B while a task of B synchronizes A: one wait throws") {
  Stream a;
  Stream b;
  const StreamRef ra = a;
  const StreamRef rb = b;
  std::atomic<bool> a_in{false};
  std::atomic<bool> b_in{false};
  Outcomes waits;
  a.enqueue([&, rb] {
    a_in.store(true);
    wait_for_flags({&b_in});
    waits.run([&] { rb.synchronize(); });
  });
  b.enqueue([&, ra] {
    b_in.store(true);
    wait_for_flags({&a_in});
    waits.run([&] { ra.synchronize(); });
  });
  require_idle_within_deadline({a, b}, "cycle of two");
  CHECK(waits.refused.load() == 1);   // exactly the wait that closed the cycle
  CHECK(waits.returned.load() == 1);  // the other one returned once that task ended
  CHECK(waits.other.load() == 0);
  const Reports r = synchronize_all({a, b});
  CHECK(r.other_errors == 0);
  REQUIRE(r.cycle_errors.size() == 1);  // reported once, by one of the streams
  const std::string& what = r.cycle_errors.front();
  INFO(what);
  CHECK(what.find("cycle") != std::string::npos);
  CHECK(what.find("would never return") != std::string::npos);
  CHECK(what.find(link(a)) != std::string::npos);
  CHECK(what.find(link(b)) != std::string::npos);

  // Both streams stay usable, and a wait between them that forms no cycle now simply works.
  // B's task is enqueued first so that A's wait covers it: the wait orders B's write before A's
  // read (TSan checks that edge), and A sees it.
  int ran = 0;
  int seen_by_a = -1;
  b.enqueue([&] { ++ran; });
  a.enqueue([&, rb] {
    rb.synchronize();
    seen_by_a = ran;
    ++ran;
  });
  require_idle_within_deadline({a, b}, "after the cycle of two");
  CHECK_NOTHROW(a.synchronize());
  CHECK_NOTHROW(b.synchronize());
  CHECK(seen_by_a == 1);
  CHECK(ran == 2);
}

TEST_CASE("cycle through an event: a task of A waits for an event B records after its task that waits for A") {
  Stream a;
  Stream b;
  const StreamRef ra = a;
  Event e;
  std::atomic<bool> recorded{false};
  std::atomic<bool> b_in{false};
  Outcomes waits;
  a.enqueue([&] {
    wait_for_flags({&recorded, &b_in});
    waits.run([&] { e.synchronize(); });  // e captured B's task below: it waits for that task
  });
  b.enqueue([&, ra] {
    b_in.store(true);
    waits.run([&] { ra.synchronize(); });  // includes A's task above
  });
  e.record(b);
  recorded.store(true);
  require_idle_within_deadline({a, b}, "cycle through an event");
  CHECK(waits.refused.load() == 1);
  CHECK(waits.returned.load() == 1);
  CHECK(waits.other.load() == 0);
  const Reports r = synchronize_all({a, b});
  CHECK(r.other_errors == 0);
  REQUIRE(r.cycle_errors.size() == 1);
  INFO(r.cycle_errors.front());
  CHECK(r.cycle_errors.front().find(link(a)) != std::string::npos);
  CHECK(r.cycle_errors.front().find(link(b)) != std::string::npos);
  CHECK(e.query());
}

TEST_CASE("cycle through a stream wait: B's task synchronizes A, which waits for B (wait_stream)") {
  // The wait enqueued by a.wait_stream(b) blocks A's worker on B's task; that task synchronizes A.
  // Whichever of the two waits starts second throws: B's task, or A's wait (then A's ordering after
  // B is lost, and A's synchronize says why).
  Stream a;
  Stream b;
  const StreamRef ra = a;
  std::atomic<bool> go{false};
  Outcomes waits;
  b.enqueue([&, ra] {
    wait_for_flags({&go});
    waits.run([&] { ra.synchronize(); });
  });
  a.wait_stream(b);
  int after_wait = 0;
  a.enqueue([&] { ++after_wait; });
  go.store(true);
  require_idle_within_deadline({a, b}, "cycle through a stream wait");
  CHECK(waits.refused.load() + waits.returned.load() == 1);  // B's wait: refused, or it returned
  CHECK(waits.other.load() == 0);
  const Reports r = synchronize_all({a, b});
  CHECK(r.other_errors == 0);
  REQUIRE(r.cycle_errors.size() == 1);
  CHECK(after_wait == 1);
  INFO(r.cycle_errors.front());
  CHECK(r.cycle_errors.front().find(link(a)) != std::string::npos);
  CHECK(r.cycle_errors.front().find(link(b)) != std::string::npos);
}

TEST_CASE("cycle of three: A -> B -> C -> A is refused at the wait that closes it, naming all three") {
  Stream a;
  Stream b;
  Stream c;
  std::atomic<bool> in[3] = {false, false, false};
  Outcomes waits;
  const StreamRef next[3] = {b, c, a};
  Stream* const streams[3] = {&a, &b, &c};
  for (int i = 0; i < 3; ++i) {
    streams[i]->enqueue([&, i, target = next[i]] {
      in[i].store(true);
      wait_for_flags({&in[0], &in[1], &in[2]});
      waits.run([&] { target.synchronize(); });
    });
  }
  require_idle_within_deadline({a, b, c}, "cycle of three");
  CHECK(waits.refused.load() == 1);
  CHECK(waits.returned.load() == 2);
  CHECK(waits.other.load() == 0);
  const Reports r = synchronize_all({a, b, c});
  CHECK(r.other_errors == 0);
  REQUIRE(r.cycle_errors.size() == 1);
  const std::string& what = r.cycle_errors.front();
  INFO(what);
  for (const Stream* s : streams) CHECK(what.find(link(*s)) != std::string::npos);
}

TEST_CASE("waits between streams that form no cycle are not refused") {
  // A chain A -> B -> C (C's task is slow), and a fan-in: D and E both wait for C. Every wait
  // blocks for a while, and none throws.
  Stream a;
  Stream b;
  Stream c;
  Stream d;
  Stream e;
  const StreamRef rb = b;
  const StreamRef rc = c;
  std::atomic<bool> c_in{false};
  std::atomic<int> returned{0};
  c.enqueue([&] {
    c_in.store(true);
    std::this_thread::sleep_for(20ms);
  });
  wait_for_flags({&c_in});
  b.enqueue([&, rc] {
    rc.synchronize();
    returned.fetch_add(1);
  });
  a.enqueue([&, rb] {
    rb.synchronize();
    returned.fetch_add(1);
  });
  for (Stream* s : {&d, &e}) {
    s->enqueue([&, rc] {
      rc.synchronize();
      returned.fetch_add(1);
    });
  }
  require_idle_within_deadline({a, b, c, d, e}, "no cycle");
  for (const Stream* s : {&a, &b, &c, &d, &e}) CHECK_NOTHROW(s->synchronize());
  CHECK(returned.load() == 4);
}

TEST_CASE("a cycle is detected again and again: 50 rounds of two streams synchronizing each other") {
  // The wait-for graph is left clean after every refused and every completed wait.
  Stream a;
  Stream b;
  const StreamRef ra = a;
  const StreamRef rb = b;
  Outcomes waits;
  int reported = 0;
  for (int round = 0; round < 50; ++round) {
    std::atomic<bool> a_in{false};
    std::atomic<bool> b_in{false};
    a.enqueue([&, rb] {
      a_in.store(true);
      wait_for_flags({&b_in});
      waits.run([&] { rb.synchronize(); });
    });
    b.enqueue([&, ra] {
      b_in.store(true);
      wait_for_flags({&a_in});
      waits.run([&] { ra.synchronize(); });
    });
    require_idle_within_deadline({a, b}, "repeated cycles");
    const Reports r = synchronize_all({a, b});
    reported += static_cast<int>(r.cycle_errors.size()) + r.other_errors;
  }
  CHECK(waits.refused.load() == 50);
  CHECK(waits.returned.load() == 50);
  CHECK(reported == 50);
}
