# Finds accel's optional parts and attaches them to the INTERFACE target `accel`.
# Used both by the source tree (add_subdirectory, top-level build) and by the installed
# accelConfig.cmake, so a consumer of an installed accel detects the same parts the same way.
#
# ACCEL_TARGET names the target to attach to (`accel` in the tree, `accel::accel` when installed).
# Inputs (cache variables, AUTO|ON|OFF): ACCEL_ENABLE_CUDA, ACCEL_ENABLE_NVTX, ACCEL_ENABLE_MPI,
# ACCEL_ENABLE_NCCL (MPI and NCCL make the opt-in target accel::comm; ACCEL_ENABLE_ALGO, ACCEL_ENABLE_BLAS for
# the other opt-in parts below). ON makes a missing part a configure error naming the package to install.
include_guard(GLOBAL)

set(ACCEL_ENABLE_CUDA "AUTO" CACHE STRING "CUDA backend: AUTO, ON or OFF")
set(ACCEL_ENABLE_NVTX "AUTO" CACHE STRING "NVTX3 profiling ranges: AUTO, ON or OFF")
set(ACCEL_ENABLE_MPI "AUTO" CACHE STRING "MPI communicator (CPU): AUTO, ON or OFF")
set(ACCEL_ENABLE_NCCL "AUTO" CACHE STRING "NCCL communicator (CUDA): AUTO, ON or OFF")
set_property(CACHE ACCEL_ENABLE_CUDA PROPERTY STRINGS AUTO ON OFF)
set_property(CACHE ACCEL_ENABLE_NVTX PROPERTY STRINGS AUTO ON OFF)
set_property(CACHE ACCEL_ENABLE_MPI PROPERTY STRINGS AUTO ON OFF)
set_property(CACHE ACCEL_ENABLE_NCCL PROPERTY STRINGS AUTO ON OFF)

function(_accel_check_mode var)
  if(NOT "${${var}}" MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "${var}='${${var}}' is not valid: use AUTO, ON or OFF")
  endif()
endfunction()
foreach(_v ACCEL_ENABLE_CUDA ACCEL_ENABLE_NVTX ACCEL_ENABLE_MPI ACCEL_ENABLE_NCCL)
  _accel_check_mode(${_v})
endforeach()

find_package(Threads REQUIRED)
target_link_libraries(${ACCEL_TARGET} INTERFACE Threads::Threads ${CMAKE_DL_LIBS})

# Boost.Hana builds the compile-time backend list (dispatch/detail only).
find_package(Boost 1.71 CONFIG QUIET)
if(NOT Boost_FOUND)
  message(FATAL_ERROR "accel needs Boost.Hana (header-only) and it was not found.\n"
                      "On Debian/Ubuntu: apt-get install libboost-dev")
endif()
target_link_libraries(${ACCEL_TARGET} INTERFACE Boost::headers)

set(ACCEL_HAS_CUDA OFF)
set(ACCEL_HAS_NVTX OFF)
if(NOT ACCEL_ENABLE_CUDA STREQUAL "OFF" OR NOT ACCEL_ENABLE_NVTX STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
endif()

if(NOT ACCEL_ENABLE_CUDA STREQUAL "OFF")
  if(CUDAToolkit_FOUND)
    set(ACCEL_HAS_CUDA ON)
    # Only the runtime is linked: the driver (libcuda) and NVRTC are loaded with dlopen when first
    # needed, so programs built with CUDA still start, and report CUDA unavailable, without a driver.
    target_link_libraries(${ACCEL_TARGET} INTERFACE CUDA::cudart)
    target_compile_definitions(${ACCEL_TARGET} INTERFACE ACCEL_HAS_CUDA=1)
  elseif(ACCEL_ENABLE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "ACCEL_ENABLE_CUDA=ON but the CUDA toolkit was not found. Install it "
                        "(nvcc, cudart, NVRTC) or pass -DACCEL_ENABLE_CUDA=OFF.")
  endif()
endif()

if(NOT ACCEL_ENABLE_NVTX STREQUAL "OFF")
  if(TARGET CUDA::nvtx3)
    set(ACCEL_HAS_NVTX ON)
    target_link_libraries(${ACCEL_TARGET} INTERFACE CUDA::nvtx3)
    target_compile_definitions(${ACCEL_TARGET} INTERFACE ACCEL_HAS_NVTX=1)
  elseif(ACCEL_ENABLE_NVTX STREQUAL "ON")
    message(FATAL_ERROR "ACCEL_ENABLE_NVTX=ON but NVTX3 headers were not found (they ship with the "
                        "CUDA toolkit). Install it or pass -DACCEL_ENABLE_NVTX=OFF.")
  endif()
endif()

set(ACCEL_HAS_MPI OFF)
if(NOT ACCEL_ENABLE_MPI STREQUAL "OFF")
  set(MPI_CXX_SKIP_MPICXX ON)  # accel/comm calls MPI's C API; the deprecated C++ bindings are not linked
  find_package(MPI QUIET COMPONENTS CXX)
  if(MPI_CXX_FOUND)
    set(ACCEL_HAS_MPI ON)
  elseif(ACCEL_ENABLE_MPI STREQUAL "ON")
    message(FATAL_ERROR "ACCEL_ENABLE_MPI=ON but MPI was not found. On Debian/Ubuntu: "
                        "apt-get install libopenmpi-dev openmpi-bin")
  endif()
endif()

set(ACCEL_HAS_NCCL OFF)
if(ACCEL_HAS_CUDA AND NOT ACCEL_ENABLE_NCCL STREQUAL "OFF")
  # Only the header is needed to build: accel/comm loads libnccl with dlopen when first used.
  find_path(ACCEL_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  if(ACCEL_NCCL_INCLUDE_DIR)
    set(ACCEL_HAS_NCCL ON)
  elseif(ACCEL_ENABLE_NCCL STREQUAL "ON")
    message(FATAL_ERROR "ACCEL_ENABLE_NCCL=ON but nccl.h was not found (libnccl-dev, or the CUDA toolkit's NCCL).")
  endif()
endif()

# accel/algo (Thrust/CUB algorithms over buffers) needs CCCL's headers: the CUDA toolkit's include/cccl
# (include/ before CUDA 13), or a standalone CCCL. When found, its include directory is on accel (the
# rest of accel never includes it). accel::algo adds OpenMP, which runs CpuBackend's algorithms on all
# cores; it is a separate target so that -fopenmp reaches only code that asks for it (it would also
# switch on OpenMP in every consumer's CPU random fills, and libgomp is not ThreadSanitizer-clean).
set(ACCEL_ENABLE_ALGO "AUTO" CACHE STRING "accel/algo (Thrust/CUB; target accel::algo): AUTO, ON or OFF")
set_property(CACHE ACCEL_ENABLE_ALGO PROPERTY STRINGS AUTO ON OFF)
_accel_check_mode(ACCEL_ENABLE_ALGO)
set(ACCEL_HAS_ALGO OFF)
if(NOT ACCEL_ENABLE_ALGO STREQUAL "OFF")
  find_path(ACCEL_CCCL_INCLUDE_DIR thrust/version.h HINTS ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES cccl
    DOC "CCCL's include directory (Thrust, CUB, libcu++)")
  if(ACCEL_CCCL_INCLUDE_DIR)
    set(ACCEL_HAS_ALGO ON)
    target_include_directories(${ACCEL_TARGET} SYSTEM INTERFACE ${ACCEL_CCCL_INCLUDE_DIR})
    find_package(OpenMP QUIET COMPONENTS CXX)
    if(NOT TARGET accel::algo)
      add_library(accel::algo INTERFACE IMPORTED GLOBAL)
      target_link_libraries(accel::algo INTERFACE accel::accel)
      if(OpenMP_CXX_FOUND)
        target_link_libraries(accel::algo INTERFACE OpenMP::OpenMP_CXX)
      endif()
    endif()
  elseif(ACCEL_ENABLE_ALGO STREQUAL "ON")
    message(FATAL_ERROR "ACCEL_ENABLE_ALGO=ON but CCCL (thrust/version.h) was not found. It ships with the "
                        "CUDA toolkit (include/cccl); or pass -DACCEL_CCCL_INCLUDE_DIR=<cccl>/include, or "
                        "-DACCEL_ENABLE_ALGO=OFF.")
  endif()
endif()

# accel/blas (GEMM over buffers on a stream; target accel::blas): oneDNN's sgemm on the CPU (chosen by
# measurement: benchmarks/RESULTS.md, "BLAS"), cuBLAS on CUDA (loaded with dlopen; only its headers,
# part of the toolkit, are needed to build). accel::blas links oneDNN (which brings its OpenMP runtime;
# accel finds that at run time, no -fopenmp needed); like accel::algo it is a separate target, so that
# oneDNN reaches only the programs that ask for it.
set(ACCEL_ENABLE_BLAS "AUTO" CACHE STRING "accel/blas (oneDNN on the CPU, cuBLAS on CUDA; target accel::blas): AUTO, ON or OFF")
set_property(CACHE ACCEL_ENABLE_BLAS PROPERTY STRINGS AUTO ON OFF)
_accel_check_mode(ACCEL_ENABLE_BLAS)
set(ACCEL_HAS_BLAS OFF)
if(NOT ACCEL_ENABLE_BLAS STREQUAL "OFF")
  find_path(ACCEL_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.h DOC "oneDNN's include directory")
  find_library(ACCEL_DNNL_LIBRARY NAMES dnnl DOC "oneDNN (libdnnl)")
  if(ACCEL_DNNL_INCLUDE_DIR AND ACCEL_DNNL_LIBRARY)
    set(ACCEL_HAS_BLAS ON)
    if(NOT TARGET accel::blas)
      add_library(accel::blas INTERFACE IMPORTED GLOBAL)
      target_link_libraries(accel::blas INTERFACE accel::accel ${ACCEL_DNNL_LIBRARY})
      target_include_directories(accel::blas SYSTEM INTERFACE ${ACCEL_DNNL_INCLUDE_DIR})
      target_compile_definitions(accel::blas INTERFACE ACCEL_HAS_BLAS=1)
    endif()
  elseif(ACCEL_ENABLE_BLAS STREQUAL "ON")
    message(FATAL_ERROR "ACCEL_ENABLE_BLAS=ON but oneDNN (oneapi/dnnl/dnnl.h, libdnnl) was not found. On "
                        "Debian/Ubuntu: apt-get install libdnnl-dev; or pass -DACCEL_ENABLE_BLAS=OFF.")
  endif()
endif()

# accel/comm (collectives over MPI for CpuBackend and NCCL for CudaBackend; target accel::comm): where
# MPI or NCCL was found. MPI is linked; NCCL only needs its header here (the toolkit's nccl.h): libnccl is
# loaded with dlopen on first use, so programs built with it start, and report NCCL unavailable, without
# it. Like accel::algo it is a separate target, so that MPI reaches only the programs that ask for it.
set(ACCEL_HAS_COMM OFF)
if(ACCEL_HAS_MPI OR ACCEL_HAS_NCCL)
  set(ACCEL_HAS_COMM ON)
  if(NOT TARGET accel::comm)
    add_library(accel::comm INTERFACE IMPORTED GLOBAL)
    target_link_libraries(accel::comm INTERFACE accel::accel)
    if(ACCEL_HAS_MPI)
      target_link_libraries(accel::comm INTERFACE MPI::MPI_CXX)
      target_compile_definitions(accel::comm INTERFACE ACCEL_HAS_MPI=1)
    endif()
    if(ACCEL_HAS_NCCL)
      target_include_directories(accel::comm SYSTEM INTERFACE ${ACCEL_NCCL_INCLUDE_DIR})
      target_compile_definitions(accel::comm INTERFACE ACCEL_HAS_NCCL=1)
    endif()
  endif()
endif()
