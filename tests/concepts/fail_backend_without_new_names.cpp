// Must NOT compile: a backend written before DeviceApi took torch.accelerator's names
// (current_accelerator, current_device_index, set_device_index) is not an accel::Accelerator, and the
// diagnostic names what to add and where it comes from (accel::DeviceNames).
#include "mock_backend.hpp"

static_assert(accel::Accelerator<mock::OldBackend>);

int main() { return 0; }
