#!/usr/bin/env bash
# Compile cost of including accel, next to baselines measured in the same run (issue: header-only
# users feel compile time first). Prints a table per TU: wall seconds and user+sys CPU seconds (each
# the best of N runs) and peak RSS. On a shared machine the CPU seconds are the figure to compare:
# wall time also counts the waits for a core.
#   bash benchmarks/compile/compile_cost.sh [repeats]
set -euo pipefail
cd "$(dirname "$0")/../.."
repeats="${1:-3}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cuda_inc=/usr/local/cuda/include
boost_defs=""

measure() {  # name, compiler, flags..., -- source text
  local name="$1" compiler="$2"; shift 2
  local flags=()
  while [[ "$1" != "--" ]]; do flags+=("$1"); shift; done
  shift
  printf '%s\n' "$@" >"$tmp/tu.${compiler##*/}.cpp"
  local src="$tmp/tu.${compiler##*/}.cpp"
  [[ "$compiler" == *nvcc ]] && { mv "$src" "$tmp/tu.cu"; src="$tmp/tu.cu"; }
  local best="" cpu="" rss=""
  for ((i = 0; i < repeats; i++)); do
    /usr/bin/time -f "%e %U %S %M" -o "$tmp/time" "$compiler" "${flags[@]}" -c "$src" -o "$tmp/tu.o" 2>"$tmp/err" || {
      printf '%-46s %8s %8s %10s\n' "$name" "error" "-" "-"; head -3 "$tmp/err"; return 0; }
    read -r wall user sys kb <"$tmp/time"
    local used
    used=$(awk "BEGIN{print $user + $sys}")
    if [[ -z "$best" ]] || awk "BEGIN{exit !($wall < $best)}"; then best=$wall; fi
    if [[ -z "$cpu" ]] || awk "BEGIN{exit !($used < $cpu)}"; then cpu=$used; rss=$kb; fi
  done
  printf '%-46s %8.2f %8.2f %10.0f\n' "$name" "$best" "$cpu" "$((rss / 1024))"
}

gxx=(g++ -std=c++20 -O2 -Iinclude)
cpu_only=("${gxx[@]}")
with_cuda=("${gxx[@]}" -DACCEL_HAS_CUDA=1 -DACCEL_HAS_NVTX=1 -I"$cuda_inc")
printf '%-46s %8s %8s %10s\n' "translation unit (g++ 12 -O2 unless noted)" "wall s" "cpu s" "peak MiB"
measure "empty TU" g++ -std=c++20 -O2 -- "int main() {}"
measure "<vector> + <variant>" g++ -std=c++20 -O2 -- "#include <vector>" "#include <variant>" "int main() {}"
measure "<accel/accel.hpp>, CPU only" "${cpu_only[@]}" -- "#include <accel/accel.hpp>" "int main() {}"
measure "<accel/accel.hpp> + <accel/ops.hpp> (op builders)" "${cpu_only[@]}" -- "#include <accel/accel.hpp>" "#include <accel/ops.hpp>" "int main() {}"
measure "<accel/cpu/backend.hpp> (no dispatch, no Hana)" "${cpu_only[@]}" -- "#include <accel/cpu/backend.hpp>" "int main() {}"
measure "Boost.Hana part (dispatch/detail/backend_list)" "${cpu_only[@]}" -- "#include <boost/hana/basic_tuple.hpp>" "#include <boost/hana/type.hpp>" "#include <boost/hana/unpack.hpp>" "int main() {}"
measure "Engine<CpuBackend> instantiated" "${cpu_only[@]}" -- "#include <accel/accel.hpp>" \
  "template <accel::Accelerator B> std::size_t step(B b) { typename B::Stream s; accel::FloatBuffer<B> x(64, s); typename B::Event e; e.record(s); e.synchronize(); return b.memory_allocated(); }" \
  "int main() { return int(step(accel::CpuBackend{})); }"
measure "Engine<AnyBackend> instantiated" "${cpu_only[@]}" -- "#include <accel/accel.hpp>" \
  "template <accel::Accelerator B> std::size_t step(B b) { typename B::Stream s; accel::FloatBuffer<B> x(64, s); typename B::Event e; e.record(s); e.synchronize(); return b.memory_allocated(); }" \
  "int main() { return int(step(accel::get_accelerator())); }"
if [[ -d "$cuda_inc" ]]; then
  measure "<accel/accel.hpp>, CUDA enabled (g++)" "${with_cuda[@]}" -- "#include <accel/accel.hpp>" "int main() {}"
  if command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]]; then
    nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
    measure "<accel/accel.hpp>, CUDA enabled (nvcc)" "$nvcc" -std=c++20 -O2 -Iinclude -DACCEL_HAS_CUDA=1 -DACCEL_HAS_NVTX=1 -- "#include <accel/accel.hpp>" "int main() {}"
    measure "<thrust/device_vector.h> (nvcc)" "$nvcc" -std=c++20 -O2 -- "#include <thrust/device_vector.h>" "int main() {}"
    measure "empty TU (nvcc)" "$nvcc" -std=c++20 -O2 -- "int main() {}"
  fi
fi
if python3 -c "import torch" 2>/dev/null; then
  tinc=$(python3 -c "from torch.utils.cpp_extension import include_paths; print(' '.join('-I'+p for p in include_paths()))" 2>/dev/null)
  pyinc=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['include'])")
  # shellcheck disable=SC2086
  measure "<torch/extension.h>" g++ -std=c++20 -O2 $tinc -I"$pyinc" -- "#include <torch/extension.h>" "int main() {}"
fi
