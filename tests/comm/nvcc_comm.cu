// accel/comm in a translation unit nvcc compiles, next to a kernel: a kernel writes each element, NCCL
// all_reduces it (one rank), the host checks. Runs where a GPU is; elsewhere it says why and passes.
#include <accel/comm.hpp>

#include <cstdio>
#include <vector>

__global__ void iota(float* p, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = static_cast<float>(i);
}

int main(int argc, char** argv) {
  accel::comm::init(argc, argv);
  using CB = accel::CudaBackend;
  if (!CB::is_available()) {
    std::printf("skipped: no CUDA device (%s); accel/comm compiled with nvcc\n", CB::availability().reason.c_str());
    return 0;
  }
  auto& world = accel::comm::world<CB>();
  accel::cuda::Stream s(world.device());
  const int n = 1000;
  accel::Buffer<float, CB> buf(n, s);
  iota<<<(n + 255) / 256, 256, 0, s.get()>>>(buf.data(), n);
  world.all_reduce(s, buf, accel::ReduceOp::avg);
  std::vector<float> host(n);
  CB{}.copy_async(s, host.data(), buf.data(), n * sizeof(float));
  s.synchronize();
  for (int i = 0; i < n; ++i) {
    if (host[static_cast<std::size_t>(i)] != static_cast<float>(i)) {
      std::printf("element %d is %g\n", i, host[static_cast<std::size_t>(i)]);
      return 1;
    }
  }
  std::printf("ok: %d ranks, %s\n", world.size(), CB{}.communication_backend_version().c_str());
  return 0;
}
