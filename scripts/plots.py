#!/usr/bin/env python3
"""Turns benchmark results (format "accel-bench/1", benchmarks/README.md) into PNGs.

  python3 scripts/plots.py [RESULTS_DIR] [PLOTS_DIR]     (defaults: benchmarks/results benchmarks/plots)
  python3 scripts/plots.py --metrics RUN.csv [RUN2.csv ...] [-o OUT.png]
      the engine's --metrics CSVs as loss curves: training and validation loss against the step and
      against training seconds, a line per file (OUT.png defaults to the first file's name, .png)

Each RESULTS_DIR/<family>.json becomes PLOTS_DIR/<family>.png: one panel per group (threads=1,
touched, ...), one line (or bar set, when there are few x values) per series, the median drawn with
its min-max range. A family is drawn by FAMILIES' entry for it when there is one, else by the
defaults; a new benchmark family adds an entry of a few lines (or none).
"""
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# family -> how to draw it. Keys: title, xlabel, ylabel, logx, logy, xfmt ("bytes", "pow2", None, or a list
# naming the x values 0, 1, ...),
# metric (draw only the points with this metric), bars (True/False: force bars or lines),
# series_order (list), ratio_panel (True: add a panel of the ratios).
FAMILIES = {
    "alloc": dict(title="alloc + touch + free of one block", xlabel="block size", ylabel="ns per pair (median, min-max)",
                  logx=True, logy=True, xfmt="bytes", bars=False),
    "alloc_threaded": dict(title="alloc + touch + free of one block, multi-threaded process (--threaded)",
                           xlabel="block size", ylabel="ns per pair (median, min-max)", logx=True, logy=True,
                           xfmt="bytes", bars=False),
    "cpu_adam": dict(title="CPU AdamW fp32, one tensor, same process", xlabel="params", ylabel="Gparam/s",
                     xfmt="pow2", bars=True, metric="Gparam/s"),
    "cpu_adam_kernels": dict(title="CPU fused Adam (bench_adam_cpu) and its ceiling", xlabel="params",
                             ylabel="Gparam/s", xfmt="pow2", bars=True, metric="Gparam/s"),
    "rng_fill": dict(title="uniform float fill, 64 MiB", xlabel="threads", ylabel="GB/s written", bars=True),
    "graph": dict(title="CPU graph replay vs eager enqueue (N tasks + synchronize)", xlabel="tasks N",
                  ylabel="ns per task", logx=True, logy=True, bars=False),
    "compile_cost": dict(title="compile cost of one translation unit", ylabel="CPU seconds (user + sys)"),
    "dispatch": dict(title="dependent chain of mixed calls (current_device, alloc, enqueue, record, query, free)",
                     ylabel="ns per chain step (thread CPU time)", metric="ns per chain step"),
    "jit_cold": dict(title="cold JIT build + load of CPU Adam, one process", ylabel="seconds", logy=True),
    "engine": dict(title="GPT tiny on the Gutenberg plays: loss against training time, accel engine and PyTorch",
                   xlabel="training seconds", ylabel="loss (cross-entropy, nats)", bars=False),
    "engine_compare": dict(title="GPT engine against PyTorch on the CPU (benchmarks/engine/compare.py)", xlabel="threads",
                           ylabel="tokens/s (median, min-max)", bars=True, metric="tokens/s"),
    "engine_dispatch": dict(title="GPT tiny, one training step: raw calls, Engine<CpuBackend>, Engine<AnyBackend>",
                            ylabel="ms per step (median, min-max)", metric="ms per step"),
    "stream_wait": dict(title="CPU stream: a caller waiting for its work, threads polling (ACCEL_CPU_SPIN_US) vs sleeping at once",
                        ylabel="us per unit (median, min-max)", logy=True, bars=True,
                        xfmt=["round trip", "10 tasks", "gap 20 us", "fill 256", "gap 200 us"]),
    "collectives": dict(title="collectives, float32, busbw (nccl-tests' definition)", xlabel="S (bytes)",
                        ylabel="busbw GB/s (median, min-max)", logx=True, logy=True, xfmt="bytes", bars=False,
                        metric="busbw GB/s", series_order=["MPI", "MPI_I*", "accel", "accel queued"]),
}


def fmt_x(x, how):
    if isinstance(how, list):  # the names of categories numbered 0, 1, ...
        return how[int(x)] if 0 <= int(x) < len(how) else str(x)
    if how == "bytes":
        for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
            if x >= 1 << shift:
                v = x / (1 << shift)
                return f"{v:g} {unit}"
        return f"{x:g} B"
    if how == "pow2" and x > 0 and float(math.log2(x)).is_integer():
        return f"2^{int(math.log2(x))}"
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return str(x)


def title(doc, spec):
    return (f"{spec.get('title', doc['family'])}\n{doc['device']}, {doc['date']}, "
            f"{doc.get('rounds', '?')} rounds, load {doc.get('load_start', -1):.1f}")


def draw_categories(doc, spec, points, groups, series, path):
    """One value per series (no swept x): horizontal bars, the series names on the axis."""
    fig, axes = plt.subplots(1, len(groups), figsize=(max(7.0, 5.5 * len(groups)), 0.9 + 0.32 * len(series)),
                             squeeze=False)
    for ax, group in zip(axes[0], groups):
        sp = {p["series"]: p for p in points if p["group"] == group}
        names = [s for s in series if s in sp][::-1]
        med = [sp[s]["median"] for s in names]
        err = [[sp[s]["median"] - sp[s]["min"] for s in names], [sp[s]["max"] - sp[s]["median"] for s in names]]
        ax.barh(range(len(names)), med, xerr=err, capsize=3, color="tab:blue")
        ax.set_yticks(range(len(names)))
        ax.set_yticklabels(names, fontsize=8)
        for i, v in enumerate(med):
            ax.text(v, i, f" {v:.3g}", va="center", fontsize=7)
        if spec.get("logy"):
            ax.set_xscale("log")
        ax.set_xlabel(spec.get("ylabel", points[0]["metric"]))
        ax.set_title(group or "", fontsize=9)
        ax.grid(True, axis="x", alpha=0.3)
    fig.suptitle(title(doc, spec), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return True


def draw(doc, spec, path):
    points = doc["points"]
    if spec.get("metric"):
        points = [p for p in points if p["metric"] == spec["metric"]]
    if not points:
        return False
    groups = list(dict.fromkeys(p["group"] for p in points))
    series = list(dict.fromkeys(p["series"] for p in points))
    if spec.get("series_order"):
        series = [s for s in spec["series_order"] if s in series] + [s for s in series if s not in spec["series_order"]]
    xs_all = sorted(set(p["x"] for p in points), key=lambda v: (isinstance(v, str), v))
    if len(xs_all) == 1:
        return draw_categories(doc, spec, points, groups, series, path)
    bars = spec.get("bars", len(xs_all) <= 4)
    fig, axes = plt.subplots(1, len(groups), figsize=(max(6.0, 5.2 * len(groups)), 4.2), squeeze=False,
                             sharey=True)
    for ax, group in zip(axes[0], groups):
        gp = [p for p in points if p["group"] == group]
        xs = sorted(set(p["x"] for p in gp), key=lambda v: (isinstance(v, str), v))
        width = 0.8 / max(1, len(series))
        for i, s in enumerate(series):
            sp = {p["x"]: p for p in gp if p["series"] == s}
            if not sp:
                continue
            if bars:
                pos = [xs.index(x) + (i - (len(series) - 1) / 2) * width for x in xs if x in sp]
                med = [sp[x]["median"] for x in xs if x in sp]
                err = [[sp[x]["median"] - sp[x]["min"] for x in xs if x in sp],
                       [sp[x]["max"] - sp[x]["median"] for x in xs if x in sp]]
                ax.bar(pos, med, width, yerr=err, capsize=3, label=s)
            else:
                x = [v for v in xs if v in sp]
                med = [sp[v]["median"] for v in x]
                ax.plot(x, med, marker="o", ms=3, label=s)
                ax.fill_between(x, [sp[v]["min"] for v in x], [sp[v]["max"] for v in x], alpha=0.2)
        if bars:
            ax.set_xticks(range(len(xs)))
            ax.set_xticklabels([fmt_x(x, spec.get("xfmt")) for x in xs], rotation=30 if len(xs) > 4 else 0,
                               ha="right" if len(xs) > 4 else "center", fontsize=8)
        else:
            if spec.get("logx"):
                ax.set_xscale("log", base=2 if spec.get("xfmt") in ("bytes", "pow2") else 10)
            if spec.get("xfmt"):
                ax.set_xticks(xs)
                ax.set_xticklabels([fmt_x(x, spec["xfmt"]) for x in xs], rotation=45, ha="right", fontsize=7)
                ax.minorticks_off()
        if spec.get("logy"):
            ax.set_yscale("log")
        ax.set_title(group or "", fontsize=9)
        ax.set_xlabel(spec.get("xlabel", ""))
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel(spec.get("ylabel", points[0]["metric"]))
    axes[0][-1].legend(fontsize=7)
    fig.suptitle(title(doc, spec), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return True


METRICS_HEADER = "step,tokens,elapsed_s,train_loss,val_loss"


def read_metrics(path):
    """An engine --metrics CSV as (steps, seconds, train losses, [(step, seconds, val loss)])."""
    import csv

    with open(path, newline="") as f:
        first = f.readline()
        if not first.startswith(METRICS_HEADER):
            raise SystemExit(f"plots: {path} is not an engine --metrics CSV (its header is not '{METRICS_HEADER},...')")
        f.seek(0)
        steps, secs, train, val = [], [], [], []
        for row in csv.DictReader(f):
            step, sec = int(row["step"]), float(row["elapsed_s"])
            steps.append(step)
            secs.append(sec)
            train.append(float(row["train_loss"]))
            if row["val_loss"]:
                val.append((step, sec, float(row["val_loss"])))
    if not steps:
        raise SystemExit(f"plots: {path} has no rows")
    return steps, secs, train, val


def plot_metrics(paths, out):
    fig, axes = plt.subplots(1, 2, figsize=(11.0, 4.2), sharey=True)
    for i, path in enumerate(paths):
        steps, secs, train, val = read_metrics(path)
        color = f"C{i}"
        name = os.path.basename(path)
        for ax, xs, vx in ((axes[0], steps, 0), (axes[1], secs, 1)):
            ax.plot(xs, train, color=color, lw=1.2, label=f"{name}: train")
            if val:
                ax.plot([v[vx] for v in val], [v[2] for v in val], color=color, ls="--", marker="o", ms=3,
                        label=f"{name}: validation (last {val[-1][2]:.4f})")
    axes[0].set_xlabel("step")
    axes[1].set_xlabel("training seconds")
    axes[0].set_ylabel("loss (cross-entropy, nats)")
    for ax in axes:
        ax.grid(True, alpha=0.3)
    axes[1].legend(fontsize=7)
    fig.suptitle("engine --metrics: " + ", ".join(os.path.basename(p) for p in paths), fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=80)
    plt.close(fig)
    print(f"plots: {out}")


def main():
    if any(a in ("-h", "--help") for a in sys.argv[1:]):
        print(__doc__.strip())
        return
    if sys.argv[1:2] == ["--metrics"]:
        args = sys.argv[2:]
        out = None
        if "-o" in args:
            at = args.index("-o")
            if at + 1 >= len(args):
                raise SystemExit("plots: -o needs a file name")
            out = args[at + 1]
            del args[at:at + 2]
        if not args:
            raise SystemExit("plots: --metrics needs at least one CSV (engine --metrics FILE)")
        plot_metrics(args, out or os.path.splitext(args[0])[0] + ".png")
        return
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "benchmarks", "results")
    dst = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "benchmarks", "plots")
    os.makedirs(dst, exist_ok=True)
    made = 0
    for name in sorted(os.listdir(src)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(src, name)) as f:
            doc = json.load(f)
        if doc.get("format") != "accel-bench/1":
            print(f"plots: {name}: not accel-bench/1, skipped")
            continue
        out = os.path.join(dst, doc["family"] + ".png")
        # The longest FAMILIES key the family starts with ("rng_fill" draws "rng_fill_native" too).
        keys = [k for k in FAMILIES if doc["family"].startswith(k)]
        spec = FAMILIES[max(keys, key=len)] if keys else {}
        if draw(doc, spec, out):
            print(f"plots: {out}")
            made += 1
    print(f"plots: {made} PNGs in {dst}")


if __name__ == "__main__":
    main()
