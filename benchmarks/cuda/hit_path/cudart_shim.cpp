// Counting stand-ins for the CUDA runtime entry points the harness reaches (LD_PRELOAD): each call is
// counted by name; allocations hand out made-up device addresses (never dereferenced) or malloc'd host
// memory. shim_reset() / shim_report(what) are looked up by the harness with dlsym.
#include <cuda_runtime_api.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

namespace {
std::mutex m;
std::map<std::string, long>& counts() { static std::map<std::string, long> c; return c; }
void count(const char* f) { std::lock_guard l(m); ++counts()[f]; }
int current = 0;
std::uintptr_t next_ptr = std::uintptr_t{1} << 44;
unsigned long long next_id = 100;
}
#define C count(__func__)
extern "C" {
__attribute__((visibility("default"))) void shim_reset() { std::lock_guard l(m); counts().clear(); }
__attribute__((visibility("default"))) void shim_report(const char* what) {
  std::lock_guard l(m);
  long total = 0;
  std::string s;
  for (auto& [k, v] : counts()) { total += v; s += " " + k + "=" + std::to_string(v); }
  std::printf("%-40s CUDA runtime calls: %ld%s\n", what, total, s.c_str());
}
cudaError_t cudaGetDevice(int* d) { C; *d = current; return cudaSuccess; }
cudaError_t cudaSetDevice(int d) { C; current = d; return cudaSuccess; }
cudaError_t cudaGetDeviceCount(int* n) { C; *n = 1; return cudaSuccess; }
cudaError_t cudaGetLastError() { C; return cudaSuccess; }
cudaError_t cudaPeekAtLastError() { C; return cudaSuccess; }
const char* cudaGetErrorName(cudaError_t) { return "cudaErrorShim"; }
const char* cudaGetErrorString(cudaError_t) { return "shim"; }
cudaError_t cudaMalloc(void** p, size_t n) { C; *p = reinterpret_cast<void*>(next_ptr); next_ptr += (n + 4095) / 4096 * 4096 + 4096; return cudaSuccess; }
cudaError_t cudaFree(void*) { C; return cudaSuccess; }
cudaError_t cudaHostAlloc(void** p, size_t n, unsigned) { C; *p = std::malloc(n); return cudaSuccess; }
cudaError_t cudaFreeHost(void* p) { C; std::free(p); return cudaSuccess; }
cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode*) { C; return cudaSuccess; }
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned, int) { C; *s = reinterpret_cast<cudaStream_t>(next_id++); return cudaSuccess; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) { C; *s = reinterpret_cast<cudaStream_t>(next_id++); return cudaSuccess; }
cudaError_t cudaStreamGetId(cudaStream_t s, unsigned long long* id) { C; *id = reinterpret_cast<unsigned long long>(s); return cudaSuccess; }
cudaError_t cudaStreamDestroy(cudaStream_t) { C; return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { C; return cudaSuccess; }
cudaError_t cudaStreamQuery(cudaStream_t) { C; return cudaSuccess; }
cudaError_t cudaStreamIsCapturing(cudaStream_t, cudaStreamCaptureStatus* st) { C; *st = cudaStreamCaptureStatusNone; return cudaSuccess; }
cudaError_t cudaDeviceGetStreamPriorityRange(int* lo, int* hi) { C; *lo = 0; *hi = -5; return cudaSuccess; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) { C; *e = reinterpret_cast<cudaEvent_t>(next_id++); return cudaSuccess; }
cudaError_t cudaEventDestroy(cudaEvent_t) { C; return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { C; return cudaSuccess; }
cudaError_t cudaEventQuery(cudaEvent_t) { C; return cudaSuccess; }
cudaError_t cudaEventSynchronize(cudaEvent_t) { C; return cudaSuccess; }
cudaError_t cudaMemGetInfo(size_t* f, size_t* t) { C; *f = size_t{70} << 30; *t = size_t{80} << 30; return cudaSuccess; }
cudaError_t cudaDeviceSynchronize() { C; return cudaSuccess; }
}
