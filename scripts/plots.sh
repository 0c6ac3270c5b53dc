#!/usr/bin/env bash
# Draws every benchmark family's results (benchmarks/results/*.json, format "accel-bench/1", see
# benchmarks/README.md) as PNGs under benchmarks/plots/. Installs matplotlib when it is missing
# (Debian's python3-matplotlib for /usr/bin/python3, else pip), then does nothing more on later runs.
#   scripts/plots.sh [RESULTS_DIR] [PLOTS_DIR]
#   scripts/plots.sh --metrics RUN.csv [RUN2.csv ...] [-o OUT.png]   (the engine's --metrics as loss curves)
set -euo pipefail
cd "$(dirname "$0")/.."

pick_python() {
  for py in "${PYTHON:-python3}" /usr/bin/python3; do
    if command -v "$py" >/dev/null && "$py" -c "import matplotlib" 2>/dev/null; then
      echo "$py"
      return 0
    fi
  done
  return 1
}

if ! py=$(pick_python); then
  echo "plots: installing matplotlib" >&2
  sudo=""
  [[ $(id -u) -ne 0 ]] && command -v sudo >/dev/null && sudo="sudo"
  if command -v apt-get >/dev/null &&
     { $sudo apt-get install -y -qq --no-install-recommends python3-matplotlib >/dev/null 2>&1 ||
       { $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends python3-matplotlib >/dev/null 2>&1; }; }; then
    :
  else
    "${PYTHON:-python3}" -m pip install --quiet matplotlib || true
  fi
  py=$(pick_python) || { echo "plots: matplotlib could not be installed" >&2; exit 1; }
fi
exec "$py" scripts/plots.py "$@"
