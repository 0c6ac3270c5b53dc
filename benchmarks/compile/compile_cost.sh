#!/usr/bin/env bash
# Compile cost of including accel, next to baselines, in interleaved rounds (benchmarks/README.md): each
# round compiles every translation unit once, in an order rotated from round to round, so a busy spell
# of a shared machine slows them alike. Prints, per TU, CPU seconds (user + sys: the figure to compare
# on a shared machine; wall time also counts waiting for a core), wall seconds and peak RSS as median
# (min-max), then the ratios the targets are stated in, round by round.
#   bash benchmarks/compile/compile_cost.sh [rounds] [JSON_FILE]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds="${1:-5}"
json="${2:-}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cuda_inc=/usr/local/cuda/include
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)

names=() ; cmds=() ; srcs=()
add() {  # name, source text (lines joined by \n), compiler and flags...
  names+=("$1"); srcs+=("$2"); shift 2; cmds+=("$*")
}
engine='template <accel::Accelerator B> std::size_t step(B b) { typename B::Stream s; accel::FloatBuffer<B> x(64, s); typename B::Event e; e.record(s); e.synchronize(); return b.memory_allocated(); }'
gxx="g++ -std=c++20 -O2 -Iinclude"
add "empty TU" 'int main() {}' g++ -std=c++20 -O2
add "<vector> + <variant>" $'#include <vector>\n#include <variant>\nint main() {}' g++ -std=c++20 -O2
add "<accel/accel.hpp>, CPU only" $'#include <accel/accel.hpp>\nint main() {}' $gxx
add "<accel/accel.hpp> + <accel/op_builders.hpp>" $'#include <accel/accel.hpp>\n#include <accel/op_builders.hpp>\nint main() {}' $gxx
add "<accel/cpu/backend.hpp>" $'#include <accel/cpu/backend.hpp>\nint main() {}' $gxx
add "Engine<CpuBackend> instantiated" $'#include <accel/accel.hpp>\n'"$engine"$'\nint main() { return int(step(accel::CpuBackend{})); }' $gxx
add "Engine<AnyBackend> instantiated" $'#include <accel/accel.hpp>\n'"$engine"$'\nint main() { return int(step(accel::get_accelerator())); }' $gxx
if [[ -d $cuda_inc ]]; then
  add "<accel/accel.hpp>, CUDA (g++)" $'#include <accel/accel.hpp>\nint main() {}' $gxx -DACCEL_HAS_CUDA=1 -DACCEL_HAS_NVTX=1 -I$cuda_inc
  if [[ -x $nvcc ]]; then
    add "<accel/accel.hpp>, CUDA (nvcc)" $'#include <accel/accel.hpp>\nint main() {}' "$nvcc" -std=c++20 -O2 -Iinclude -DACCEL_HAS_CUDA=1 -DACCEL_HAS_NVTX=1
    add "<thrust/device_vector.h> (nvcc)" $'#include <thrust/device_vector.h>\nint main() {}' "$nvcc" -std=c++20 -O2
  fi
fi
if python3 -c "import torch" 2>/dev/null; then
  tinc=$(python3 -c "from torch.utils.cpp_extension import include_paths; print(' '.join('-I'+p for p in include_paths()))" 2>/dev/null)
  pyinc=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['include'])")
  add "<torch/extension.h>" $'#include <torch/extension.h>\nint main() {}' g++ -std=c++20 -O2 $tinc -I"$pyinc"
fi

n=${#names[@]}
: > "$tmp/results.tsv"
for ((r = 0; r < rounds; r++)); do
  for ((j = 0; j < n; j++)); do
    i=$(((r + j) % n))
    ext=cpp
    [[ ${cmds[$i]} == *nvcc* ]] && ext=cu
    printf '%s\n' "${srcs[$i]}" > "$tmp/tu$i.$ext"
    # shellcheck disable=SC2086
    if /usr/bin/time -f "%e %U %S %M" -o "$tmp/time" ${cmds[$i]} -c "$tmp/tu$i.$ext" -o "$tmp/tu.o" 2>"$tmp/err"; then
      read -r wall user sys kb <"$tmp/time"
      printf '%s\t%s\t%s\t%s\t%s\n' "$i" "$r" "$wall" "$(awk "BEGIN{print $user + $sys}")" "$kb" >> "$tmp/results.tsv"
    else
      echo "${names[$i]}: compile error"; head -3 "$tmp/err"
    fi
  done
  echo "round $((r + 1))/$rounds done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
done
printf '%s\n' "${names[@]}" > "$tmp/names"
printf '%s\n' "${cmds[@]}" > "$tmp/cmds"
PYTHONPATH=benchmarks python3 - "$tmp" "$rounds" "$json" <<'EOF'
import sys
import bench_support as bs
tmp, rounds, json_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
names = open(f"{tmp}/names").read().splitlines()
rows = [l.split("\t") for l in open(f"{tmp}/results.tsv").read().splitlines()]
cpu = {i: {} for i in range(len(names))}
wall, rss = {i: [] for i in range(len(names))}, {i: [] for i in range(len(names))}
for i, r, w, c, kb in rows:
    cpu[int(i)][int(r)] = float(c); wall[int(i)].append(float(w)); rss[int(i)].append(int(kb) / 1024)
argv = ["benchmarks/compile/compile_cost.sh", str(rounds)] + ([json_path] if json_path else [])
rep = bs.Report("compile_cost", argv)
rep.command = "bash " + " ".join(argv)
rep.path, rep.rounds = json_path, rounds
print(rep.header())
print(f"{'translation unit (g++ 12 -O2 unless noted)':44s} {'cpu s':>20s} {'wall s':>20s} {'peak MiB':>10s}")
for i, name in enumerate(names):
    if not cpu[i]:
        continue
    c = bs.summarize(list(cpu[i].values()))
    rep.point(name, "", 0, "cpu seconds", c)
    print(f"{name:44s} {bs.fmt(c):>20s} {bs.fmt(bs.summarize(wall[i])):>20s} {max(rss[i]):10.0f}")
def ratio(a, b, label):
    ia, ib = names.index(a) if a in names else -1, names.index(b) if b in names else -1
    if ia < 0 or ib < 0:
        return
    common = sorted(set(cpu[ia]) & set(cpu[ib]))
    s = bs.ratio_per_round([cpu[ia][r] for r in common], [cpu[ib][r] for r in common])
    rep.ratio(f"cpu s of {a} / cpu s of {b}", b, "", 0, s)
    print(f"{label}: {bs.fmt(s)} (cpu s, round by round)")
print()
ratio("<accel/accel.hpp>, CUDA (nvcc)", "<thrust/device_vector.h> (nvcc)", "umbrella with CUDA (nvcc) / <thrust/device_vector.h>")
ratio("<torch/extension.h>", "<accel/accel.hpp>, CPU only", "<torch/extension.h> / umbrella CPU only")
ratio("Engine<AnyBackend> instantiated", "Engine<CpuBackend> instantiated", "Engine<AnyBackend> / Engine<CpuBackend>")
rep.write()
EOF
