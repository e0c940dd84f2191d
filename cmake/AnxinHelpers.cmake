# Helpers shared by every module's CMakeLists.txt.

# anxin_module(NAME SOURCES... [DEPS libs...])
# Builds the static library anxin_NAME from SOURCES and records it so that the
# `anxin` program links it. Include paths are rooted at src/ ("anxin/base/error.h").
function(anxin_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(anxin_${name} STATIC ${ARG_SOURCES})
  target_include_directories(anxin_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src
                                                  ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(anxin_${name} PUBLIC ${ARG_DEPS})
  set_property(GLOBAL APPEND PROPERTY ANXIN_MODULE_LIBS anxin_${name})
endfunction()

# The optimised build whose tests the test build runs too (`make test`):
# build/test-release, made by the test-release preset with the release flags.
# Empty: the test build runs only its own (sanitized) binaries.
set(ANXIN_RELEASE_TEST_DIR "" CACHE PATH
    "build tree of the test-release preset, whose RELEASE tests ctest runs too")
if(ANXIN_BUILD_TESTS AND NOT TARGET anxin_release_tests)
  # What the test-release preset builds: the RELEASE tests and the programs they run.
  add_custom_target(anxin_release_tests)
endif()

# Registers one ctest entry NAME running TARGET with ARGS, in this build and,
# when RELEASE is given, a second entry "release.NAME" running the same
# program of the optimised build (ANXIN_RELEASE_TEST_DIR). A missing release
# binary fails the entry: nothing built is never a pass. SKIP_GTEST: ARGS
# select exactly one gtest case; if it calls GTEST_SKIP (a path this machine
# lacks), ctest reports the entry as skipped, by name, instead of passed.
function(anxin_add_ctest name target)
  cmake_parse_arguments(ARG "RELEASE;SKIP_GTEST" "TIMEOUT" "ARGS;LABELS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  add_test(NAME ${name} COMMAND ${target} ${ARG_ARGS})
  set(_entries ${name})
  if(ARG_RELEASE AND ANXIN_RELEASE_TEST_DIR)
    file(RELATIVE_PATH _rel ${PROJECT_BINARY_DIR} ${CMAKE_CURRENT_BINARY_DIR})
    add_test(NAME release.${name} COMMAND ${ANXIN_RELEASE_TEST_DIR}/${_rel}/${target} ${ARG_ARGS})
    list(APPEND _entries release.${name})
    set_tests_properties(release.${name} PROPERTIES LABELS "release;${ARG_LABELS}")
  endif()
  set_tests_properties(${_entries} PROPERTIES TIMEOUT ${ARG_TIMEOUT})
  set_tests_properties(${name} PROPERTIES LABELS "unit;${ARG_LABELS}")
  if(ARG_SKIP_GTEST)
    set_tests_properties(${_entries} PROPERTIES SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\] 1 test")
  endif()
  if(ARG_RELEASE AND TARGET anxin_release_tests)
    add_dependencies(anxin_release_tests ${target})
  endif()
endfunction()

# anxin_test(NAME SOURCES... [DEPS libs...] [LABELS labels...] [TIMEOUT s] [RELEASE])
# A gtest executable registered with ctest under NAME. Tests run from the
# build directory; ANXIN_SOURCE_DIR and ANXIN_BINARY_DIR point at the source
# tree (fixtures live in tests/fixtures/) and at the build tree (its `anxin`).
# RELEASE: it also runs as "release.NAME" on the optimised build, so that what
# users get is tested too (see anxin_add_ctest).
function(anxin_test name)
  if(NOT ANXIN_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "RELEASE" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gmock GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    ANXIN_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    ANXIN_BINARY_DIR="${PROJECT_BINARY_DIR}")
  set(_release)
  if(ARG_RELEASE)
    set(_release RELEASE)
  endif()
  set(_timeout 300)
  if(ARG_TIMEOUT)
    set(_timeout ${ARG_TIMEOUT})
  endif()
  anxin_add_ctest(${name} ${name} ${_release} TIMEOUT ${_timeout} LABELS ${ARG_LABELS})
endfunction()

# anxin_fuzzer(NAME SOURCE [DEPS libs...] [CORPUS dir] [RUNS n])
# A libFuzzer target. g++ cannot use -fsanitize=fuzzer, so the harness is
# built with comparison tracing (-fsanitize-coverage=trace-cmp) and linked with
# clang's libFuzzer runtime, and runs with -use_value_profile=1 for feedback.
# ctest runs it for RUNS iterations starting from CORPUS.
set(ANXIN_LIBFUZZER_RUNTIME "" CACHE FILEPATH "libclang_rt.fuzzer for the host")
if(NOT ANXIN_LIBFUZZER_RUNTIME)
  file(GLOB _fuzz_rt /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a)
  if(_fuzz_rt)
    list(GET _fuzz_rt 0 _fuzz_rt0)
    set(ANXIN_LIBFUZZER_RUNTIME ${_fuzz_rt0} CACHE FILEPATH "" FORCE)
  endif()
endif()
function(anxin_fuzzer name source)
  if(NOT ANXIN_BUILD_TESTS OR NOT ANXIN_BUILD_FUZZERS OR NOT ANXIN_LIBFUZZER_RUNTIME)
    return()
  endif()
  cmake_parse_arguments(ARG "" "CORPUS;RUNS" "DEPS" ${ARGN})
  add_executable(${name} ${source})
  target_compile_options(${name} PRIVATE -fsanitize-coverage=trace-cmp)
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} ${ANXIN_LIBFUZZER_RUNTIME})
  if(NOT ARG_RUNS)
    set(ARG_RUNS 20000)
  endif()
  set(_dir ${CMAKE_CURRENT_BINARY_DIR}/${name}_corpus)
  set(_cmd ${CMAKE_COMMAND} -E make_directory ${_dir})
  add_test(NAME ${name}
    COMMAND ${CMAKE_COMMAND}
      -DFUZZER=$<TARGET_FILE:${name}> -DWORK=${_dir} -DSEEDS=${ARG_CORPUS} -DRUNS=${ARG_RUNS}
      -P ${PROJECT_SOURCE_DIR}/cmake/RunFuzzer.cmake)
  set_tests_properties(${name} PROPERTIES TIMEOUT 300 LABELS "fuzz")
endfunction()

