#!/usr/bin/env bash
# gpu_clocks.sh CSV COMMAND... — runs COMMAND while nvidia-smi samples GPU 0 every 50 ms (SM and memory
# clocks, power, temperature, the active clock-event reasons) into CSV, then prints the samples in
# one-second bins, so that a run whose steps slow after their first seconds shows whether the clocks
# moved with them. Reads only; it changes no setting of the card.
#
#   benchmarks/engine/explore/gpu_clocks.sh /tmp/clocks.csv \
#       env ACCEL_BACKEND=cuda build/default/examples/engine/engine --size gpt2 --dtype bf16 --steps 60
set -uo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,8p' "$0"
  exit 2
fi
csv=$1
shift
fields=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu
# The reasons' field was renamed (clocks_throttle_reasons -> clocks_event_reasons); take the one the driver knows.
for reasons in clocks_event_reasons.active clocks_throttle_reasons.active; do
  nvidia-smi --query-gpu=$reasons --format=csv,noheader -i 0 > /dev/null 2>&1 && { fields=$fields,$reasons; break; }
done
nvidia-smi --query-gpu=$fields --format=csv,nounits -i 0 -lms 50 > "$csv" 2>&1 &
sampler=$!
"$@"
status=$?
kill "$sampler" 2> /dev/null
wait "$sampler" 2> /dev/null
python3 - "$csv" <<'EOF'
import csv, datetime, statistics, sys
rows = [[c.strip() for c in r] for r in csv.reader(open(sys.argv[1]))]
# Columns in the order asked: timestamp, SM clock, memory clock, power, temperature[, reasons].
samples = [r for r in rows[1:] if len(r) >= 5 and r[0][:2].isdigit()]
if not samples:
    sys.exit("gpu_clocks.sh: no samples: " + " | ".join(" ".join(r) for r in rows[:3]))
def num(x):
    try:
        return float(x)
    except ValueError:
        return float("nan")
def seconds(r):
    return datetime.datetime.strptime(r[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
t0 = seconds(samples[0])
bins = {}
for r in samples:
    bins.setdefault(int(seconds(r) - t0), []).append(r)
print("second  SM MHz median, min  memory MHz  power W  temp C  reasons (" + " ".join(rows[0][1:]) + ")")
for s in sorted(bins):
    rs = bins[s]
    sm = [num(r[1]) for r in rs]
    print("%6d  %6.0f %6.0f  %10s  %7.0f  %6s  %s" % (s, statistics.median(sm), min(sm), rs[-1][2],
          statistics.median(num(r[3]) for r in rs), rs[-1][4], ",".join(sorted({r[5] for r in rs if len(r) > 5}))))
EOF
exit $status
