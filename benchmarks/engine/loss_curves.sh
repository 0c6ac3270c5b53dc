#!/usr/bin/env bash
# The loss-against-time plot: the engine's tiny run (its defaults) and PyTorch's same model (the README's
# yardstick: AdamW lr 1e-3 constant, betas 0.9/0.99, wd 0.1 on 2-D weights, clip 1.0, batch 12) for as
# many seconds, on the same cores; their training and validation losses against training seconds go to
# benchmarks/results/engine.json (accel-bench/1, family "engine"), which scripts/plots.sh draws as
# benchmarks/plots/engine.png.
#   benchmarks/engine/loss_curves.sh [THREADS] [SECONDS]      (defaults: 2, 60; needs torch)
set -euo pipefail
cd "$(dirname "$0")/../.."
threads="${1:-2}"
seconds="${2:-60}"
engine=build/default/examples/engine/engine
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ACCEL_BACKEND=cpu OMP_NUM_THREADS="$threads" "$engine" --size tiny --threads "$threads" --time "$seconds" \
  --print-every 100 --eval-every 250 --metrics "$tmp/accel.csv" --quiet
OMP_NUM_THREADS="$threads" python3 benchmarks/engine/torch_gpt.py train --seconds "$seconds" --threads "$threads" \
  --csv "$tmp/torch.csv"
mkdir -p benchmarks/results
python3 - "$tmp/accel.csv" "$tmp/torch.csv" "$threads" "$seconds" > benchmarks/results/engine.json <<'PY'
import csv, datetime, json, os, re, subprocess, sys
accel, torch_csv, threads, seconds = sys.argv[1:5]
lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
f = dict(re.findall(r"^(Model name|CPU family|Model):\s*(.*)$", lscpu, re.M))
cpu = f"{f.get('Model name', '?')} (family {f.get('CPU family', '?')}, model {f.get('Model', '?')}; {os.cpu_count()} CPUs)"
points = []
def add(series, x, y):
    points.append({"series": series, "group": "", "x": float(x), "metric": "loss", "median": float(y),
                   "min": float(y), "max": float(y), "n": 1})
for row in csv.DictReader(open(accel)):
    add("accel train", row["elapsed_s"], row["train_loss"])
    if row["val_loss"]:
        add("accel val", row["elapsed_s"], row["val_loss"])
for row in csv.DictReader(open(torch_csv)):
    add("torch train", row["elapsed_s"], row["train_loss"])
    add("torch val", row["elapsed_s"], row["val_loss"])
json.dump({"format": "accel-bench/1", "family": "engine",
           "command": f"benchmarks/engine/loss_curves.sh {threads} {seconds}", "cpu": cpu, "device": cpu,
           "date": datetime.date.today().isoformat(), "rounds": 1,
           "notes": {"accel": "engine --size tiny (its defaults)", "torch": "torch_gpt.py train (lr 1e-3 constant)",
                     "threads": threads},
           "points": points, "ratios": []}, sys.stdout, indent=1)
PY
echo "loss_curves: benchmarks/results/engine.json"
if [[ -x scripts/plots.sh ]]; then
  scripts/plots.sh
else
  echo "loss_curves: scripts/plots.sh is not in this checkout; it draws benchmarks/results/engine.json when it is"
fi
