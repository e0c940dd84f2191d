# Runs promtool on deploy/prometheus/ for ctest.
#   cmake -DPROMTOOL=<path or ...-NOTFOUND> -DMODE=test|check -DDEPLOY=<deploy dir> -P promtool.cmake
# MODE test:  `promtool test rules` on every deploy/prometheus/tests/*.yml
# MODE check: `promtool check rules` on the rule files and
#             `promtool check config` on prometheus.yml
# A missing promtool is a failure, never a skip.
if(NOT PROMTOOL OR NOT EXISTS "${PROMTOOL}")
  message(FATAL_ERROR
    "error: promtool not found; run scripts/install-deps (it installs the Debian package "
    "prometheus, which provides promtool), then configure again")
endif()
set(_prom ${DEPLOY}/prometheus)

function(run_promtool)
  execute_process(COMMAND ${PROMTOOL} ${ARGN} WORKING_DIRECTORY ${_prom}
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
  message("$ promtool ${ARGN}\n${_out}")
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "error: promtool ${ARGN} failed (exit ${_rc})")
  endif()
endfunction()

if(MODE STREQUAL "test")
  file(GLOB _tests RELATIVE ${_prom} ${_prom}/tests/*.yml)
  if(NOT _tests)
    message(FATAL_ERROR "error: no rule tests in ${_prom}/tests/*.yml")
  endif()
  list(SORT _tests)
  run_promtool(test rules ${_tests})
elseif(MODE STREQUAL "check")
  file(GLOB _rules RELATIVE ${_prom} ${_prom}/rules/*.yml)
  if(NOT _rules)
    message(FATAL_ERROR "error: no rule files in ${_prom}/rules/*.yml")
  endif()
  run_promtool(check rules ${_rules})
  run_promtool(check config prometheus.yml)
else()
  message(FATAL_ERROR "error: MODE must be test or check, not '${MODE}'")
endif()
