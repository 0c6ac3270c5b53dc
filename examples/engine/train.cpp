// Engine<B>'s instantiations for the backends the engine is built for, compiled once (train.hpp).
// One translation unit for the three: they share most of what they instantiate, so apart they cost
// ~1.5x the CPU time of together.
#include "train.hpp"

#include "run.hpp"

namespace engine {

int train(accel::CpuBackend backend, const Config& config) { return Engine<accel::CpuBackend>(backend, config).run(); }

#if defined(ACCEL_HAS_CUDA)
int train(accel::CudaBackend backend, const Config& config) {
  return Engine<accel::CudaBackend>(backend, config).run();
}
#endif

int train(const accel::AnyBackend& backend, const Config& config) {
  return Engine<accel::AnyBackend>(backend, config).run();
}

}  // namespace engine
