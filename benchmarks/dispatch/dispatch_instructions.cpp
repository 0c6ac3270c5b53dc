// Instruction counts of single calls, for callgrind (count_instructions.sh): each call of
// dispatch_ways.hpp, four ways (raw, static, variant, virtual). Each (call, way) is a noipa function
// path_<way>_<call> run `calls` times after a warm-up outside them, so callgrind's inclusive count of
// the function divided by `calls` is the exact, load-independent cost of one call.
#include "dispatch_ways.hpp"

#include <cstdio>
#include <cstdlib>

using namespace dispatch_bench;

namespace {
RawApi* raw;
GenericApi<accel::CpuBackend>* statik;
GenericApi<accel::AnyBackend>* var;
VirtualApi* virt;
std::uintptr_t sink = 0;
}  // namespace

#define ACCEL_PATHS(way, api)                                                                            \
  extern "C" __attribute__((noipa)) void path_##way##_current_device() { sink += (api)->current_device(); } \
  extern "C" __attribute__((noipa)) void path_##way##_alloc_free() {                                     \
    void* p = (api)->alloc(1024);                                                                        \
    sink += reinterpret_cast<std::uintptr_t>(p);                                                         \
    (api)->free(p);                                                                                      \
  }                                                                                                      \
  extern "C" __attribute__((noipa)) void path_##way##_enqueue() { (api)->enqueue(task_slot, &sink); }     \
  extern "C" __attribute__((noipa)) void path_##way##_record() { (api)->record(); }                      \
  extern "C" __attribute__((noipa)) void path_##way##_query() { sink += (api)->query(); }                 \
  extern "C" __attribute__((noipa)) void path_##way##_chain_step() { sink = chain(*(api), 1, sink); }

ACCEL_PATHS(raw, raw)
ACCEL_PATHS(static, statik)
ACCEL_PATHS(variant, var)
ACCEL_PATHS(virtual, virt)

int main() {
  RawApi r;
  GenericApi<accel::CpuBackend> s{accel::CpuBackend{}};
  GenericApi<accel::AnyBackend> a{make_any()};
  VirtualApi v{make_virtual()};
  raw = &r, statik = &s, var = &a, virt = &v;
  const int calls = 1000;
  using Path = void (*)();
  const Path paths[] = {
#define ACCEL_LIST(way) path_##way##_current_device, path_##way##_alloc_free, path_##way##_enqueue, \
                        path_##way##_record, path_##way##_query, path_##way##_chain_step
      ACCEL_LIST(raw), ACCEL_LIST(static), ACCEL_LIST(variant), ACCEL_LIST(virtual)};
  // Warm-up outside the counted functions: the allocator's segment, the event's capture, the stream.
  sink += chain(r, 2, 0) + chain(s, 2, 0) + chain(a, 2, 0) + chain(v, 2, 0);
  for (const Path p : paths) {
    for (int i = 0; i < calls; ++i) p();
  }
  std::printf("%zu\n", static_cast<std::size_t>(sink & 1));
  return 0;
}
