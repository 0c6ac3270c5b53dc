// AnyBackend, accel::visit and get_accelerator(): run-time choice without giving up static calls.
#include "concepts/mock_backend.hpp"

#include <accel/accel.hpp>

#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <type_traits>

static_assert(accel::Accelerator<accel::AnyBackend>);
static_assert(std::is_trivially_copyable_v<accel::AnyBackend::StreamRef>);
static_assert(std::variant_size_v<accel::AnyBackend::variant_type> ==
              std::tuple_size_v<accel::enabled_backends_t<std::tuple>>);
static_assert(std::is_same_v<std::variant_alternative_t<std::variant_size_v<accel::AnyBackend::variant_type> - 1,
                                                        accel::AnyBackend::variant_type>,
                             accel::CpuBackend>,
              "the CPU backend is last in priority order");

namespace {

template <accel::Accelerator B>
struct Engine {
  B backend;
  std::size_t step() {
    typename B::Stream stream;
    accel::FloatBuffer<B> buffer(256, stream);
    typename B::Event done;
    done.record(stream);
    done.synchronize();
    return backend.memory_allocated();
  }
};

}  // namespace

TEST_CASE("Engine<AnyBackend> runs, dispatching per call") {
  // The selected backend: the one AnyStream{} and AnyEvent{} inside Engine are created on too (the
  // CUDA backend where a GPU is present, else the CPU backend).
  const accel::AnyBackend any;
  const std::size_t before = any.memory_allocated();
  CHECK(Engine<accel::AnyBackend>{any}.step() == before + 1024);
  CHECK(any.index() == accel::AnyBackend::Stream{}.index());
  if (any.holds<accel::CpuBackend>()) {
    CHECK(any.name() == "cpu");
    CHECK(any.device_type() == accel::DeviceType::cpu);
  }
}

TEST_CASE("visit enters static code once with the concrete backend") {
  const accel::AnyBackend any{accel::CpuBackend{}};
  const auto name = accel::visit(any, [](auto backend) {
    static_assert(!std::is_same_v<decltype(backend), accel::AnyBackend>);
    Engine<decltype(backend)>{backend}.step();
    return std::string(backend.name());
  });
  CHECK(name == "cpu");
  // Results of different types are converted to their common type.
  const double value = accel::visit(any, [](auto backend) {
    if constexpr (std::is_same_v<decltype(backend), accel::CpuBackend>) return 1;
    else return 2.5;
  });
  CHECK(value == 1.0);
}

TEST_CASE("get_accelerator selects an available backend, once") {
  const accel::AnyBackend selected = accel::get_accelerator();
  CHECK(selected.is_available());
  const auto& why = accel::accelerator_selection();
  CHECK(why.name == selected.name());
  CHECK(why.probes.size() == std::variant_size_v<accel::AnyBackend::variant_type>);
  CHECK_FALSE(why.reason.empty());
  for (const auto& probe : why.probes) {
    CHECK(probe.availability.available == probe.availability.reason.empty());
  }
  if (const char* env = std::getenv("ACCEL_BACKEND"); env != nullptr) {
    CHECK(why.from_environment);
    CHECK(why.name == env);
  }
  CHECK(accel::get_accelerator() == selected);
}

TEST_CASE("selection errors: unknown names list the valid ones; unavailable is never a silent fallback") {
  try {
    (void)accel::select_backend<accel::CpuBackend, mock::Backend>("xpu");
    FAIL("an unknown backend name was accepted");
  } catch (const accel::InvalidArgumentError& e) {
    CHECK(std::string(e.what()) == "ACCEL_BACKEND='xpu' is not a backend of this build (valid: cpu, mock)");
  }
  CHECK(accel::select_backend<accel::CpuBackend, mock::Backend>("mock").index == 1);
  CHECK(accel::select_backend<accel::CpuBackend, mock::Backend>(nullptr).index == 0);
  CHECK(accel::select_backend<accel::CpuBackend, mock::Backend>("").index == 0);
#if defined(ACCEL_HAS_CUDA)
  if (!accel::CudaBackend{}.is_available()) {
    try {
      (void)accel::select_backend<accel::CudaBackend, accel::CpuBackend>("cuda");
      FAIL("an unavailable backend was selected");
    } catch (const accel::BackendUnavailableError& e) {
      CHECK(std::string(e.what()).find("ACCEL_BACKEND=cuda but cuda is unavailable: ") == 0);
    }
    const auto probed = accel::select_backend<accel::CudaBackend, accel::CpuBackend>(nullptr);
    CHECK(probed.name == "cpu");
    CHECK(probed.reason.find("skipped cuda: ") != std::string::npos);
  }
#endif
}

TEST_CASE("a user's own backend joins a user-side list and dispatches the same way") {
  using MyAny = accel::enabled_backends_t<accel::BasicAnyBackend, mock::Backend>;
  static_assert(accel::Accelerator<MyAny>);
  const MyAny mine{mock::Backend{}};
  CHECK(mine.name() == "mock");
  CHECK(accel::visit(mine, [](auto b) { return Engine<decltype(b)>{b}.step(); }) == 1024);
}

TEST_CASE("handles of different backends do not mix") {
  using Two = accel::BasicAnyBackend<accel::CpuBackend, mock::Backend>;
  const Two cpu{accel::CpuBackend{}};
  const Two fake{mock::Backend{}};
  const Two::StreamRef fake_stream = fake.current_stream();
  CHECK_THROWS_AS(cpu.set_stream(fake_stream), accel::InvalidArgumentError);
  // Memory follows the stream's backend, and raw_delete finds the owner.
  void* p = cpu.raw_alloc(64, fake_stream);
  CHECK(mock::live_blocks().count(p) == 1);
  cpu.raw_delete(p);
  CHECK(mock::live_blocks().count(p) == 0);
  Two::Event event{false};
  event.record(cpu.current_stream());
  CHECK_THROWS_AS(fake_stream.wait(event), accel::InvalidArgumentError);
}

TEST_CASE("the process can fork after selection and the child uses the CPU backend") {
  (void)accel::get_accelerator();
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int code = 1;
    try {
      accel::CpuBackend cpu;
      accel::cpu::Stream stream;
      int value = 0;
      stream.enqueue([&] { value = 7; });
      stream.synchronize();
      void* p = cpu.raw_alloc(1000, stream);
      cpu.raw_delete(p);
      code = value == 7 ? 0 : 2;
    } catch (...) {
      code = 3;
    }
    _exit(code);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
