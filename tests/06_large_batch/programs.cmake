# programs.cmake — Chapter 6's programs tested as a user runs them:
# bad input, the comparison, the steps-to-target sweep, the bench, a dying rank.
# Included by tests/CMakeLists.txt (every tests/NN_name/programs.cmake is);
# ${mpi2}, ${mpi3} and ${bad_data_dir} come from there.

if(TARGET ch06_train_solution)
  set(ch06 $<TARGET_FILE:ch06_train_solution>)
  set(ch06_bench $<TARGET_FILE:ch06_bench_solution>)
  workbook_expect_error(ch06_train_bad_method "solution;ch06" 2 "--method" ${ch06} --method adam)
  workbook_expect_error(ch06_train_batch_not_divisible "solution;ch06;mpi" 2
                        "global batch 7 must divide evenly among the 2 ranks" ${mpi2} ${ch06} --batch 7)
  workbook_expect_error(ch06_train_micro_batch_mismatch "solution;ch06;mpi" 2
                        "global batch 96 must split into 2 ranks x micro-batches of 32" ${mpi2} ${ch06} --batch 96 --micro-batch 32)
  workbook_expect_error(ch06_train_batch_above_data "solution;ch06" 2 "global batch 4096 is more than the 1000 training samples"
                        ${ch06} --batch 4096 --train-samples 1000)
  workbook_expect_error(ch06_train_full_alone "solution;ch06" 2 "--full goes with --compare" ${ch06} --full)
  workbook_expect_error(ch06_train_batches_alone "solution;ch06" 2 "--batches and --methods go with --sweep or --compare"
                        ${ch06} --batches 128)
  workbook_expect_error(ch06_train_sweep_and_compare "solution;ch06" 2 "two different measurements"
                        ${ch06} --sweep --compare)
  workbook_expect_error(ch06_train_sweep_with_epochs "solution;ch06" 2 "--epochs, --lr, --decay and --warmup-epochs do not apply"
                        ${ch06} --sweep --epochs 3)
  workbook_expect_error(ch06_train_quick_alone "solution;ch06" 2 "--quick and --max-epochs go with --sweep"
                        ${ch06} --compare --quick)
  workbook_expect_error(ch06_train_bad_sweep_method "solution;ch06" 2 "--methods: adam not in"
                        ${ch06} --sweep --methods lars,adam)
  workbook_expect_error(ch06_train_sweep_with_batch "solution;ch06" 2 "--sweep and --compare set the batch and the method"
                        ${ch06} --sweep --batch 512)
  workbook_expect_error(ch06_train_warmup_past_end "solution;ch06" 2 "the decay ends at epoch 2, not after the warm-up's 3"
                        ${ch06} --method lamb --batch 64 --epochs 2 --warmup-epochs 3 --train-samples 512 --test-samples 100)
  workbook_check_result_line(ch06_train_result_line "solution;ch06;mpi" ${mpi2} ${ch06}
                             --method lars --batch 64 --micro-batch 16 --epochs 2 --train-samples 512 --test-samples 200 --threads 1)
  workbook_check_result_line(ch06_train_compare_result_line "solution;ch06;mpi" ${mpi2} ${ch06}
                             --compare --batches 32,64 --methods sgd,lamb --epochs 1 --train-samples 256 --test-samples 200 --threads 1)
  workbook_check_result_line(ch06_train_sweep_result_line "solution;ch06;mpi" ${mpi2} ${ch06}
                             --sweep --batches 32,64 --methods warmup --target 0.5 --max-epochs 2 --train-samples 512 --test-samples 250 --threads 1)
  workbook_check_result_line(ch06_train_noise_scale "solution;ch06;mpi" ${mpi2} ${ch06}
                             --method lars --batch 64 --micro-batch 16 --epochs 1 --train-samples 512 --test-samples 200 --threads 1
                             --noise-scale --momentum-correction)
  workbook_expect_error(ch06_train_noise_scale_one_rank "solution;ch06" 2 "--noise-scale compares each rank's gradient"
                        ${ch06} --noise-scale --batch 64 --train-samples 512)
  workbook_expect_error(ch06_train_momentum_correction_not_lars "solution;ch06" 2 "--momentum-correction is for --method lars"
                        ${ch06} --method lamb --momentum-correction)
  add_test(NAME ch06_bench_runs COMMAND ${mpi2} ${ch06_bench} --rounds 1 --batches 4 --frequencies 1,4 --threads 1)
  set_tests_properties(ch06_bench_runs PROPERTIES LABELS "solution;ch06;mpi" TIMEOUT 300
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
  workbook_expect_error(ch06_bench_needs_frequency_one "solution;ch06" 2 "--frequencies must include 1"
                        ${ch06_bench} --frequencies 2,4)
  # A rank that dies between accumulated steps: the survivor ends within
  # seconds and names the call it was waiting in.
  workbook_expect_failure_within(ch06_train_dead_rank "solution;ch06;mpi" 60 "rank 0 of 2: stopped by a signal while in"
    ${mpi2} sh ${CMAKE_SOURCE_DIR}/tests/support/kill_rank_after.sh 1 epoch:${CMAKE_BINARY_DIR}/ch06_dead_rank.jsonl ${ch06}
    --method lamb --batch 256 --epochs 50 --train-samples 2048 --test-samples 200 --threads 1 --json ${CMAKE_BINARY_DIR}/ch06_dead_rank.jsonl)
endif()
