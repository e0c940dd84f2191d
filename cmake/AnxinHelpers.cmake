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

# anxin_test(NAME SOURCES... [DEPS libs...] [LABELS labels...] [TIMEOUT s])
# A gtest executable registered with ctest under NAME. Tests run from the
# build directory; ANXIN_SOURCE_DIR and ANXIN_BINARY_DIR point at the source
# tree (fixtures live in tests/fixtures/) and at the build tree.
function(anxin_test name)
  if(NOT ANXIN_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gmock GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    ANXIN_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    ANXIN_BINARY_DIR="${PROJECT_BINARY_DIR}")
  add_test(NAME ${name} COMMAND ${name})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT} LABELS "unit;${ARG_LABELS}")
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

