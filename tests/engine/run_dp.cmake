# The data-parallel engine under mpiexec: one scenario per CTest test, each a few runs of a tiny model
# on tests/engine/data/hamlet_act1.txt compared by dp_check (tests/engine/dp_check.cpp).
#   cmake -DSCENARIO=name -DMPIEXEC=... -DOPENMPI=ON|OFF -DENGINE=... -DCHECK=... -DDATA=... -DWORK=dir -P run_dp.cmake
# Scenarios: deterministic, default, zero2 (and activation checkpointing), zero2_streams, resume, rank_death, rank_hang, loss_scale, ds_config,
# two_machines, force_collectives, mismatch (see each below).
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(ENV{ACCEL_BACKEND} cpu)
set(ENV{ACCEL_COMM_TIMEOUT} 60)
set(mpi_flags)
if(OPENMPI)
  list(APPEND mpi_flags --oversubscribe --bind-to none -x ACCEL_BACKEND -x ACCEL_COMM_TIMEOUT -x ENGINE_FAULT)
  execute_process(COMMAND id -u OUTPUT_VARIABLE uid OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(uid STREQUAL "0")
    list(APPEND mpi_flags --allow-run-as-root)
  endif()
endif()
if(DEFINED ENV{ASAN_OPTIONS})
  set(ENV{ASAN_OPTIONS} "$ENV{ASAN_OPTIONS}:detect_leaks=0")
endif()
# A tiny model, 6 steps of a global batch of 12 sequences of 32 tokens, one thread per rank.
set(base --data ${DATA} --block 32 --steps 6 --warmup 2 --eval-every 0 --print-every 1 --threads 1 --batch 3
    --global-batch 12)

# engine_run(<np> <expected exit: 0|nonzero|2> <output var> args...)
function(engine_run np expect out)
  string(TIMESTAMP t0 "%s")
  execute_process(COMMAND ${MPIEXEC} -n ${np} ${mpi_flags} ${ENGINE} ${ARGN}
                  RESULT_VARIABLE status OUTPUT_VARIABLE o ERROR_VARIABLE e)
  string(TIMESTAMP t1 "%s")
  math(EXPR s "${t1} - ${t0}")
  message("---- ${np} rank(s): engine ${ARGN}\n${o}${e}-- exit status ${status} after ${s} s")
  if((expect STREQUAL "0" AND NOT status EQUAL 0) OR (expect STREQUAL "nonzero" AND status EQUAL 0)
     OR (expect STREQUAL "2" AND NOT status EQUAL 2))
    message(FATAL_ERROR "expected exit status ${expect}, got ${status}")
  endif()
  set(${out} "${o}${e}" PARENT_SCOPE)
endfunction()

# engine_plain(<output var> args...): one process, no launcher (accel::comm starts MPI as a singleton).
function(engine_plain out)
  execute_process(COMMAND ${ENGINE} ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE o ERROR_VARIABLE e)
  message("---- plain launch: engine ${ARGN}\n${o}${e}-- exit status ${status}")
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "expected exit status 0, got ${status}")
  endif()
  set(${out} "${o}${e}" PARENT_SCOPE)
endfunction()

# engine_mpmd(<expected exit> <output var> <np A> <args A...> : <np B> <args B...>): one launch of two
# app contexts (mpiexec's MPMD syntax), so that ranks get different command lines.
function(engine_mpmd expect out)
  list(FIND ARGN ":" colon)
  list(SUBLIST ARGN 0 ${colon} a)
  math(EXPR after "${colon} + 1")
  list(SUBLIST ARGN ${after} -1 b)
  list(POP_FRONT a na)
  list(POP_FRONT b nb)
  string(TIMESTAMP t0 "%s")
  execute_process(COMMAND ${MPIEXEC} ${mpi_flags} -n ${na} ${ENGINE} ${a} : -n ${nb} ${ENGINE} ${b}
                  RESULT_VARIABLE status OUTPUT_VARIABLE o ERROR_VARIABLE e)
  string(TIMESTAMP t1 "%s")
  math(EXPR s "${t1} - ${t0}")
  message("---- ${na} rank(s): engine ${a}\n     ${nb} rank(s): engine ${b}\n${o}${e}-- exit status ${status} after ${s} s")
  if((expect STREQUAL "0" AND NOT status EQUAL 0) OR (expect STREQUAL "2" AND NOT status EQUAL 2))
    message(FATAL_ERROR "expected exit status ${expect}, got ${status}")
  endif()
  # The ranks agree on the error: rank 0 says it once, and nobody aborts the job.
  string(REGEX MATCHALL "the ranks were not given the same run" said "${o}${e}")
  list(LENGTH said times)
  if(times GREATER 1 OR "${o}${e}" MATCHES "MPI_Abort|flight recorder")
    message(FATAL_ERROR "the error was said ${times} times, or the job was aborted")
  endif()
  if(s GREATER 30)
    message(FATAL_ERROR "the launch took ${s} s: a rank waited for another")
  endif()
  set(${out} "${o}${e}" PARENT_SCOPE)
endfunction()

function(check)
  execute_process(COMMAND ${CHECK} ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE o ERROR_VARIABLE e)
  message("${o}${e}")
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "dp_check ${ARGN} failed")
  endif()
endfunction()

function(expect_in text)
  foreach(re IN LISTS ARGN)
    if(NOT text MATCHES "${re}")
      message(FATAL_ERROR "the output lacks /${re}/")
    endif()
  endforeach()
endfunction()

# The optimizer state a run printed in its summary (MiB).
function(optimizer_mib text out)
  if(NOT text MATCHES "optimizer state +([0-9.]+) MiB")
    message(FATAL_ERROR "no 'optimizer state' in the summary")
  endif()
  set(${out} ${CMAKE_MATCH_1} PARENT_SCOPE)
endfunction()

# Runs s1 (stage 1) and z2 (stage 2; their outputs in the variables s1, z2 and metrics in WORK/s1.csv,
# WORK/z2.csv): the backend's allocator (memory_allocated: the metrics' allocated_bytes) falls by exactly
# the gradient bytes the accounting says stage 2 saves (every buffer is a multiple of the allocator's 512 B).
function(check_allocator_saving what)
  foreach(v s1 z2)
    file(STRINGS ${WORK}/${v}.csv rows)
    list(GET rows -1 last)
    if(NOT last MATCHES ",([0-9]+),[0-9]+$")  # ...,allocated_bytes,reserved_bytes
      message(FATAL_ERROR "no allocated_bytes in ${WORK}/${v}.csv")
    endif()
    set(alloc_${v} ${CMAKE_MATCH_1})
    if(NOT ${v} MATCHES "gradients +[0-9.]+ MiB per rank \\(([0-9]+) B: ")
      message(FATAL_ERROR "no gradient bytes in run ${v}")
    endif()
    set(grad_${v} ${CMAKE_MATCH_1})
  endforeach()
  math(EXPR alloc_drop "${alloc_s1} - ${alloc_z2}")
  math(EXPR grad_drop "${grad_s1} - ${grad_z2}")
  message("allocated${what}: stage 1 ${alloc_s1} B, stage 2 ${alloc_z2} B: ${alloc_drop} B less; gradients ${grad_drop} B less")
  if(NOT alloc_drop EQUAL grad_drop OR grad_drop LESS_EQUAL 0)
    message(FATAL_ERROR "the allocator's figure did not fall by the gradient memory stage 2 saves${what}")
  endif()
endfunction()

if(SCENARIO STREQUAL "deterministic")
  # --deterministic: the same losses and weights, bit for bit, on 1, 2 and 4 ranks, dropout on (each
  # sequence's masks keyed by its index in the global batch); the optimizer state per rank 1/N; the
  # consolidated export from 4 shards is the 1-rank run's weights.
  foreach(n 1 2 4)
    engine_run(${n} 0 out${n} ${base} --deterministic --dropout 0.1 --metrics ${WORK}/m${n}.csv --save ${WORK}/ck${n})
    optimizer_mib("${out${n}}" opt${n})
  endforeach()
  # and on 2 threads per rank (the kernels' sums do not depend on the thread count)
  engine_run(2 0 out2t ${base} --deterministic --dropout 0.1 --threads 2 --metrics ${WORK}/m2t.csv)
  check(losses-equal ${WORK}/m1.csv ${WORK}/m2t.csv)
  expect_in("${out4}" "global batch 12 = micro-batch 3 x accumulation 1 x 4 ranks")
  check(losses-equal ${WORK}/m1.csv ${WORK}/m2.csv)
  check(losses-equal ${WORK}/m1.csv ${WORK}/m4.csv)
  check(files-equal ${WORK}/ck1/latest/params.f32 ${WORK}/ck2/latest/params.f32)
  check(files-equal ${WORK}/ck1/latest/params.f32 ${WORK}/ck4/latest/params.f32)
  check(ratio ${opt2} ${opt1} 0.45 0.55)
  check(ratio ${opt4} ${opt1} 0.2 0.3)
  engine_run(1 0 z --zero-to-fp32 ${WORK}/ck4/latest ${WORK}/consolidated.f32)
  expect_in("${z}" "\\(4 ranks\\) -> .*consolidated.f32: 800768 fp32 values, 36 tensors")
  check(files-equal ${WORK}/ck1/latest/params.f32 ${WORK}/consolidated.f32)
  file(STRINGS ${WORK}/consolidated.f32.index index_lines)
  list(LENGTH index_lines index_count)
  file(GLOB leftovers ${WORK}/consolidated.f32*.tmp.*)
  if(NOT index_count EQUAL 36 OR leftovers)
    message(FATAL_ERROR "--zero-to-fp32: ${index_count} index lines (expected 36), temporaries left: ${leftovers}")
  endif()
elseif(SCENARIO STREQUAL "default")
  # The default (fastest) reduction: within 1e-5 of one rank on 2 and 4 ranks, ZeRO stage 1 and 2, and
  # with --overlap on, dropout on (the same masks on any rank count); --graph on 2 ranks gives the
  # eager run's bits.
  set(drop --dropout 0.1)
  engine_run(1 0 out1 ${base} ${drop} --metrics ${WORK}/m1.csv)
  engine_run(2 0 out2 ${base} ${drop} --metrics ${WORK}/m2.csv)
  engine_run(4 0 out4 ${base} ${drop} --metrics ${WORK}/m4.csv)
  engine_run(2 0 out2z ${base} ${drop} --batch 2 --zero-stage 2 --metrics ${WORK}/m2z.csv)
  # --graph on 2 ranks: the step with its collectives recorded once and replayed, the eager bits
  engine_run(2 0 out2g ${base} ${drop} --graph --metrics ${WORK}/m2g.csv)
  check(losses-equal ${WORK}/m2.csv ${WORK}/m2g.csv)
  expect_in("${out2}" "data parallel: 2 ranks \\(mpi\\), ZeRO stage 1: global batch 12 = micro-batch 3 x accumulation 2 x 2 ranks"
            "opt 3\\.1 MiB/rank x 2")
  expect_in("${out2z}" "ZeRO stage 2: global batch 12 = micro-batch 2 x accumulation 3 x 2 ranks")
  check(losses-close ${WORK}/m2.csv ${WORK}/m1.csv 1e-5)
  check(losses-close ${WORK}/m4.csv ${WORK}/m1.csv 1e-5)
  check(losses-close ${WORK}/m2z.csv ${WORK}/m1.csv 1e-5)
  # --overlap on: each layer's gradients reduced to their owners on a communication stream during backward;
  # with 3 threads a rank's default would be 3 streams, which overlap cannot follow: --overlap on makes it 1
  engine_run(2 0 out2o ${base} ${drop} --overlap on --threads 3 --metrics ${WORK}/m2o.csv)
  expect_in("${out2o}" "ZeRO stage 1, overlapped \\(buckets on a communication stream\\)")
  check(losses-close ${WORK}/m2o.csv ${WORK}/m1.csv 1e-5)
  # Without --threads: ranks launched unbound on one machine (--bind-to none) share the CPUs they may
  # all run on (each took every CPU before: twice the threads of the cores, the MFU's peak counted twice)
  engine_run(2 0 out2d --data ${DATA} --block 32 --steps 2 --warmup 2 --eval-every 0 --print-every 1 --batch 3
             --global-batch 12)
  expect_in("${out2d}" "FMA loop on [0-9]+ threads?: the [0-9]+ CPUs? this rank may run on, shared by 2 ranks on this machine\\)")
elseif(SCENARIO STREQUAL "zero2")
  # ZeRO stage 2: a rank's gradient memory is its shard (1/N of the one-rank run's, exactly) plus the
  # buckets (a layer's by default, or --reduce-bucket-size's; two with --overlap; and the embeddings');
  # the losses within 1e-5 of one rank; the backend's allocated memory falls by what the accounting
  # says; --deterministic gives the one-rank stage 1 run's bits, on 2 ranks and after a 2-rank
  # checkpoint resumed on 4.
  engine_run(1 0 one ${base} --metrics ${WORK}/one.csv)
  engine_run(2 0 s1 ${base} --metrics ${WORK}/s1.csv)
  engine_run(2 0 z2 ${base} --zero-stage 2 --metrics ${WORK}/z2.csv)
  engine_run(2 0 z2o ${base} --zero-stage 2 --overlap on --reduce-bucket-size 65536 --metrics ${WORK}/z2o.csv)
  engine_run(4 0 z4 ${base} --zero-stage 2 --metrics ${WORK}/z4.csv)
  expect_in("${z2}" "ZeRO stage 2: global batch 12 = micro-batch 3 x accumulation 2 x 2 ranks" "grad [0-9.]+ MiB/rank")
  expect_in("${z2o}" "ZeRO stage 2, overlapped \\(buckets on a communication stream\\)")
  check(losses-close ${WORK}/z2.csv ${WORK}/one.csv 1e-5)
  check(losses-close ${WORK}/z2o.csv ${WORK}/one.csv 1e-5)
  check(losses-close ${WORK}/z4.csv ${WORK}/one.csv 1e-5)
  # --graph: the bucketed step with its reduces recorded once and replayed gives the eager bits
  engine_run(2 0 z2g ${base} --zero-stage 2 --graph --metrics ${WORK}/z2g.csv)
  check(losses-equal ${WORK}/z2.csv ${WORK}/z2g.csv)
  # --activation-checkpointing: each layer's forward again while the buckets before it are reduced on the
  # communication stream gives the stored activations' bits
  engine_run(2 0 z2oa ${base} --zero-stage 2 --overlap on --reduce-bucket-size 65536 --activation-checkpointing
             --metrics ${WORK}/z2oa.csv)
  expect_in("${z2oa}" "activation checkpointing")
  check(losses-equal ${WORK}/z2o.csv ${WORK}/z2oa.csv)
  if(NOT one MATCHES "gradients +[0-9.]+ MiB \\(([0-9]+) B: the whole model's\\)")
    message(FATAL_ERROR "no gradient bytes in the one-rank run's summary")
  endif()
  set(full ${CMAKE_MATCH_1})
  if(NOT one MATCHES "vocabulary ([0-9]+)")
    message(FATAL_ERROR "no vocabulary size")
  endif()
  # The tiny model (width 128, block 32), fp32: a layer's bucket 12 C^2 + 4 C elements; the embedding
  # bucket V C + T C + 2 C; with --reduce-bucket-size 65536 the largest bucket is one 4C x C matrix.
  math(EXPR layer "12 * 128 * 128 + 4 * 128")
  math(EXPR embed "${CMAKE_MATCH_1} * 128 + 32 * 128 + 2 * 128")
  math(EXPR expect_z2 "4 * (${embed} + ${layer})")
  math(EXPR expect_z2o "4 * (${embed} + 2 * 65536)")
  set(expect_z4 ${expect_z2})
  set(n_z2 2)
  set(n_z2o 2)
  set(n_z4 4)
  foreach(v z2 z2o z4)
    if(NOT ${v} MATCHES "gradients +([0-9.]+) MiB per rank \\(([0-9]+) B: shard ([0-9]+) B \\+ buckets ([0-9]+) B, ZeRO stage 2\\)")
      message(FATAL_ERROR "no stage 2 gradient accounting in run ${v}")
    endif()
    set(grad_mib_${v} ${CMAKE_MATCH_1})
    set(total ${CMAKE_MATCH_2})
    set(shard ${CMAKE_MATCH_3})
    set(buckets ${CMAKE_MATCH_4})
    math(EXPR whole "${shard} * ${n_${v}}")
    math(EXPR sum "${shard} + ${buckets}")
    message("${v}: gradients ${total} B per rank = shard ${shard} B (x ${n_${v}} = ${whole}; one rank's: ${full}) + buckets ${buckets} B (expected ${expect_${v}})")
    if(NOT whole EQUAL full OR NOT sum EQUAL total OR NOT buckets EQUAL expect_${v})
      message(FATAL_ERROR "stage 2's gradient memory in run ${v} is not the shard (1/${n_${v}}) plus the buckets")
    endif()
  endforeach()
  check_allocator_saving("")
  # --deterministic stage 2: stage 1's bits on one rank; 3 steps on 2 ranks + resume on 4; dropout on.
  set(d ${base} --deterministic --dropout 0.1)
  engine_run(1 0 d1 ${d} --metrics ${WORK}/d1.csv --save ${WORK}/d1)
  engine_run(2 0 d2 ${d} --zero-stage 2 --metrics ${WORK}/d2.csv --save ${WORK}/d2)
  expect_in("${d2}" "ZeRO stage 2, deterministic" "shard [0-9]+ B \\+ buckets")
  check(losses-equal ${WORK}/d1.csv ${WORK}/d2.csv)
  check(files-equal ${WORK}/d1/latest/params.f32 ${WORK}/d2/latest/params.f32)
  engine_run(2 0 h2 ${d} --zero-stage 2 --stop-at 3 --save ${WORK}/h)
  engine_run(4 0 r4 ${d} --zero-stage 2 --resume latest --save ${WORK}/h --metrics ${WORK}/r4.csv)
  expect_in("${r4}" "resumed at step 3")
  check(losses-equal-tail ${WORK}/d1.csv ${WORK}/r4.csv)
  check(files-equal ${WORK}/d1/latest/params.f32 ${WORK}/h/latest/params.f32)
  # 6 micro-batches of 2 per step (runs of 3: not a power of two) on 2 ranks: each rank's run of three
  # backwards in lockstep into its buckets, stage 1's bits without the whole model's gradient buffer.
  engine_run(1 0 d1r ${d} --batch 2 --metrics ${WORK}/d1r.csv --save ${WORK}/d1r)
  engine_run(2 0 d2r ${d} --batch 2 --zero-stage 2 --metrics ${WORK}/d2r.csv --save ${WORK}/d2r)
  expect_in("${d2r}" "ZeRO stage 2, deterministic: global batch 12 = micro-batch 2 x accumulation 3 x 2 ranks"
            "shard [0-9]+ B \\+ buckets [0-9]+ B")
  check(losses-equal ${WORK}/d1r.csv ${WORK}/d2r.csv)
  check(files-equal ${WORK}/d1r/latest/params.f32 ${WORK}/d2r/latest/params.f32)
elseif(SCENARIO STREQUAL "zero2_streams")
  # ZeRO stage 2 with --streams 2: two lanes per rank, each with its own buckets, summed in lane order
  # by lane 0 before each reduction. On 2 and 3 ranks the losses are within 1e-5 of one rank's; a
  # second run gives the same bits; a rank's gradient memory is its shard plus two bucket sets, and the
  # backend's allocator falls from stage 1 --streams 2 by exactly what the accounting says.
  set(s ${base} --batch 2 --streams 2)
  engine_run(1 0 one ${base} --metrics ${WORK}/one.csv)
  engine_run(2 0 s1 ${s} --metrics ${WORK}/s1.csv)
  engine_run(2 0 z2 ${s} --zero-stage 2 --metrics ${WORK}/z2.csv)
  engine_run(2 0 z2b ${s} --zero-stage 2 --metrics ${WORK}/z2b.csv)
  engine_run(3 0 z3 ${s} --zero-stage 2 --metrics ${WORK}/z3.csv)
  expect_in("${z2}" "ZeRO stage 2: global batch 12 = micro-batch 2 x accumulation 3 x 2 ranks" "on 2 streams")
  expect_in("${z3}" "ZeRO stage 2: global batch 12 = micro-batch 2 x accumulation 2 x 3 ranks" "on 2 streams")
  check(losses-close ${WORK}/s1.csv ${WORK}/one.csv 1e-5)
  check(losses-close ${WORK}/z2.csv ${WORK}/one.csv 1e-5)
  check(losses-close ${WORK}/z3.csv ${WORK}/one.csv 1e-5)
  check(losses-equal ${WORK}/z2.csv ${WORK}/z2b.csv)
  if(NOT one MATCHES "vocabulary ([0-9]+)")
    message(FATAL_ERROR "no vocabulary size")
  endif()
  # Per lane (fp32, width 128, block 32): a layer bucket 12 C^2 + 4 C elements and the embedding
  # bucket V C + T C + 2 C; the shard of the 800768-element model on R ranks: ceil(800768 / R) rounded
  # up to the 4096-element norm block.
  math(EXPR layer "12 * 128 * 128 + 4 * 128")
  math(EXPR embed "${CMAKE_MATCH_1} * 128 + 32 * 128 + 2 * 128")
  math(EXPR expect_buckets "2 * 4 * (${embed} + ${layer})")
  math(EXPR expect_lane "4 * (${embed} + ${layer})")
  foreach(n 2 3)
    if(NOT z${n} MATCHES "gradients +[0-9.]+ MiB per rank \\(([0-9]+) B: shard ([0-9]+) B \\+ buckets ([0-9]+) B \\(2 lanes x ([0-9]+) B\\), ZeRO stage 2\\)")
      message(FATAL_ERROR "no stage 2 gradient accounting with two lanes on ${n} ranks")
    endif()
    set(total ${CMAKE_MATCH_1})
    set(shard ${CMAKE_MATCH_2})
    set(buckets ${CMAKE_MATCH_3})
    set(lane ${CMAKE_MATCH_4})
    math(EXPR expect_shard "((800768 + ${n} - 1) / ${n} + 4095) / 4096 * 4096 * 4")
    math(EXPR sum "${shard} + ${buckets}")
    message("${n} ranks, 2 lanes: gradients ${total} B per rank = shard ${shard} B (expected ${expect_shard}) + buckets ${buckets} B = 2 x ${lane} B (expected ${expect_buckets})")
    if(NOT shard EQUAL expect_shard OR NOT sum EQUAL total OR NOT buckets EQUAL expect_buckets OR NOT lane EQUAL expect_lane)
      message(FATAL_ERROR "stage 2's gradient memory with two lanes on ${n} ranks is not the shard plus two bucket sets")
    endif()
  endforeach()
  check_allocator_saving(" with two lanes")
elseif(SCENARIO STREQUAL "resume")
  # Checkpoints of 2 ranks: 8 steps, or 4 + resume + 4, give the same bits; the step-4 checkpoint of
  # 2 ranks resumed on 4 (re-partitioned from 2 shards to 4) gives them too (--deterministic).
  set(r ${base} --steps 8 --deterministic)
  engine_run(2 0 full ${r} --metrics ${WORK}/full.csv --save ${WORK}/full)
  engine_run(2 0 half ${r} --stop-at 4 --save ${WORK}/a)
  file(COPY ${WORK}/a/ DESTINATION ${WORK}/b)
  engine_run(2 0 res2 ${r} --resume latest --save ${WORK}/a --metrics ${WORK}/res2.csv)
  engine_run(4 0 res4 ${r} --resume latest --save ${WORK}/b --metrics ${WORK}/res4.csv)
  expect_in("${res4}" "resumed at step 4")
  check(losses-equal-tail ${WORK}/full.csv ${WORK}/res2.csv)
  check(losses-equal-tail ${WORK}/full.csv ${WORK}/res4.csv)
  check(files-equal ${WORK}/full/latest/params.f32 ${WORK}/a/latest/params.f32)
  check(files-equal ${WORK}/full/latest/params.f32 ${WORK}/b/latest/params.f32)
  check(files-equal ${WORK}/full/latest/zero_rank_00001.f32 ${WORK}/a/latest/zero_rank_00001.f32)
elseif(SCENARIO STREQUAL "rank_death")
  # Rank 1 dies (SIGKILL) as step 3 begins: the job ends with an error naming it, no rank hangs, and
  # the last complete checkpoint (step 2) is intact and resumes.
  set(ENV{ENGINE_FAULT} kill:1:3)
  engine_run(2 nonzero out ${base} --save ${WORK}/ck --save-every 2)
  unset(ENV{ENGINE_FAULT})
  expect_in("${out}" "engine: rank 1: ENGINE_FAULT kills this rank at step 3"
            "rank 1 .*exited on signal 9")
  if(out MATCHES "step 4/6")
    message(FATAL_ERROR "a rank went on after its peer died")
  endif()
  file(READ_SYMLINK ${WORK}/ck/latest latest)
  if(NOT latest STREQUAL "step_00000002" OR NOT EXISTS ${WORK}/ck/step_00000002/manifest.txt)
    message(FATAL_ERROR "the last complete checkpoint is not step 2 (latest -> ${latest})")
  endif()
  engine_run(2 0 res ${base} --resume latest --save ${WORK}/ck --steps 3)
  expect_in("${res}" "resumed at step 2" "step 3/3")
elseif(SCENARIO STREQUAL "rank_hang")
  # Rank 1 stops (alive) as step 3 begins: rank 0's next collective times out (ACCEL_COMM_TIMEOUT 2 s)
  # naming rank 1, rank 0 fails with that error, and the job ends (MPI_Abort) instead of hanging.
  set(ENV{ENGINE_FAULT} hang:1:3)
  set(ENV{ACCEL_COMM_TIMEOUT} 2)
  string(TIMESTAMP t0 "%s")
  engine_run(2 nonzero out ${base})
  string(TIMESTAMP t1 "%s")
  unset(ENV{ENGINE_FAULT})
  set(ENV{ACCEL_COMM_TIMEOUT} 60)
  expect_in("${out}" "engine: rank 1: ENGINE_FAULT stops this rank at step 3"
            "engine: rank 0: failed: .*timed out after 2\\.[0-9]+ s: rank 1 has not arrived"
            "MPI_Abort")
  math(EXPR took "${t1} - ${t0}")
  if(took GREATER 30)
    message(FATAL_ERROR "the job took ${took} s to end")
  endif()
elseif(SCENARIO STREQUAL "loss_scale")
  # DeepSpeed's dynamic loss scaler: with no overflow, a power-of-two scale changes no bit; an inf in
  # one rank's gradients skips the step on every rank (the learning rate does not move), spends one
  # unit of hysteresis (2), and the second overflow halves the scale.
  engine_run(2 0 plain ${base} --metrics ${WORK}/plain.csv)
  engine_run(2 0 scaled ${base} --loss-scale dynamic --metrics ${WORK}/scaled.csv)
  check(losses-equal ${WORK}/plain.csv ${WORK}/scaled.csv)
  set(ENV{ENGINE_FAULT} inf:2)
  engine_run(2 0 o1 ${base} --loss-scale dynamic --metrics ${WORK}/o1.csv)
  expect_in("${o1}" "OVERFLOW! Skipping step\\. Attempted loss scale: 65536, reducing to 65536"
            "step 3/6 [^\n]*lr 2\\.00e-03 \\| norm inf[^\n]*scale 65536 \\| skipped 1"
            "step 4/6 [^\n]*lr 2\\.00e-03 [^\n]*skipped 1" "loss scale +65536 \\(1 steps skipped\\)")
  engine_run(2 0 o2 ${base} --loss-scale dynamic --hysteresis 1)
  # ZeRO stage 2: the inf in the last rank's shard of reduced gradients, the same decision everywhere
  engine_run(2 0 o3 ${base} --loss-scale dynamic --hysteresis 1 --zero-stage 2)
  unset(ENV{ENGINE_FAULT})
  foreach(o o2 o3)
    expect_in("${${o}}" "OVERFLOW! Skipping step\\. Attempted loss scale: 65536, reducing to 32768"
              "loss scale +32768 \\(1 steps skipped\\)")
  endforeach()
elseif(SCENARIO STREQUAL "ds_config")
  # --deepspeed-config: the same run as the flags; an unsupported key is an error naming it.
  file(WRITE ${WORK}/ds.json [=[{
  "train_batch_size": 12,
  "train_micro_batch_size_per_gpu": 3,
  "gradient_accumulation_steps": 2,
  "gradient_clipping": 1.0,
  "steps_per_print": 1,
  "optimizer": {"type": "AdamW", "params": {"lr": 2e-3, "betas": [0.9, 0.99], "eps": 1e-8, "weight_decay": 0.1}},
  "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 6, "warmup_num_steps": 2, "cos_min_ratio": 0.1}},
  "bf16": {"enabled": false},
  "zero_optimization": {"stage": 1}
}]=])
  file(WRITE ${WORK}/bad.json [=[{"train_batch_size": 12, "zero_optimization": {"stage": 1, "offload_optimizer": {"device": "cpu"}}}]=])
  engine_run(2 0 flags ${base} --metrics ${WORK}/flags.csv)
  engine_run(2 0 ds --data ${DATA} --block 32 --eval-every 0 --threads 1 --deepspeed-config ${WORK}/ds.json
             --metrics ${WORK}/ds.csv)
  expect_in("${ds}" "global batch 12 = micro-batch 3 x accumulation 2 x 2 ranks" "step 6/6")
  check(losses-equal ${WORK}/flags.csv ${WORK}/ds.csv)
  engine_run(1 2 bad --data ${DATA} --deepspeed-config ${WORK}/bad.json)
  expect_in("${bad}" "unsupported key 'zero_optimization.offload_optimizer'")
elseif(SCENARIO STREQUAL "two_machines")
  # Two "machines": network namespaces joined by a veth pair, Open MPI over TCP between them, launched
  # through a plm_rsh_agent that runs `ip netns exec` where ssh would log in. --deterministic: the
  # losses are one rank's bits. Needs root and `ip netns` (elsewhere it prints "skipped: ...", which
  # CTest counts as skipped).
  execute_process(COMMAND id -u OUTPUT_VARIABLE uid OUTPUT_STRIP_TRAILING_WHITESPACE)
  find_program(IP ip PATHS /usr/sbin /sbin)
  if(NOT uid STREQUAL "0" OR NOT IP OR NOT OPENMPI)
    message("skipped: two network namespaces need root, ip (iproute2) and Open MPI")
    return()
  endif()
  string(RANDOM LENGTH 5 ALPHABET abcdefghijklmnopqrstuvwxyz tag)
  string(RANDOM LENGTH 2 ALPHABET 123456789 octet)
  set(ns0 accel_dp_${tag}0)
  set(ns1 accel_dp_${tag}1)
  set(a0 10.${octet}.77.1)
  set(a1 10.${octet}.77.2)
  function(netns_cleanup)
    execute_process(COMMAND ${IP} netns del ${ns0} ERROR_QUIET)
    execute_process(COMMAND ${IP} netns del ${ns1} ERROR_QUIET)
  endfunction()
  set(ok TRUE)
  foreach(cmd "netns add ${ns0}" "netns add ${ns1}" "link add v${tag}0 type veth peer name v${tag}1"
              "link set v${tag}0 netns ${ns0}" "link set v${tag}1 netns ${ns1}"
              "-n ${ns0} addr add ${a0}/24 dev v${tag}0" "-n ${ns1} addr add ${a1}/24 dev v${tag}1"
              "-n ${ns0} link set v${tag}0 up" "-n ${ns1} link set v${tag}1 up"
              "-n ${ns0} link set lo up" "-n ${ns1} link set lo up")
    separate_arguments(argv UNIX_COMMAND "${cmd}")
    execute_process(COMMAND ${IP} ${argv} RESULT_VARIABLE rc ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      netns_cleanup()
      message("skipped: ip ${cmd}: ${err}")
      return()
    endif()
  endforeach()
  file(WRITE ${WORK}/hosts "${a0} slots=1\n${a1} slots=1\n")
  set(ENV{ENGINE_NETNS_MAP} "${a0}=${ns0} ${a1}=${ns1}")
  get_filename_component(here ${CMAKE_SCRIPT_MODE_FILE} DIRECTORY)
  engine_run(1 0 one ${base} --deterministic --metrics ${WORK}/one.csv)
  execute_process(COMMAND ${IP} netns exec ${ns0} ${MPIEXEC} -n 2 --allow-run-as-root --hostfile ${WORK}/hosts
                          --mca plm_rsh_agent ${here}/netns_agent.sh --mca btl tcp,self
                          --mca btl_tcp_if_include ${a0}/24 --mca oob_tcp_if_include ${a0}/24
                          -x ACCEL_BACKEND -x ACCEL_COMM_TIMEOUT -x PATH -x ENGINE_NETNS_MAP
                          ${ENGINE} ${base} --deterministic --metrics ${WORK}/two.csv
                  RESULT_VARIABLE status OUTPUT_VARIABLE o ERROR_VARIABLE e TIMEOUT 120)
  netns_cleanup()
  message("---- 2 ranks in network namespaces ${ns0} (${a0}) and ${ns1} (${a1}), TCP:\n${o}${e}-- exit status ${status}")
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "expected exit status 0, got ${status}")
  endif()
  expect_in("${o}${e}" "data parallel: 2 ranks \\(mpi\\)")
  check(losses-equal ${WORK}/one.csv ${WORK}/two.csv)
elseif(SCENARIO STREQUAL "mismatch")
  # Ranks given different runs (an MPMD launch, a node's own data file or checkpoint) stop at start-up
  # with one error naming each differing setting and its value on each rank, exit status 2, within
  # seconds: unchecked, a different --steps left the other rank waiting in a collective until the
  # timeout, a different --seed trained on silently, a different --layers failed in the first
  # reduce-scatter. The same text under another name is the same data, and what a rank may choose for
  # itself (what rank 0 alone does, --dispatch) is not compared.
  set(err "engine: error: the ranks were not given the same run: ")
  engine_mpmd(2 out 1 ${base} : 1 ${base} --steps 8 --seed 4)
  expect_in("${out}" "${err}--steps is 6 \\(rank 0\\), 8 \\(rank 1\\); --seed is 1337 \\(rank 0\\), 4 \\(rank 1\\)\\. Every rank needs")
  engine_mpmd(2 out 2 ${base} : 1 ${base} --layers 2 --lr 3e-3)
  expect_in("${out}" "${err}--layers is 4 \\(ranks 0, 1\\), 2 \\(rank 2\\); --lr is 0\\.002 \\(ranks 0, 1\\), 0\\.003 \\(rank 2\\)\\.")
  file(COPY_FILE ${DATA} ${WORK}/same.txt)
  engine_mpmd(0 out 1 ${base} --save ${WORK}/ck --stop-at 3 : 1 ${base} --data ${WORK}/same.txt --save ${WORK}/ck --stop-at 3
                                                                  --eval-every 2 --print-every 3 --dispatch any)
  expect_in("${out}" "step 3/6")
  file(READ ${DATA} text)
  file(WRITE ${WORK}/edited.txt "${text}One more line.\n")
  engine_mpmd(2 out 1 ${base} : 1 ${base} --data ${WORK}/edited.txt)
  expect_in("${out}" "${err}the data file's contents \\(--data\\) is [^ ]*hamlet_act1\\.txt: 27409 bytes, content hash [0-9a-f]+ \\(rank 0\\), [^ ]*edited\\.txt: 27424 bytes, content hash [0-9a-f]+ \\(rank 1\\)\\.")
  # One rank resumes the step-3 checkpoint, the other starts afresh: refused before either writes.
  engine_mpmd(2 out 1 ${base} --resume latest --save ${WORK}/ck : 1 ${base} --save ${WORK}/ck)
  expect_in("${out}" "${err}--resume is the checkpoint of step 3 \\(rank 0\\), \\(none\\) \\(rank 1\\)\\.")
  file(GLOB left RELATIVE ${WORK}/ck ${WORK}/ck/*)
  list(SORT left)
  if(NOT left STREQUAL ".lock;latest;step_00000003")
    message(FATAL_ERROR "the refused launch changed the checkpoint directory: ${left}")
  endif()
  # --save on a node's own disk: rank 1 in a mount namespace of its own with a tmpfs over WORK/shared (a
  # second machine's local disk there). Refused at start-up naming rank 1, not at the first save.
  find_program(UNSHARE unshare PATHS /usr/bin /bin)
  if(uid STREQUAL "0" AND UNSHARE AND OPENMPI)
    file(MAKE_DIRECTORY ${WORK}/shared)
    file(WRITE ${WORK}/own_disk.sh "mount -t tmpfs tmpfs \"$1\" || exit 99\nshift\nexec \"$@\"\n")
    execute_process(COMMAND ${MPIEXEC} ${mpi_flags} -n 1 ${ENGINE} ${base} --save ${WORK}/shared/ck
                            : -n 1 ${UNSHARE} -m sh ${WORK}/own_disk.sh ${WORK}/shared ${ENGINE} ${base} --save ${WORK}/shared/ck
                    RESULT_VARIABLE status OUTPUT_VARIABLE o ERROR_VARIABLE e TIMEOUT 60)
    message("---- rank 1 with its own disk at ${WORK}/shared:\n${o}${e}-- exit status ${status}")
    if(status EQUAL 99 OR "${o}${e}" MATCHES "mount: ")
      message("(this machine cannot mount a tmpfs in a mount namespace: the --save check is not run)")
    else()
      if(NOT status EQUAL 2)
        message(FATAL_ERROR "expected exit status 2, got ${status}")
      endif()
      expect_in("${o}${e}" "engine: error: --save [^ ]*shared/ck: rank 1 of 2 cannot see the file rank 0 wrote in [^ ]*shared: a checkpoint is one directory holding every rank's shard")
      file(GLOB left ${WORK}/shared/* ${WORK}/shared/.*)
      if(left)
        message(FATAL_ERROR "the refused launch left files behind: ${left}")
      endif()
    endif()
    # --save on a file system too small for one checkpoint (every rank in one mount namespace, a 1 MiB
    # tmpfs): the ranks go by rank 0's figure and stop together at start-up, one message, exit status 2.
    execute_process(COMMAND ${UNSHARE} -m sh ${SMALL_DISK} 1m ${WORK}/shared ${MPIEXEC} ${mpi_flags} -n 2 ${ENGINE} ${base}
                            --save ${WORK}/shared/ck
                    RESULT_VARIABLE status OUTPUT_VARIABLE o ERROR_VARIABLE e TIMEOUT 60)
    message("---- 2 ranks, --save on a 1 MiB file system:\n${o}${e}-- exit status ${status}")
    if(NOT status EQUAL 99)
      if(NOT status EQUAL 2)
        message(FATAL_ERROR "expected exit status 2, got ${status}")
      endif()
      set(msg "engine: error: --save [^ ]*shared/ck: a checkpoint of this model takes [0-9.]+ MiB and the file system there has 1\\.0 MiB free")
      expect_in("${o}${e}" "${msg}")
      string(REGEX MATCHALL "${msg}" said "${o}${e}")
      list(LENGTH said times)
      if(NOT times EQUAL 1 OR "${o}${e}" MATCHES "left: |MPI_Abort|step 1/")
        message(FATAL_ERROR "expected the message once, no abort, no step and nothing written")
      endif()
    endif()
  else()
    message("(a mount namespace needs root, unshare and Open MPI: the --save checks are not run)")
  endif()
elseif(SCENARIO STREQUAL "force_collectives")
  # --force-collectives: one rank runs the data-parallel path (MPI's world of one, every collective
  # launched: ACCEL_COMM_LOG counts them) and changes no bit: --deterministic (its all_to_all and the
  # receive buffer), the default reduction with stage 2's bucketed reduces overlapped on a
  # communication stream, and --graph (the reduce-scatter and all-gathers recorded and replayed) give
  # the plain one-rank run's losses and weights, in a plain process and (the first two) under mpiexec -n 1. The optimizer state is the plain run's (1/1); the deterministic gradient memory
  # grows by exactly the receive buffer (the model's padded flat buffer).
  set(ENV{ACCEL_COMM_LOG} 1)
  foreach(mode d z g)
    if(mode STREQUAL "d")
      set(args ${base} --deterministic)
    elseif(mode STREQUAL "z")
      set(args ${base} --zero-stage 2 --overlap on)
    else()
      set(args ${base} --graph)
    endif()
    engine_plain(${mode}_plain ${args} --metrics ${WORK}/${mode}_plain.csv --save ${WORK}/${mode}_plain)
    engine_plain(${mode}_forced ${args} --force-collectives --metrics ${WORK}/${mode}_forced.csv --save ${WORK}/${mode}_forced)
    check(losses-equal ${WORK}/${mode}_plain.csv ${WORK}/${mode}_forced.csv)
    if(NOT mode STREQUAL "g")
      engine_run(1 0 ${mode}_mpi ${args} --force-collectives --metrics ${WORK}/${mode}_mpi.csv)
      check(losses-equal ${WORK}/${mode}_plain.csv ${WORK}/${mode}_mpi.csv)
    endif()
    check(files-equal ${WORK}/${mode}_plain/latest/params.f32 ${WORK}/${mode}_forced/latest/params.f32)
    if(${mode}_plain MATCHES "data parallel|accel::comm summary|/rank")
      message(FATAL_ERROR "the plain one-rank run took the data-parallel path")
    endif()
    optimizer_mib("${${mode}_plain}" opt_plain)
    optimizer_mib("${${mode}_forced}" opt_forced)
    check(ratio ${opt_forced} ${opt_plain} 1 1)
  endforeach()
  # What ran, per ACCEL_COMM_LOG: in each of the 6 steps the gradients' all_to_all (--deterministic) or
  # a grouped reduce per bucket (stage 2), the weights' all-gather, the stop agreement's all_reduce
  # (the --save runs add the checkpoint's barriers; the norm's and losses' all-gathers are smaller).
  foreach(o d_forced d_mpi)
    expect_in("${${o}}" "data parallel: 1 rank \\(mpi, collectives forced on one rank\\), ZeRO stage 1, deterministic: global batch 12 = micro-batch 3 x accumulation 4 x 1 ranks"
              "opt 6\\.1 MiB/rank x 1 \\| grad 15\\.3 MiB/rank" "optimizer state +6\\.1 MiB per rank \\(ZeRO stage 1, 1 rank\\)"
              "accel::comm summary \\(ACCEL_COMM_LOG\\), rank 0 of 1" "mpi +all_to_all +3211264 +6 " "mpi +all_gather +3211264 +6 ")
  endforeach()
  foreach(o z_forced z_mpi)
    expect_in("${${o}}" "ZeRO stage 2, overlapped \\(buckets on a communication stream\\): global batch 12 = micro-batch 3 x accumulation 4 x 1 ranks"
              "mpi +reduce +786432 +96 " "mpi +all_gather +3211264 +6 ")
  endforeach()
  expect_in("${g_forced}" "ZeRO stage 1: global batch 12" "mpi +reduce_scatter +3211264 +6 " "mpi +all_gather +3211264 +6 ")
  expect_in("${d_mpi}" "mpi +all_reduce +8 +6 ")
  expect_in("${z_mpi}" "mpi +all_reduce +8 +6 ")
  foreach(v d_plain d_forced)
    if(NOT ${v} MATCHES "gradients +[0-9.]+ MiB[a-z ]* \\(([0-9]+) B: ")
      message(FATAL_ERROR "no gradient bytes in run ${v}")
    endif()
    set(grad_${v} ${CMAKE_MATCH_1})
  endforeach()
  math(EXPR grew "${grad_d_forced} - ${grad_d_plain}")
  math(EXPR padded "(800768 + 4095) / 4096 * 4096 * 4")
  message("--deterministic gradients: plain ${grad_d_plain} B, forced ${grad_d_forced} B: ${grew} B more (the receive buffer: ${padded} B)")
  if(NOT grew EQUAL padded)
    message(FATAL_ERROR "the forced run's gradient memory is not the plain run's plus the receive buffer")
  endif()
  unset(ENV{ACCEL_COMM_LOG})
else()
  message(FATAL_ERROR "unknown SCENARIO '${SCENARIO}'")
endif()
file(REMOVE_RECURSE "${WORK}")
