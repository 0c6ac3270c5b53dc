// Engine<CpuBackend>, compiled once (train.hpp); train_any.cpp holds the other backends' instantiations.
#include "train.hpp"

#include "run.hpp"

namespace engine {

int train(accel::CpuBackend backend, const Config& config) { return Engine<accel::CpuBackend>(backend, config).run(); }

}  // namespace engine
