# accel_build_ops_aot(<target> [CUDA_ARCHS <sm>...]): ahead-of-time builds of accel's ops.
#
# Builds, into $<TARGET_FILE_DIR>-independent directory ${CMAKE_BINARY_DIR}/accel_ops:
#   fused_adam.so, cpu_adam.so, tensor_ops.so, nn_ops.so   from kernels/cpu (host compiler, -O3 -march=native
#                                               -fopenmp: the JIT's flags; so the build machine's CPU)
#   fused_adam.sm_XY.cubin, tensor_ops.sm_XY.cubin, random_fill.sm_XY.cubin, nn_ops.sm_XY.cubin
#                                               from kernels/cuda with nvcc, for each CUDA_ARCHS
#                                               (random_fill also includes accel's include/)
# and points <target> (an INTERFACE library such as accel) at them with ACCEL_OPS_AOT_DIR, so the op
# builders load these instead of compiling (a mismatching ABI or an unsupported CPU falls back to JIT).
# Usage (top-level CMakeLists.txt):
#   option(ACCEL_BUILD_OPS_AOT "Compile accel's kernels ahead of time" OFF)
#   if(ACCEL_BUILD_OPS_AOT)
#     include(kernels/aot.cmake)
#     accel_build_ops_aot(accel CUDA_ARCHS 80 90)
#   endif()
include_guard(GLOBAL)

function(accel_build_ops_aot target)
  cmake_parse_arguments(ARG "" "" "CUDA_ARCHS" ${ARGN})
  set(_kernels ${CMAKE_CURRENT_FUNCTION_LIST_DIR})
  set(_out ${CMAKE_BINARY_DIR}/accel_ops)
  find_package(OpenMP REQUIRED COMPONENTS CXX)
  set(_outputs)
  foreach(_pair fused_adam:fused_adam cpu_adam:fused_adam tensor_ops:tensor_ops nn_ops:nn_ops)
    string(REPLACE ":" ";" _pair ${_pair})
    list(GET _pair 0 _name)
    list(GET _pair 1 _src)
    add_library(accel_aot_${_name} MODULE ${_kernels}/cpu/${_src}.cpp)
    target_include_directories(accel_aot_${_name} PRIVATE ${_kernels}/cpu ${_kernels}/common)
    target_compile_options(accel_aot_${_name} PRIVATE -O3 -march=native -fno-math-errno -ffp-contract=off
                                                      -mprefer-vector-width=512)
    target_compile_features(accel_aot_${_name} PRIVATE cxx_std_17)
    target_link_libraries(accel_aot_${_name} PRIVATE OpenMP::OpenMP_CXX)
    set_target_properties(accel_aot_${_name} PROPERTIES PREFIX "" OUTPUT_NAME ${_name}
                          LIBRARY_OUTPUT_DIRECTORY ${_out})
    list(APPEND _outputs accel_aot_${_name})
  endforeach()
  if(ARG_CUDA_ARCHS AND CUDAToolkit_NVCC_EXECUTABLE)
    set(_random ${_kernels}/../include/accel/random)
    set(_deps_fused_adam ${_kernels}/cuda/cuda_common.cuh ${_kernels}/common/accel_ops_abi.h)
    set(_deps_tensor_ops ${_deps_fused_adam})
    set(_deps_nn_ops ${_deps_fused_adam} ${_kernels}/common/accel_nn_abi.h)
    set(_deps_random_fill ${_random}/detail/block_fill.hpp ${_random}/distributions.hpp ${_random}/philox.hpp)
    foreach(_op fused_adam tensor_ops random_fill nn_ops)
      foreach(_sm IN LISTS ARG_CUDA_ARCHS)
        set(_cubin ${_out}/${_op}.sm_${_sm}.cubin)
        add_custom_command(OUTPUT ${_cubin}
          COMMAND ${CMAKE_COMMAND} -E make_directory ${_out}
          COMMAND ${CUDAToolkit_NVCC_EXECUTABLE} -cubin -arch=sm_${_sm} -std=c++17 --fmad=false
                  -I${_kernels}/cuda -I${_kernels}/common -I${_kernels}/../include ${_kernels}/cuda/${_op}.cu
                  -o ${_cubin}
          DEPENDS ${_kernels}/cuda/${_op}.cu ${_deps_${_op}}
          COMMENT "nvcc ${_op}.cu for sm_${_sm}" VERBATIM)
        list(APPEND _cubins ${_cubin})
      endforeach()
    endforeach()
    add_custom_target(accel_aot_cubins ALL DEPENDS ${_cubins})
    list(APPEND _outputs accel_aot_cubins)
  endif()
  add_custom_target(accel_ops_aot ALL DEPENDS ${_outputs})
  target_compile_definitions(${target} INTERFACE $<BUILD_INTERFACE:ACCEL_OPS_AOT_DIR="${_out}">)
endfunction()
