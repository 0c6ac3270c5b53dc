#!/usr/bin/env python3
"""Engine<B> (--dispatch static) against Engine<AnyBackend> (--dispatch any): the same engine binary run
with each, alternating, ROUNDS rounds; each run's median step time from its per-step metrics
(--print-every 1 --metrics), the first WARMUP steps left out (JIT, allocator warm-up), so the ratio has
the step's own resolution, not the summary line's 0.1 ms or a whole run's start-up. Prints the medians
and static ÷ any round by round (> 1: the run-time choice is slower), median and min-max.

  python3 benchmarks/engine/dispatch_compare.py [--device cuda] [--size gpt2] [--dtype bf16] \\
      [--rounds 3] [--steps 40] [--warmup 10] [--engine PATH] [--json FILE]

On the CPU, --threads N is passed to the engine. --json writes accel-bench/1 (family engine_dispatch_steps).
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.dirname(HERE))
import bench_support as bs  # noqa: E402
from compare import gpu_name  # noqa: E402  (this folder's engine-against-PyTorch harness)


def median_step_ms(engine, way, args):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.csv")
        cmd = [engine, "--size", args.size, "--dtype", args.dtype, "--steps", str(args.steps), "--eval-every", "0",
               "--quiet", "--print-every", "1", "--metrics", metrics, "--dispatch", way]
        if args.device == "cpu":
            cmd += ["--threads", str(args.threads)]
        env = dict(os.environ, ACCEL_BACKEND=args.device)
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"dispatch_compare.py: {' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()[-400:]}")
        with open(metrics, newline="") as f:
            ms = [float(row["ms_per_step"]) for row in csv.DictReader(f) if int(row["step"]) > args.warmup]
    if not ms:
        sys.exit("dispatch_compare.py: no steps after the warm-up (raise --steps)")
    return statistics.median(ms)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--size", default="tiny")
    p.add_argument("--dtype", default="fp32")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--engine", default=os.path.join(ROOT, "build", "default", "examples", "engine", "engine"))
    p.add_argument("--json", default="", metavar="FILE")
    args = p.parse_args()
    where = bs.cpu_name() if args.device == "cpu" else gpu_name()
    report = bs.Report("engine_dispatch_steps", argv=["benchmarks/engine/dispatch_compare.py"], device=where)
    report.command = "python3 benchmarks/engine/dispatch_compare.py " + " ".join(sys.argv[1:])
    report.path = args.json
    report.rounds = args.rounds
    print(f"# {args.size} {args.dtype} on {args.device}, {args.rounds} alternating rounds of {args.steps} steps "
          f"(the first {args.warmup} left out); load average {os.getloadavg()[0]:.2f}")
    runs = {"static": [], "any": []}
    for r in range(args.rounds):
        order = ("static", "any") if r % 2 == 0 else ("any", "static")
        for way in order:
            runs[way].append(median_step_ms(args.engine, way, args))
        print(f"  round {r + 1}: static {runs['static'][-1]:.3f} ms, any {runs['any'][-1]:.3f} ms", flush=True)
    ratio = [a / s for s, a in zip(runs["static"], runs["any"])]
    print(f"  median step, ms: static {statistics.median(runs['static']):.3f}, any {statistics.median(runs['any']):.3f}")
    print(f"  any / static: {statistics.median(ratio):.4f} ({min(ratio):.4f}-{max(ratio):.4f})  (> 1: run-time dispatch slower)")
    group = f"{args.size} {args.dtype}, {args.device}"
    for way, vals in runs.items():
        report.point(way, group, 0, "median ms/step", bs.summarize(vals))
    report.ratio("static", "any (time ratio any / static)", group, 0, bs.summarize(ratio))
    report.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
