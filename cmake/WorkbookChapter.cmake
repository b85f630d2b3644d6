# WorkbookChapter.cmake — builds one chapter twice, from conventions alone:
#
#   solutions/NN_name/*.cpp      the reference library   chNN_solution
#   chapters/NN_name/*.cpp       the student's library   chNN_student
#   .../main_<prog>.cpp          a program chNN_<prog>, in bin/solution/ and bin/student/
#   tests/NN_name/*.cpp          test_chNN_solution and test_chNN_student
#
# What the two builds share (headers, program mains, tests) is compiled once;
# only the exercise files are compiled for each (workbook_add_chapter).
#
# A new chapter is a new folder (and its chapter.json for the CLI): no CMake edits.

# Registers a Catch2 binary with CTest, split by tag into the labels ARCHITECTURE.md (Tests)
# names: the default run excludes [slow], [timing] and [gpu] test cases, which
# get their own CTest entries (only when some test in the folder uses the tag).
#
#   workbook_add_tests(target labels test_dir [RANKS n1 n2 ...])
#
# With RANKS, the binary is a multi-process test (tests/support/mpi_main.cpp)
# started by mpiexec, oversubscribed so that more ranks than cores work: at n1
# ranks every test runs; at each further count only the tests tagged [npN]
# (e.g. [np3]: where odd world sizes matter). These entries carry the label mpi.
function(workbook_add_tests target labels test_dir)
  cmake_parse_arguments(PARSE_ARGV 3 arg "" "" "RANKS")
  file(GLOB test_sources ${CMAKE_SOURCE_DIR}/${test_dir}/*.cpp)
  # Open MPI refuses root without these (CI runs as root): set for the tests
  # only, never in the user's environment.
  set(env "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
  # Note: [one thread per test process] The default suite runs two tests at a
  # time, most of them 2 to 4 ranks each, and LibTorch gives each process a
  # thread per core: 4 ranks of 2 threads beside another test is 8 or more
  # threads on 2 cores, and OpenMP's and MPI's waiting threads spin. These
  # tests check results, which do not depend on the thread count, so each
  # process of theirs runs one intra-op thread (a test that wants more sets it
  # itself). Measured on a 2-core EPYC (the -O0 build, 2026-11-29): the
  # suite's tests took 504 s in all with it against 641 s without (the SLURM
  # ones left out), and the suite 295 s against 386 s at -O3. The slow, timing
  # and gpu tests keep LibTorch's default: what they measure depends on it.
  set(suite_env "${env};OMP_NUM_THREADS=1")
  set(skip "~[.]~[slow]~[timing]~[gpu]")  # [.]: hidden tests run only by name
  if(arg_RANKS)
    list(APPEND labels mpi)
    list(GET arg_RANKS 0 first_ranks)
    set(launch ${MPIEXEC_EXECUTABLE} --oversubscribe -n)
    foreach(ranks IN LISTS arg_RANKS)
      if(ranks EQUAL first_ranks)
        add_test(NAME ${target}_np${ranks} COMMAND ${launch} ${ranks} $<TARGET_FILE:${target}> "${skip}")
      else()
        add_test(NAME ${target}_np${ranks} COMMAND ${launch} ${ranks} $<TARGET_FILE:${target}> "[np${ranks}]${skip}")
      endif()
      set_tests_properties(${target}_np${ranks} PROPERTIES LABELS "${labels}" TIMEOUT 600 ENVIRONMENT "${suite_env}")
    endforeach()
  else()
    set(launch "")
    set(first_ranks "")
    add_test(NAME ${target} COMMAND ${target} "${skip}")
    set_tests_properties(${target} PROPERTIES LABELS "${labels}" TIMEOUT 600 ENVIRONMENT "${suite_env}")
  endif()
  foreach(tag slow timing gpu)
    set(uses_tag OFF)
    foreach(source IN LISTS test_sources)
      file(STRINGS ${source} hits REGEX "\\[${tag}\\]")
      if(hits)
        set(uses_tag ON)
      endif()
    endforeach()
    if(uses_tag)
      if(arg_RANKS AND tag STREQUAL "gpu")
        # One rank: NCCL needs a GPU per rank, and a machine may have one.
        add_test(NAME ${target}_${tag} COMMAND ${launch} 1 $<TARGET_FILE:${target}> "[${tag}]")
      elseif(arg_RANKS)
        add_test(NAME ${target}_${tag} COMMAND ${launch} ${first_ranks} $<TARGET_FILE:${target}> "[${tag}]")
      else()
        add_test(NAME ${target}_${tag} COMMAND ${target} "[${tag}]")
      endif()
      set_tests_properties(${target}_${tag} PROPERTIES LABELS "${labels};${tag}" TIMEOUT 1800 ENVIRONMENT "${env}")
    endif()
  endforeach()
endfunction()

# A list from a chapter's chapter.json: the items of array `key`, or an empty
# list when the file or the key is absent.
function(workbook_chapter_list folder key out)
  set(manifest_file ${CMAKE_SOURCE_DIR}/chapters/${folder}/chapter.json)
  set(items "")
  if(EXISTS ${manifest_file})
    file(READ ${manifest_file} manifest)
    string(JSON count ERROR_VARIABLE missing LENGTH "${manifest}" ${key})
    if(NOT missing AND count GREATER 0)
      math(EXPR last "${count} - 1")
      foreach(i RANGE ${last})
        string(JSON item GET "${manifest}" ${key} ${i})
        list(APPEND items ${item})
      endforeach()
    endif()
  endif()
  set(${out} "${items}" PARENT_SCOPE)
endfunction()

# The earlier chapters a chapter builds on: "uses" in its chapter.json, a list
# of folders such as "03_ddp". Their reference libraries are linked into both
# of its builds, so a learner's Chapter 5 runs on Chapter 3's reference DDP
# whether or not their own Chapter 3 is finished.
function(workbook_chapter_uses folder out)
  workbook_chapter_list(${folder} uses used_folders)
  set(libraries "")
  foreach(used IN LISTS used_folders)
    string(SUBSTRING ${used} 0 2 number)
    if(NOT TARGET ch${number}_solution)
      message(FATAL_ERROR "chapters/${folder}/chapter.json uses ${used}, which is not a chapter before it")
    endif()
    list(APPEND libraries ch${number}_solution)
  endforeach()
  set(${out} "${libraries}" PARENT_SCOPE)
endfunction()

# `text` without its SOLUTION NOTE regions, whole lines, as the skeleton
# generator cuts them (Note [solution notes] in common/cli/skeleton.cpp): a
# header that differs from the reference only there is the same code.
function(workbook_cut_solution_notes text out)
  while(TRUE)
    string(FIND "${text}" "// BEGIN SOLUTION NOTE" begin)
    if(begin EQUAL -1)
      break()
    endif()
    string(SUBSTRING "${text}" 0 ${begin} before)
    string(FIND "${before}" "\n" line_start REVERSE)
    math(EXPR line_start "${line_start} + 1")  # -1 (the first line) becomes 0
    string(SUBSTRING "${text}" ${begin} -1 rest)
    string(FIND "${rest}" "// END SOLUTION NOTE" end)
    if(end EQUAL -1)
      break()  # unclosed: dev sync says so; the copies then differ
    endif()
    string(SUBSTRING "${rest}" ${end} -1 tail)
    string(FIND "${tail}" "\n" newline)
    if(newline EQUAL -1)
      set(after "")
    else()
      math(EXPR newline "${newline} + 1")
      string(SUBSTRING "${tail}" ${newline} -1 after)
    endif()
    string(SUBSTRING "${text}" 0 ${line_start} kept)
    set(text "${kept}${after}")
  endwhile()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# True (in `out`) when the student's copy of a chapter shares its code with
# the reference: every header and program main file in chapters/ equals the
# one in solutions/. Only exercise files differ then, and the programs and the
# tests can be compiled once for both. A learner who edits a header or a main
# file changes that: CMake configures again (the files are watched) and
# compiles the two copies apart.
function(workbook_chapter_shares_code folder out)
  set(same ON)
  file(GLOB shared_files RELATIVE ${CMAKE_SOURCE_DIR}/solutions/${folder}
       ${CMAKE_SOURCE_DIR}/solutions/${folder}/*.hpp ${CMAKE_SOURCE_DIR}/solutions/${folder}/main_*.cpp)
  file(GLOB student_files RELATIVE ${CMAKE_SOURCE_DIR}/chapters/${folder}
       ${CMAKE_SOURCE_DIR}/chapters/${folder}/*.hpp ${CMAKE_SOURCE_DIR}/chapters/${folder}/main_*.cpp)
  if(NOT "${shared_files}" STREQUAL "${student_files}")
    set(same OFF)
  endif()
  foreach(name IN LISTS student_files)
    set(student_copy ${CMAKE_SOURCE_DIR}/chapters/${folder}/${name})
    set_property(DIRECTORY ${CMAKE_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${student_copy})
    if(same)
      file(READ ${student_copy} student_text)
      file(READ ${CMAKE_SOURCE_DIR}/solutions/${folder}/${name} solution_text)
      workbook_cut_solution_notes("${solution_text}" solution_text)
      if(NOT student_text STREQUAL solution_text)
        set(same OFF)
      endif()
    endif()
  endforeach()
  set(${out} ${same} PARENT_SCOPE)
endfunction()

# Note: [one compile per chapter's tests] Every file includes LibTorch and
# instantiates the same templates (GCC spends most of a file's compile on
# the precompiled header's deferred templates, however small the file; Clang
# keeps those in the header, but each file still generates code for what it
# uses); compiled apart, a chapter's eight test files pay for that eight times.
# Built as one unity source they pay once. The same holds for each
# chapter's reference library, the common library and the CLI: nobody edits
# those while learning. A student's library is never a unity source: a
# learner (and `workbook dev mutants`) recompiles the one file changed. In
# one source, the files' anonymous namespaces are one namespace: two files of
# a unity target must not define helpers of the same name.
function(workbook_unity target)
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 0)
endfunction()

# Object files that both builds of a chapter link (`name` holds `sources`,
# compiled once against the reference's headers).
function(workbook_shared_objects name folder uses)
  add_library(${name} OBJECT ${ARGN})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/solutions/${folder})
  target_link_libraries(${name} PRIVATE workbook_common ${uses})
endfunction()

# Note: the student's build is left out of `all`. The README's first command
# builds the reference, the tour and the CLI; a chapter's student targets are
# built when the learner first checks or runs it (`workbook check` builds the
# chapter's test binary, `workbook run` its program), and the target
# `students` builds all of them (`workbook dev check` and CI do).
function(workbook_add_chapter folder)
  string(SUBSTRING ${folder} 0 2 number)
  set(id ch${number})
  workbook_chapter_uses(${folder} uses)
  workbook_chapter_list(${folder} test_ranks test_ranks)  # absent: a single-process chapter
  workbook_chapter_shares_code(${folder} shares_code)
  if(test_ranks)
    set(test_main workbook_mpi_test_main)
  else()
    set(test_main workbook_test_main)
  endif()
  file(GLOB tests CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/${folder}/*.cpp)
  file(GLOB shared_programs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/solutions/${folder}/main_*.cpp)
  if(shares_code)
    foreach(program_source IN LISTS shared_programs)
      get_filename_component(stem ${program_source} NAME_WE)
      workbook_shared_objects(${id}_${stem} ${folder} "${uses}" ${program_source})
      workbook_use_pch(${id}_${stem})
    endforeach()
    if(tests)
      workbook_shared_objects(test_${id}_objects ${folder} "${uses}" ${tests})
      target_link_libraries(test_${id}_objects PRIVATE ${test_main})
      workbook_use_test_pch(test_${id}_objects)
      workbook_unity(test_${id}_objects)
    endif()
  endif()

  foreach(flavor student solution)
    if(flavor STREQUAL "student")
      set(dir ${CMAKE_SOURCE_DIR}/chapters/${folder})
    else()
      set(dir ${CMAKE_SOURCE_DIR}/solutions/${folder})
    endif()
    file(GLOB sources CONFIGURE_DEPENDS ${dir}/*.cpp)
    file(GLOB programs CONFIGURE_DEPENDS ${dir}/main_*.cpp)
    if(programs)
      list(REMOVE_ITEM sources ${programs})
    endif()

    if(NOT sources)
      message(WARNING "${dir} has no sources: run `workbook dev sync` to generate chapters/ from solutions/")
      continue()
    endif()
    add_custom_target(${id}_${flavor}_all)
    add_library(${id}_${flavor} STATIC ${sources})
    target_include_directories(${id}_${flavor} PUBLIC ${dir})
    target_link_libraries(${id}_${flavor} PUBLIC workbook_common ${uses})
    workbook_use_pch(${id}_${flavor})
    if(flavor STREQUAL "solution")
      workbook_unity(${id}_${flavor})
    endif()
    set(targets ${id}_${flavor})

    foreach(program_source IN LISTS programs)
      get_filename_component(stem ${program_source} NAME_WE)
      string(REPLACE "main_" "${id}_" program ${stem})
      if(shares_code)
        add_executable(${program}_${flavor} $<TARGET_OBJECTS:${id}_${stem}>)
      else()
        add_executable(${program}_${flavor} ${program_source})
        workbook_use_pch(${program}_${flavor})
      endif()
      target_link_libraries(${program}_${flavor} PRIVATE ${id}_${flavor})
      set_target_properties(${program}_${flavor} PROPERTIES
        OUTPUT_NAME ${program}
        RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin/${flavor})
      add_dependencies(${id}_${flavor}_all ${program}_${flavor})
      list(APPEND targets ${program}_${flavor})
    endforeach()

    if(tests)
      if(shares_code)
        add_executable(test_${id}_${flavor} $<TARGET_OBJECTS:test_${id}_objects>)
      else()
        add_executable(test_${id}_${flavor} ${tests})
        workbook_use_test_pch(test_${id}_${flavor})
        workbook_unity(test_${id}_${flavor})
      endif()
      target_link_libraries(test_${id}_${flavor} PRIVATE ${id}_${flavor} ${test_main})
      workbook_add_tests(test_${id}_${flavor} "${flavor};${id}" tests/${folder} RANKS ${test_ranks})
      add_dependencies(${id}_${flavor}_all test_${id}_${flavor})
      list(APPEND targets test_${id}_${flavor})
    endif()
    if(flavor STREQUAL "student")
      set_target_properties(${targets} PROPERTIES EXCLUDE_FROM_ALL ON)
      add_dependencies(students ${id}_student_all)
    endif()
  endforeach()
endfunction()

# A job that goes wrong (a dead peer, a mismatched collective, a test past its
# limit) must end within `seconds`, non-zero, and say `pattern` (grep -E).
function(workbook_expect_failure_within name labels seconds pattern)
  add_test(NAME ${name}
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/support/expect_failure_within.sh ${seconds} ${pattern} ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" TIMEOUT 180
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
endfunction()

# A program given bad input must exit with `status` and say `pattern` on stderr.
# Note: [no grace before SIGKILL in the bad-input tests] Open MPI 4's mpirun,
# once a rank exits non-zero, waits odls_base_sigkill_timeout (1 s) between
# SIGTERM and SIGKILL even when every rank has exited already: 2.3 s of a
# 2-rank job that ends at once on bad input, 0.3 s without. Here every rank
# ends by itself, so no rank needs the grace (the dead-rank tests keep it:
# their survivors say where they were on SIGTERM). Open MPI 5 ignores it.
function(workbook_expect_error name labels status pattern)
  add_test(NAME ${name} COMMAND sh ${CMAKE_SOURCE_DIR}/tests/support/expect_error.sh ${status} ${pattern} ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" TIMEOUT 120
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_odls_base_sigkill_timeout=0")
endfunction()

# A short run of `program` must end its JSON lines with a complete result line
# (ARCHITECTURE.md, Output), checked by tests/support/check_result_line.py.
function(workbook_check_result_line name labels program)
  set(json ${CMAKE_BINARY_DIR}/${name}.jsonl)
  add_test(NAME ${name}
           COMMAND sh -c "\"$0\" \"$@\" --json ${json} > /dev/null && /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/support/check_result_line.py ${json}"
                   ${program} ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" TIMEOUT 120
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
endfunction()
