# cmake -DENGINE=engine -DDATA=text -DWORK=dir -DSTEPS=n -DCOMMON=a,b,... -DA=x,... -DB=y,... -P same_bits.cmake:
# the engine binary run with COMMON plus A and with COMMON plus B (comma-separated arguments) gives the same
# STEPS losses, bit for bit, and the same step-0 gradients (--dump). The tests that use it
# (tests/engine/CMakeLists.txt) pick options that must not change a bit: --run-ahead on against off,
# --activation-checkpointing against without; under CI's ASan build too.
file(REMOVE_RECURSE "${WORK}")
string(REPLACE "," ";" common "${COMMON}")
foreach(side A B)
  string(REPLACE "," ";" extra "${${side}}")
  execute_process(COMMAND ${ENGINE} ${common} ${extra} --data ${DATA} --quiet --dump ${WORK}/${side}
                  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "engine ${extra} exited with ${status}\n${out}\n${err}")
  endif()
  file(STRINGS "${WORK}/${side}/losses.txt" losses_${side})
  list(LENGTH losses_${side} n)
  if(NOT n EQUAL STEPS)
    message(FATAL_ERROR "${extra}: ${n} loss lines, expected ${STEPS}\n${out}")
  endif()
  file(SHA256 "${WORK}/${side}/grads0.f32" grads_${side})
endforeach()
if(NOT losses_A STREQUAL losses_B)
  message(FATAL_ERROR "'${A}' and '${B}' give different losses:\n${A}: ${losses_A}\n${B}: ${losses_B}")
endif()
if(NOT grads_A STREQUAL grads_B)
  message(FATAL_ERROR "'${A}' and '${B}' give different step-0 gradients")
endif()
file(REMOVE_RECURSE "${WORK}")
message(STATUS "'${A}' and '${B}': the same ${STEPS} losses and step-0 gradients")
