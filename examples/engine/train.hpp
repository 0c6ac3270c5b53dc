// train.hpp — engine::train(backend, config): Engine<B>(backend, config).run() for each backend the
// engine is built for, compiled once, in train_cpu.cpp and train_any.cpp.
//
// Engine<B> is a template written only against accel::Accelerator; these are its instantiations, put
// in translation units of their own (the usual way to keep a heavy template's cost in one place): the
// binary and the tests that run whole trainings call these instead of instantiating Engine<B> again
// (the three cost ~40 s of g++ CPU time at -O1, each further copy as much again).
#pragma once

#include "config.hpp"

#include <accel/accel.hpp>

namespace engine {

/// Trains on `backend` as `config` says; returns the exit status (Engine<B>::run()).
int train(accel::CpuBackend backend, const Config& config);
#if defined(ACCEL_HAS_CUDA)  // a build without the CUDA toolkit has no CudaBackend: the CPU alone
int train(accel::CudaBackend backend, const Config& config);
#endif
/// Engine<AnyBackend>: every accelerator call dispatched at run time.
int train(const accel::AnyBackend& backend, const Config& config);

}  // namespace engine
