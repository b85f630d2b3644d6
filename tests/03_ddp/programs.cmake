# programs.cmake — Chapter 3's programs tested as a user runs them:
# bad input on every rank, a dying rank, resuming, accuracy.
# Included by tests/CMakeLists.txt (every tests/NN_name/programs.cmake is);
# ${mpi2}, ${mpi3} and ${bad_data_dir} come from there.

if(TARGET ch03_train_solution)
  set(ch03 $<TARGET_FILE:ch03_train_solution>)
  # Bad input: one clear message from every rank, exit 2, and no rank left waiting.
  workbook_expect_error(ch03_train_batch_not_divisible "solution;ch03;mpi" 2
                        "rank [01] of 2: --batch 101 is the global batch and must divide evenly among the 2 ranks"
                        ${mpi2} ${ch03} --batch 101)
  workbook_expect_error(ch03_train_more_ranks_than_samples "solution;ch03;mpi" 2
                        "--train-samples 2 is fewer than the 3 ranks" ${mpi3} ${ch03} --batch 3 --train-samples 2)
  workbook_expect_error(ch03_train_fewer_test_samples_than_ranks "solution;ch03;mpi" 2
                        "--test-samples 2 is fewer than the 3 ranks" ${mpi3} ${ch03} --batch 3 --test-samples 2)
  workbook_expect_error(ch03_train_missing_launcher_variable "solution;ch03;mpi" 2
                        "OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK is not"
                        env OMPI_COMM_WORLD_SIZE=2 ${ch03})
  workbook_expect_error(ch03_train_alone_in_a_two_task_job "solution;ch03;mpi" 2
                        "MPI says this is rank 0 of 1, but srun .SLURM_.. says rank 0 of 2"
                        env SLURM_PROCID=0 SLURM_NTASKS=2 ${ch03})
  workbook_expect_error(ch03_train_resume_without_checkpoint "solution;ch03;mpi" 2 "--resume needs --checkpoint"
                        ${mpi2} ${ch03} --resume)
  workbook_expect_error(ch03_train_corrupt_checkpoint "solution;ch03;mpi" 2
                        "checkpoint .*train-images-idx3-ubyte is unreadable"
                        ${mpi2} ${ch03} --checkpoint ${bad_data_dir}/train-images-idx3-ubyte --resume)
  if(NOT TORCH_CUDA_LIBRARIES)
    workbook_expect_error(ch03_train_no_cuda "solution;ch03" 2 "no CUDA device" ${ch03} --device cuda)
  endif()
  workbook_check_result_line(ch03_train_result_line "solution;ch03;mpi" ${mpi2} ${ch03}
                             --epochs 2 --train-samples 400 --test-samples 200 --threads 1)
  # A rank that dies mid-training: the job ends within seconds, and the
  # survivor says where it was.
  workbook_expect_failure_within(ch03_train_dead_rank "solution;ch03;mpi" 60 "rank 0 of 2: stopped by a signal"
    ${mpi2} sh ${CMAKE_SOURCE_DIR}/tests/support/kill_rank_after.sh 1 epoch:${CMAKE_BINARY_DIR}/ch03_dead_rank.jsonl ${ch03}
    --epochs 50 --train-samples 2000 --test-samples 200 --threads 1 --json ${CMAKE_BINARY_DIR}/ch03_dead_rank.jsonl)
  # The whole training set, one epoch on 2 ranks: the accuracy a correct DDP reaches.
  add_test(NAME ch03_train_accuracy
           COMMAND sh -c "\"$0\" \"$@\" --json ${CMAKE_BINARY_DIR}/ch03_accuracy.jsonl > /dev/null && /usr/bin/python3 -c \"import json, sys; r = json.loads(open(sys.argv[1]).readlines()[-1]); print('test accuracy', r['test_accuracy']); sys.exit(0 if r['test_accuracy'] >= 0.87 else 'below 0.87')\" ${CMAKE_BINARY_DIR}/ch03_accuracy.jsonl"
                   ${mpi2} ${ch03} --epochs 1 --threads 1)
  set_tests_properties(ch03_train_accuracy PROPERTIES LABELS "solution;ch03;mpi;slow" TIMEOUT 600
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
  add_test(NAME ch03_train_resume_bit_identical
           COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/support/check_resume.py ${CMAKE_BINARY_DIR}/resume-test
                   ${mpi2} ${ch03} -- --train-samples 600 --test-samples 200 --threads 1)
  set_tests_properties(ch03_train_resume_bit_identical PROPERTIES LABELS "solution;ch03;mpi" TIMEOUT 300
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
endif()
