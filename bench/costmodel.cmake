# Google Benchmark for the cost model (included by bench/CMakeLists.txt).
add_executable(bench_costmodel ${CMAKE_CURRENT_SOURCE_DIR}/bench_costmodel.cpp)
target_link_libraries(bench_costmodel PRIVATE cleave_costmodel benchmark::benchmark cleave_warnings)
