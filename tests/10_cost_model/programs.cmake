# programs.cmake — Chapter 10's program tested as a user runs it: bad input,
# the result line, a dying rank. The measurements themselves belong to
# `workbook model` on the emulated cluster, not to tests.
# Included by tests/CMakeLists.txt; ${mpi2} and ${bad_data_dir} come from there.

if(TARGET ch10_model_solution)
  set(ch10 $<TARGET_FILE:ch10_model_solution>)
  workbook_expect_error(ch10_model_bad_algorithm "solution;ch10" 2 "--algorithm" ${ch10} --algorithm tree)
  workbook_expect_error(ch10_model_alpha_without_beta "solution;ch10" 2 "--alpha and --beta go together"
                        ${ch10} --alpha 1e-5)
  workbook_expect_error(ch10_model_one_rank "solution;ch10" 2 "ch10_model needs 2 ranks or more" ${ch10})
  # The runs themselves: they exit 0, their tables printed.
  add_test(NAME ch10_model_allreduce COMMAND ${mpi2} ${ch10} --measure allreduce --algorithm workbook_ring
           --max-bytes 65536 --quick)
  add_test(NAME ch10_model_steps COMMAND ${mpi2} ${ch10} --measure steps --alpha 1e-5 --beta 1e-9 --blocks 2
           --width 64 --batch 32 --steps 1)
  add_test(NAME ch10_model_pipeline COMMAND ${mpi2} ${ch10} --measure pipeline --alpha 1e-5 --beta 1e-9 --blocks 2
           --width 64 --batch 32 --steps 1)
  add_test(NAME ch10_model_tensor COMMAND ${mpi2} ${ch10} --measure tensor --alpha 1e-5 --beta 1e-9 --blocks 2
           --width 64 --batch 32 --steps 1)
  set_tests_properties(ch10_model_allreduce ch10_model_steps ch10_model_pipeline ch10_model_tensor PROPERTIES
                       LABELS "solution;ch10;mpi" TIMEOUT 300
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
  workbook_expect_error(ch10_model_unequal_stages "solution;ch10;mpi" 2 "3 blocks do not cut into 2 equal stages"
                        ${mpi2} ${ch10} --measure pipeline --alpha 1e-5 --beta 1e-9 --blocks 3 --width 64 --batch 32)
  # A rank killed between steps: the survivor names the call it was in.
  workbook_expect_failure_within(ch10_model_dead_rank "solution;ch10;mpi" 60 "rank 0 of 2: stopped by a signal while in"
    ${mpi2} sh ${CMAKE_SOURCE_DIR}/tests/support/kill_rank_after.sh 1 3 ${ch10}
    --measure steps --alpha 1e-5 --beta 1e-9 --blocks 2 --width 64 --batch 32 --steps 1000000)
endif()

if(TARGET ch10_simulate_solution)
  set(ch10_simulate $<TARGET_FILE:ch10_simulate_solution>)
  add_test(NAME ch10_simulate_table COMMAND ${ch10_simulate} --collective broadcast --algorithm scatter_all_gather
           --max-ranks 5)
  set_tests_properties(ch10_simulate_table PROPERTIES LABELS "solution;ch10" TIMEOUT 120
                       PASS_REGULAR_EXPRESSION "     5         7     177408.0")
  workbook_expect_error(ch10_simulate_no_program "solution;ch10" 2 "no program here for broadcast by ring"
                        ${ch10_simulate} --collective broadcast --algorithm ring)
  workbook_expect_error(ch10_simulate_odd_bytes "solution;ch10" 2 "--bytes 6: a positive multiple of 4"
                        ${ch10_simulate} --bytes 6)
endif()
# results.md's tables are what tables.py renders from the kept files.
add_test(NAME ch10_results_tables
         COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/support/check_rendered_tables.py
                 ${CMAKE_SOURCE_DIR}/chapters/10_cost_model/results.md)
set_tests_properties(ch10_results_tables PROPERTIES LABELS "ch10")
