// Instruction counts of one call, for callgrind (count_instructions.sh): the raw operation, the static
// backend, AnyBackend and a virtual interface. Each path is a noinline function called N times, so
// callgrind's inclusive count per call is exact and repeatable.
#include <accel/accel.hpp>

#include <cstdio>
#include <cstdlib>
#include <memory>

thread_local int raw_current_device_slot = 0;

struct VirtualAccelerator {
  virtual ~VirtualAccelerator() = default;
  virtual int current_device() const = 0;
};
struct VirtualCpu final : VirtualAccelerator {
  int current_device() const override { return accel::CpuBackend::current_device(); }
};

extern "C" {
__attribute__((noipa)) int path_raw() { return raw_current_device_slot; }
__attribute__((noipa)) int path_static(accel::CpuBackend b) { return b.current_device(); }
__attribute__((noipa)) int path_any(const accel::AnyBackend& b) { return b.current_device(); }
__attribute__((noipa)) int path_virtual(const VirtualAccelerator& v) { return v.current_device(); }
}

int main(int argc, char**) {
  const int calls = 1000;
  // argc keeps the choice of object opaque to the optimiser.
  const accel::AnyBackend any = argc > 100 ? accel::get_accelerator() : accel::AnyBackend{accel::CpuBackend{}};
  const std::unique_ptr<VirtualAccelerator> virt = std::make_unique<VirtualCpu>();
  long sum = 0;
  for (int i = 0; i < calls; ++i) sum += path_raw();
  for (int i = 0; i < calls; ++i) sum += path_static(accel::CpuBackend{});
  for (int i = 0; i < calls; ++i) sum += path_any(any);
  for (int i = 0; i < calls; ++i) sum += path_virtual(*virt);
  std::printf("%ld\n", sum);
  return 0;
}
