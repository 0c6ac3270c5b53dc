#!/usr/bin/env python3
"""Data parallel on one machine's cores: accel's engine on 2 ranks x 1 thread (mpirun, ZeRO stage 1)
against 1 rank x 2 threads, and against PyTorch DDP (gloo) on 2 processes x 1 thread, interleaved.

  benchmarks/engine/dp_compare.py [--size tiny|shakespeare] [--rounds 5] [--steps N] [--ranks 2]
                                  [--engine build/default/examples/engine/engine] [--no-torch] [--overlap]
                                  [--dtype fp32|bf16]

Every run trains the same global batch (tiny 12, shakespeare 64 sequences) from the same seed. Each
round runs, in turn: the engine on one rank with --threads R, the engine under mpirun -np R with
--threads 1 (ACCEL_COMM_LOG=1: the time in collectives), and torch_gpt.py ddp (R processes of one
thread). Figures: the engine's median ms/step over its run (start-up excluded), PyTorch's median over
its timed steps. Printed: median tokens/s (min-max over the rounds), the ratios taken round by round,
and the engine's time in collectives per step (start to completion, so it includes waiting for the
other rank) as a share of its step. The load (uptime) before and after, and the CPU as lscpu names it.
--dtype bf16: both sides in bfloat16 (the engine's --dtype bf16, fp32 master weights and Adam state; DDP's
forward under torch.autocast("cpu", bfloat16)), where the CPU has AVX512-BF16 or AMX.
PyTorch is needed for the DDP column (pip install torch); it is never a dependency of accel.
"""
import argparse
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.dirname(HERE))
import bench_support as bs  # noqa: E402
BATCH = {"tiny": 12, "shakespeare": 64}
BLOCK = {"tiny": 64, "shakespeare": 256}


def load():
    return open("/proc/loadavg").read().split()[:3]


def engine_cmd(exe, size, threads, steps, dtype):
    return [exe, "--size", size, "--steps", str(steps), "--warmup", "10", "--eval-every", "0", "--print-every",
            str(steps), "--threads", str(threads), "--dropout", "0", "--dtype", dtype]


def median_ms(out):
    return float(re.search(r"ms/step\s+([0-9.]+) median", out).group(1))


def run_single(exe, size, threads, steps, dtype):
    env = dict(os.environ, ACCEL_BACKEND="cpu")
    out = bs.run_checked(engine_cmd(exe, size, threads, steps, dtype), env)
    return median_ms(out.stdout)


def run_ranks(exe, size, ranks, steps, dtype, extra=()):
    env = dict(os.environ, ACCEL_BACKEND="cpu", ACCEL_COMM_LOG="1")
    cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-x", "ACCEL_BACKEND", "-x", "ACCEL_COMM_LOG"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += ["-np", str(ranks)] + engine_cmd(exe, size, 1, steps, dtype) + list(extra)
    out = bs.run_checked(cmd, env)
    ms = median_ms(out.stdout)
    # rank 0's ACCEL_COMM_LOG table: "mpi  <op>  <bytes>  <count>  <total ms> ..."
    comm_ms = sum(float(m.group(1)) for m in re.finditer(r"^\s+mpi\s+\w+\s+\d+\s+\d+\s+([0-9.]+)", out.stderr, re.M))
    return ms, comm_ms / steps


def run_ddp(size, ranks, steps, dtype):
    cmd = [sys.executable, os.path.join(HERE, "torch_gpt.py"), "ddp", "--size", size, "--procs", str(ranks),
           "--threads", "1", "--steps", str(steps), "--warmup", "10" if size == "tiny" else "2", "--dtype", dtype]
    out = bs.run_checked(cmd, dict(os.environ, OMP_NUM_THREADS="1"))
    return float(re.search(r"\(([0-9.]+) ms/step median", out.stdout).group(1))


def summary(values):
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", choices=BATCH, default="tiny")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=0, help="steps per run (default: tiny 150, shakespeare 8)")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--engine", default=os.path.join(ROOT, "build", "default", "examples", "engine", "engine"))
    p.add_argument("--no-torch", action="store_true")
    p.add_argument("--overlap", action="store_true", help="also the engine's R ranks with --overlap on")
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32",
                   help="bf16: the engine's --dtype bf16 (bf16 weights and activations, fp32 master weights and "
                        "Adam state) against DDP with the forward under torch.autocast(\"cpu\", bfloat16)")
    args = p.parse_args()
    steps = args.steps or (150 if args.size == "tiny" else 8)
    tokens = BATCH[args.size] * BLOCK[args.size]
    R = args.ranks
    print(f"# {args.size}, {args.dtype}: global batch {BATCH[args.size]} x block {BLOCK[args.size]}, {args.rounds} interleaved rounds, "
          f"{steps} steps per run; {bs.cpu_name()}; load before {' '.join(load())}")
    print(f"# command: benchmarks/engine/dp_compare.py {' '.join(sys.argv[1:])}")
    one, many, ddp, share, over, over_share = [], [], [], [], [], []
    for _ in range(args.rounds):
        one.append(run_single(args.engine, args.size, R, steps, args.dtype))
        ms, comm = run_ranks(args.engine, args.size, R, steps, args.dtype)
        many.append(ms)
        share.append(comm / ms)
        if args.overlap:
            ms, comm = run_ranks(args.engine, args.size, R, steps, args.dtype, ("--overlap", "on"))
            over.append(ms)
            over_share.append(comm / ms)
        if not args.no_torch:
            ddp.append(run_ddp(args.size, R, max(10, steps // 3), args.dtype))
    tok = lambda v: [tokens / (m / 1e3) for m in v]
    print(f"  accel 1 rank x {R} threads      {summary(tok(one))} tokens/s")
    print(f"  accel {R} ranks x 1 thread      {summary(tok(many))} tokens/s   (ZeRO stage 1, MPI)")
    if over:
        print(f"  accel {R} ranks, --overlap on    {summary(tok(over))} tokens/s")
    if ddp:
        print(f"  PyTorch DDP {R} x 1 thread (gloo) {summary(tok(ddp))} tokens/s")
    r = [a / b for a, b in zip(one, many)]
    print(f"  accel {R} ranks / accel 1 rank x {R} threads: {statistics.median(r):.2f}x ({min(r):.2f}-{max(r):.2f})")
    if ddp:
        r = [a / b for a, b in zip(ddp, many)]
        print(f"  accel {R} ranks / PyTorch DDP:             {statistics.median(r):.2f}x ({min(r):.2f}-{max(r):.2f})")
    print(f"  accel {R} ranks: time in collectives {statistics.median(share) * 100:.1f}% of the step "
          f"({min(share) * 100:.1f}-{max(share) * 100:.1f}; start to completion, waiting for the peer included)")
    if over:
        r = [a / b for a, b in zip(many, over)]
        print(f"  accel {R} ranks --overlap on / off:        {statistics.median(r):.2f}x ({min(r):.2f}-{max(r):.2f}); "
              f"collectives {statistics.median(over_share) * 100:.1f}% of the step (issued during backward)")
    print(f"# load after {' '.join(load())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
