// Two translation units include the umbrella header; linking them proves every definition in a
// header is inline (or a template), and that both see the same process-wide state.
#include <accel/accel.hpp>

#include <cstdio>

std::size_t allocated_in_other_tu();

int main() {
  accel::CpuBackend cpu;
  void* p = cpu.raw_alloc(4096, cpu.current_stream());
  const std::size_t here = cpu.memory_allocated();
  const std::size_t there = allocated_in_other_tu();
  cpu.raw_delete(p);
  if (here != there || here < 4096) {
    std::printf("FAIL: the two translation units disagree: %zu vs %zu\n", here, there);
    return 1;
  }
  return 0;
}
