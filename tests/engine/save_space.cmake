# cmake -DENGINE=engine -DDATA=text -DWORK=dir -DSMALL_DISK=small_disk.sh -P save_space.cmake: --save on a
# file system too small for the run's checkpoints (a tmpfs in a mount namespace of its own: root and
# unshare, as CI has; else skipped). One checkpoint does not fit: refused at start-up, exit status 2,
# nothing written (unchecked, the run trained up to its first save and failed there). Two fit, four are
# written: a warning at start-up, and the third save fails with the first two intact. --keep-last 1:
# no warning, every save made, only the newest left.
find_program(UNSHARE unshare PATHS /usr/bin /bin)
execute_process(COMMAND id -u OUTPUT_VARIABLE uid OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT uid STREQUAL "0" OR NOT UNSHARE)
  message("skipped: a tmpfs in a mount namespace needs root and unshare")
  return()
endif()
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/disk")
set(run --size tiny --block 32 --batch 4 --warmup 2 --threads 1 --eval-every 0 --print-every 1 --data ${DATA}
        --save ${WORK}/disk/ck)

function(small_disk size expect out)
  execute_process(COMMAND ${UNSHARE} -m sh ${SMALL_DISK} ${size} ${WORK}/disk ${ENGINE} ${ARGN}
                  RESULT_VARIABLE status OUTPUT_VARIABLE o ERROR_VARIABLE e TIMEOUT 120)
  message("---- ${size}: engine ${ARGN}\n${o}${e}-- exit status ${status}")
  if(status EQUAL 99 OR "${e}" MATCHES "mount: |unshare: ")
    message("skipped: this machine cannot mount a tmpfs in a mount namespace")
    set(${out} "skipped" PARENT_SCOPE)
    return()
  endif()
  if(NOT status EQUAL expect)
    message(FATAL_ERROR "expected exit status ${expect}, got ${status}")
  endif()
  set(${out} "${o}\n--stderr\n${e}" PARENT_SCOPE)
endfunction()

function(expect_in text pattern)
  if(NOT text MATCHES "${pattern}")
    message(FATAL_ERROR "expected to match: ${pattern}")
  endif()
endfunction()

function(expect_not_in text pattern)
  if(text MATCHES "${pattern}")
    message(FATAL_ERROR "expected not to match: ${pattern}")
  endif()
endfunction()

set(size "[0-9]+\\.[0-9] MiB")
small_disk(1m 2 out ${run} --steps 4)
if(out STREQUAL "skipped")
  return()
endif()
expect_in("${out}" "engine: error: --save [^ ]*disk/ck: a checkpoint of this model takes ${size} and the file system there has 1\\.0 MiB free")
expect_not_in("${out}" "step 1/|left: ")

small_disk(32m 1 out ${run} --steps 4 --save-every 1)
expect_in("${out}" "engine: warning: --save [^ ]*disk/ck: this run writes 4 checkpoints of ${size} \\(${size}\\) and the file system there has 32\\.0 MiB free; --keep-last N keeps only the newest N")
expect_in("${out}" "checkpoint: [^ ]*step_00000002\n")
expect_in("${out}" "engine: failed: checkpoint: cannot write [^ ]*: No space left on device \\(a checkpoint takes ${size}; the file system has [0-9.]+ [KM]iB free, the checkpoints already there take ${size}; --keep-last N keeps only the newest N\\)")
# The failed save left nothing of its own; the two before it stand, latest at the second.
expect_in("${out}" "\nleft: ck\nleft: ck/.lock\nleft: ck/latest -> step_00000002\nleft: ck/step_00000001\nleft: ck/step_00000002\n\n--stderr")

small_disk(32m 0 out ${run} --steps 4 --save-every 1 --keep-last 1)
expect_not_in("${out}" "warning")
expect_in("${out}" "checkpoint: --keep-last 1 removed step_00000001 \\(${size}\\)\n")
expect_in("${out}" "checkpoint: --keep-last 1 removed step_00000003 \\(${size}\\)\n")
expect_in("${out}" "\nleft: ck\nleft: ck/.lock\nleft: ck/latest -> step_00000004\nleft: ck/step_00000004\n\n--stderr")
file(REMOVE_RECURSE "${WORK}")
message(STATUS "--save on a small file system: refused, warned, pruned")
