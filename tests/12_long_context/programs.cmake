# programs.cmake — Chapter 12's program tested as a user runs it: bad input
# (one message, exit 2, before any rank waits for another) and the result
# line of a short run. Included by tests/CMakeLists.txt; ${mpi2} comes from there.

if(TARGET ch12_train_solution)
  set(ch12 $<TARGET_FILE:ch12_train_solution>)
  workbook_expect_error(ch12_train_context_not_split "solution;ch12;mpi" 2
                        "a context of 102 cannot be split among 2 ranks with equal causal work" ${mpi2} ${ch12} --context 102)
  workbook_expect_error(ch12_train_bad_split "solution;ch12;mpi" 2 "--split must be contiguous or balanced, got 'zigzag'"
                        ${mpi2} ${ch12} --split zigzag)
  workbook_expect_error(ch12_train_heads_not_dividing "solution;ch12;mpi" 2 "width 24 is not a multiple of its 5 heads"
                        ${mpi2} ${ch12} --width 24 --heads 5)
  workbook_check_result_line(ch12_train_result_line "solution;ch12;mpi" ${mpi2} ${ch12}
                             --context 64 --layers 1 --width 32 --heads 2 --steps 4 --threads 1)
endif()
# results.md's tables are what tables.py renders from the kept files.
add_test(NAME ch12_results_tables
         COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/support/check_rendered_tables.py
                 ${CMAKE_SOURCE_DIR}/chapters/12_long_context/results.md)
set_tests_properties(ch12_results_tables PROPERTIES LABELS "ch12")
