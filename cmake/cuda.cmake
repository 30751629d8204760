# TANDEM_CUDA (CMakeLists.txt): finds nvcc and enables CUDA for the backend in src/backends/cuda,
# setting TANDEM_WITH_CUDA and TANDEM_CUDA_COMPILE_OPTIONS. Only sm_90 (H100/H200) is compiled:
# the one GPU this project is lent, and every extra architecture is another nvcc pass in CI.
set(TANDEM_WITH_CUDA OFF)
if(NOT TANDEM_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  # check_language looks on PATH (and CUDACXX) only; the toolkit's default prefix is where
  # NVIDIA's packages and runfile installer put nvcc without adding it to PATH.
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    # Both: check_language left a normal variable (NOTFOUND) that would hide the cache entry.
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler" FORCE)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  if(CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_ARCHITECTURES 90)
    enable_language(CUDA)
    # C++20 as for the rest (the shared headers use it). CMake 3.25 knows no C++20 flag for
    # nvcc (12.0 added it), so it is named here; targets then take CUDA_STANDARD 20 as usual.
    if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(TANDEM_WITH_CUDA ON)
  elseif(TANDEM_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TANDEM_CUDA=ON but no CUDA compiler was found (nvcc on PATH or /usr/local/cuda/bin/nvcc)")
  endif()
endif()
if(TANDEM_WITH_CUDA)
  message(STATUS "CUDA ${CMAKE_CUDA_COMPILER_VERSION} found: src/backends/cuda builds for sm_90 (TANDEM_CUDA=${TANDEM_CUDA})")
  # The host compiler's warnings as for C++; nvcc's own warnings too, as errors with TANDEM_WERROR.
  set(TANDEM_CUDA_COMPILE_OPTIONS $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter>)
  if(TANDEM_WERROR)
    list(APPEND TANDEM_CUDA_COMPILE_OPTIONS $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>)
  endif()
else()
  message(STATUS "CUDA left out (TANDEM_CUDA=${TANDEM_CUDA}): CPU only (install the CUDA toolkit for --device cuda)")
endif()
