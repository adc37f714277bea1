# Trace reading throughput: a generated Kineto trace read and summarised in memory
# (issue 46: a 1 GB trace in under 10 s and 3 GB on the 2-core box; CLEAVE_BENCH_TRACE_MB sets
# the size, default 64).
add_executable(bench_trace ${CMAKE_CURRENT_SOURCE_DIR}/bench_trace.cpp)
target_link_libraries(bench_trace PRIVATE cleave_trace benchmark::benchmark cleave_warnings)
