#!/usr/bin/env python3
"""Where the engine's step goes, from its --trace file: the stream spans by name (the ops inside each
layer — gemm, attention, layernorm, gelu, dropout and their backward — and the phases around them),
summed over the traced steps, per step and as a share of the step. The step's time is its span on lane 0's
stream: from where the stream reaches the step (the step before done) to the last of its work.

  engine --size gpt2 --dtype bf16 --steps 5 --trace trace.json --trace-steps 4
  benchmarks/engine/trace_summary.py trace.json [--skip N]

--skip N leaves out the first N traced steps (the first step touches every activation's memory for the
first time: on the CPU at shakespeare's size in float32 it took three times a later step).

Spans nest (an op inside its layer's span), so the shares of the ops and of the layers each add up to
about the step, not together; with several streams (--streams N, the CPU's default: one per thread)
they add up to N steps, the streams' spans running side by side. On CUDA the spans are timed with
events on the stream: what ran on the GPU between two points of the stream, gaps between launches
included. Tracing slows a step (on the CPU each span is a task of its own): read the shares.
"""
import collections
import json
import sys


def main():
    args = sys.argv[1:]
    skip = 0
    if len(args) == 3 and args[1] == "--skip" and args[2].isdigit():
        skip = int(args[2])
        args = args[:1]
    if len(args) != 1 or args[0] in ("-h", "--help"):
        print(__doc__)
        return 2
    events = [e for e in json.load(open(args[0]))["traceEvents"] if e.get("ph") == "X"]
    # The step's time: its span on the stream (from where the stream reaches the step to the last of its
    # work). The host's "step" range is only the enqueueing since --run-ahead; traces written before the
    # stream span existed fall back to it.
    steps = sorted((e for e in events if e.get("cat") == "stream" and e["name"] == "step"), key=lambda e: e["ts"])
    clock = "the step's stream span"
    if not steps:
        steps = sorted((e for e in events if e.get("cat") == "range" and e["name"] == "step"), key=lambda e: e["ts"])
        clock = "host range: the enqueueing only, with --run-ahead"
    if len(steps) <= skip:
        sys.exit(f"trace_summary.py: {len(steps)} steps in the trace, none left after skipping {skip}")
    if skip:
        # Every stream's work of a step starts after lane 0's stream reached that step: count the
        # spans that start once the first counted step has begun there (host ranges: after the
        # skipped steps' enqueueing).
        begin = steps[skip]["ts"] if steps[skip].get("cat") == "stream" else steps[skip - 1]["ts"] + steps[skip - 1]["dur"]
        steps = steps[skip:]
        events = [e for e in events if e["ts"] >= begin]
    step_us = sum(e["dur"] for e in steps) / len(steps)
    total = collections.Counter()
    count = collections.Counter()
    for e in events:
        if e.get("cat") != "stream" or e["name"] == "step":
            continue
        name = e["name"]
        # "layer 3" / "layer 3 backward": one row for every layer
        if name.startswith("layer "):
            name = "layer N" + (" backward" if name.endswith("backward") else "")
        total[name] += e["dur"]
        count[name] += 1
    after = f" after the first {skip}" if skip else ""
    print(f"{len(steps)} steps traced{after}, {step_us / 1e3:.2f} ms per step ({clock})")
    streams = {e.get("tid") for e in events if e.get("cat") == "stream"}
    if len(streams) > 1:
        print(f"{len(streams)} streams side by side: their shares add up to about {len(streams)} steps")
    print(f"{'span':24s} {'per step':>9s} {'ms/step':>9s} {'share':>7s}")
    for name, us in total.most_common():
        print(f"{name:24s} {count[name] / len(steps):9.1f} {us / len(steps) / 1e3:9.3f} {100 * us / len(steps) / step_us:6.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
