# programs.cmake — Chapter 1's programs tested as a user runs them:
# bad input gets one message and exit 2, the result line.
# Included by tests/CMakeLists.txt (every tests/NN_name/programs.cmake is);
# ${mpi2}, ${mpi3} and ${bad_data_dir} come from there.

if(TARGET ch01_train_solution)
  set(ch01 $<TARGET_FILE:ch01_train_solution>)
  workbook_expect_error(ch01_train_bad_flag "solution;ch01" 2 "--bogus" ${ch01} --bogus)
  workbook_expect_error(ch01_train_zero_batch "solution;ch01" 2 "--batch" ${ch01} --batch 0)
  workbook_expect_error(ch01_train_bad_device "solution;ch01" 2 "--device must be cpu" ${ch01} --device tpu)
  workbook_expect_error(ch01_train_missing_data "solution;ch01" 2 "Fashion-MNIST not found.*" ${ch01} --data /nonexistent)
  workbook_expect_error(ch01_train_corrupt_data "solution;ch01" 2 "train-images-idx3-ubyte: truncated"
                        ${ch01} --data ${bad_data_dir})
  workbook_expect_error(ch01_train_too_many_samples "solution;ch01" 2 "asked for 70000 train samples"
                        ${ch01} --train-samples 70000)
  workbook_expect_error(ch01_train_too_many_test_samples "solution;ch01" 2 "asked for 20000 test samples"
                        ${ch01} --test-samples 20000)
  workbook_expect_error(ch01_train_graph_on_cpu "solution;ch01" 2 "--cuda-graph needs --device cuda"
                        ${ch01} --cuda-graph)
  if(NOT TORCH_CUDA_LIBRARIES)
    workbook_expect_error(ch01_train_no_cuda "solution;ch01" 2 "no CUDA device" ${ch01} --device cuda)
  endif()
  # The result line every program ends with (ARCHITECTURE.md, Output).
  workbook_check_result_line(ch01_train_result_line "solution;ch01" ${ch01} --epochs 2 --train-samples 400 --test-samples 200)
endif()
