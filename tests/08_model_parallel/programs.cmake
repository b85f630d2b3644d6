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
                             --layout tensor --epochs 2 --train-samples 400 --test-samples 200 --threads 1)
  workbook_check_result_line(ch08_train_result_line_3_ranks "solution;ch08;mpi" ${mpi3} ${ch08}
                             --layout tensor --epochs 1 --train-samples 300 --test-samples 200 --threads 1)
  # A rank that dies while the other waits in fc2's all-reduce or fc1's:
  # the survivor ends within seconds and names the call it was waiting in.
  workbook_expect_failure_within(ch08_train_dead_rank "solution;ch08;mpi" 60 "rank 0 of 2: stopped by a signal while in"
    ${mpi2} sh ${CMAKE_SOURCE_DIR}/tests/support/kill_rank_after.sh 1 epoch:${CMAKE_BINARY_DIR}/ch08_tensor_dead_rank.jsonl ${ch08}
    --layout tensor --epochs 50 --train-samples 2000 --test-samples 200 --threads 1 --json ${CMAKE_BINARY_DIR}/ch08_tensor_dead_rank.jsonl)
  # The pipeline: bad layouts exit 2 before any rank waits for another.
  workbook_expect_error(ch08_train_more_stages_than_blocks "solution;ch08;mpi" 2
                        "FashionCNN has 5 blocks to cut .*: 6 ranks are too many"
                        ${MPIEXEC_EXECUTABLE} --oversubscribe -n 6 ${ch08} --layout pipeline)
  workbook_expect_error(ch08_train_micro_batches_not_dividing "solution;ch08;mpi" 2
                        "--micro-batches 3 does not divide --batch 100" ${mpi2} ${ch08} --layout pipeline --micro-batches 3)
  workbook_expect_error(ch08_train_ranks_do_not_factor "solution;ch08;mpi" 2
                        "3 ranks do not make groups of --tensor-ranks 2" ${mpi3} ${ch08} --layout hybrid --tensor-ranks 2)
  workbook_expect_error(ch08_bench_one_rank "solution;ch08" 2 "1 rank\\(s\\) cannot make one" $<TARGET_FILE:ch08_bench_solution>)
  foreach(schedule gpipe 1f1b)
    workbook_check_result_line(ch08_train_pipeline_${schedule}_result_line "solution;ch08;mpi" ${mpi3} ${ch08}
                               --layout pipeline --schedule ${schedule} --micro-batches 4 --batch 40 --epochs 1
                               --train-samples 400 --test-samples 200 --threads 1)
  endforeach()
  # One stage (the whole model on one rank, no messages) and four (every
  # boundary a real link between processes): both train and report.
  foreach(stages 1 4)
    workbook_check_result_line(ch08_train_pipeline_${stages}_stages_result_line "solution;ch08;mpi"
                               ${MPIEXEC_EXECUTABLE} --oversubscribe -n ${stages} ${ch08}
                               --layout pipeline --schedule 1f1b --micro-batches 4 --batch 40 --epochs 1
                               --train-samples 400 --test-samples 200 --threads 1)
  endforeach()
  # A stage that dies mid-step: its neighbours end within seconds, naming the
  # send or receive they were waiting in.
  workbook_expect_failure_within(ch08_train_pipeline_dead_stage "solution;ch08;mpi" 60
    "rank 0 of 2: stopped by a signal while in"
    ${mpi2} sh ${CMAKE_SOURCE_DIR}/tests/support/kill_rank_after.sh 1 epoch:${CMAKE_BINARY_DIR}/ch08_pipeline_dead_rank.jsonl ${ch08}
    --layout pipeline --epochs 50 --train-samples 2000 --test-samples 200 --threads 1 --json ${CMAKE_BINARY_DIR}/ch08_pipeline_dead_rank.jsonl)
endif()
