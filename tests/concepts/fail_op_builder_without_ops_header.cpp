// Must NOT compile: the op builders are opt-in, and this file asks for one without <accel/op_builders.hpp>.
// The diagnostic must name the header to include (tests/concepts/CMakeLists.txt checks it).
#include <accel/accel.hpp>

int main() { return static_cast<int>(accel::get_accelerator().create_op_builder("fused_adam").name().size()); }
