# programs.cmake — Chapter 9's programs tested as a user runs them: bad
# input, the result line, a dying rank.
# Included by tests/CMakeLists.txt; ${mpi2} and ${bad_data_dir} come from there.

if(TARGET ch09_train_solution)
  set(ch09 $<TARGET_FILE:ch09_train_solution>)
  workbook_expect_error(ch09_train_bad_precision "solution;ch09" 2 "--precision" ${ch09} --precision fp8)
  workbook_expect_error(ch09_train_checkpoint_past_the_blocks "solution;ch09" 2
                        "--checkpoint-every 9: the model has 8 block\\(s\\)" ${ch09} --checkpoint-every 9)
  workbook_expect_error(ch09_train_master_weights_fp32 "solution;ch09" 2 "--master-weights needs --precision bf16 or fp16"
                        ${ch09} --master-weights)
  workbook_check_result_line(ch09_train_result_line "solution;ch09;mpi" ${mpi2} ${ch09}
                             --precision bf16 --wire bf16 --checkpoint-every 2 --blocks 4 --width 64 --epochs 1
                             --batch 32 --train-samples 640 --test-samples 200 --threads 1)
  workbook_check_result_line(ch09_train_fp16_master_weights "solution;ch09;mpi" ${mpi2} ${ch09}
                             --precision fp16 --master-weights --blocks 2 --width 64 --epochs 1
                             --batch 32 --train-samples 640 --test-samples 200 --threads 1)
  workbook_expect_failure_within(ch09_train_dead_rank "solution;ch09;mpi" 60 "rank 0 of 2: stopped by a signal while in"
    ${mpi2} sh ${CMAKE_SOURCE_DIR}/tests/support/kill_rank_after.sh 1 epoch:${CMAKE_BINARY_DIR}/ch09_dead_rank.jsonl ${ch09}
    --wire bf16 --epochs 50 --train-samples 2000 --test-samples 200 --threads 1 --json ${CMAKE_BINARY_DIR}/ch09_dead_rank.jsonl)
endif()
# The lesson's GPU table is what hpc/results/table.py renders from the kept checks.
add_test(NAME ch09_readme_tables
         COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/support/check_rendered_tables.py
                 ${CMAKE_SOURCE_DIR}/chapters/09_precision_memory/README.md)
set_tests_properties(ch09_readme_tables PROPERTIES LABELS "ch09")
