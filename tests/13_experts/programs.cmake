# programs.cmake — Chapter 13's program tested as a user runs it: bad input
# (one message, exit 2, before any rank waits for another) and the result
# line of a short run, experts and dense. Included by tests/CMakeLists.txt;
# ${mpi2} comes from there.

if(TARGET ch13_train_solution)
  set(ch13 $<TARGET_FILE:ch13_train_solution>)
  workbook_expect_error(ch13_train_experts_not_split "solution;ch13;mpi" 2
                        "7 experts cannot be split evenly over 2 ranks" ${mpi2} ${ch13} --experts 7)
  workbook_expect_error(ch13_train_top_k_too_large "solution;ch13;mpi" 2 "top-k 5 is more than the 4 experts"
                        ${mpi2} ${ch13} --experts 4 --top-k 5)
  workbook_expect_error(ch13_train_heads_not_dividing "solution;ch13;mpi" 2 "width 24 is not a multiple of its 5 heads"
                        ${mpi2} ${ch13} --width 24 --heads 5)
  workbook_check_result_line(ch13_train_result_line "solution;ch13;mpi" ${mpi2} ${ch13}
                             --experts 4 --layers 1 --width 32 --heads 2 --expert-hidden 16 --context 16 --steps 4
                             --threads 1)
  workbook_check_result_line(ch13_train_dense_result_line "solution;ch13;mpi" ${mpi2} ${ch13}
                             --dense --layers 1 --width 32 --heads 2 --expert-hidden 16 --context 16 --steps 4
                             --threads 1)
endif()
# results.md's tables are what tables.py renders from the kept files.
add_test(NAME ch13_results_tables
         COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/support/check_rendered_tables.py
                 ${CMAKE_SOURCE_DIR}/chapters/13_experts/results.md)
set_tests_properties(ch13_results_tables PROPERTIES LABELS "ch13")
