// dispatch_ways.hpp — the four ways of calling accel that bench_dispatch times and
// dispatch_instructions counts (raw, static, variant, virtual), each offering the same small API,
// and the dependent chain of mixed calls both use. See bench_dispatch.cpp.
#pragma once

#include <accel/accel.hpp>

#include <cstdint>
#include <memory>

namespace dispatch_bench {

using Task = void (*)(void*);
inline void write_one(void* p) { *static_cast<volatile char*>(p) = 1; }

// ---- the four ways, each offering the same small API to the chain ----

struct RawApi {
  accel::cpu::StreamRef stream = accel::cpu::Streams::default_stream(0);
  accel::cpu::Event event;
  int current_device() const { return accel::cpu::detail::current_device_slot(); }
  void* alloc(std::size_t bytes) const { return accel::cpu::Memory::allocator(stream.device_index()).allocate(bytes, stream); }
  void free(void* p) const { (void)accel::cpu::Memory::allocator(current_device()).try_free(p); }
  void enqueue(Task f, void* p) const { stream.enqueue([f, p] { f(p); }); }
  void record() { event.record(stream); }
  bool query() const { return event.query(); }
};

// Generic code over a backend type B, as Engine<B> is written.
template <class B>
struct GenericApi {
  B b;
  typename B::StreamRef stream;
  typename B::Event event;
  explicit GenericApi(B backend) : b(backend), stream(b.default_stream()) {}
  int current_device() const { return b.current_device(); }
  void* alloc(std::size_t bytes) const { return b.raw_alloc(bytes, stream); }
  void free(void* p) const { b.raw_delete(p); }
  void enqueue(Task f, void* p) const { stream.enqueue([f, p] { f(p); }); }
  void record() { event.record(stream); }
  bool query() const { return event.query(); }
};

struct VirtualAccelerator {
  virtual ~VirtualAccelerator() = default;
  virtual int current_device() const = 0;
  virtual void* alloc(std::size_t bytes) const = 0;
  virtual void free(void* p) const = 0;
  virtual void enqueue(Task f, void* p) const = 0;
  virtual void record() = 0;
  virtual bool query() const = 0;
};
struct VirtualCpu final : VirtualAccelerator {
  GenericApi<accel::CpuBackend> impl{accel::CpuBackend{}};
  int current_device() const override { return impl.current_device(); }
  void* alloc(std::size_t bytes) const override { return impl.alloc(bytes); }
  void free(void* p) const override { impl.free(p); }
  void enqueue(Task f, void* p) const override { impl.enqueue(f, p); }
  void record() override { impl.record(); }
  bool query() const override { return impl.query(); }
};
struct VirtualApi {
  std::unique_ptr<VirtualAccelerator> v;
  int current_device() const { return v->current_device(); }
  void* alloc(std::size_t bytes) const { return v->alloc(bytes); }
  void free(void* p) const { v->free(p); }
  void enqueue(Task f, void* p) const { v->enqueue(f, p); }
  void record() { v->record(); }
  bool query() const { return v->query(); }
};

// Hidden from the optimiser, so the variant's index and the virtual call's target stay run-time facts.
inline __attribute__((noinline)) accel::AnyBackend make_any() { return accel::AnyBackend{accel::CpuBackend{}}; }
inline __attribute__((noinline)) std::unique_ptr<VirtualAccelerator> make_virtual() { return std::make_unique<VirtualCpu>(); }
inline volatile Task task_slot = write_one;  // the task's function, read at run time

// The chain: `steps` dependent steps. Not inlined, one copy per way.
template <class Api>
__attribute__((noinline)) std::uintptr_t chain(Api& api, long steps, std::uintptr_t x) {
  const Task task = task_slot;
  for (long i = 0; i < steps; ++i) {
    const int dev = api.current_device();
    const std::size_t bytes = 512 + ((x >> 4) + static_cast<std::uintptr_t>(dev)) % 4 * 512;  // 512 B .. 2 KiB
    void* p = api.alloc(bytes);
    api.enqueue(task, p);
    api.record();
    x = x * 31 + reinterpret_cast<std::uintptr_t>(p) + static_cast<std::uintptr_t>(api.query());
    api.free(p);
  }
  return x;
}

}  // namespace dispatch_bench
