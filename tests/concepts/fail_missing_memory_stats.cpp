// Must NOT compile: the backend lacks memory_stats(), so it is not an accel::Accelerator.
#include "mock_backend.hpp"

template <accel::Accelerator B>
int use(B) { return 0; }

int main() { return use(mock::NoStats{}); }
