# The zero-work streaming server that bench/serve/loadgen_run measures load testers against.
add_executable(loadgen_zero_server ${CMAKE_CURRENT_LIST_DIR}/loadgen_zero_server.cc)
