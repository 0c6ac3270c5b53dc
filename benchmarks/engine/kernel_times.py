#!/usr/bin/env python3
"""Where a step's GPU time goes, kernel by kernel, from Nsight Compute's CSV of one metric
(gpu__time_duration.sum) over a few engine steps — what the engine's --trace cannot give (its spans
include the gaps between launches):

  ncu --target-processes application-only --clock-control none --metrics gpu__time_duration.sum \\
      --csv --log-file k.csv engine --size gpt2 --dtype bf16 --steps 3 --eval-every 0 --quiet
  benchmarks/engine/kernel_times.py k.csv 3

Prints the kernels by total time, per step (all launches divided by STEPS, start-up included), with
their calls per step and time per call. With a second CSV of a shorter run of the same program,

  benchmarks/engine/kernel_times.py k4.csv 4 k1.csv 1

the per-step figures are the difference over the steps between them ((k4 - k1) / 3): the start-up's
kernels (the weights' initialisation: random normals, scales, fills) and the first step's one-time work
drop out, which a 3-step run spreads over its steps (~0.3-0.4 ms a step at gpt2 on an H200). Under ncu accel's CUDA detection skips its forked cuInit probe
(ncu's process tracking sets NV_TPS_LAUNCH_TOKEN; other tools CUDA_INJECTION64_PATH): a probe tracked
by ncu never returned. --target-processes application-only keeps ncu off forked children as well.
"""
import collections
import csv
import sys


def read(path):
    """Per kernel name: total ns and launches, from an ncu --csv log of gpu__time_duration.sum."""
    rows = list(csv.reader(open(path, newline="")))
    start = next((i for i, r in enumerate(rows) if "Kernel Name" in r and "Metric Value" in r), None)
    if start is None:
        sys.exit(f"kernel_times.py: {path} has no 'Kernel Name' / 'Metric Value' header (ncu --csv output?)")
    hdr = rows[start]
    ki, mi, vi = hdr.index("Kernel Name"), hdr.index("Metric Name"), hdr.index("Metric Value")
    ui = hdr.index("Metric Unit") if "Metric Unit" in hdr else None
    scale = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6}
    total, calls = collections.Counter(), collections.Counter()
    for r in rows[start + 1:]:
        if len(r) <= max(ki, mi, vi) or r[mi] != "gpu__time_duration.sum":
            continue
        ns = float(r[vi].replace(",", "")) * (scale.get(r[ui], 1.0) if ui is not None else 1.0)
        name = r[ki] if len(r[ki]) <= 100 else r[ki][:97] + "..."
        total[name] += ns
        calls[name] += 1
    if not total:
        sys.exit(f"kernel_times.py: no gpu__time_duration.sum rows in {path}")
    return total, calls


def main():
    if len(sys.argv) not in (2, 3, 5) or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 2
    steps = int(sys.argv[2]) if len(sys.argv) >= 3 else 1
    total, calls = read(sys.argv[1])
    what = f"({steps} steps, start-up included)"
    if len(sys.argv) == 5:
        short_steps = int(sys.argv[4])
        if short_steps >= steps:
            sys.exit(f"kernel_times.py: the second run ({short_steps} steps) must be the shorter")
        short_total, short_calls = read(sys.argv[3])
        total.subtract(short_total)
        calls.subtract(short_calls)
        # What only the start-up ran is gone; a kernel the longer run ran fewer times says the two runs differ.
        odd = sorted(n for n in calls if calls[n] < 0)
        if odd:
            sys.exit(f"kernel_times.py: the shorter run launched more of {odd[0]!r}: not the same program and options?")
        total = collections.Counter({n: ns for n, ns in total.items() if calls[n] > 0})
        calls = collections.Counter({n: c for n, c in calls.items() if c > 0})
        what = f"(steps {short_steps + 1}-{steps}: {steps} steps' launches less {short_steps}'s)"
        steps -= short_steps
    all_ns = sum(total.values())
    print(f"{sum(calls.values())} launches, {all_ns / 1e6 / steps:.2f} ms of kernel time per step {what}")
    print(f"{'ms/step':>9} {'share':>6} {'calls/step':>10} {'us/call':>9}  kernel")
    for name, ns in total.most_common(40):
        print(f"{ns / 1e6 / steps:9.3f} {100 * ns / all_ns:5.1f}% {calls[name] / steps:10.1f} {ns / calls[name] / 1e3:9.1f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
