# The KV cache: storage per format, quantise and attention throughput
# against fp16 attention in the same run (kv_run).
add_executable(serve_kv_bench ${CMAKE_CURRENT_LIST_DIR}/kv_bench.cc)
target_link_libraries(serve_kv_bench PRIVATE anxin_kv)
