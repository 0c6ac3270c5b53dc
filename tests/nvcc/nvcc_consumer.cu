// The umbrella header under nvcc, with a kernel launched on an accel stream into an accel Buffer.
#include <accel/accel.hpp>

#include <cstdio>
#include <vector>

__global__ void iota_kernel(int* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = i;
}

int main() {
  accel::CudaBackend cuda;
  if (!cuda.is_available()) {
    std::printf("SKIPPED: %s\n", cuda.availability().reason.c_str());
    return 0;
  }
  accel::CudaBackend::Stream stream;
  const int n = 1 << 20;
  accel::IntBuffer<accel::CudaBackend> buffer(n, stream);
  iota_kernel<<<(n + 255) / 256, 256, 0, stream.get()>>>(buffer.data(), n);
  std::vector<int> host(n);
  cuda.copy_async(stream, host.data(), buffer.data(), buffer.bytes());
  stream.synchronize();
  for (int i = 0; i < n; ++i) {
    if (host[i] != i) {
      std::printf("FAILED: element %d is %d\n", i, host[i]);
      return 1;
    }
  }
  std::printf("ok: %d elements written by a kernel on an accel stream\n", n);
  return 0;
}
