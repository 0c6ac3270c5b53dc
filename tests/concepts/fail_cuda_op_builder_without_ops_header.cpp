// Must NOT compile: the CUDA backend's op builders are opt-in like the CPU backend's
// (cuda/detail/ops_api.hpp), and this file asks for one without <accel/op_builders.hpp>.
// The diagnostic must name the header to include (tests/concepts/CMakeLists.txt checks it).
#include <accel/cuda/backend.hpp>

int main() { return static_cast<int>(accel::CudaBackend::op_names().size()); }
