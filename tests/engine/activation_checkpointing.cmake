# cmake -DENGINE=engine -DDATA=text -DWORK=dir -P activation_checkpointing.cmake: the engine binary with and
# without --activation-checkpointing gives the same loss bits and step-0 gradients, over two streams with
# dropout, gradient accumulation and evaluations between the steps. Under CI's ASan build too, where each
# layer's forward again into the shared working set is checked for reads and writes out of its buffers.
file(REMOVE_RECURSE "${WORK}")
foreach(mode kept again)
  set(extra)
  if(mode STREQUAL "again")
    set(extra --activation-checkpointing)
  endif()
  execute_process(COMMAND ${ENGINE} --size tiny --block 32 --batch 4 --accum 2 --steps 4 --warmup 2 --threads 2 --streams 2
                          --dropout 0.1 --eval-every 2 --eval-batches 2 --data ${DATA} --quiet --dump ${WORK}/${mode} ${extra}
                  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "engine ${extra} exited with ${status}\n${out}\n${err}")
  endif()
  file(STRINGS "${WORK}/${mode}/losses.txt" losses_${mode})
  list(LENGTH losses_${mode} n)
  if(NOT n EQUAL 4)
    message(FATAL_ERROR "${mode}: ${n} loss lines, expected 4\n${out}")
  endif()
  file(SHA256 "${WORK}/${mode}/grads0.f32" grads_${mode})
endforeach()
if(NOT losses_kept STREQUAL losses_again)
  message(FATAL_ERROR "--activation-checkpointing changed the losses:\nkept:  ${losses_kept}\nagain: ${losses_again}")
endif()
if(NOT grads_kept STREQUAL grads_again)
  message(FATAL_ERROR "--activation-checkpointing changed step 0's gradients")
endif()
file(REMOVE_RECURSE "${WORK}")
message(STATUS "--activation-checkpointing: the same 4 losses and step-0 gradients")
