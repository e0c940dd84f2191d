# Runs one libFuzzer target for a bounded number of inputs, seeded from SEEDS.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(_args ${WORK})
if(SEEDS AND EXISTS ${SEEDS})
  list(APPEND _args ${SEEDS})
endif()
execute_process(
  COMMAND ${FUZZER} -use_value_profile=1 -runs=${RUNS} -max_len=65536 -timeout=20
          -rss_limit_mb=4096 -artifact_prefix=${WORK}/ ${_args}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${FUZZER} found a failing input (exit ${rc}); see ${WORK}/")
endif()
