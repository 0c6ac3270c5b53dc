// accel/core/event_options.hpp — accel::EventOptions: how an event is created (torch.cuda.Event's
// enable_timing and external arguments).
//
//   enable_timing  the event takes a timestamp when its stream reaches it, so elapsed_time() accepts it
//                  (the same as Event{true})
//   external       what a record during a graph capture means (CUDA's cudaEventRecordExternal, torch's
//                  Event(external=True)):
//                    false  the record marks a point of the capture and adds nothing to the graph (CUDA's
//                           default): only a wait on the capturing stream itself may use it; querying,
//                           synchronizing or timing it is an error until it is recorded outside a capture
//                    true   the record becomes a step of the graph: every replay records the event at that
//                           point of the replayed work, so query / synchronize / wait / elapsed_time after
//                           a replay observe that replay
//                  Outside a capture both record the same way.
//
// `Event e({.enable_timing = true, .external = true});`
#pragma once

namespace accel {

struct EventOptions {
  bool enable_timing = false;
  bool external = false;
};

}  // namespace accel
