# programs.cmake — Chapter 5's programs tested as a user runs them:
# bad input, the result line, a dying rank.
# Included by tests/CMakeLists.txt (every tests/NN_name/programs.cmake is);
# ${mpi2}, ${mpi3} and ${bad_data_dir} come from there.

if(TARGET ch05_train_solution)
  set(ch05 $<TARGET_FILE:ch05_train_solution>)
  workbook_expect_error(ch05_train_bad_norm "solution;ch05" 2 "--norm" ${ch05} --norm batch)
  workbook_expect_error(ch05_train_batch_not_divisible "solution;ch05;mpi" 2
                        "--batch 7 is the global batch and must divide evenly among the 2 ranks" ${mpi2} ${ch05} --batch 7)
  workbook_expect_error(ch05_train_too_short "solution;ch05;mpi" 2 "too few to time"
                        ${mpi2} ${ch05} --batch 64 --train-samples 64)
  workbook_check_result_line(ch05_train_result_line "solution;ch05;mpi" ${mpi2} ${ch05}
                             --norm both --epochs 2 --batch 16 --train-samples 320 --test-samples 200 --threads 1)
  # A rank that dies while the other is inside SyncBatchNorm's collectives:
  # the survivor ends within seconds and names the call it was waiting in.
  workbook_expect_failure_within(ch05_train_dead_rank "solution;ch05;mpi" 60 "rank 0 of 2: stopped by a signal while in"
    ${mpi2} sh ${CMAKE_SOURCE_DIR}/tests/support/kill_rank_after.sh 1 epoch:${CMAKE_BINARY_DIR}/ch05_dead_rank.jsonl ${ch05}
    --norm sync --epochs 50 --train-samples 2000 --test-samples 200 --threads 1 --json ${CMAKE_BINARY_DIR}/ch05_dead_rank.jsonl)
endif()
