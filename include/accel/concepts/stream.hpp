// accel/concepts/stream.hpp — StreamApi: in-order work queues and the events that order and time them.
//
// Types:
//   B::StreamRef   trivially copyable, non-owning view of a stream; equality-comparable.
//   B::Stream      owning, move-only; derives from (or converts to) StreamRef, so every StreamRef
//                  operation works on it. `Stream{}` creates a stream on the current device,
//                  `Stream{device, priority}` on a given one.
//   B::Event       move-only; `Event{}` without timing, `Event{true}` with timing,
//                  `Event(EventOptions{...})` with timing and/or external (accel/core/event_options.hpp).
//   B::StreamGuard makes a stream current for the calling thread; restores the previous one.
// Operations, for `const B b`, StreamRef s, Event e:
//   b.current_stream() / (i) -> StreamRef     the calling thread's current stream of device i
//   b.default_stream() / (i) -> StreamRef     the device's default stream
//   b.set_stream(s)                           makes s current (and its device current)
//   b.stream(s) -> StreamGuard                DeepSpeed's `with accelerator.stream(s):`
//   s.synchronize()        blocks until all work enqueued so far is done; rethrows a task's failure
//   s.query() -> bool      true when all work enqueued so far is done; never blocks
//   s.wait(e)              work enqueued on s after this waits for e's recorded work; does not block
//   s.wait_stream(s2)      the same for everything enqueued on s2 so far
//   s.enqueue(fn)          runs a host function in stream order (fn is void())
//   s.device_index() -> int, s.id() -> std::uint64_t (unique among live streams, stable)
//   e.record() / e.record(s)    captures the work enqueued on s (default: current stream) so far
//   e.wait() / e.wait(s)        s.wait(e): later work on s (default: current stream) waits for e (torch's Event.wait)
//   e.query() -> bool, e.synchronize()
//   e.elapsed_time(end) -> float  milliseconds between two completed, timed events; throws
//                                 InvalidStateError if either was created without timing, not recorded or
//                                 not yet completed
#pragma once

#include <accel/core/event_options.hpp>

#include <concepts>
#include <cstdint>
#include <type_traits>

namespace accel {

template <class B>
concept StreamApi =
    std::is_trivially_copyable_v<typename B::StreamRef> &&
    std::equality_comparable<typename B::StreamRef> &&
    std::movable<typename B::Stream> && !std::copyable<typename B::Stream> &&
    std::convertible_to<const typename B::Stream&, typename B::StreamRef> &&
    std::movable<typename B::Event> && !std::copyable<typename B::Event> &&
    std::default_initializable<typename B::Stream> &&
    std::constructible_from<typename B::Stream, int, int> &&
    std::default_initializable<typename B::Event> &&
    std::constructible_from<typename B::Event, bool> &&
    std::constructible_from<typename B::Event, EventOptions> &&
    !std::copyable<typename B::StreamGuard> &&
    requires(const B b, int i, typename B::StreamRef s, typename B::Event& e, const typename B::Event& ce,
             void (*fn)()) {
      { b.current_stream() } -> std::same_as<typename B::StreamRef>;
      { b.current_stream(i) } -> std::same_as<typename B::StreamRef>;
      { b.default_stream() } -> std::same_as<typename B::StreamRef>;
      { b.default_stream(i) } -> std::same_as<typename B::StreamRef>;
      b.set_stream(s);
      { b.stream(s) } -> std::same_as<typename B::StreamGuard>;
      s.synchronize();
      { s.query() } -> std::same_as<bool>;
      s.wait(ce);
      s.wait_stream(s);
      s.enqueue(fn);
      { s.device_index() } -> std::same_as<int>;
      { s.id() } -> std::same_as<std::uint64_t>;
      e.record();
      e.record(s);
      ce.wait();
      ce.wait(s);
      { ce.query() } -> std::same_as<bool>;
      ce.synchronize();
      { ce.elapsed_time(ce) } -> std::same_as<float>;
    };

}  // namespace accel
