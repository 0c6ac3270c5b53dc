# cmake -DENGINE=engine -DDATA=text -DWORK=dir -P run_ahead.cmake: the engine binary with --run-ahead on
# (the default: the next step enqueued before this one's losses are read) and off gives the same loss
# bits, over two streams with dropout and evaluations between the steps run ahead. Under CI's ASan
# build too, where the slots the host writes while the stream still runs the step before are checked.
file(REMOVE_RECURSE "${WORK}")
foreach(mode on off)
  execute_process(COMMAND ${ENGINE} --size tiny --block 32 --batch 4 --steps 8 --warmup 2 --threads 2 --streams 2
                          --dropout 0.1 --eval-every 3 --eval-batches 2 --data ${DATA} --quiet --run-ahead ${mode}
                          --dump ${WORK}/${mode}
                  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "engine --run-ahead ${mode} exited with ${status}\n${out}\n${err}")
  endif()
  file(STRINGS "${WORK}/${mode}/losses.txt" losses_${mode})
  list(LENGTH losses_${mode} n)
  if(NOT n EQUAL 8)
    message(FATAL_ERROR "--run-ahead ${mode}: ${n} loss lines, expected 8\n${out}")
  endif()
endforeach()
if(NOT losses_on STREQUAL losses_off)
  message(FATAL_ERROR "--run-ahead on and off differ:\non:  ${losses_on}\noff: ${losses_off}")
endif()
file(REMOVE_RECURSE "${WORK}")
message(STATUS "--run-ahead on and off: the same 8 losses")
