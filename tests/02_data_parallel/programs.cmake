# programs.cmake — Chapter 2's programs tested as a user runs them:
# bad input, the result line.
# Included by tests/CMakeLists.txt (every tests/NN_name/programs.cmake is);
# ${mpi2}, ${mpi3} and ${bad_data_dir} come from there.

if(TARGET ch02_train_solution)
  set(ch02 $<TARGET_FILE:ch02_train_solution>)
  workbook_expect_error(ch02_train_zero_replicas "solution;ch02" 2 "--replicas" ${ch02} --replicas 0)
  workbook_expect_error(ch02_train_batch_below_replicas "solution;ch02" 2 "smaller than --replicas"
                        ${ch02} --replicas 4 --batch 3)
  workbook_expect_error(ch02_train_short_last_batch "solution;ch02" 2 "last batch of an epoch would hold 1"
                        ${ch02} --replicas 2 --batch 100 --train-samples 101)
  workbook_expect_error(ch02_bench_batch_below_replicas "solution;ch02" 2 "at least one sample per replica"
                        $<TARGET_FILE:ch02_bench_solution> --batches 2,64 --replicas 1,4)
  if(NOT TORCH_CUDA_LIBRARIES)
    workbook_expect_error(ch02_train_no_cuda "solution;ch02" 2 "no CUDA device" ${ch02} --device cuda)
  endif()
  workbook_check_result_line(ch02_train_result_line "solution;ch02" ${ch02} --replicas 3 --epochs 2 --train-samples 300 --test-samples 200)
endif()
