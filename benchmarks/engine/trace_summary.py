#!/usr/bin/env python3
"""Where the engine's step goes, from its --trace file: the stream spans by name (the ops inside each
layer — gemm, attention, layernorm, gelu, dropout and their backward — and the phases around them),
summed over the traced steps, per step and as a share of the step.

  engine --size gpt2 --dtype bf16 --steps 5 --trace trace.json --trace-steps 4
  benchmarks/engine/trace_summary.py trace.json

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
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 2
    events = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
    steps = [e for e in events if e.get("cat") == "range" and e["name"] == "step"]
    if not steps:
        sys.exit("trace_summary.py: no 'step' range in the trace")
    step_us = sum(e["dur"] for e in steps) / len(steps)
    total = collections.Counter()
    count = collections.Counter()
    for e in events:
        if e.get("cat") != "stream":
            continue
        name = e["name"]
        # "layer 3" / "layer 3 backward": one row for every layer
        if name.startswith("layer "):
            name = "layer N" + (" backward" if name.endswith("backward") else "")
        total[name] += e["dur"]
        count[name] += 1
    print(f"{len(steps)} steps traced, {step_us / 1e3:.2f} ms per step (host range)")
    print(f"{'span':24s} {'per step':>9s} {'ms/step':>9s} {'share':>7s}")
    for name, us in total.most_common():
        print(f"{name:24s} {count[name] / len(steps):9.1f} {us / len(steps) / 1e3:9.3f} {100 * us / len(steps) / step_us:6.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
