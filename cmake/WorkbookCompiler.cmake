# WorkbookCompiler.cmake — which C++ compiler and linker build the workbook.
# Included before project(), where the compiler can still be chosen.
#
# Note: [Clang by default, GCC where it is alone] Every file of the workbook
# includes LibTorch, and most of a file's compile time is spent instantiating
# LibTorch's templates. Clang instantiates them once, inside the precompiled
# header (-fpch-instantiate-templates, which CMake adds for Clang), and every
# file that reuses the header skips that work; GCC cannot keep instantiations
# in a precompiled header and does them again in every file. Measured on a
# 2-core machine with LibTorch 2.15 and the CUDA code on, as CI builds:
#   one exercise file (ch01 train_step.cpp, batches.cpp)  clang 16: 2.0, 4.0 s   GCC 12: 7.2, 9.5 s
#   the precompiled header                                clang 16: 24 s         GCC 12: 47 s
#   the whole build from nothing (cmake --build)          clang 16: 276 s        GCC 12: 570 s
# Clang 19 is faster again: ch02's replicate.cpp, the reference, took 9.2 s
# against clang 16's 10.8 s on a slower 2-core machine (2026-11-28). So the
# build takes the newest Clang it finds (clang-19 on Debian 12 and 13, which
# ./install-packages installs) unless the user named a
# compiler (CXX=g++, -DCMAKE_CXX_COMPILER=g++ or a toolchain file), and falls
# back to the default compiler, saying what that costs, where there is none.
# Clang 16 is the oldest that compiles LibTorch 2.15's headers with libstdc++;
# both link against the same libstdc++ (LibTorch's wheels use its C++11 ABI).
#
# Note: [lld] Every test and program links LibTorch's large libraries. lld
# (Debian's lld-NN, beside clang-NN) relinked the build's 45 programs
# and test binaries in 2.2 s against GNU ld's 9.3 s; it is used where the
# compiler finds it.

set(workbook_clang_versions 19 18 17 16)  # the newest first
if(NOT DEFINED CMAKE_CXX_COMPILER AND NOT DEFINED ENV{CXX} AND NOT CMAKE_TOOLCHAIN_FILE)
  set(workbook_clang_names "")
  foreach(version IN LISTS workbook_clang_versions)
    list(APPEND workbook_clang_names clang++-${version})
  endforeach()
  find_program(WORKBOOK_CLANGXX NAMES ${workbook_clang_names} clang++ DOC "The Clang the workbook builds with")
  if(WORKBOOK_CLANGXX)
    execute_process(COMMAND ${WORKBOOK_CLANGXX} -dumpversion OUTPUT_VARIABLE workbook_clang_version
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(workbook_clang_version VERSION_GREATER_EQUAL 16)
      set(CMAKE_CXX_COMPILER ${WORKBOOK_CLANGXX} CACHE FILEPATH "C++ compiler (Note [Clang by default])")
    else()
      message(STATUS "workbook: ${WORKBOOK_CLANGXX} is Clang ${workbook_clang_version}, older than 16: not used")
    endif()
  endif()
  if(NOT DEFINED CMAKE_CXX_COMPILER)
    message(STATUS "workbook: no Clang 16 or newer found: building with the default compiler, whose files "
                   "each take 2-3 times as long (install clang-19 on Debian 12 or 13: "
                   "./install-packages does)")
  endif()
endif()

# After project(): lld where the compiler can use it (Note [lld]). A user's own
# -fuse-ld in CMAKE_*_LINKER_FLAGS wins.
function(workbook_choose_linker)
  if("${CMAKE_EXE_LINKER_FLAGS} ${CMAKE_SHARED_LINKER_FLAGS}" MATCHES "-fuse-ld=")
    return()
  endif()
  include(CheckLinkerFlag)
  set(candidates lld)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    # Clang looks for ld.lld; Debian names it ld.lld-NN beside clang-NN.
    string(REGEX MATCH "^[0-9]+" major "${CMAKE_CXX_COMPILER_VERSION}")
    find_program(workbook_lld NAMES ld.lld-${major} ld.lld)
    if(workbook_lld)
      set(candidates ${workbook_lld})
    endif()
  endif()
  foreach(candidate IN LISTS candidates)
    if(candidate MATCHES "/")
      set(flag "--ld-path=${candidate}")
    else()
      set(flag "-fuse-ld=${candidate}")
    endif()
    check_linker_flag(CXX "${flag}" workbook_linker_works)
    if(workbook_linker_works)
      add_link_options(${flag})
      message(STATUS "workbook: ${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}, linking with ${flag}")
      return()
    endif()
  endforeach()
  message(STATUS "workbook: ${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}, the default linker")
endfunction()
