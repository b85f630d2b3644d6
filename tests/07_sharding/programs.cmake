# programs.cmake — Chapter 7's program tested as a user runs it: bad input,
# the result line, the three stages' weights, a dying rank.
# Included by tests/CMakeLists.txt (every tests/NN_name/programs.cmake is);
# ${mpi2}, ${mpi3} and ${bad_data_dir} come from there.

if(TARGET ch07_train_solution)
  set(ch07 $<TARGET_FILE:ch07_train_solution>)
  workbook_expect_error(ch07_train_bad_stage "solution;ch07" 2 "--stage: 4 not in" ${ch07} --stage 4)
  workbook_expect_error(ch07_train_bad_optimizer "solution;ch07" 2 "--optimizer: sgd not in" ${ch07} --optimizer sgd)
  workbook_expect_error(ch07_train_batch_not_divisible "solution;ch07;mpi" 2
                        "--batch 7 is the global batch and must divide evenly among the 2 ranks" ${mpi2} ${ch07} --batch 7)
  workbook_check_result_line(ch07_train_result_line "solution;ch07;mpi" ${mpi2} ${ch07}
                             --stage 2 --epochs 2 --train-samples 400 --test-samples 200 --threads 1)
  # FashionCNN, 2 ranks: stages 0 to 3 give the same weights, bit for bit
  # (Note [bit-identical at 2 ranks] in test_ex7_2_stage1.cpp), with Adam.
  add_test(NAME ch07_train_stages_same_weights
           COMMAND sh -c "for stage in 0 1 2 3; do \"$0\" \"$@\" --stage $stage --json ${CMAKE_BINARY_DIR}/ch07_stage$stage.jsonl > /dev/null || exit 1; done; /usr/bin/python3 -c \"import json, sys; h = [json.loads(open(f).readlines()[-1])['weights_sha256'] for f in sys.argv[1:]]; print('weights', h); sys.exit(0 if len(set(h)) == 1 else 'the stages trained different weights')\" ${CMAKE_BINARY_DIR}/ch07_stage0.jsonl ${CMAKE_BINARY_DIR}/ch07_stage1.jsonl ${CMAKE_BINARY_DIR}/ch07_stage2.jsonl ${CMAKE_BINARY_DIR}/ch07_stage3.jsonl"
                   ${mpi2} ${ch07} --train-samples 600 --test-samples 200 --threads 1)
  set_tests_properties(ch07_train_stages_same_weights PROPERTIES LABELS "solution;ch07;mpi" TIMEOUT 300
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
  # A rank that dies while the other is in stage 2's hooks or step: the
  # survivor ends within seconds and names the call it was waiting in.
  workbook_expect_failure_within(ch07_train_dead_rank "solution;ch07;mpi" 60 "rank 0 of 2: stopped by a signal while in"
    ${mpi2} sh ${CMAKE_SOURCE_DIR}/tests/support/kill_rank_after.sh 1 epoch:${CMAKE_BINARY_DIR}/ch07_dead_rank.jsonl ${ch07}
    --stage 2 --epochs 50 --train-samples 2000 --test-samples 200 --threads 1 --json ${CMAKE_BINARY_DIR}/ch07_dead_rank.jsonl)
endif()

if(TARGET ch07_train_solution)
  # Checkpoints: interrupted after one epoch and resumed, stage 3 ends with the
  # weights of a run never interrupted (stage 1: a test case in test_checkpoints.cpp).
  add_test(NAME ch07_train_resume_bit_identical
           COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/support/check_resume.py ${CMAKE_BINARY_DIR}/ch07-resume-test
                   ${mpi2} ${ch07} -- --stage 3 --train-samples 600 --test-samples 200 --threads 1)
  set_tests_properties(ch07_train_resume_bit_identical PROPERTIES LABELS "solution;ch07;mpi" TIMEOUT 300
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
  # Resharding: a checkpoint of stage 1 on 2 ranks goes on at stage 3 on 3 ranks.
  string(REPLACE ";" " " mpi3_words "${mpi3}")
  add_test(NAME ch07_train_reshard_2_to_3
           COMMAND sh -c "rm -f ${CMAKE_BINARY_DIR}/ch07-reshard.pt && $0 \"$@\" --stage 1 --epochs 1 > /dev/null && ${mpi3_words} ${ch07} --train-samples 600 --test-samples 200 --threads 1 --checkpoint ${CMAKE_BINARY_DIR}/ch07-reshard.pt --resume --stage 3 --epochs 2 --batch 99 | grep 'resumed after epoch 1'"
                   ${mpi2} ${ch07} --train-samples 600 --test-samples 200 --threads 1 --checkpoint ${CMAKE_BINARY_DIR}/ch07-reshard.pt)
  set_tests_properties(ch07_train_reshard_2_to_3 PROPERTIES LABELS "solution;ch07;mpi" TIMEOUT 300
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
  workbook_expect_error(ch07_train_resume_without_checkpoint "solution;ch07;mpi" 2 "--resume needs --checkpoint"
                        ${mpi2} ${ch07} --resume)
  workbook_expect_error(ch07_train_corrupt_checkpoint "solution;ch07;mpi" 2
                        "checkpoint .*train-images-idx3-ubyte is unreadable"
                        ${mpi2} ${ch07} --checkpoint ${bad_data_dir}/train-images-idx3-ubyte --resume)
endif()

if(TARGET ch07_train_solution)
  workbook_expect_error(ch07_train_negative_clip "solution;ch07" 2 "--clip-grad-norm" ${ch07} --clip-grad-norm -1)
  # A checkpoint of Adam resumed with LAMB: one message that says what to check.
  string(REPLACE ";" " " mpi2_words "${mpi2}")
  workbook_expect_error(ch07_train_checkpoint_of_another_optimizer "solution;ch07;mpi" 2
                        "was it saved with another --optimizer"
                        sh -c "rm -f ${CMAKE_BINARY_DIR}/ch07-adam.pt && ${mpi2_words} ${ch07} --epochs 1 --train-samples 200 --test-samples 200 --threads 1 --checkpoint ${CMAKE_BINARY_DIR}/ch07-adam.pt > /dev/null && ${mpi2_words} ${ch07} --optimizer lamb --epochs 2 --train-samples 200 --test-samples 200 --threads 1 --checkpoint ${CMAKE_BINARY_DIR}/ch07-adam.pt --resume")
endif()
