// Counts the CUDA runtime calls of CudaBackend's cache-hit alloc+free pair (raw_alloc + raw_delete on
// an explicit stream) and of a pinned cache hit (host_alloc + host_free), with every cuda* entry point
// replaced by a counting stand-in (cudart_shim.cpp, LD_PRELOAD) and tests/cuda's stand-in driver for
// detection. No GPU needed. run.sh builds and runs it, and counts instructions per pair (callgrind).
// `harness N` runs N pairs of each kind after one pair that fills the cache.
#include <accel/cuda/backend.hpp>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>

using Report = void (*)(const char*);
using Reset = void (*)();

[[gnu::noinline]] void hit_pairs(std::size_t n, std::size_t bytes, accel::cuda::StreamRef s) {
  for (std::size_t i = 0; i < n; ++i) {
    void* p = accel::CudaBackend::raw_alloc(bytes, s);
    asm volatile("" : : "r"(p) : "memory");
    accel::CudaBackend::raw_delete(p);
  }
}
[[gnu::noinline]] void pinned_pairs(std::size_t n, std::size_t bytes, accel::cuda::StreamRef s) {
  for (std::size_t i = 0; i < n; ++i) {
    void* p = accel::CudaBackend::host_alloc(bytes, s);
    asm volatile("" : : "r"(p) : "memory");
    accel::CudaBackend::host_free(p);
  }
}

int main(int argc, char** argv) {
  const std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1000;
  auto report = reinterpret_cast<Report>(dlsym(RTLD_DEFAULT, "shim_report"));
  auto reset = reinterpret_cast<Reset>(dlsym(RTLD_DEFAULT, "shim_reset"));
  if (!report || !reset) { std::printf("shim not preloaded\n"); return 1; }
  const accel::CudaBackend cuda;
  auto av = cuda.availability();
  if (!av.available) { std::printf("unavailable: %s\n", av.reason.c_str()); return 1; }
  cuda.set_device(0);
  accel::cuda::Stream stream(0);
  const accel::cuda::StreamRef s = stream;
  for (std::size_t bytes : {std::size_t{512}, std::size_t{1} << 20, std::size_t{64} << 20}) {
    hit_pairs(1, bytes, s);  // fills the cache
    report(bytes == 512 ? "setup + first pair (a miss)" : "first pair of this size");
    reset();
    hit_pairs(n, bytes, s);
    char what[64];
    std::snprintf(what, sizeof what, "raw_alloc+raw_delete %zu B x %zu", bytes, n);
    report(what);
  }
  pinned_pairs(1, 4096, s);
  reset();
  pinned_pairs(n, 4096, s);
  report("host_alloc+host_free 4096 B");
  return 0;
}
