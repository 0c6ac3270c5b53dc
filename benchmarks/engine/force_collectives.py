#!/usr/bin/env python3
"""What the data-parallel communication path costs a step: the engine on one rank, plain (no
collectives: the single-rank engine) against --force-collectives (the path N ranks run, on a world of
one: MPI for the CPU, NCCL for CUDA), interleaved.

  benchmarks/engine/force_collectives.py [--device cpu|cuda] [--size tiny|shakespeare|gpt2] [--dtype fp32]
                                         [--rounds 5] [--steps N] [--threads N] [--launch plain|mpirun]
                                         [--engine build/default/examples/engine/engine] [-- ENGINE ARGS...]

Each round runs both, the order alternating round by round (a machine whose speed drifts moves both),
with the same seed, batch and flags (--dropout 0, no evaluation; ENGINE ARGS after -- go to both, e.g.
-- --zero-stage 2). Forced, the engine launches every collective of the N-rank step — the gradients'
reduce-scatter (or bucketed reduces with --zero-stage 2 or --overlap; --overlap auto is on with CUDA:
on a communication stream during backward), the global norm's, the losses' and the weights'
all-gathers, the per-step stop agreement — and allocates what they need. Figures: each run's median
ms/step (the engine's summary, start-up excluded); printed: median tokens/s (min-max over the rounds)
of each, the ratio forced / plain taken round by round (median, min-max) and so the cost of the
communication path in percent, and whether the losses agreed (the train_loss column of --metrics, bit
for bit, and the largest relative difference). --launch mpirun runs both under mpirun -np 1. The
device as lscpu or nvidia-smi names it, each command, and the load before and after.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import BATCH, BLOCK, ROOT, bs, gpu_name  # noqa: E402

STEPS = {("cpu", "tiny"): 100, ("cpu", "shakespeare"): 8, ("cpu", "gpt2"): 3,
         ("cuda", "tiny"): 300, ("cuda", "shakespeare"): 150, ("cuda", "gpt2"): 30}


def load():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def command(args, forced, metrics):
    cmd = []
    if args.launch == "mpirun":
        cmd = ["mpirun", "-np", "1", "--bind-to", "none", "-x", "ACCEL_BACKEND"]
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
    cmd += [args.engine, "--size", args.size, "--dtype", args.dtype, "--steps", str(args.steps), "--eval-every", "0",
            "--print-every", "10", "--dropout", "0", "--metrics", metrics]
    if args.threads > 0:
        cmd += ["--threads", str(args.threads)]
    cmd += args.engine_args
    if forced:
        cmd.append("--force-collectives")
    return cmd


def run(args, forced, metrics, shown):
    cmd = command(args, forced, metrics)
    if len(shown) < 2:
        print(f"# {'forced' if forced else 'plain '}: ACCEL_BACKEND={args.device} {' '.join(cmd)}", flush=True)
        shown.append(forced)
    out = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, ACCEL_BACKEND=args.device))
    if out.returncode != 0:
        sys.exit(f"engine failed ({out.returncode}): {' '.join(cmd)}\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    text = out.stdout
    ms = next(float(l.split()[1]) for l in text.splitlines() if l.strip().startswith("ms/step"))
    if forced and "collectives forced on one rank" not in text:
        sys.exit("the forced run did not report the data-parallel path:\n" + text[:2000])
    backend = next((l.split(None, 1)[1] for l in text.splitlines() if l.strip().startswith("backend")), "?")
    if forced:  # "data parallel: 1 rank (nccl, collectives forced on one rank), ZeRO stage 1, ..."
        dp = next(l for l in text.splitlines() if l.startswith("data parallel:"))
        backend += "; forced: " + dp.split("(", 1)[1].split(",", 1)[0] + ", " + dp.split("), ", 1)[1].split(":", 1)[0]
    with open(metrics) as f:
        losses = [row.split(",")[3] for row in f.read().splitlines()[1:]]
    return ms, losses, backend


def main():
    sys.stdout.reconfigure(line_buffering=True)  # the commands appear before a run that fails
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--size", choices=BATCH, default="tiny")
    p.add_argument("--dtype", default="fp32")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=0, help="steps per run (default by device and size: cpu tiny 100)")
    p.add_argument("--threads", type=int, default=0, help="CPU threads (default: the engine's: OMP_NUM_THREADS, else its share of the CPUs it may run on)")
    p.add_argument("--launch", choices=["plain", "mpirun"], default="plain")
    p.add_argument("--engine", default=os.path.join(ROOT, "build", "default", "examples", "engine", "engine"))
    p.add_argument("engine_args", nargs="*", help="after --: more engine flags for both runs")
    args = p.parse_args()
    args.steps = args.steps or STEPS[(args.device, args.size)]
    tokens = BATCH[args.size] * BLOCK[args.size]
    where = gpu_name() if args.device == "cuda" else bs.cpu_name()
    print(f"# {args.size} {args.dtype} on {args.device} ({where}): {args.rounds} interleaved rounds of {args.steps} steps, "
          f"launch {args.launch}; load before {load()}")
    print(f"# command: benchmarks/engine/force_collectives.py {' '.join(sys.argv[1:])}")
    plain, forced, shown = [], [], []
    same, worst, backend = True, 0.0, "?"
    first, repeat = None, 0.0  # the plain runs against the first: what varies from run to run anyway
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            res = {}
            for f in ((False, True) if r % 2 == 0 else (True, False)):
                res[f] = run(args, f, os.path.join(tmp, f"{int(f)}.csv"), shown)
            plain.append(res[False][0])
            forced.append(res[True][0])
            backend = res[True][2]
            a, b = res[False][1], res[True][1]
            first = first or a
            for x, y in zip(first, a):
                repeat = max(repeat, abs(float(x) - float(y)) / max(abs(float(x)), 1e-30))
            same = same and a == b
            for x, y in zip(a, b):
                worst = max(worst, abs(float(x) - float(y)) / max(abs(float(x)), 1e-30))
    tok = lambda v: [tokens / (m / 1e3) for m in v]
    summ = lambda v: f"{statistics.median(v):,.0f} ({min(v):,.0f}-{max(v):,.0f})"
    print(f"  backend: {backend}")
    print(f"  plain, one rank (no collectives)      {summ(tok(plain))} tokens/s, {statistics.median(plain):.2f} ms/step")
    print(f"  --force-collectives (world of one)    {summ(tok(forced))} tokens/s, {statistics.median(forced):.2f} ms/step")
    ratio = [b / a for a, b in zip(plain, forced)]
    med = statistics.median(ratio)
    print(f"  forced / plain step time: {med:.3f}x ({min(ratio):.3f}-{max(ratio):.3f}): the communication path costs "
          f"{(med - 1) * 100:+.1f}% of the step")
    print(f"  losses: {'bit-identical in every round' if same else 'DIFFERENT'} (largest relative difference {worst:.3g}; "
          f"plain against plain over the rounds {repeat:.3g})")
    print(f"# load after {load()}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
