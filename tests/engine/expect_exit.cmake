# cmake -DCOMMAND=prog -DARGS=a,b,c -DEXPECT_STATUS=n -DEXPECT_OUTPUT=text [-DEXPECT_OUTPUT2=text] -P expect_exit.cmake:
# runs prog with the arguments and checks its exit status and that its output contains the text(s).
string(REPLACE "," ";" _args "${ARGS}")
execute_process(COMMAND ${COMMAND} ${_args} RESULT_VARIABLE _status OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
if(NOT _status STREQUAL "${EXPECT_STATUS}")
  message(FATAL_ERROR "exit status ${_status}, expected ${EXPECT_STATUS}\nstdout: ${_out}\nstderr: ${_err}")
endif()
foreach(_expect IN ITEMS "${EXPECT_OUTPUT}" "${EXPECT_OUTPUT2}")
  string(FIND "${_out}${_err}" "${_expect}" _at)
  if(_at EQUAL -1)
    message(FATAL_ERROR "the output lacks '${_expect}'\nstdout: ${_out}\nstderr: ${_err}")
  endif()
endforeach()
message(STATUS "exit status ${_status}: ${_err}")
