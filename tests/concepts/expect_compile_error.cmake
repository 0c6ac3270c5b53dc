# Compiles SOURCE (with FLAGS, a ;-list, when given) and succeeds only if compilation fails with EXPECT
# (and EXPECT_ALSO, when given) in the diagnostic.
execute_process(
  COMMAND ${COMPILER} -std=c++20 -fsyntax-only -I${INCLUDE} -I${TESTS} ${FLAGS} ${SOURCE}
  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(result EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must be rejected")
endif()
foreach(expected IN ITEMS "${EXPECT}" "${EXPECT_ALSO}")
  if(expected STREQUAL "")
    continue()
  endif()
  string(FIND "${err}" "${expected}" found)
  if(found EQUAL -1)
    message(FATAL_ERROR "the diagnostic does not mention '${expected}':\n${err}")
  endif()
endforeach()
string(LENGTH "${err}" length)
message(STATUS "rejected as expected (${length} bytes of diagnostic)")
