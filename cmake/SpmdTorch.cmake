# Finds pip's LibTorch and, with a CUDA build, the NCCL path.
#
#   cmake -S . -B build                              # torch of .venv/bin/python
#   cmake -S . -B build -DSPMD_PYTHON=/usr/bin/python3
#   cmake -S . -B build -DCMAKE_PREFIX_PATH=$(python3 -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
#
# Defines spmd_dep_torch (LibTorch + c10d's Gloo group, and NCCL's when
# SPMD_WITH_NCCL), SPMD_TORCH_CUDA and SPMD_WITH_NCCL. Torch's own compile
# flags (the C++ ABI define among them) are added to every target of the
# project, since the compiler libraries share std::string and friends with
# the runtime.

if(EXISTS ${PROJECT_SOURCE_DIR}/.venv/bin/python)
  set(_spmd_default_python ${PROJECT_SOURCE_DIR}/.venv/bin/python)
else()
  set(_spmd_default_python python3)
endif()
set(SPMD_PYTHON ${_spmd_default_python} CACHE STRING "Python whose torch the runtime builds against")

if(NOT Torch_DIR)
  execute_process(
    COMMAND ${SPMD_PYTHON} -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE _spmd_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_VARIABLE _spmd_torch_error RESULT_VARIABLE _spmd_torch_rc)
  if(_spmd_torch_rc EQUAL 0)
    list(APPEND CMAKE_PREFIX_PATH ${_spmd_torch_prefix})
  endif()
endif()

# A CUDA torch's config looks for the CUDA toolkit (FindCUDA, then
# CUDAToolkit): CUDA_HOME, or /usr/local/cuda where it usually lives.
if(NOT CUDA_TOOLKIT_ROOT_DIR)
  if(DEFINED ENV{CUDA_HOME})
    set(CUDA_TOOLKIT_ROOT_DIR $ENV{CUDA_HOME})
  elseif(EXISTS /usr/local/cuda/bin/nvcc)
    set(CUDA_TOOLKIT_ROOT_DIR /usr/local/cuda)
  endif()
endif()
# Torch's config prints a warning for an unset CUDA architecture list; the
# project compiles no CUDA code, so any value will do.
if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(ENV{TORCH_CUDA_ARCH_LIST} "9.0")
endif()
find_package(Torch QUIET)
if(NOT Torch_FOUND)
  message(FATAL_ERROR
    "LibTorch not found. Run scripts/setup.sh (it makes .venv with pip's torch), or pass "
    "-DSPMD_PYTHON=<python with torch> or -DCMAKE_PREFIX_PATH=<torch.utils.cmake_prefix_path>. "
    "${SPMD_PYTHON} said: ${_spmd_torch_error}")
endif()
if(Torch_VERSION VERSION_LESS 2.6)
  message(FATAL_ERROR "LibTorch ${Torch_VERSION} is too old: spmdc supports torch 2.6 to 2.14")
endif()
if(Torch_VERSION VERSION_GREATER_EQUAL 2.15)
  message(WARNING "LibTorch ${Torch_VERSION} is newer than the newest tested (2.14)")
endif()

separate_arguments(_spmd_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
add_compile_options(${_spmd_torch_flags})

set(SPMD_TORCH_CUDA OFF)
if(CAFFE2_USE_CUDA)
  set(SPMD_TORCH_CUDA ON)
endif()

# TORCH_INSTALL_PREFIX is .../site-packages/torch for pip's wheels.
get_filename_component(_spmd_site ${TORCH_INSTALL_PREFIX} DIRECTORY)

add_library(spmd_dep_torch INTERFACE)
# A CUDA torch lists libraries its config may not find (nvrtc, when the
# toolkit has none and the wheel's is not looked for): none is needed here.
set(_spmd_torch_libs ${TORCH_LIBRARIES})
list(FILTER _spmd_torch_libs EXCLUDE REGEX "-NOTFOUND$")
target_link_libraries(spmd_dep_torch INTERFACE ${_spmd_torch_libs})
target_include_directories(spmd_dep_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
# c10d's Gloo group: its header needs gloo's headers, which pip's wheel does
# not ship (Debian's libgloo-dev, or the GPU bundle, has them).
find_path(SPMD_GLOO_INCLUDE gloo/algorithm.h HINTS ${SPMD_DEPS_BUNDLE}/include)
if(NOT SPMD_GLOO_INCLUDE)
  message(FATAL_ERROR "gloo's headers not found: install libgloo-dev (scripts/setup.sh does)")
endif()
target_include_directories(spmd_dep_torch SYSTEM INTERFACE ${SPMD_GLOO_INCLUDE})
target_compile_definitions(spmd_dep_torch INTERFACE USE_C10D_GLOO)

# NCCL: compiled whenever torch is a CUDA build (AUTO), refused on a CPU one.
set(SPMD_WITH_NCCL AUTO CACHE STRING "Compile the NCCL path: AUTO (with a CUDA torch), ON or OFF")
if(SPMD_WITH_NCCL STREQUAL "AUTO")
  set(SPMD_WITH_NCCL ${SPMD_TORCH_CUDA})
endif()
if(SPMD_WITH_NCCL AND NOT SPMD_TORCH_CUDA)
  message(FATAL_ERROR "SPMD_WITH_NCCL=ON needs a CUDA build of torch; ${TORCH_INSTALL_PREFIX} is a CPU build")
endif()
if(SPMD_WITH_NCCL)
  find_path(SPMD_NCCL_INCLUDE nccl.h
    HINTS ${_spmd_site}/nvidia/nccl/include ${SPMD_DEPS_BUNDLE}/include ${CUDAToolkit_INCLUDE_DIRS})
  find_library(SPMD_NCCL_LIBRARY NAMES nccl libnccl.so.2
    HINTS ${_spmd_site}/nvidia/nccl/lib ${SPMD_DEPS_BUNDLE}/lib ${CUDAToolkit_LIBRARY_DIR})
  if(NOT SPMD_NCCL_INCLUDE OR NOT SPMD_NCCL_LIBRARY)
    message(FATAL_ERROR "nccl.h or libnccl not found (torch's nvidia-nccl wheel, the CUDA toolkit, or "
                        "SPMD_DEPS_BUNDLE): install the CUDA torch with pip, or pass -DSPMD_WITH_NCCL=OFF")
  endif()
  # c10d's NCCL header pulls in ATen/cuda/CUDAContext.h and so cuBLAS's and
  # cuSPARSE's headers: the toolkit's, else those of torch's nvidia wheels.
  file(GLOB _spmd_wheel_includes ${_spmd_site}/nvidia/*/include)
  target_include_directories(spmd_dep_torch SYSTEM INTERFACE
    ${CUDAToolkit_INCLUDE_DIRS} ${SPMD_NCCL_INCLUDE} ${_spmd_wheel_includes})
  target_link_libraries(spmd_dep_torch INTERFACE ${SPMD_NCCL_LIBRARY})
  target_compile_definitions(spmd_dep_torch INTERFACE USE_C10D_NCCL SPMD_WITH_NCCL)
endif()
if(SPMD_TORCH_CUDA)
  target_compile_definitions(spmd_dep_torch INTERFACE SPMD_TORCH_CUDA)
endif()
message(STATUS "spmdc: LibTorch ${Torch_VERSION} (${TORCH_INSTALL_PREFIX}), CUDA ${SPMD_TORCH_CUDA}, NCCL path ${SPMD_WITH_NCCL}")
