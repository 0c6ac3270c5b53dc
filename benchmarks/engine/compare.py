#!/usr/bin/env python3
"""Tokens/s of Engine<CpuBackend> against the same model and step in PyTorch, interleaved.

  benchmarks/engine/compare.py [--size tiny|shakespeare|gpt2] [--threads 1,2] [--rounds 5] [--steps N]
                               [--compile] [--dtype fp32[,bf16]] [--device cpu|cuda] [--graph]
                               [--activation-checkpointing] [--engine build/default/examples/engine/engine]

Each round runs the engine (`--steps N`, no evaluation) and then torch_gpt.py bench (eager, and with
--compile also torch.compile) on the same corpus, batch and thread count; the engine's figure is its
median ms/step over the run, PyTorch's the median over its timed steps (after warm-up), so start-up and
compilation are not counted on either side. Rounds alternate so that a machine whose speed drifts
moves both. Prints per thread count: median tokens/s of each (min-max over the rounds), and the
ratio engine / torch taken round by round (median, min-max). The CPU is named as lscpu names it.
--dtype fp32,bf16 runs each side in each dtype every round (engine --dtype bf16; PyTorch's forward
under torch.autocast("cpu", bfloat16)), and adds the ratio engine bf16 / engine fp32.
--device cuda: Engine<CudaBackend> against PyTorch eager on the GPU (SDPA attention, fused AdamW;
bf16 under torch.autocast("cuda")), --graph adds the engine with its step replayed as a CUDA graph.
--activation-checkpointing: both sides recompute each block in backward (the engine's flag; PyTorch's
torch.utils.checkpoint around each block, use_reentrant=False).
PyTorch is needed (pip install torch); it is never a dependency of accel.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.dirname(HERE))
import bench_support as bs  # noqa: E402
BATCH = {"tiny": 12, "shakespeare": 64, "gpt2": 8}
BLOCK = {"tiny": 64, "shakespeare": 256, "gpt2": 1024}


def gpu_name():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.strip()
    except OSError:
        return "no nvidia-smi"
    return out.splitlines()[0] if out else "no GPU"


MFU = {}  # the engine's last MFU line per configuration (on a GPU: of the data sheet's peak)


def run_engine(exe, size, threads, steps, dtype="fp32", device="cpu", graph=False, ac=False):
    env = dict(os.environ, ACCEL_BACKEND=device, OMP_NUM_THREADS=str(threads))
    cmd = [exe, "--size", size, "--steps", str(steps), "--eval-every", "0", "--quiet", "--dropout", "0",
           "--dtype", dtype]
    if ac:
        cmd.append("--activation-checkpointing")
    if device == "cpu":
        cmd += ["--threads", str(threads)]
    if graph:
        cmd.append("--graph")
    out = bs.run_checked(cmd, env).stdout
    ms = float(re.search(r"ms/step\s+([0-9.]+) median", out).group(1))
    mfu = re.search(r"MFU\s+(.*)", out)
    if mfu:
        MFU[(dtype, graph)] = mfu.group(1).strip()
    return BATCH[size] * BLOCK[size] / (ms / 1e3)


def run_torch(size, threads, steps, compile_, dtype="fp32", device="cpu", ac=False):
    warmup = "10" if size == "tiny" or device == "cuda" else "2"
    cmd = [sys.executable, os.path.join(HERE, "torch_gpt.py"), "bench", "--size", size, "--threads", str(threads),
           "--steps", str(steps), "--warmup", warmup, "--dtype", dtype, "--device", device]
    if compile_:
        cmd.append("--compile")
    if ac:
        cmd.append("--checkpoint")
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = bs.run_checked(cmd, env).stdout
    return float(re.search(r": ([0-9.]+) tokens/s", out).group(1))


def summary(values):
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", choices=BATCH, default="tiny")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=0, help="steps per run (default: tiny 200, shakespeare 6)")
    p.add_argument("--compile", action="store_true", help="also torch.compile")
    p.add_argument("--dtype", default="fp32", help="comma-separated: fp32, bf16 (engine --dtype bf16, torch autocast)")
    p.add_argument("--engine", default=os.path.join(ROOT, "build", "default", "examples", "engine", "engine"))
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="cuda: the engine on CudaBackend, PyTorch on the GPU (SDPA attention, fused AdamW); "
                        "--threads is then ignored")
    p.add_argument("--graph", action="store_true", help="also the engine with --graph (the step replayed)")
    p.add_argument("--activation-checkpointing", action="store_true",
                   help="both sides recompute each block in backward: the engine's --activation-checkpointing, "
                        "torch.utils.checkpoint around each block")
    p.add_argument("--json", default="", metavar="FILE",
                   help="also write the tokens/s and the round-by-round ratios as accel-bench/1 JSON (family "
                        "engine_compare on the CPU, engine_compare_gpu on a GPU; scripts/results_table.py reads them)")
    args = p.parse_args()
    steps = args.steps or (200 if args.size == "tiny" or args.device == "cuda" else 6)
    if args.device == "cuda":
        args.threads = "0"
    where = gpu_name() if args.device == "cuda" else bs.cpu_name()
    report = bs.Report("engine_compare_gpu" if args.device == "cuda" else "engine_compare",
                       argv=["benchmarks/engine/compare.py"], device=where)
    report.command = "python3 benchmarks/engine/compare.py " + " ".join(sys.argv[1:])
    report.path = args.json
    report.rounds = args.rounds
    print(f"# {args.size} (batch {BATCH[args.size]}, block {BLOCK[args.size]}), {args.rounds} interleaved rounds, "
          f"{steps} steps per run; {where}")
    print(f"# command: benchmarks/engine/compare.py {' '.join(sys.argv[1:])}")
    print(f"# load average at start: {os.getloadavg()[0]:.2f}", flush=True)
    dtypes = args.dtype.split(",")
    for threads in (int(t) for t in args.threads.split(",")):
        rows = {}
        for _ in range(args.rounds):
            for dt in dtypes:
                tag = "" if dtypes == ["fp32"] else f" {dt}"
                ac = args.activation_checkpointing
                rows.setdefault("engine" + tag, []).append(
                    run_engine(args.engine, args.size, threads, steps, dt, args.device, ac=ac))
                if args.graph:
                    rows.setdefault("engine graph" + tag, []).append(
                        run_engine(args.engine, args.size, threads, steps, dt, args.device, graph=True, ac=ac))
                torch_steps = max(4, steps // 2)
                rows.setdefault("torch eager" + tag, []).append(
                    run_torch(args.size, threads, torch_steps, False, dt, args.device, ac=ac))
                if args.compile:
                    rows.setdefault("torch.compile" + tag, []).append(
                        run_torch(args.size, threads, torch_steps, True, dt, args.device, ac=ac))
        print(f"{threads} thread{'s' if threads > 1 else ''}:" if args.device == "cpu" else "cuda:")
        group = f"{args.size}, {'cuda' if args.device == 'cuda' else f'threads {threads}'}"
        for name, vals in rows.items():
            print(f"  {name:20s} {summary(vals)} tokens/s")
            report.point(name, group, threads, "tokens/s", bs.summarize(vals))
        for dt in dtypes:
            tag = "" if dtypes == ["fp32"] else f" {dt}"
            for name in rows:
                if name.startswith("engine") or not name.endswith(tag):
                    continue
                for engine in ("engine", "engine graph"):
                    if engine + tag not in rows:
                        continue
                    ratios = [e / t for e, t in zip(rows[engine + tag], rows[name])]
                    print(f"  {engine}{tag} / {name}: {statistics.median(ratios):.2f}x "
                          f"({min(ratios):.2f}-{max(ratios):.2f})")
                    report.ratio(engine + tag, name, group, threads, bs.summarize(ratios))
        if "engine bf16" in rows and "engine fp32" in rows:
            ratios = [b / f for b, f in zip(rows["engine bf16"], rows["engine fp32"])]
            print(f"  engine bf16 / engine fp32: {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")
        if "torch eager bf16" in rows and "torch eager fp32" in rows:
            ratios = [b / f for b, f in zip(rows["torch eager bf16"], rows["torch eager fp32"])]
            print(f"  torch autocast bf16 / torch fp32: {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")
        for (dt, graph), mfu in MFU.items():
            print(f"  engine {dt}{' graph' if graph else ''} MFU (last run): {mfu}")
            report.notes[f"{group}: engine {dt}{' graph' if graph else ''} MFU (last run)"] = mfu
        MFU.clear()
        print(f"  (load average now {os.getloadavg()[0]:.2f})", flush=True)
    report.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
