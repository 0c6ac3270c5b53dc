// accel::Accelerator accepts a complete user-written backend and rejects one missing any part.
#include "mock_backend.hpp"

#include <accel/cpu/backend.hpp>

#include <doctest/doctest.h>

static_assert(accel::Accelerator<mock::Backend>);
static_assert(accel::Accelerator<accel::CpuBackend>);

static_assert(!accel::MemoryApi<mock::NoStats> && !accel::Accelerator<mock::NoStats>);
static_assert(!accel::ProfileApi<mock::NoProfiling> && !accel::Accelerator<mock::NoProfiling>);
static_assert(!accel::FlagsApi<mock::NoFlags> && !accel::Accelerator<mock::NoFlags>);
static_assert(!accel::DeviceApi<mock::NoDeviceGuard> && !accel::Accelerator<mock::NoDeviceGuard>);
static_assert(!accel::OpApi<mock::NoOps> && !accel::Accelerator<mock::NoOps>);
static_assert(!accel::GraphApi<mock::NoGraphs> && !accel::Accelerator<mock::NoGraphs>);
static_assert(!accel::DeviceApi<mock::OldBackend> && !accel::Accelerator<mock::OldBackend>);
static_assert(!accel::Accelerator<int>);

// A policy must be a trivially copyable value.
struct NotTrivial : mock::Backend {
  NotTrivial() = default;
  NotTrivial(const NotTrivial&) {}
};
static_assert(!accel::FlagsApi<NotTrivial>);

namespace {

// Generic engine code, written once against the concept.
template <accel::Accelerator B>
std::size_t run_step(B backend) {
  typename B::Stream stream;
  typename B::Event done;
  void* block = backend.raw_alloc(4096, stream);
  stream.enqueue([] {});
  done.record(stream);
  done.synchronize();
  const std::size_t in_use = backend.memory_allocated();
  backend.raw_delete(block);
  return in_use;
}

}  // namespace

TEST_CASE("a complete user-written backend runs generic engine code") {
  CHECK(run_step(mock::Backend{}) == 4096);
  CHECK(mock::live_blocks().empty());
}

TEST_CASE("a user-written backend's graphs capture and replay through the concept") {
  const mock::Backend backend;
  typename mock::Backend::Stream stream;
  auto graph = backend.create_graph();
  int runs = 0;
  {
    auto capture = backend.capture_to_graph(graph, stream);
    CHECK(stream.is_capturing());
    stream.enqueue([&runs] { ++runs; });
    capture.end();
  }
  CHECK_FALSE(stream.is_capturing());
  CHECK(runs == 0);
  CHECK(graph.captured());
  backend.replay_graph(graph, stream);
  backend.replay_graph(graph);
  CHECK(runs == 2);
}
