// accel/algo/algo.hpp — accel's algorithms over buffers, on a stream (Thrust and CUB underneath).
//
//   fill(stream, out, value)                       algo/fill.hpp
//   transform(stream, in, out, op)                 algo/transform.hpp
//   transform(stream, in1, in2, out, op)
//   reduce(stream, in, out[, init[, op]])          algo/reduce.hpp   (asynchronous, result in out[0])
//   reduce(stream, in[, init[, op]]) -> Buffer     (asynchronous, result in a new one-element buffer)
//   reduce_sync(stream, in[, init[, op]]) -> T     (blocking)
//   inclusive_scan(stream, in, out[, op])          algo/inclusive_scan.hpp
//   sort(stream, data[, comp])                     algo/sort.hpp
//   for_each_n(stream, data, n, f)                 algo/for_each.hpp
//   DeviceSpan<T, B>                               algo/device_span.hpp (part of a buffer, or pointer + count)
//   ThrustAllocator<B>                             algo/thrust_allocator.hpp (for your own Thrust calls)
//
// Ranges are Buffer<T, B> or DeviceSpan<T, B>; the stream comes first and is B's stream. Every call
// returns once the work is enqueued: it runs in stream order, after what was enqueued before and before
// what is enqueued after, and its results are visible after stream.synchronize() (or an event recorded
// after it). Nothing synchronizes behind the caller's back; the one blocking call is named reduce_sync.
// A bad argument (an output too small, mismatched input sizes, overlapping ranges, a null pointer with
// elements) is an InvalidArgumentError thrown by the call, naming what was wrong, before anything runs.
//
//   CpuBackend   any compiler. One task on the CPU stream runs Thrust's OpenMP system (thrust::omp::par)
//                with temporaries from the device's caching allocator. It needs OpenMP (-fopenmp: link
//                accel::algo); without it the task runs Thrust's sequential CPP system (cpu_parallel).
//   CudaBackend  translation units compiled by nvcc. thrust::cuda::par_nosync on the stream (reduce:
//                cub::DeviceReduce), temporaries from the device's caching allocator, freed in stream
//                order: no cudaMalloc, no synchronization. Operators must be callable on the device.
//                Calling one with CudaBackend from host-compiled code is a compile-time error that says so.
//
// Needs CCCL (Thrust, CUB, libcu++): the CUDA toolkit's include/cccl or a standalone CCCL. CMake: when
// configure finds it (ACCEL_HAS_ALGO; ACCEL_ENABLE_ALGO=AUTO|ON|OFF) accel::accel carries its include
// directory, and accel::algo adds OpenMP. accel/accel.hpp does not include this header: the rest of
// accel never needs CCCL.
#pragma once

#include <accel/algo/device_span.hpp>
#include <accel/algo/fill.hpp>
#include <accel/algo/for_each.hpp>
#include <accel/algo/inclusive_scan.hpp>
#include <accel/algo/reduce.hpp>
#include <accel/algo/sort.hpp>
#include <accel/algo/thrust_allocator.hpp>
#include <accel/algo/transform.hpp>
