# programs.cmake — Chapter 8's program tested as a user runs it: bad input,
# the result line, a dying rank.
# Included by tests/CMakeLists.txt (every tests/NN_name/programs.cmake is);
# ${mpi2}, ${mpi3} and ${bad_data_dir} come from there.

if(TARGET ch08_train_solution)
  set(ch08 $<TARGET_FILE:ch08_train_solution>)
  workbook_expect_error(ch08_train_bad_layout "solution;ch08" 2 "--layout: pipe not in" ${ch08} --layout pipe)
  workbook_expect_error(ch08_train_too_few_samples "solution;ch08;mpi" 2 "is less than one batch"
                        ${mpi2} ${ch08} --batch 100 --train-samples 50)
  workbook_check_result_line(ch08_train_result_line "solution;ch08;mpi" ${mpi2} ${ch08}
                             --layout tensor --epochs 2 --train-samples 400 --threads 1)
  workbook_check_result_line(ch08_train_result_line_3_ranks "solution;ch08;mpi" ${mpi3} ${ch08}
                             --layout tensor --epochs 1 --train-samples 300 --threads 1)
  # A rank that dies while the other waits in fc2's all-reduce or fc1's:
  # the survivor ends within seconds and names the call it was waiting in.
  workbook_expect_failure_within(ch08_train_dead_rank "solution;ch08;mpi" 60 "rank 0 of 2: stopped by a signal while in"
    ${mpi2} sh ${CMAKE_SOURCE_DIR}/tests/support/kill_rank_after.sh 1 6 ${ch08} --layout tensor --epochs 5 --threads 1)
endif()
