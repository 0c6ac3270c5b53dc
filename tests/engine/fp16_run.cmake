# cmake -DENGINE=engine -DDATA=text -P fp16_run.cmake: `engine --dtype fp16` on the CPU with DeepSpeed's
# dynamic loss scaler started at 2^22, where the fp16 gradients overflow: the first steps are skipped
# and printed as DeepSpeed prints them (hysteresis 2: the first overflow keeps the scale, each later
# one halves it), the progress lines and the summary count the skipped steps, and the loss falls.
execute_process(COMMAND ${ENGINE} --size tiny --block 32 --batch 4 --steps 16 --warmup 2 --threads 1 --eval-every 0
                        --print-every 1 --data ${DATA} --dtype fp16 --initial-scale-power 22
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "engine exited with ${status}\n${out}\n${err}")
endif()
foreach(expect
    "tiny on cpu \\([^)]*\\), fp16"
    "OVERFLOW! Skipping step\\. Attempted loss scale: 4194304, reducing to 4194304\n"
    "OVERFLOW! Skipping step\\. Attempted loss scale: 4194304, reducing to 2097152\n"
    "step 1/16 [^\n]*norm -?(inf|nan)[^\n]*scale 4194304 \\| skipped 1"
    "step 2/16 [^\n]*norm -?(inf|nan)[^\n]*scale 4194304 \\| skipped 2")
  if(NOT out MATCHES "${expect}")
    message(FATAL_ERROR "the output lacks /${expect}/\n${out}")
  endif()
endforeach()
if(NOT out MATCHES "loss scale +([0-9]+) \\(([0-9]+) steps skipped\\)")
  message(FATAL_ERROR "no loss scale line in the summary\n${out}")
endif()
set(scale ${CMAKE_MATCH_1})
set(skipped ${CMAKE_MATCH_2})
if(skipped LESS 2 OR skipped GREATER 10 OR NOT scale LESS 4194304)
  message(FATAL_ERROR "expected 2-10 skipped steps and a scale below 2^22, got ${skipped} and ${scale}\n${out}")
endif()
if(NOT out MATCHES "train loss +([0-9.]+) -> ([0-9.]+)")
  message(FATAL_ERROR "no train loss line in the summary\n${out}")
endif()
set(first ${CMAKE_MATCH_1})
set(last ${CMAKE_MATCH_2})
if(NOT last LESS first)
  message(FATAL_ERROR "the loss did not fall: ${first} -> ${last}\n${out}")
endif()
message(STATUS "fp16: ${skipped} steps skipped, final scale ${scale}, train loss ${first} -> ${last}")
