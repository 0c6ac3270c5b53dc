#!/usr/bin/env bash
# The loss-against-time plot: the engine's tiny run (its defaults: 2000 steps) and PyTorch's same model
# (the README's yardstick: AdamW lr 1e-3 constant, betas 0.9/0.99, wd 0.1 on 2-D weights, clip 1.0,
# batch 12) for as many training seconds as the engine took, on the same cores; their training and
# validation losses against training seconds go to benchmarks/results/engine.json (accel-bench/1,
# family "engine"), which scripts/plots.sh draws as benchmarks/plots/engine.png.
#   benchmarks/engine/loss_curves.sh [THREADS] [SECONDS]
#   (defaults: 2 threads; the engine's whole run. SECONDS caps both. Needs torch: pip install torch)
set -euo pipefail
cd "$(dirname "$0")/../.."
command="benchmarks/engine/loss_curves.sh $*"
threads="${1:-2}"
seconds="${2:-}"
engine=build/default/examples/engine/engine
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
load_start=$(cut -d' ' -f1 /proc/loadavg)
ACCEL_BACKEND=cpu OMP_NUM_THREADS="$threads" "$engine" --size tiny --threads "$threads" ${seconds:+--time "$seconds"} \
  --print-every 100 --eval-every 250 --metrics "$tmp/accel.csv" --quiet
# PyTorch trains for the engine's training time (the last row's elapsed seconds).
seconds=$(python3 -c 'import csv, sys; print(list(csv.DictReader(open(sys.argv[1])))[-1]["elapsed_s"])' "$tmp/accel.csv")
OMP_NUM_THREADS="$threads" python3 benchmarks/engine/torch_gpt.py train --seconds "$seconds" --threads "$threads" \
  --csv "$tmp/torch.csv" --eval-every 100
load_end=$(cut -d' ' -f1 /proc/loadavg)
mkdir -p benchmarks/results
python3 - "$tmp/accel.csv" "$tmp/torch.csv" "$threads" "$seconds" "$load_start" "$load_end" "$command" > benchmarks/results/engine.json <<'PY'
import csv, datetime, json, os, re, subprocess, sys
accel, torch_csv, threads, seconds, load_start, load_end, command = sys.argv[1:8]
lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
f = dict(re.findall(r"^(Model name|CPU family|Model):\s*(.*)$", lscpu, re.M))
cpu = f"{f.get('Model name', '?')} (family {f.get('CPU family', '?')}, model {f.get('Model', '?')}; {os.cpu_count()} CPUs)"
points = []
def add(series, x, y):
    points.append({"series": series, "group": f"{threads} thread{'s' if threads != '1' else ''}", "x": float(x), "metric": "loss", "median": float(y),
                   "min": float(y), "max": float(y), "n": 1})
for row in csv.DictReader(open(accel)):
    add("accel train", row["elapsed_s"], row["train_loss"])
    if row["val_loss"]:
        add("accel val", row["elapsed_s"], row["val_loss"])
for row in csv.DictReader(open(torch_csv)):
    add("torch train", row["elapsed_s"], row["train_loss"])
    add("torch val", row["elapsed_s"], row["val_loss"])
json.dump({"format": "accel-bench/1", "family": "engine",
           "command": command.strip(), "cpu": cpu, "device": cpu,
           "date": datetime.date.today().isoformat(), "rounds": 1,
           "load_start": float(load_start), "load_end": float(load_end),
           "notes": {"accel": "engine --size tiny (its defaults: lr 2e-3 cosine to 2e-4, warmup 100)",
                     "torch": "torch_gpt.py train (the issue's yardstick: lr 1e-3 constant), torch " + subprocess.run(
                         [sys.executable, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                         text=True).stdout.strip(),
                     "order": "one after the other (accel first), not interleaved: a loss curve is one run",
                     "threads": threads, "seconds": seconds},
           "points": points, "ratios": []}, sys.stdout, indent=1)
PY
echo "loss_curves: benchmarks/results/engine.json"
if [[ -x scripts/plots.sh ]]; then
  scripts/plots.sh
else
  echo "loss_curves: scripts/plots.sh is not in this checkout; it draws benchmarks/results/engine.json when it is"
fi
