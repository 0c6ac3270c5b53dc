#!/usr/bin/env bash
# The checks and benchmarks that need an NVIDIA GPU, in one go, from a Release build with tests and
# benchmarks (cmake --preset default -DACCEL_BUILD_TESTS=ON -DACCEL_BUILD_BENCHMARKS=ON), run on the
# GPU machine itself or unpacked there from scripts/gpu-bundle.sh:
#
#   scripts/gpu-check.sh BUILD_DIR [RESULTS_DIR]      (PHASES="checks compare bench" by default)
#
# checks   (correctness, several processes at once): every test binary with CUDA cases (the engine's
#          Engine<CudaBackend> cases among them); the engine on CUDA against PyTorch (--dump, then
#          torch_gpt.py check: per-step losses and step-0 gradients within 1e-5); compute-sanitizer
#          memcheck / racecheck / synccheck / initcheck over the CUDA suites and a few engine steps.
# compare  (timed, alone on the GPU): GEMM through accel against raw cuBLAS (bench_blas --gpu);
#          Engine<CudaBackend> against PyTorch eager (SDPA, fused AdamW) at
#          the shakespeare and gpt2 sizes, bf16, with and without --graph (benchmarks/engine/compare.py
#          --device cuda; its JSON engine_compare_gpu_SIZE.json, kept as benchmarks/results/
#          engine_compare_gpu.json, gives RESULTS.md's summary rows), where a gpt2 step goes (a traced
#          run: benchmarks/engine/trace_summary.py; with NCU=on per kernel: kernel_times.py), the
#          communication path on one rank (force_collectives.py), static against AnyBackend, and a short
#          training run with validation loss and a sample.
# bench    (timed, alone): the allocator,
#          graphs, random fills, Thrust/CUB algorithms, fused Adam against torch in one process.
# variants (first, whenever VARIANTS="DIR ..." is set): kernel directories against each other
#          (benchmarks/engine/kernel_variants.sh); the best is ENGINE_KERNEL_DIR for the later phases.
# Environment: TESTS (the test binaries), SANITIZE=on|engine|quick|off (quick: memcheck over bf16 engine
# steps and the conformance suite, racecheck over the flash attention test; SAN_TIMEOUT s each), COMPARE ("SIZE ARGS;SIZE ARGS" for
# compare.py; off: none), TRAIN=on|off, BLAS=on|off, FORCE=on|off (force_collectives.py), DISPATCH=on|off (static
# against AnyBackend), TRACE=on|off (the traced gpt2 run), STEADY=on|off (400 gpt2 steps under gpu_clocks.sh, then 60 at each batch of STEADY_BATCHES, default 64: llm.c's micro-batch), RUN_AHEAD=on|off (--run-ahead on against off, eager and --graph, engine_ab.sh), FLASH_BACKWARD=on|off (--flash-backward fused against split, engine_ab.sh; STEADY_FLASH_BACKWARD=auto|split|fused:
# the steady runs' backward, auto the A/B's winner) narrow a visit, FOCUS=mfu to those two alone; GELU=on
# (--gelu-fusion on against off, measured in GPU run 8: off by default) widens it; NCU=on adds Nsight Compute's per-kernel times of gpt2 steps and every section of one step's flash kernels.
# Logs go to RESULTS_DIR (default ./gpu-results); after each phase they are packed into
# $PACK (default RESULTS_DIR.tgz; the JIT cache and dumps left out) so that a run stopped part way keeps what it did.
# Kernels are JIT-compiled from ACCEL_KERNEL_DIR (default: this checkout's kernels/, through the bundle's
# source folder where it was linked, see below). A summary is printed last. Exit status 1 when a test, a
# check or a sanitizer run fails.
set -uo pipefail
if [[ $# -lt 1 || $1 == -h || $1 == --help ]]; then
  awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"  # the comment above
  exit 2
fi
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=$(cd "$1" && pwd)
RES=${2:-$PWD/gpu-results}
# FOCUS=mfu: the open MFU target's measurements first and alone — the flash backward's A/B, then the steady
# gpt2 runs (batch 8 eager and --graph, batch 64) with the faster backward — a few minutes of a lent GPU's
# time; every other part off unless set.
if [[ ${FOCUS:-} == mfu ]]; then
  PHASES=${PHASES:-compare} COMPARE=${COMPARE:-off} BLAS=${BLAS:-off} RUN_AHEAD=${RUN_AHEAD:-off} FORCE=${FORCE:-off}
  TRACE=${TRACE:-off} DISPATCH=${DISPATCH:-off} TRAIN=${TRAIN:-off}
fi
PHASES=${PHASES:-checks compare bench}
[[ -n ${VARIANTS:-} && " $PHASES " != *" variants "* ]] && PHASES="variants $PHASES"
mkdir -p "$RES"
RES=$(cd "$RES" && pwd)
# A bundle built in another folder (scripts/gpu-bundle.sh records it in gpu-source-root): its binaries
# look for their test data and kernels there, so that folder is made a link to this checkout where this
# machine lacks it, and the kernels default to the folder compiled in (test_ops compares the two).
src_root=$(cat "$DIR/gpu-source-root" 2>/dev/null)
if [[ -n $src_root && $src_root != "$ROOT" ]]; then
  if [[ ! -e $src_root ]]; then
    mkdir -p "$(dirname "$src_root")" && ln -s "$ROOT" "$src_root" && echo "gpu-check: $src_root -> $ROOT (the bundle's source folder)"
  elif [[ ! $src_root -ef $ROOT ]]; then
    echo "gpu-check: warning: the bundle was built from $src_root, which is another folder here; its tests read their data there" >&2
  fi
fi
[[ -n $src_root && $src_root -ef $ROOT ]] && export ACCEL_KERNEL_DIR=${ACCEL_KERNEL_DIR:-$src_root/kernels}
export ACCEL_KERNEL_DIR=${ACCEL_KERNEL_DIR:-$ROOT/kernels}
export ACCEL_CACHE_DIR=${ACCEL_CACHE_DIR:-/tmp/accel-gpu-check-cache}
export PATH=$PATH:/usr/local/cuda/bin
# Libraries a bundle brought (scripts/gpu-bundle.sh), CUDA's, and NCCL / cuBLAS from pip's wheels.
nvidia_libs=$(python3 -c 'import glob, os, nvidia; print(":".join(sorted(glob.glob(os.path.join(list(nvidia.__path__)[0], "*", "lib")))))' 2>/dev/null)
export LD_LIBRARY_PATH=$DIR/gpu-lib:/usr/local/cuda/lib64:${nvidia_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cd "$ROOT" || exit 2
status=0
PACK=${PACK:-$RES.tgz}
# The logs and tables only (small files): the pack must stay small enough to come back from a lent machine.
pack() { (cd "$(dirname "$RES")" && find "$(basename "$RES")" -type f -size -2M -not -path '*/dump/*' |
          tar -czf "$PACK" -T -); }
find_bin() { find "$DIR" -type f -perm -u+x -name "$1" 2>/dev/null | head -1; }
stamp() { echo "[$(date -u +%H:%M:%S)] $*"; }

# Runs "$@" in the background with its output in $RES/$1.log (the first word: the log's name), then
# one line "name rc=N (S s)" in $RES/checks.log; at most $JOBS at once.
JOBS=${JOBS:-8}
job() {
  local name=$1
  shift
  while (($(jobs -rp | wc -l) >= JOBS)); do wait -n; done
  (
    start=$SECONDS
    timeout "${JOB_TIMEOUT:-300}" "$@" > "$RES/$name.log" 2>&1
    rc=$?
    echo "$name rc=$rc ($((SECONDS - start)) s) $(grep -hE 'test cases:|ERROR SUMMARY|RACECHECK SUMMARY' "$RES/$name.log" | tail -1)" >> "$RES/checks.log"
  ) &
}

{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader 2>&1
  nvcc --version 2>&1 | tail -1
  python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)' 2>&1
  report=$(find_bin accel-report)
  [[ -n $report ]] && "$report"
} > "$RES/env.log" 2>&1
stamp "env: $(head -1 "$RES/env.log")"

engine=$(find_bin engine)
# variants (VARIANTS="DIR ..." set): kernel directories against each other (benchmarks/engine/
# kernel_variants.sh); the best passing one is ENGINE_KERNEL_DIR for the phases after it.
if [[ " $PHASES " == *" variants "* && -n ${VARIANTS:-} ]]; then
  stamp "variants"
  # shellcheck disable=SC2086
  bash "$ROOT/benchmarks/engine/kernel_variants.sh" "$DIR" "$RES/variants" $VARIANTS > "$RES/variants.log" 2>&1
  if [[ -f $RES/variants/best ]]; then
    ENGINE_KERNEL_DIR=$(cat "$RES/variants/best")
    export ENGINE_KERNEL_DIR
  else
    status=1
  fi
  pack
fi
if [[ " $PHASES " == *" checks "* ]]; then
  stamp "checks"
  : > "$RES/checks.log"
  TESTS=${TESTS:-test_engine test_conformance test_ops test_blas test_cuda_device test_cuda_random test_algo_cuda
        test_dispatch test_philox test_generator test_cuda_unavailable test_blas_nvcc test_comm_nccl
        test_comm_nvcc test_nvcc_consumer}
  for t in $TESTS; do
    bin=$(find_bin "$t")
    if [[ -z $bin ]]; then echo "$t: not built" >> "$RES/checks.log"; continue; fi
    job "$t" "$bin"
  done
  if [[ -n $engine ]]; then
    job engine_vs_torch bash -c "ACCEL_BACKEND=cuda '$engine' --size tiny --steps 20 --dropout 0 --eval-every 0 --quiet \
        --dump '$RES/dump' && python3 benchmarks/engine/torch_gpt.py check '$RES/dump' --threads 4"
  fi
  # compute-sanitizer runs one at a time (several at once on one GPU failed to attach: exit 255), in
  # one background chain beside the tests.
  SANITIZE=${SANITIZE:-on}
  if [[ $SANITIZE != off ]] && command -v compute-sanitizer > /dev/null; then
    san() {  # log name, tool, binary, arguments...
      local name=$1 tool=$2 bin=$3 start rc
      shift 3
      [[ -z $bin ]] && return
      start=$SECONDS
      timeout "${SAN_TIMEOUT:-150}" compute-sanitizer --tool "$tool" --print-limit 20 "$bin" "$@" > "$RES/$name.log" 2>&1
      rc=$?
      echo "$name rc=$rc ($((SECONDS - start)) s) $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' "$RES/$name.log" | tail -1)" >> "$RES/checks.log"
    }
    (
      if [[ $SANITIZE == quick ]]; then  # the flash kernels (tiny bf16: head size 32) and the allocator
        san memcheck_engine_bf16_graph memcheck "$engine" --size tiny --steps 3 --eval-every 0 --quiet --dtype bf16 --graph
        san racecheck_test_engine racecheck "$(find_bin test_engine)" -tc='flash attention on CUDA*'
        san memcheck_engine_bf16_fused memcheck "$engine" --size tiny --steps 3 --eval-every 0 --quiet --dtype bf16 \
          --flash-backward fused --dropout 0.1
        san memcheck_test_conformance memcheck "$(find_bin test_conformance)"
        exit 0
      fi
      san memcheck_engine memcheck "$engine" --size tiny --steps 3 --eval-every 0 --quiet --dropout 0.1
      san memcheck_engine_bf16_graph memcheck "$engine" --size tiny --steps 3 --eval-every 0 --quiet --dtype bf16 --graph
      san memcheck_test_engine memcheck "$(find_bin test_engine)" -tc='*CUDA*,*Cuda*'
      san racecheck_test_engine racecheck "$(find_bin test_engine)" -tc='*attention on CUDA*'
      san memcheck_engine_bf16_fused memcheck "$engine" --size tiny --steps 3 --eval-every 0 --quiet --dtype bf16 \
        --flash-backward fused --dropout 0.1
      san synccheck_test_engine synccheck "$(find_bin test_engine)" -tc='flash attention on CUDA*'
      [[ $SANITIZE == engine ]] && exit 0  # the engine's runs only
      san memcheck_test_blas memcheck "$(find_bin test_blas)" -tc='*CUDA*,*cuda*,*Cuda*'
      san memcheck_test_ops memcheck "$(find_bin test_ops)" -tc='cuda*'
      san memcheck_test_conformance memcheck "$(find_bin test_conformance)"
      san memcheck_test_cuda_random memcheck "$(find_bin test_cuda_random)"
      san racecheck_test_ops racecheck "$(find_bin test_ops)" -tc='cuda fused*'
      san synccheck_test_cuda_random synccheck "$(find_bin test_cuda_random)"
      san initcheck_test_cuda_device initcheck "$(find_bin test_cuda_device)"
    ) &
  fi
  wait
  grep -vE "rc=0 " "$RES/checks.log" | grep -q . && status=1
  pack
fi

if [[ " $PHASES " == *" compare "* && -n $engine ]]; then
  stamp "compare"
  bin=$(find_bin bench_blas)
  [[ -n $bin && ${BLAS:-on} == on ]] && timeout 120 "$bin" --gpu --rounds 7 > "$RES/bench_blas.log" 2>&1
  COMPARE=${COMPARE:-shakespeare --dtype bf16,fp32 --rounds 3 --steps 100;gpt2 --dtype bf16 --rounds 2 --steps 30}
  specs=()
  [[ $COMPARE != off ]] && IFS=';' read -r -a specs <<< "$COMPARE"
  for size_args in "${specs[@]}"; do
    read -r size rest <<< "$size_args"
    # shellcheck disable=SC2086
    timeout 240 python3 benchmarks/engine/compare.py --device cuda --graph --size $size $rest --engine "$engine" \
      --json "$RES/engine_compare_gpu_$size.json" > "$RES/compare_$size.log" 2>&1 || status=1
    pack
  done
  # The GELU inside the MLP's GEMMs (cuBLASLt's epilogues) against the separate kernels, gpt2 bf16 eager,
  # alternating, by each run's median step (GELU=off skips it; with NCU=on also kernel by kernel).
  if [[ ${GELU:-off} == on ]]; then
    OLD_ARGS="--gelu-fusion off" NEW_ARGS="--gelu-fusion on" OUT="$RES/gelu_ab" ACCEL_BACKEND=cuda timeout 240 \
      bash benchmarks/engine/explore/engine_ab.sh "$engine" "$engine" 3 --size gpt2 --dtype bf16 --steps 40 \
      > "$RES/gelu_fusion_ab.log" 2>&1
    echo "exit status $?" >> "$RES/gelu_fusion_ab.log"
    pack
  fi
  # --run-ahead (step k + 1 enqueued before step k's losses are read) against off, gpt2 bf16, eager and
  # --graph, alternating, by each run's median step (RUN_AHEAD=off skips it).
  if [[ ${RUN_AHEAD:-on} == on ]]; then
    for mode in eager graph; do
      extra=()
      [[ $mode == graph ]] && extra=(--graph)
      OLD_ARGS="--run-ahead off" NEW_ARGS="--run-ahead on" OUT="$RES/run_ahead_ab_$mode" ACCEL_BACKEND=cuda timeout 240 \
        bash benchmarks/engine/explore/engine_ab.sh "$engine" "$engine" 3 --size gpt2 --dtype bf16 --steps 40 "${extra[@]}" \
        > "$RES/run_ahead_ab_$mode.log" 2>&1
      echo "exit status $?" >> "$RES/run_ahead_ab_$mode.log"
      pack
    done
  fi
  # --flash-backward fused (one kernel per key tile computing dq too: 5 products of a tile pair instead
  # of 7) against split (the two kernels), gpt2 bf16 eager, alternating (FLASH_BACKWARD=off skips it).
  if [[ ${FLASH_BACKWARD:-on} == on ]]; then
    OLD_ARGS="--flash-backward split" NEW_ARGS="--flash-backward fused" OUT="$RES/flash_backward_ab" ACCEL_BACKEND=cuda \
      timeout 240 bash benchmarks/engine/explore/engine_ab.sh "$engine" "$engine" 3 --size gpt2 --dtype bf16 --steps 40 \
      > "$RES/flash_backward_ab.log" 2>&1
    echo "exit status $?" >> "$RES/flash_backward_ab.log"
    pack
  fi
  # The flash backward the steady runs below use (STEADY_FLASH_BACKWARD=auto|split|fused; auto: fused where
  # the A/B above had it faster in every pair, else split, the default), written to steady_flash_backward.txt.
  steady_flash=${STEADY_FLASH_BACKWARD:-auto}
  if [[ $steady_flash == auto ]]; then
    steady_flash=split
    if grep -qE 'old / new: median [0-9.]+, range 1\.[0-9]*[1-9][0-9]*-' "$RES/flash_backward_ab.log" 2> /dev/null; then
      steady_flash=fused
    fi
  fi
  echo "--flash-backward $steady_flash (STEADY_FLASH_BACKWARD=${STEADY_FLASH_BACKWARD:-auto})" > "$RES/steady_flash_backward.txt"
  # The steady state the MFU target is about: 400 gpt2 bf16 steps, eager and --graph (--run-ahead on, the
  # default; the flash backward chosen above), while nvidia-smi samples the clocks every 50 ms (GPU run 8's card slowed under its power cap
  # after the first second); the summary's MFU is at the median step (STEADY=off skips it).
  if [[ ${STEADY:-on} == on ]]; then
    for mode in eager graph; do
      extra=()
      [[ $mode == graph ]] && extra=(--graph)
      timeout 150 bash benchmarks/engine/explore/gpu_clocks.sh "$RES/steady_clocks_$mode.csv" env ACCEL_BACKEND=cuda \
        "$engine" --size gpt2 --dtype bf16 --steps 400 --eval-every 0 "${extra[@]}" --flash-backward "$steady_flash" \
        --metrics "$RES/steady_$mode.csv" \
        > "$RES/steady_$mode.log" 2>&1
      pack
    done
    # llm.c's configuration per GPU (its MFU anchor: 8 x H100, a micro-batch of 64 x 1024 tokens a rank, one
    # a step): --batch 64, eager, 60 steps (21.8 GB of bf16 activations with the flash kernels). The
    # optimizer's and the step boundary's fixed costs (~1.5 ms at batch 8) are spread over 8 times the
    # tokens. Then the same with --activation-checkpointing (3.8 GB of activations): what recomputing
    # each block's forward costs a step on the GPU.
    for batch in ${STEADY_BATCHES:-64}; do
      for ac in "" --activation-checkpointing; do
        tag=batch$batch${ac:+_ac}
        timeout 150 bash benchmarks/engine/explore/gpu_clocks.sh "$RES/steady_clocks_$tag.csv" env ACCEL_BACKEND=cuda \
          "$engine" --size gpt2 --dtype bf16 --batch "$batch" --steps 60 --eval-every 0 $ac --flash-backward "$steady_flash" \
          --metrics "$RES/steady_$tag.csv" \
          > "$RES/steady_$tag.log" 2>&1
        pack
      done
    done
  fi
  # The communication path's cost on one GPU: the plain single-rank engine against --force-collectives
  # (NCCL on a world of one: every collective of N ranks, --overlap's comm stream), interleaved.
  if [[ ${FORCE:-on} == on ]]; then
    timeout 120 python3 benchmarks/engine/force_collectives.py --device cuda --size shakespeare --dtype bf16 --rounds 3 \
      --engine "$engine" > "$RES/force_collectives.log" 2>&1
    echo "exit status $?" >> "$RES/force_collectives.log"
    pack
  fi
  # Where a gpt2 step goes: the ops' spans of a traced run (CUDA events on the stream).
  if [[ ${TRACE:-on} == on ]]; then
    ACCEL_BACKEND=cuda timeout 120 "$engine" --size gpt2 --dtype bf16 --steps 6 --eval-every 0 --quiet \
      --trace "$RES/trace_gpt2.json" --trace-steps 4 > "$RES/trace_gpt2.log" 2>&1 &&
      python3 benchmarks/engine/trace_summary.py "$RES/trace_gpt2.json" > "$RES/trace_gpt2.txt" 2>&1
    pack
  fi
  # Engine<CudaBackend> against Engine<AnyBackend> (run-time dispatch), alternating, three rounds, by each
  # run's median step after its first 10 (per-step metrics: the summary's 0.1 ms is too coarse for 1 %).
  if [[ ${DISPATCH:-on} == on ]]; then
    timeout 180 python3 benchmarks/engine/dispatch_compare.py --device cuda --size gpt2 --dtype bf16 --rounds 3 \
      --steps 40 --engine "$engine" --json "$RES/engine_dispatch_steps.json" > "$RES/dispatch.log" 2>&1
    pack
  fi
  # Kernel by kernel (NCU=on; Nsight Compute, one metric over gpt2 runs of 4 steps and of 1): the trace's
  # spans include launch gaps, this does not; the difference of the two runs leaves out the start-up's
  # kernels (the weights' initialisation) and the first step's one-time work. --cache-control none: ncu's
  # default flushes the caches before every kernel, which a step does not (a kernel reads what the one
  # before it wrote from L2).
  if [[ ${NCU:-off} == on ]] && command -v ncu > /dev/null; then
    for n in 4 1; do
      ACCEL_BACKEND=cuda timeout 150 ncu --target-processes application-only --clock-control none --cache-control none \
        --metrics gpu__time_duration.sum --csv --log-file "$RES/ncu_gpt2_$n.csv" "$engine" --size gpt2 --dtype bf16 --steps $n --eval-every 0 --quiet > "$RES/ncu_gpt2_$n.log" 2>&1
    done
    python3 benchmarks/engine/kernel_times.py "$RES/ncu_gpt2_4.csv" 4 "$RES/ncu_gpt2_1.csv" 1 > "$RES/kernel_times_gpt2.txt" 2>&1
    # The same with the one-kernel flash backward (--flash-backward fused)
    for n in 4 1; do
      ACCEL_BACKEND=cuda timeout 150 ncu --target-processes application-only --clock-control none --cache-control none \
        --metrics gpu__time_duration.sum --csv --log-file "$RES/ncu_gpt2_fused_$n.csv" "$engine" --size gpt2 --dtype bf16 \
        --flash-backward fused --steps $n --eval-every 0 --quiet > "$RES/ncu_gpt2_fused_$n.log" 2>&1
    done
    python3 benchmarks/engine/kernel_times.py "$RES/ncu_gpt2_fused_4.csv" 4 "$RES/ncu_gpt2_fused_1.csv" 1 \
      > "$RES/kernel_times_gpt2_fused.txt" 2>&1
    # Why the flash kernels run at ~200 TFLOP/s: every section (warp stall reasons, scheduler issue,
    # pipe utilisation, occupancy, shared memory) of the last layer's forward, dq and dk/dv of one step
    # (the 12th matching launch on). The .ncu-rep opens in Nsight Compute; the CSV is its details page.
    ACCEL_BACKEND=cuda timeout 240 ncu --target-processes application-only --set full --kernel-name regex:gpt_flash \
      --launch-skip 11 --launch-count 3 -f -o "$RES/flash_sections" "$engine" --size gpt2 --dtype bf16 --steps 1 \
      --eval-every 0 --quiet > "$RES/flash_sections.log" 2>&1 &&
      ncu --import "$RES/flash_sections.ncu-rep" --page details --csv > "$RES/flash_sections.csv" 2>> "$RES/flash_sections.log"
    pack
  fi
  if [[ ${TRAIN:-on} == on ]]; then
    ACCEL_BACKEND=cuda timeout 90 "$engine" --size shakespeare --dtype bf16 --time 45 --eval-every 500 --sample 300 \
      --metrics "$RES/train_shakespeare_bf16.csv" > "$RES/train_shakespeare_bf16.log" 2>&1 || status=1
    pack
  fi
fi

if [[ " $PHASES " == *" bench "* ]]; then
  stamp "bench"
  run_bench() {  # log name, binary name, arguments...
    local log=$1 name=$2 bin
    shift 2
    bin=$(find_bin "$name")
    if [[ -z $bin ]]; then echo "$name: not built" >> "$RES/$log"; return; fi
    timeout 200 "$bin" "$@" >> "$RES/$log" 2>&1
  }
  run_bench bench_memory.log bench_cuda_memory --benchmark_min_time=0.2
  run_bench bench_graph.log bench_cuda_graph --benchmark_min_time=0.2 --rounds=3 --json="$RES/cuda_graph.json"
  run_bench bench_rng.log bench_rng_fill_gpu --rounds=7 --json="$RES/rng_fill_gpu.json"
  run_bench bench_algo.log bench_algo_cuda --rounds=3 --json="$RES/algo_cuda.json"
  pack
  adam=$(find_bin bench_adam_gpu)
  if [[ -n $adam ]]; then
    timeout 300 bash "$ROOT/benchmarks/ops/run_gpu_adam.sh" "$(dirname "$adam")" "$RES/adam" > "$RES/adam.log" 2>&1
  fi
  pack
fi

echo "## accel GPU check ($(head -1 "$RES/env.log"))"
[[ -f $RES/variants/variants.md ]] && { echo "--- variants"; cat "$RES/variants/variants.md"; tail -1 "$RES/variants.log"; }
if [[ -f $RES/checks.log ]]; then
  sort "$RES/checks.log"
  # What failed, briefly: doctest's failing checks, sanitizer reports, crashes.
  grep -vE " rc=0 " "$RES/checks.log" | grep -oE "^[A-Za-z0-9_]+ rc=" | sed 's/ rc=//' | while read -r name; do
    echo "--- $name"
    grep -hE -A3 "ERROR:|FATAL|Segmentation|terminate|what\(\)|Error:|Invalid|Hazard|= [A-Z].*error" "$RES/$name.log" | head -40
    tail -5 "$RES/$name.log"
  done
fi
for f in "$RES"/compare_*.log; do [[ -f $f ]] && { echo "--- $(basename "$f")"; grep -vE "^# (command|load)" "$f" | tail -25; }; done
[[ -f $RES/force_collectives.log ]] && { echo "--- force_collectives"; grep -vE "^# (load|plain|forced)" "$RES/force_collectives.log" | tail -12; }
[[ -f $RES/trace_gpt2.txt ]] && { echo "--- trace_gpt2"; cat "$RES/trace_gpt2.txt"; }
[[ -f $RES/gelu_fusion_ab.log ]] && { echo "--- --gelu-fusion (gpt2 bf16 eager; old: off, new: on)"; cat "$RES/gelu_fusion_ab.log"; }
for f in "$RES"/run_ahead_ab_*.log; do [[ -f $f ]] && { echo "--- --run-ahead, gpt2 bf16 $(basename "$f" .log | sed 's/run_ahead_ab_//') (old: off, new: on)"; tail -4 "$f"; }; done
[[ -f $RES/flash_backward_ab.log ]] && { echo "--- --flash-backward, gpt2 bf16 eager (old: split, new: fused)"; tail -4 "$RES/flash_backward_ab.log"; }
[[ -f $RES/steady_flash_backward.txt ]] && { echo "--- the steady runs' flash backward"; cat "$RES/steady_flash_backward.txt"; }
for f in "$RES"/steady_*.log; do [[ -f $f ]] && { echo "--- gpt2 bf16 steady state, $(basename "$f" .log | sed 's/steady_//')"; grep -E "^  (ms/step|MFU|tokens/s) " "$f"; tail -8 "$f" | grep -vE "^  "; }; done
[[ -f $RES/dispatch.log ]] && { echo "--- dispatch (gpt2 bf16, static against AnyBackend)"; cat "$RES/dispatch.log"; }
[[ -f $RES/kernel_times_gpt2.txt ]] && { echo "--- kernel_times_gpt2"; head -30 "$RES/kernel_times_gpt2.txt"; }
[[ -f $RES/train_shakespeare_bf16.log ]] && { echo "--- train"; tail -22 "$RES/train_shakespeare_bf16.log"; }
[[ -f $RES/bench_blas.log ]] && { echo "--- bench_blas"; tail -15 "$RES/bench_blas.log"; }
[[ -f $RES/bench_memory.log ]] && sed -n '/^ratios/,$p' "$RES/bench_memory.log"
[[ -f $RES/bench_graph.log ]] && sed -n '/^per replay/,$p' "$RES/bench_graph.log"
[[ -f $RES/bench_rng.log ]] && grep -E "^uniform|^normal|^targets" "$RES/bench_rng.log"
[[ -f $RES/bench_algo.log ]] && tail -14 "$RES/bench_algo.log"
[[ -f $RES/adam.log ]] && grep -E "^\| accel|vs fused|target|FAIL|checks|identical" "$RES/adam.log"
echo "logs: $RES (packed: $PACK)"
exit $status
