# Planner search speed (issue #4: GPT-3 175B on 4096 DGX-A100 GPUs, >= 5 M evaluations/s,
# whole search < 1 s) and the public-runs rank table (docs/planner.md).
add_executable(bench_planner ${CMAKE_CURRENT_SOURCE_DIR}/bench_planner.cpp)
target_link_libraries(bench_planner PRIVATE cleave_planner benchmark::benchmark cleave_warnings)
target_compile_definitions(bench_planner PRIVATE CLEAVE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")

add_executable(planner_public_runs ${CMAKE_CURRENT_SOURCE_DIR}/planner_public_runs.cpp)
target_link_libraries(planner_public_runs PRIVATE cleave_planner cleave_published cleave_warnings)
target_compile_definitions(planner_public_runs PRIVATE CLEAVE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
