# cmake -DENGINE=engine -DPYTHON=python3 -DSUMMARY=trace_summary.py -DDATA=text -DWORK=dir -P trace_summary.cmake:
# benchmarks/engine/trace_summary.py on a trace the engine writes, one stream and --run-ahead on (the
# default): the step it divides by is the step's time on the stream, so the layers' spans (forward and
# backward, which hold every op of a step but the head, the embeddings and the optimizer) are most of it
# and never more. With the host's range as the step (the enqueueing only, since --run-ahead) they were
# thousands of per cent.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
execute_process(COMMAND ${ENGINE} --data ${DATA} --block 32 --steps 4 --eval-every 0 --quiet --threads 1 --streams 1
                        --trace ${WORK}/trace.json --trace-steps 4
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "engine exited with ${status}\n${out}\n${err}")
endif()
execute_process(COMMAND ${PYTHON} ${SUMMARY} ${WORK}/trace.json --skip 1
                RESULT_VARIABLE status OUTPUT_VARIABLE summary ERROR_VARIABLE err)
message("${summary}${err}")
if(NOT status EQUAL 0)
  message(FATAL_ERROR "trace_summary.py exited with ${status}")
endif()
if(NOT summary MATCHES "3 steps traced after the first 1, [0-9.]+ ms per step \\(the step's stream span\\)")
  message(FATAL_ERROR "trace_summary.py did not divide by the steps' stream spans")
endif()
set(layers 0)
foreach(row "layer N" "layer N backward")
  if(NOT summary MATCHES "\n${row} +[0-9.]+ +[0-9.]+ +([0-9]+)\\.([0-9])%")
    message(FATAL_ERROR "no '${row}' row")
  endif()
  math(EXPR layers "${layers} + ${CMAKE_MATCH_1}${CMAKE_MATCH_2}")  # tenths of a per cent
endforeach()
if(layers LESS 500 OR layers GREATER 1000)
  message(FATAL_ERROR "the layers' spans are ${layers} tenths of a per cent of the step: expected 50-100 %")
endif()
file(REMOVE_RECURSE "${WORK}")
message(STATUS "the layers' spans: ${layers} tenths of a per cent of the step")
