# WorkbookTorch.cmake — which LibTorch the workbook builds against, found and
# checked at configure time, so that a wrong one is one message here and not
# a page of compile or link errors later.
#
# Where it looks, first found wins:
#   1. CMAKE_PREFIX_PATH or Torch_DIR, as given (a cluster's module, the
#      libtorch archive, another Python's torch.utils.cmake_prefix_path);
#   2. the project's virtual environment, .venv (install-packages makes it,
#      with the pinned torch wheel);
#   3. the system's (Debian 13's libtorch-dev).
# What it refuses, each with what was found and what to do:
#   - no LibTorch at all;
#   - one older than WORKBOOK_TORCH_OLDEST (the oldest CI builds against);
#   - a CUDA LibTorch where CMake finds no CUDA toolkit (its CMake files need one);
#   - a LibTorch built with the pre-C++11 ABI of libstdc++ (nothing would link
#     with the system's fmt, CLI11 and Open MPI);
#   - a CPU-only LibTorch given to the cuda preset (WORKBOOK_CUDA=ON).
#
# Note: [fmt inside LibTorch] PyPI's torch ships fmt's headers (fmt 12 in 2.15)
# in its include folder, ahead of the system's on every compile line, so a
# file that includes both LibTorch and fmt gets torch's fmt. Such files then
# link torch's fmt (workbook_fmt_for_torch): linking the system's libfmt (another
# fmt, in another inline namespace) would leave every fmt call undefined.
#
# Note: [fmt compiled once] Header-only, every file that formats defines and
# optimises fmt's whole formatting engine (dragonbox, the float writers, the
# format-string parser) anew. At -O3, ch03's main_train.cpp (compiled without
# the precompiled header) spent 9.3 s in the compiler's back end header-only
# and 5.3 s without, and 54 of the build's 87 objects held that engine; now 2
# do (clang 19, 2-core EPYC, 2026-11-29). So fmt's compiled part is built once,
# from LibTorch's own fmt headers, in cmake/fmt_compiled.cpp, as the library
# build of fmt does; every file declares it, as with a linked libfmt.
#
# Sets: Torch_VERSION, WORKBOOK_TORCH_IS_CUDA, WORKBOOK_PYTHON (the Python whose
# torch the baselines run), and the target workbook_fmt_for_torch.

set(WORKBOOK_TORCH_OLDEST 2.6)  # Debian 13's libtorch-dev; CI builds against it and the pinned wheel

set(workbook_venv_python ${CMAKE_SOURCE_DIR}/.venv/bin/python3)
if(EXISTS ${workbook_venv_python})
  set(workbook_default_python ${workbook_venv_python})
else()
  find_program(workbook_default_python NAMES python3)
endif()
set(WORKBOOK_PYTHON ${workbook_default_python} CACHE FILEPATH
    "The Python whose torch gives LibTorch (when nothing else does) and runs the baselines")

# 2. The virtual environment's torch, after whatever CMAKE_PREFIX_PATH already names.
if(WORKBOOK_PYTHON)
  execute_process(COMMAND ${WORKBOOK_PYTHON} -c "import torch; print(torch.utils.cmake_prefix_path)"
                  OUTPUT_VARIABLE workbook_python_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE workbook_python_has_torch ERROR_QUIET)
  if(workbook_python_has_torch EQUAL 0 AND IS_DIRECTORY "${workbook_python_torch_prefix}/Torch")
    list(APPEND CMAKE_PREFIX_PATH ${workbook_python_torch_prefix})
  endif()
endif()

# Where find_package(Torch) is about to look, so that its CUDA-ness is known before
# TorchConfig.cmake runs (which stops with a message about Caffe2 when CUDA is missing).
set(workbook_torch_config "")
foreach(prefix IN LISTS Torch_DIR CMAKE_PREFIX_PATH CMAKE_SYSTEM_PREFIX_PATH)
  foreach(suffix "" Torch share/cmake/Torch lib/cmake/Torch lib/${CMAKE_LIBRARY_ARCHITECTURE}/cmake/Torch)
    if(NOT workbook_torch_config AND EXISTS "${prefix}/${suffix}/TorchConfig.cmake")
      cmake_path(SET workbook_torch_config NORMALIZE "${prefix}/${suffix}/TorchConfig.cmake")
    endif()
  endforeach()
endforeach()

set(workbook_torch_help
    "  - ./install-packages makes .venv with the pinned torch wheel (found without settings), or\n"
    "  - set CMAKE_PREFIX_PATH to a LibTorch ${WORKBOOK_TORCH_OLDEST} or newer: a cluster's module, the\n"
    "    libtorch archive, or  python3 -c 'import torch;print(torch.utils.cmake_prefix_path)'\n"
    "  (README.md, \"Which LibTorch\").")
if(NOT workbook_torch_config)
  message(FATAL_ERROR "workbook: no LibTorch found (looked in CMAKE_PREFIX_PATH='${CMAKE_PREFIX_PATH}', "
                      "${CMAKE_SOURCE_DIR}/.venv and the system).\n" ${workbook_torch_help})
endif()
cmake_path(GET workbook_torch_config PARENT_PATH workbook_torch_dir)
file(STRINGS "${workbook_torch_dir}/../Caffe2/Caffe2Config.cmake" workbook_torch_cuda_line
     REGEX "^ *set\\(CAFFE2_USE_CUDA (1|ON|TRUE)\\)")
if(workbook_torch_cuda_line)
  set(WORKBOOK_TORCH_IS_CUDA ON)
else()
  set(WORKBOOK_TORCH_IS_CUDA OFF)
endif()
if(WORKBOOK_TORCH_IS_CUDA AND NOT CUDAToolkit_FOUND)
  message(FATAL_ERROR
    "workbook: the LibTorch at ${workbook_torch_dir} is a CUDA build, and its CMake files need the CUDA "
    "toolkit (nvcc), which was not found, even to build for the CPU. Either\n"
    "  - install the CUDA toolkit (or put its bin/ on PATH: /usr/local/cuda/bin), or\n"
    "  - use PyTorch's CPU-only wheel (a smaller download too):\n"
    "      .venv/bin/pip install --index-url https://download.pytorch.org/whl/cpu torch==<version>\n"
    "    or a CPU libtorch archive via CMAKE_PREFIX_PATH.")
endif()

# Torch's own CUDA flags: the GPUs this project targets (A100, H100/H200), not every architecture
# torch knows (nvcc 13 no longer compiles some of those).
if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(TORCH_CUDA_ARCH_LIST "8.0;9.0")
endif()

find_package(Torch CONFIG QUIET PATHS ${workbook_torch_dir} NO_DEFAULT_PATH)
if(NOT Torch_FOUND)
  message(FATAL_ERROR "workbook: ${workbook_torch_config} did not load.\n" ${workbook_torch_help})
endif()
if(NOT Torch_VERSION)  # LibTorch 1.x set no version; anything that old is refused below anyway
  set(Torch_VERSION 0)
endif()
if(Torch_VERSION VERSION_LESS WORKBOOK_TORCH_OLDEST)
  message(FATAL_ERROR "workbook: LibTorch ${Torch_VERSION} at ${workbook_torch_dir} is older than "
                      "${WORKBOOK_TORCH_OLDEST}, the oldest the workbook is built and tested against.\n"
                      ${workbook_torch_help})
endif()
if(TORCH_CXX_FLAGS MATCHES "_GLIBCXX_USE_CXX11_ABI=0")
  message(FATAL_ERROR
    "workbook: LibTorch ${Torch_VERSION} at ${workbook_torch_dir} was built with the pre-C++11 ABI of "
    "libstdc++ (-D_GLIBCXX_USE_CXX11_ABI=0), and the system's fmt, CLI11 and Open MPI use the C++11 ABI: "
    "nothing would link. Use a cxx11-ABI LibTorch: PyTorch's wheels from 2.7 on, or the libtorch archive "
    "named 'cxx11-abi'.")
endif()
if(WORKBOOK_CUDA AND NOT WORKBOOK_TORCH_IS_CUDA)
  message(FATAL_ERROR
    "workbook: the cuda preset (WORKBOOK_CUDA=ON) needs a CUDA LibTorch; the one at ${workbook_torch_dir} "
    "(${Torch_VERSION}) is CPU-only. Set CMAKE_PREFIX_PATH to a CUDA LibTorch (the default PyPI torch "
    "wheel is one), or use the default preset.")
endif()

# Note [fmt inside LibTorch], above.
add_library(workbook_fmt_for_torch INTERFACE)
# A LibTorch installed in the system's prefix (Debian 13's, in /usr) finds the
# system's own fmt in its include folder: that one is linked as it is.
get_filename_component(workbook_torch_include "${TORCH_INSTALL_PREFIX}/include" REALPATH)
get_target_property(workbook_system_fmt_include fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
set(workbook_torch_has_own_fmt FALSE)
if(EXISTS "${workbook_torch_include}/fmt/format.h")
  set(workbook_torch_has_own_fmt TRUE)
  foreach(dir IN LISTS workbook_system_fmt_include)
    get_filename_component(dir "${dir}" REALPATH)
    if(dir STREQUAL workbook_torch_include)
      set(workbook_torch_has_own_fmt FALSE)
    endif()
  endforeach()
endif()
if(workbook_torch_has_own_fmt)
  # Note [fmt compiled once], above.
  add_library(workbook_fmt_compiled STATIC ${CMAKE_SOURCE_DIR}/cmake/fmt_compiled.cpp)
  target_include_directories(workbook_fmt_compiled SYSTEM PUBLIC "${TORCH_INSTALL_PREFIX}/include")
  target_link_libraries(workbook_fmt_for_torch INTERFACE workbook_fmt_compiled)
  set(workbook_fmt_note "fmt from LibTorch's include folder, compiled once")
else()
  target_link_libraries(workbook_fmt_for_torch INTERFACE fmt::fmt)
  set(workbook_fmt_note "fmt ${fmt_VERSION} of the system")
endif()
message(STATUS "workbook: LibTorch ${Torch_VERSION} (${workbook_torch_dir}), CUDA build: "
               "${WORKBOOK_TORCH_IS_CUDA}; ${workbook_fmt_note}; Python for baselines: ${WORKBOOK_PYTHON}")
