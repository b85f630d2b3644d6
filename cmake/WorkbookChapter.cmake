# WorkbookChapter.cmake — builds one chapter twice, from conventions alone:
#
#   solutions/NN_name/*.cpp      the reference library   chNN_solution
#   chapters/NN_name/*.cpp       the student's library   chNN_student
#   .../main_<prog>.cpp          a program chNN_<prog>, in bin/solution/ and bin/student/
#   tests/NN_name/*.cpp          test_chNN_solution and test_chNN_student
#
# A new chapter is a new folder (and its chapter.json for the CLI): no CMake edits.

# Registers a Catch2 binary with CTest, split by tag into the labels DESIGN.md
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
      set_tests_properties(${target}_np${ranks} PROPERTIES LABELS "${labels}" TIMEOUT 600 ENVIRONMENT "${env}")
    endforeach()
  else()
    set(launch "")
    set(first_ranks "")
    add_test(NAME ${target} COMMAND ${target} "${skip}")
    set_tests_properties(${target} PROPERTIES LABELS "${labels}" TIMEOUT 600 ENVIRONMENT "${env}")
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

function(workbook_add_chapter folder)
  string(SUBSTRING ${folder} 0 2 number)
  set(id ch${number})
  workbook_chapter_uses(${folder} uses)
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

    foreach(program_source IN LISTS programs)
      get_filename_component(stem ${program_source} NAME_WE)
      string(REPLACE "main_" "${id}_" program ${stem})
      add_executable(${program}_${flavor} ${program_source})
      target_link_libraries(${program}_${flavor} PRIVATE ${id}_${flavor})
      set_target_properties(${program}_${flavor} PROPERTIES
        OUTPUT_NAME ${program}
        RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin/${flavor})
      workbook_use_pch(${program}_${flavor})
      add_dependencies(${id}_${flavor}_all ${program}_${flavor})
    endforeach()

    file(GLOB tests CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/${folder}/*.cpp)
    if(tests)
      workbook_chapter_list(${folder} test_ranks test_ranks)  # absent: a single-process chapter
      add_executable(test_${id}_${flavor} ${tests})
      if(test_ranks)
        target_link_libraries(test_${id}_${flavor} PRIVATE ${id}_${flavor} workbook_mpi_test_main)
      else()
        target_link_libraries(test_${id}_${flavor} PRIVATE ${id}_${flavor} workbook_test_main)
      endif()
      workbook_use_pch(test_${id}_${flavor})
      workbook_add_tests(test_${id}_${flavor} "${flavor};${id}" tests/${folder} RANKS ${test_ranks})
      add_dependencies(${id}_${flavor}_all test_${id}_${flavor})
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
function(workbook_expect_error name labels status pattern)
  add_test(NAME ${name} COMMAND sh ${CMAKE_SOURCE_DIR}/tests/support/expect_error.sh ${status} ${pattern} ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" TIMEOUT 120
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
endfunction()

# A short run of `program` must end its JSON lines with a complete result line
# (DESIGN.md, Conventions: Output), checked by tests/support/check_result_line.py.
function(workbook_check_result_line name labels program)
  set(json ${CMAKE_BINARY_DIR}/${name}.jsonl)
  add_test(NAME ${name}
           COMMAND sh -c "\"$0\" \"$@\" --json ${json} > /dev/null && /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/support/check_result_line.py ${json}"
                   ${program} ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" TIMEOUT 120
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
endfunction()
