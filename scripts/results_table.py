#!/usr/bin/env python3
"""Prints RESULTS.md's summary table (Markdown) from the accel-bench/1 JSON files of a results directory:
one row per ratio that RESULTS.md quotes, with the median and min-max of the round-by-round ratio, the
device, the date and the command that produced it.

  python3 scripts/results_table.py [RESULTS_DIR]          (default benchmarks/results)

Which ratios become rows: ROWS below (family, filter on name/baseline/group/x, the row's label). A family's
rows come from RESULTS_DIR/FAMILY.json; the engine's CPU rows from the dated runs that RESULTS.md quotes for the
summary's CPU (ENGINE_CPU_RUNS: its section on the Zen 4 a week later, 2026-12-04).
"""
import json
import os
import re
import sys


def size(x):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if x >= 1 << shift:
            return f"{x / (1 << shift):g} {unit}"
    return f"{x:g} B"


def pow2(x):
    return f"2^{int(x).bit_length() - 1}"


def engine_gpu_label(r):
    """compare.py --device cuda's ratio "engine [graph] DTYPE" / "torch eager DTYPE" in group "SIZE, cuda"."""
    words = r["name"].split()
    dtype = words[-1] if words[-1] in ("fp32", "bf16", "fp16") else "fp32"
    graph = ", `--graph`" if "graph" in words else ""
    return (f"`Engine<CudaBackend>` {r['group'].split(',')[0]} {dtype}{graph}, tokens/s",
            f"PyTorch eager {dtype} (SDPA, fused AdamW)")


def engine_cpu_label(r):
    """compare.py's ratio "engine [DTYPE]" / "torch eager|torch.compile [DTYPE]" in group "SIZE, threads N"."""
    size, threads = r["group"].split(", ")
    dtype = r["name"].split()[-1] if r["name"] != "engine" else "fp32"
    torch_way = r["baseline"].replace(" " + dtype, "")
    base = ("PyTorch " + torch_way.replace("torch ", "") + (" (CPU autocast)" if dtype == "bf16" else "")).replace(
        "PyTorch torch.compile", "PyTorch, torch.compile")
    return (f"`Engine<CpuBackend>` {size} {dtype}, {threads}, tokens/s", base)


def engine_dispatch_label(r):
    """bench_engine_dispatch's ratio raw / static or raw / AnyBackend (1: the raw calls' speed)."""
    way = "Engine<CpuBackend>" if r["name"] == "static" else "Engine<AnyBackend>"
    return (f"`{way}` tiny step, 1 thread, process CPU time", "the same step in raw calls")


# The engine's CPU runs the summary quotes (RESULTS.md, "Zen 4 on another day: the engine a week later").
ENGINE_CPU_RUNS = ["epyc/engine_compare_tiny_2026-12-04.json", "epyc/engine_compare_shakespeare_bf16_2026-12-04_run2.json"]
ENGINE_DISPATCH_RUN = "epyc/engine_dispatch_2026-12-04_run2.json"

# family (or paths under RESULTS_DIR), predicate(ratio) -> bool, label(ratio) -> (benchmark text, baseline text)
ROWS = [
    (ENGINE_CPU_RUNS, lambda r: True, engine_cpu_label),
    ([ENGINE_DISPATCH_RUN], lambda r: r["baseline"] == "raw", engine_dispatch_label),
    ("cpu_adam", lambda r: r["name"] == "accel" and r["baseline"] in ("DeepSpeedCPUAdam", "torch fused"),
     lambda r: (f"CPU AdamW fp32, {pow2(r['x'])} params, {r['group'].replace('=', ' ')}", r["baseline"])),
    ("cpu_adam_kernels", lambda r: False, None),
    ("alloc", lambda r: r["x"] in (512, 65536, 1 << 20, 32 << 20, 256 << 20) and r["baseline"] == "glibc"
     or r["x"] in (512, 256 << 20) and r["baseline"] in ("jemalloc", "mimalloc"),
     lambda r: (f"alloc + touch + free, {size(r['x'])}", r["baseline"] + " malloc/free")),
    ("alloc_threaded", lambda r: r["x"] in (512, 65536, 131072) and r["baseline"] == "glibc",
     lambda r: (f"alloc + touch + free, {size(r['x'])}, multi-threaded process", r["baseline"] + " malloc/free")),
    ("dispatch", lambda r: True, lambda r: (f"dependent chain of mixed calls, {r['name']}", "raw calls (raw / way)")),
    ("rng_fill_native", lambda r: r["baseline"] in ("curand_host_uniform",),
     lambda r: (f"uniform float fill 64 MiB, {int(r['x'])} thread(s)", r["baseline"].replace("_uniform", ""))),
    ("graph", lambda r: True,
     lambda r: ("CPU graph replay, one 256-float random fill", "the same fill enqueued eagerly") if r["x"] == 256
     else (f"CPU graph replay, N = {int(r['x'])} tasks", "eager enqueue")),
    ("jit_cold", lambda r: True, lambda r: ("cold JIT build + load of CPU Adam", "DeepSpeed CPUAdamBuilder().load()")),
    ("compile_cost", lambda r: True,
     lambda r: ("compile CPU time of `" + r["name"].replace("cpu s of ", "").split(" / ")[0] + "`",
                "`" + r["baseline"] + "` (a cost ratio: lower is better)")),
    ("stream_wait", lambda r: True,
     lambda r: (f"CPU stream, caller waits: {r['group']}", "sleeping at once (`ACCEL_CPU_SPIN_US=0`)")),
    ("gpu_adam", lambda r: True, lambda r: (f"GPU AdamW, {r['group']}", r["baseline"])),
    ("engine_compare_gpu", lambda r: r["baseline"].startswith("torch eager"), lambda r: engine_gpu_label(r)),
    ("collectives", lambda r: r["baseline"] == "MPI" and (r["name"] == "accel" and r["x"] in (8, 131072, 2 << 20, 256 << 20)
                                                       or r["name"] == "accel queued" and r["x"] == 8 and r["group"] == "all_reduce"),
     lambda r: (f"{r['group']} float32, S = {size(r['x'])}, 2 ranks (MPI)" + (", stream busy" if "queued" in r["name"] else ""),
                "the blocking MPI call")),
]


def main():
    if any(a in ("-h", "--help") for a in sys.argv[1:]):
        print(__doc__.strip())
        return
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "benchmarks", "results")
    print("| benchmark | baseline | ratio: median (min–max) | device | date, load | command |")
    print("|---|---|---|---|---|---|")
    for family, keep, label in ROWS:
        paths = family if isinstance(family, list) else [family + ".json"]
        for path in paths:
            print_rows(os.path.join(src, path), keep, label)


def print_rows(path, keep, label):
    if not os.path.exists(path) or label is None:
        return
    doc = json.load(open(path))
    # "AMD EPYC (family 25, model 17: Zen 4; 2 CPUs)" -> "AMD EPYC, family 25 model 17 (Zen 4), 2 CPUs"
    m = re.match(r"(.*) \(family (\d+), model (\d+)(?:: ([^;]+))?; (\d+) CPUs\)$", doc["device"])
    dev = (f"{m[1]}, family {m[2]} model {m[3]}" + (f" ({m[4]})" if m[4] else "") + f", {m[5]} CPUs") if m \
        else doc["device"]
    for r in doc["ratios"]:
        if not keep(r):
            continue
        bench, base = label(r)
        print(f"| {bench} | {base} | **{r['median']:.2f}×** ({r['min']:.2f}–{r['max']:.2f}), "
              f"{r['n']} rounds | {dev} | {doc['date']}, {doc['load_start']:.2f} | `{doc['command']}` |")


if __name__ == "__main__":
    main()
