// Engine<CudaBackend> (where the build has CUDA) and Engine<AnyBackend>, compiled once (train.hpp).
#include "train.hpp"

#include "run.hpp"

namespace engine {

#if defined(ACCEL_HAS_CUDA)
int train(accel::CudaBackend backend, const Config& config) {
  return Engine<accel::CudaBackend>(backend, config).run();
}
#endif

int train(const accel::AnyBackend& backend, const Config& config) {
  return Engine<accel::AnyBackend>(backend, config).run();
}

}  // namespace engine
