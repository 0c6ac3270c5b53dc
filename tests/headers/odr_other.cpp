#include <accel/accel.hpp>

std::size_t allocated_in_other_tu() { return accel::CpuBackend{}.memory_allocated(); }
