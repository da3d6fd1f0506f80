# Runs COMMAND (its arguments separated by '|') and passes only where it exits non-zero and its output matches both
# EXPECT and ALSO: a run of several ranks in which one rank fails must fail as a whole, for ctest to see the failure,
# and a GPU verification in which a CUDA test skips must fail, naming it.
string(REPLACE "|" ";" command "${COMMAND}")
execute_process(COMMAND ${command} RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
if(result EQUAL 0)
  message(FATAL_ERROR "exited 0 where it should fail:\n${output}")
endif()
foreach(pattern IN ITEMS "${EXPECT}" "${ALSO}")
  if(NOT output MATCHES "${pattern}")
    message(FATAL_ERROR "exited ${result}, but its output lacks '${pattern}':\n${output}")
  endif()
endforeach()
message(STATUS "exited ${result} as it should, saying '${EXPECT}'")
