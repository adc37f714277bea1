# Simulator throughput: one iteration of p = 64, m = 1024, v = 4 (issue #5 target < 50 ms).
add_executable(bench_simulator ${CMAKE_CURRENT_SOURCE_DIR}/bench_simulator.cpp)
target_link_libraries(bench_simulator PRIVATE cleave_simulator benchmark::benchmark cleave_warnings)
