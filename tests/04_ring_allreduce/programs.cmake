# programs.cmake — Chapter 4's programs tested as a user runs them:
# the bench checks its own sums, the reducer matches Chapter 3 bit for bit.
# Included by tests/CMakeLists.txt (every tests/NN_name/programs.cmake is);
# ${mpi2}, ${mpi3} and ${bad_data_dir} come from there.

if(TARGET ch04_bench_solution)
  set(ch04 $<TARGET_FILE:ch04_bench_solution>)
  # The bench checks its own results (#wrong) and fails when any is wrong.
  foreach(ranks 2 3)
    add_test(NAME ch04_bench_bandwidth_np${ranks}
             COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe -n ${ranks} ${ch04} --max-bytes 1048576 --rounds 1 --threads 1)
    set_tests_properties(ch04_bench_bandwidth_np${ranks} PROPERTIES LABELS "solution;ch04;mpi" TIMEOUT 300
                         ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
  endforeach()
  add_test(NAME ch04_bench_overlap COMMAND ${mpi2} ${ch04} --measure overlap --rounds 1 --steps 2 --threads 1)
  set_tests_properties(ch04_bench_overlap PROPERTIES LABELS "solution;ch04;mpi" TIMEOUT 300
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
  workbook_expect_error(ch04_bench_sizes_reversed "solution;ch04;mpi" 2 "--min-bytes 8192 is larger than --max-bytes 4096"
                        ${mpi2} ${ch04} --min-bytes 8192 --max-bytes 4096)
  workbook_expect_error(ch04_bench_bad_measure "solution;ch04" 2 "--measure" ${ch04} --measure latency)
  # A rank killed in the middle of the ring: the job ends within seconds and
  # the survivor names the exchange it was waiting in.
  workbook_expect_failure_within(ch04_bench_dead_rank "solution;ch04;mpi" 60
    "rank 0 of 2: stopped by a signal while in (exchange|all_reduce|barrier)"
    ${mpi2} sh ${CMAKE_SOURCE_DIR}/tests/support/kill_rank_after.sh 1 4 ${ch04}
    --min-bytes 67108864 --max-bytes 67108864 --rounds 100000 --threads 1)
endif()
if(TARGET ch04_train_solution)
  set(ch04_train $<TARGET_FILE:ch04_train_solution>)
  workbook_check_result_line(ch04_train_result_line "solution;ch04;mpi" ${mpi2} ${ch04_train}
                             --epochs 2 --train-samples 400 --test-samples 200 --threads 1)
  workbook_check_result_line(ch04_train_after_backward_result_line "solution;ch04;mpi" ${mpi2} ${ch04_train}
                             --reducer after-backward --epochs 1 --train-samples 400 --test-samples 200 --threads 1)
  # The oracle: Chapter 3's DDP on the same data, seed and dropout masks. The
  # two differ only in the order the ring adds the gradients, and at 2 ranks a
  # sum of two numbers has one order: the weights are bit-identical. A reducer
  # that sums without averaging, skips a bucket, mixes up parameters or leaves
  # the ranks apart changes them.
  if(TARGET ch03_train_solution)
    add_test(NAME ch04_train_matches_ch03
             COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/support/compare_results.py
                     weights_sha256:exact test_loss:0
                     -- ${mpi2} $<TARGET_FILE:ch03_train_solution> --epochs 2 --train-samples 1000 --test-samples 200 --threads 1
                     -- ${mpi2} ${ch04_train} --epochs 2 --train-samples 1000 --test-samples 200 --threads 1)
    set_tests_properties(ch04_train_matches_ch03 PROPERTIES LABELS "solution;ch04;mpi" TIMEOUT 300
                         ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
  endif()
  # --trace: one timeline of both ranks, whose spans nest, whose steps follow
  # each other, whose buckets lie inside their step and started during
  # backward (after-backward's never do: check_trace.py refuses that trace);
  # and `workbook report` draws a step of it.
  set(trace ${CMAKE_BINARY_DIR}/ch04_train_trace.json)
  add_test(NAME ch04_train_trace
           COMMAND sh -c "\"$0\" \"$@\" --trace ${trace} > /dev/null && /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/support/check_trace.py ${trace} --ranks 2 --expect-overlap && \"$<TARGET_FILE:workbook>\" report ${trace} --out ${CMAKE_BINARY_DIR}/trace-report && test -s ${CMAKE_BINARY_DIR}/trace-report/timeline-ch04_train_trace.png"
                   ${mpi2} ${ch04_train} --epochs 1 --train-samples 800 --test-samples 200 --threads 1)
  set_tests_properties(ch04_train_trace PROPERTIES LABELS "solution;ch04;mpi" TIMEOUT 120
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
  workbook_expect_error(ch04_train_trace_no_folder "solution;ch04;mpi" 2 "--trace /nonexistent/t.json: the folder /nonexistent does not exist"
                        ${mpi2} ${ch04_train} --trace /nonexistent/t.json --train-samples 400)
  workbook_expect_error(ch04_train_batch_not_divisible "solution;ch04;mpi" 2 "--batch 101 is the global batch"
                        ${mpi2} ${ch04_train} --batch 101 --train-samples 400)
endif()
