#!/usr/bin/env python3
"""Summarizes alternate.sh's runs: per operation and size, the median over the runs of each build of
bench_comm's in-run ratio (MPI's blocking call / accel; > 1: accel faster), its range, and after/before.
Another benchmark's runs: --baseline NAME picks its ratios against NAME (bench_alloc: glibc, jemalloc,
mimalloc).

    python3 benchmarks/comm/explore/compare_pairs.py OUTDIR [--baseline NAME]
"""
import glob
import json
import statistics
import sys


def ratios(pattern, baseline):
    found = {}
    for path in sorted(glob.glob(pattern)):
        with open(path) as f:
            run = json.load(f)
        for r in run["ratios"]:
            if r.get("baseline") == baseline:
                found.setdefault((r["group"], r["x"], r["name"]), []).append(r["median"])
    return found


def main():
    out = sys.argv[1]
    baseline = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--baseline" else "MPI"
    before, after = ratios(f"{out}/before_*.json", baseline), ratios(f"{out}/after_*.json", baseline)
    print(f"{'operation':12} {'bytes':>6} {'candidate':14} {'before':>22} {'after':>22} {'after/before':>12}")
    for key in sorted(before, key=lambda k: (k[0], k[1], k[2])):
        if key not in after:
            continue
        b, a = before[key], after[key]
        mb, ma = statistics.median(b), statistics.median(a)
        print(f"{key[0]:12} {key[1]:>6} {key[2]:14} {mb:8.3f} ({min(b):.2f}-{max(b):.2f}) {ma:8.3f} ({min(a):.2f}-{max(a):.2f}) {ma / mb:12.3f}")


if __name__ == "__main__":
    main()
