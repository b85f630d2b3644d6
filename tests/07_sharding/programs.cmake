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
                             --stage 2 --epochs 2 --train-samples 400 --threads 1)
  # FashionCNN, 2 ranks: stages 0, 1 and 2 give the same weights, bit for bit
  # (Note [bit-identical at 2 ranks] in test_ex7_2_stage1.cpp), with Adam.
  add_test(NAME ch07_train_stages_same_weights
           COMMAND sh -c "for stage in 0 1 2; do \"$0\" \"$@\" --stage $stage --json ${CMAKE_BINARY_DIR}/ch07_stage$stage.jsonl > /dev/null || exit 1; done; /usr/bin/python3 -c \"import json, sys; h = [json.loads(open(f).readlines()[-1])['weights_sha256'] for f in sys.argv[1:]]; print('weights', h); sys.exit(0 if len(set(h)) == 1 else 'the stages trained different weights')\" ${CMAKE_BINARY_DIR}/ch07_stage0.jsonl ${CMAKE_BINARY_DIR}/ch07_stage1.jsonl ${CMAKE_BINARY_DIR}/ch07_stage2.jsonl"
                   ${mpi2} ${ch07} --train-samples 600 --threads 1)
  set_tests_properties(ch07_train_stages_same_weights PROPERTIES LABELS "solution;ch07;mpi" TIMEOUT 300
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
  # A rank that dies while the other is in stage 2's hooks or step: the
  # survivor ends within seconds and names the call it was waiting in.
  workbook_expect_failure_within(ch07_train_dead_rank "solution;ch07;mpi" 60 "rank 0 of 2: stopped by a signal while in"
    ${mpi2} sh ${CMAKE_SOURCE_DIR}/tests/support/kill_rank_after.sh 1 6 ${ch07} --stage 2 --epochs 5 --threads 1)
endif()
