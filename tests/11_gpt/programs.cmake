# programs.cmake — Chapter 11's programs tested as a user runs them: bad
# input (one message, exit 2, before any rank waits for another) and the
# result line of a short run whose untrained model writes any byte.
# Included by tests/CMakeLists.txt; ${mpi2} comes from there.

if(TARGET ch11_train_solution)
  set(ch11 $<TARGET_FILE:ch11_train_solution>)
  workbook_expect_error(ch11_train_heads_not_split "solution;ch11;mpi" 2 "3 heads cannot be split over 2 tensor ranks"
                        ${mpi2} ${ch11} --tensor 2 --heads 3 --width 24)
  workbook_expect_error(ch11_train_more_stages_than_layers "solution;ch11;mpi" 2 "2 pipeline stages for 1 layers"
                        ${mpi2} ${ch11} --pipeline 2 --layers 1)
  workbook_check_result_line(ch11_train_result_line "solution;ch11;mpi" ${mpi2} ${ch11}
                             --tensor 2 --layers 2 --width 32 --heads 2 --context 16 --batch 4 --micro-batches 2
                             --steps 5 --sample 64 --threads 1)
  # The bench's baseline does the reference's work (the same losses), and
  # --profile's files render on both sides (tests/11_gpt/check_baseline.py).
  # It runs in the baselines' Python (WORKBOOK_PYTHON), which imports torch once.
  # Label `bench`: a check of the bench, not of a learner's code, and the
  # default suite's longest test after ch11's own (20 s of its 150 s, three at
  # a time): CI runs it with the bench's smoke (.ci/run), not in the suite.
  if(WORKBOOK_PYTHON)
    add_test(NAME ch11_baseline_same_work
             COMMAND ${WORKBOOK_PYTHON} ${CMAKE_SOURCE_DIR}/tests/11_gpt/check_baseline.py ${ch11}
                     ${CMAKE_SOURCE_DIR}/chapters/11_gpt/pytorch_gpt_baseline.py ${CMAKE_BINARY_DIR}/ch11_baseline)
    set_tests_properties(ch11_baseline_same_work PROPERTIES LABELS "solution;ch11;bench" TIMEOUT 300 SKIP_RETURN_CODE 77)
  endif()
endif()
# results.md's tables are what tables.py renders from the kept files.
add_test(NAME ch11_results_tables
         COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/support/check_rendered_tables.py
                 ${CMAKE_SOURCE_DIR}/chapters/11_gpt/results.md)
set_tests_properties(ch11_results_tables PROPERTIES LABELS "ch11")
add_test(NAME ch11_results_bench_tables
         COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/support/check_rendered_tables.py
                 ${CMAKE_SOURCE_DIR}/chapters/11_gpt/results_bench.md)
set_tests_properties(ch11_results_bench_tables PROPERTIES LABELS "ch11")
if(TARGET ch11_plan_solution)
  workbook_expect_error(ch11_plan_assumed_needs_links "solution;ch11" 2 "--assume-ranks needs"
                        $<TARGET_FILE:ch11_plan_solution> --assume-ranks 8)
endif()
