#!/usr/bin/env python3
"""Where a step's GPU time goes, kernel by kernel, from Nsight Compute's CSV of one metric
(gpu__time_duration.sum) over a few engine steps — what the engine's --trace cannot give (its spans
include the gaps between launches):

  ncu --target-processes application-only --clock-control none --metrics gpu__time_duration.sum \\
      --csv --log-file k.csv engine --size gpt2 --dtype bf16 --steps 3 --eval-every 0 --quiet
  benchmarks/engine/kernel_times.py k.csv 3

Prints the kernels by total time, per step (all launches divided by STEPS, start-up included), with
their calls per step and time per call. Under ncu accel's CUDA detection skips its forked cuInit probe
(ncu's process tracking sets NV_TPS_LAUNCH_TOKEN; other tools CUDA_INJECTION64_PATH): a probe tracked
by ncu never returned. --target-processes application-only keeps ncu off forked children as well.
"""
import collections
import csv
import sys


def main():
    if len(sys.argv) not in (2, 3) or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 2
    steps = int(sys.argv[2]) if len(sys.argv) == 3 else 1
    rows = list(csv.reader(open(sys.argv[1], newline="")))
    start = next((i for i, r in enumerate(rows) if "Kernel Name" in r and "Metric Value" in r), None)
    if start is None:
        sys.exit(f"kernel_times.py: {sys.argv[1]} has no 'Kernel Name' / 'Metric Value' header (ncu --csv output?)")
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
        sys.exit("kernel_times.py: no gpu__time_duration.sum rows")
    all_ns = sum(total.values())
    print(f"{sum(calls.values())} launches, {all_ns / 1e6 / steps:.2f} ms of kernel time per step ({steps} steps)")
    print(f"{'ms/step':>9} {'share':>6} {'calls/step':>10} {'us/call':>9}  kernel")
    for name, ns in total.most_common(40):
        print(f"{ns / 1e6 / steps:9.3f} {100 * ns / all_ns:5.1f}% {calls[name] / steps:10.1f} {ns / calls[name] / 1e3:9.1f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
