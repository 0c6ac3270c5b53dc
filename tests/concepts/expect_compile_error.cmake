# Compiles SOURCE and succeeds only if compilation fails with EXPECT in the diagnostic.
execute_process(
  COMMAND ${COMPILER} -std=c++20 -fsyntax-only -I${INCLUDE} -I${TESTS} ${SOURCE}
  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(result EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must be rejected")
endif()
string(FIND "${err}" "${EXPECT}" found)
if(found EQUAL -1)
  message(FATAL_ERROR "the diagnostic does not mention '${EXPECT}':\n${err}")
endif()
string(LENGTH "${err}" length)
message(STATUS "rejected as expected (${length} bytes of diagnostic)")
