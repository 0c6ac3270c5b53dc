// Engine-style generic code over accel::Accelerator, built outside accel's tree.
#include <accel/accel.hpp>

#include <cstdio>

template <accel::Accelerator B>
int run(B backend) {
  typename B::Stream stream;
  accel::FloatBuffer<B> buffer(1024, stream);
  typename B::Event done;
  done.record(stream);
  done.synchronize();
  return backend.memory_allocated() >= 4096 ? 0 : 1;
}

int main() {
  const int rc = accel::visit(accel::get_accelerator(), [](auto backend) { return run(backend); });
  std::printf("consumer: %s\n", rc == 0 ? "ok" : "FAILED");
  return rc;
}
