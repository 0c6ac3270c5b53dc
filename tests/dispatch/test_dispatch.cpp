// AnyBackend, accel::visit and get_accelerator(): run-time choice without giving up static calls.
#include "concepts/mock_backend.hpp"

#include <accel/accel.hpp>
#include <accel/profile/trace.hpp>

#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <variant>

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

TEST_CASE("selection: DS_ACCELERATOR is read like ACCEL_BACKEND; both set to different names is an error") {
  const auto select = [](const char* accel_backend, const char* ds_accelerator) {
    return accel::select_backend<accel::CpuBackend, mock::Backend>(accel_backend, ds_accelerator);
  };
  try {
    (void)select(nullptr, "bogus");
    FAIL("an unknown DS_ACCELERATOR was accepted");
  } catch (const accel::InvalidArgumentError& e) {
    CHECK(std::string(e.what()) == "DS_ACCELERATOR='bogus' is not a backend of this build (valid: cpu, mock)");
  }
  const accel::BackendSelection ds = select(nullptr, "mock");
  CHECK(ds.index == 1);
  CHECK(ds.from_environment);
  CHECK(ds.reason == "DS_ACCELERATOR=mock");
  const accel::BackendSelection both = select("mock", "mock");
  CHECK(both.index == 1);
  CHECK(both.reason == "ACCEL_BACKEND=mock (and DS_ACCELERATOR)");
  try {
    (void)select("cpu", "mock");
    FAIL("two different names were accepted");
  } catch (const accel::InvalidArgumentError& e) {
    CHECK(std::string(e.what()) == "ACCEL_BACKEND='cpu' and DS_ACCELERATOR='mock' name different backends: unset "
                                   "one, or set both to the same name (valid: cpu, mock)");
  }
  CHECK_THROWS_AS((void)select("bogus", "cpu"), accel::InvalidArgumentError);
  // Empty counts as unset, for either variable.
  CHECK(select("", "mock").index == 1);
  CHECK(select("mock", "").index == 1);
  CHECK_FALSE(select("", "").from_environment);
#if defined(ACCEL_HAS_CUDA)
  if (!accel::CudaBackend{}.is_available()) {
    using CudaFirst = accel::BackendSelection (*)(const char*, const char*);
    const CudaFirst cuda_first = &accel::select_backend<accel::CudaBackend, accel::CpuBackend>;
    CHECK_THROWS_WITH_AS((void)cuda_first(nullptr, "cuda"),
                         doctest::Contains("DS_ACCELERATOR=cuda but cuda is unavailable: "),
                         accel::BackendUnavailableError);
  }
#endif
}

// Run by the ctest entries test_dispatch_ds_accelerator_* (tests/dispatch/CMakeLists.txt), each with
// its own DS_ACCELERATOR (and ACCEL_BACKEND): get_accelerator() must do what the variables say.
TEST_CASE("selection: get_accelerator() reads DS_ACCELERATOR, alone or beside ACCEL_BACKEND" * doctest::skip()) {
  const char* ds = std::getenv("DS_ACCELERATOR");
  const char* accel_backend = std::getenv("ACCEL_BACKEND");
  REQUIRE_MESSAGE(ds != nullptr, "run through ctest (test_dispatch_ds_accelerator_*), which sets DS_ACCELERATOR");
  const std::string ds_value = ds;
  const std::string accel_value = accel_backend != nullptr ? accel_backend : "";
  std::string valid;
  bool known = ds_value.empty();
  for (std::size_t i = 0; i < std::variant_size_v<accel::AnyBackend::variant_type>; ++i) {
    const std::string name(accel::AnyBackend(accel::BackendIndex{i}).name());
    valid += (valid.empty() ? "" : ", ") + name;
    known = known || name == ds_value;
  }
  INFO("DS_ACCELERATOR='" << ds_value << "' ACCEL_BACKEND='" << accel_value << "' valid: " << valid);
  if (!accel_value.empty() && !ds_value.empty() && accel_value != ds_value) {
    CHECK_THROWS_WITH_AS((void)accel::get_accelerator(),
                         doctest::Contains(("ACCEL_BACKEND='" + accel_value + "' and DS_ACCELERATOR='" + ds_value +
                                            "' name different backends")
                                               .c_str()),
                         accel::InvalidArgumentError);
    CHECK_THROWS_AS((void)accel::get_accelerator(), accel::InvalidArgumentError);  // every time, not once
  } else if (!known) {
    CHECK_THROWS_WITH_AS((void)accel::get_accelerator(),
                         doctest::Contains(("DS_ACCELERATOR='" + ds_value +
                                            "' is not a backend of this build (valid: " + valid + ")")
                                               .c_str()),
                         accel::InvalidArgumentError);
  } else if (!ds_value.empty()) {
    const accel::AnyBackend selected = accel::get_accelerator();
    CHECK(selected.name() == ds_value);
    CHECK(accel::accelerator_selection().from_environment);
    CHECK(accel::accelerator_selection().reason.find("DS_ACCELERATOR") != std::string::npos);
  } else {  // empty: unset
    CHECK(accel::get_accelerator().is_available());
    CHECK(accel::accelerator_selection().from_environment == !accel_value.empty());
  }
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

TEST_CASE("BackendIndex names a backend of the list by position; the int-tag constructor is deprecated") {
  using Two = accel::BasicAnyBackend<accel::CpuBackend, mock::Backend>;
  CHECK(Two(accel::BackendIndex{0}).name() == "cpu");
  CHECK(Two(accel::BackendIndex{1}).name() == "mock");
  CHECK(Two(accel::BackendIndex{1}) == Two{mock::Backend{}});
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
  CHECK(Two(1, 0) == Two(accel::BackendIndex{1}));
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
  // The forwarding parts are empty bases: AnyBackend is its variant and nothing more.
  static_assert(sizeof(accel::AnyBackend) == sizeof(accel::AnyBackend::variant_type));
  static_assert(std::is_trivially_copyable_v<accel::AnyBackend>);
}

TEST_CASE("a backend index past the list is an InvalidArgumentError naming it, for every handle built from one") {
  using Two = accel::BasicAnyBackend<accel::CpuBackend, mock::Backend>;
  using Stream = accel::AnyStream<accel::CpuBackend, mock::Backend>;
  using DeviceGuard = accel::AnyDeviceGuard<accel::CpuBackend, mock::Backend>;
  using Graph = accel::AnyGraph<accel::CpuBackend, mock::Backend>;
  const std::string list = "the list has 2 backends (0 = cpu, 1 = mock)";
  CHECK_THROWS_WITH_AS(Two(accel::BackendIndex{5}),
                       doctest::Contains(("AnyBackend: backend index 5 is out of range: " + list).c_str()),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(Stream(9),
                       doctest::Contains(("AnyStream: backend index 9 is out of range: " + list).c_str()),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(Stream(2, 0, 0),
                       doctest::Contains(("AnyStream: backend index 2 is out of range: " + list).c_str()),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(DeviceGuard(3, 0),
                       doctest::Contains(("AnyDeviceGuard: backend index 3 is out of range: " + list).c_str()),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(Graph(4),
                       doctest::Contains(("AnyGraph: backend index 4 is out of range: " + list).c_str()),
                       accel::InvalidArgumentError);
  // A list of one backend says so in the singular.
  const std::string one = "AnyStream: backend index 1 is out of range: the list has 1 backend (0 = cpu)";
  CHECK_THROWS_WITH_AS(accel::AnyStream<accel::CpuBackend>(1), one.c_str(), accel::InvalidArgumentError);
  // The last index is still the last backend.
  CHECK(Two(accel::BackendIndex{1}).name() == "mock");
  CHECK(Stream(1).index() == 1);
  CHECK(Graph(1).backend_name() == "mock");
}

TEST_CASE("TraceRecorder refuses a stream of another backend than the AnyBackend passed with it") {
  using Two = accel::BasicAnyBackend<accel::CpuBackend, mock::Backend>;
  const Two cpu{accel::CpuBackend{}};
  const Two fake{mock::Backend{}};
  const Two::StreamRef mock_stream = fake.current_stream();
  accel::profile::TraceRecorder rec;
  const std::string mismatch = "the stream is a mock stream, but the backend passed with it is cpu";
  CHECK_THROWS_WITH_AS(rec.span_begin(cpu, mock_stream, "x"),
                       doctest::Contains(("TraceRecorder::span_begin: " + mismatch).c_str()), accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(rec.span_end(cpu, mock_stream), doctest::Contains(("TraceRecorder::span_end: " + mismatch).c_str()),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(rec.mark(cpu, mock_stream, "x"), doctest::Contains(("TraceRecorder::mark: " + mismatch).c_str()),
                       accel::InvalidArgumentError);
  // The matching pair is traced, under the stream's backend.
  accel::cpu::Stream s;
  const Two::StreamRef cpu_stream(std::in_place_index<0>, accel::cpu::StreamRef{s});
  rec.span_begin(cpu, cpu_stream, "on cpu");
  rec.span_end(cpu, cpu_stream);
  const std::string j = rec.json();
  CHECK(j.find("\"process_name\", \"pid\": 2, \"tid\": 0, \"args\": {\"name\": \"cpu:0\"}") != std::string::npos);
  CHECK(j.find("mock") == std::string::npos);
}

TEST_CASE("raw_delete frees through the backend that holds the pointer, the active one first") {
  using Two = accel::BasicAnyBackend<accel::CpuBackend, mock::Backend>;
  const Two cpu{accel::CpuBackend{}};
  const Two fake{mock::Backend{}};
  // The CPU backend is active. Its own memory is freed by its try_raw_delete; the mock backend's, which
  // it does not hold, by the mock (which has no try_raw_delete: on_accelerator, then raw_delete).
  const std::size_t before = accel::CpuBackend{}.memory_allocated();
  void* own = cpu.raw_alloc(2048, cpu.current_stream());
  CHECK(accel::CpuBackend{}.memory_allocated() == before + 2048);
  CHECK(cpu.try_raw_delete(own));
  CHECK(accel::CpuBackend{}.memory_allocated() == before);
  void* foreign = cpu.raw_alloc(64, fake.current_stream());
  CHECK(mock::live_blocks().count(foreign) == 1);
  CHECK_FALSE(accel::CpuBackend{}.try_raw_delete(foreign));
  CHECK(cpu.try_raw_delete(foreign));  // found through the mock backend
  CHECK(mock::live_blocks().count(foreign) == 0);
}

TEST_CASE("raw_delete of a pointer no backend holds is the active backend's typed error, changing nothing") {
  const accel::AnyBackend any{accel::CpuBackend{}};
  const std::size_t before = accel::CpuBackend{}.memory_allocated();
  void* live = any.raw_alloc(4096, any.current_stream());
  CHECK(accel::CpuBackend{}.memory_allocated() == before + 4096);
  int on_stack = 0;
  // Every backend of the list is asked (one lookup each), then the active one reports it.
  CHECK_FALSE(any.try_raw_delete(&on_stack));
  CHECK_THROWS_WITH_AS(any.raw_delete(&on_stack), doctest::Contains("raw_delete("), accel::InvalidArgumentError);
  // "...: the pointer was not allocated by cpu:0's caching allocator (or was already freed)", or "...by
  // the caching allocator of any of the N cpu devices" where there are several.
  CHECK_THROWS_WITH_AS(any.raw_delete(&on_stack), doctest::Contains("the pointer was not allocated by"),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(any.raw_delete(&on_stack), doctest::Contains("(or was already freed)"),
                       accel::InvalidArgumentError);
  CHECK_THROWS_AS(any.raw_delete(static_cast<char*>(live) + 512), accel::InvalidArgumentError);  // inside a block
  CHECK(accel::CpuBackend{}.memory_allocated() == before + 4096);
  any.raw_delete(live);
  CHECK(accel::CpuBackend{}.memory_allocated() == before);
  CHECK_THROWS_AS(any.raw_delete(live), accel::InvalidArgumentError);  // double free
  CHECK(accel::CpuBackend{}.memory_allocated() == before);
}

TEST_CASE("an AnyEvent follows the stream it records on; a failed re-creation keeps the old event") {
  using Two = accel::BasicAnyBackend<accel::CpuBackend, mock::Backend>;
  const Two cpu{accel::CpuBackend{}};
  const Two fake{mock::Backend{}};
  Two::Event event{accel::EventOptions{.enable_timing = true}};
  event.record(cpu.current_stream());
  event.synchronize();
  CHECK(event.index() == 0);
  CHECK(event.query());
  event.record(fake.current_stream());  // re-created on the mock backend, same options
  CHECK(event.index() == 1);
  CHECK(event.backend_name() == "mock");
  CHECK(event.timing_enabled());
  event.record(cpu.current_stream());
  CHECK(event.index() == 0);

  // Creating the event on the other backend throws: the event stays the CPU one, usable.
  mock::fail_event_creation() = true;
  CHECK_THROWS_WITH_AS(event.record(fake.current_stream()), "mock: event creation failed", accel::Error);
  mock::fail_event_creation() = false;
  CHECK(event.index() == 0);
  CHECK(event.backend_name() == "cpu");
  event.synchronize();
  CHECK(event.query());
  Two::Event end{accel::EventOptions{.enable_timing = true}};
  cpu.current_stream().enqueue([] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
  end.record(cpu.current_stream());
  end.synchronize();
  CHECK(event.elapsed_time(end) >= 19.5F);  // the 20 ms between the records reach the caller through the variant

  // Waits and timings across backends stay refused, naming both.
  Two::Event other{false};
  other.record(fake.current_stream());
  CHECK_THROWS_WITH_AS((void)event.elapsed_time(other),
                       "elapsed_time: a mock handle was used with a cpu stream; handles of different backends do not mix",
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(cpu.current_stream().wait(other),
                       "wait: a mock handle was used with a cpu stream; handles of different backends do not mix",
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(cpu.current_stream().wait_stream(fake.current_stream()),
                       "wait_stream: a mock handle was used with a cpu stream; handles of different backends do not mix",
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(cpu.set_stream(fake.current_stream()),  // the backend is the cpu, the stream the mock's
                       "stream argument: a cpu handle was used with a mock stream; handles of different backends do not mix",
                       accel::InvalidArgumentError);
}

namespace {
// A move-only task: writes the value it owns.
struct MoveOnlyTask {
  std::unique_ptr<int> value;
  int* out;
  void operator()() const { *out = *value; }
};
}  // namespace

TEST_CASE("AnyStreamRef::enqueue moves the task to the stream's backend: move-only tasks run") {
  const accel::AnyBackend any{accel::CpuBackend{}};
  accel::AnyBackend::Stream stream = any.create_stream();
  int out = 0;
  stream.ref().enqueue(MoveOnlyTask{std::make_unique<int>(42), &out});  // a copy would not compile
  stream.synchronize();
  CHECK(out == 42);
  int seen = 0;
  auto lambda = [&seen, v = std::make_unique<int>(7)] { seen = *v; };
  stream.enqueue(std::move(lambda));
  stream.synchronize();
  CHECK(seen == 7);
}

namespace {
// Moving it may throw, so a variant of it can be emptied (valueless_by_exception).
struct ThrowingMove {
  explicit ThrowingMove(bool fail) {
    if (fail) throw accel::Error(accel::Errc::runtime_failure, "construction failed");
  }
  ThrowingMove(ThrowingMove&&) noexcept(false) {}
};
}  // namespace

TEST_CASE("dispatch reads an alternative without a second test only where the variant cannot be emptied") {
  static_assert(accel::detail::never_valueless<accel::AnyBackend::variant_type>::value);
  static_assert(accel::detail::never_valueless<accel::AnyBackend::StreamRef::variant_type>::value);
  static_assert(accel::detail::never_valueless<accel::AnyEvent<accel::CpuBackend, mock::Backend>::variant_type>::value);
  static_assert(!accel::detail::never_valueless<std::variant<int, ThrowingMove>>::value);
  std::variant<int, ThrowingMove> v{7};
  CHECK(accel::detail::visit_indexed(v, [](auto i, auto&) { return int(i()); }) == 0);
  CHECK_THROWS_AS(v.emplace<1>(true), accel::Error);
  REQUIRE(v.valueless_by_exception());
  // An emptied handle of a user's backend is a typed error, not undefined behaviour.
  CHECK_THROWS_WITH_AS(accel::detail::visit_indexed(v, [](auto i, auto&) { return int(i()); }),
                       doctest::Contains("is empty"), accel::InvalidStateError);
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

TEST_CASE("set_accelerator belongs to its backend list: a user's list and the built-in one are independent") {
  // Issue 19, item 15. MyAny lists the mock backend first; the built-in list never holds it.
  using MyAny = accel::BasicAnyBackend<mock::Backend, accel::CpuBackend>;
  const accel::AnyBackend builtin = accel::get_accelerator();

  accel::set_accelerator<MyAny>(MyAny{accel::CpuBackend{}});
  CHECK(accel::get_accelerator<MyAny>().name() == "cpu");
  CHECK(accel::get_accelerator() == builtin);  // unchanged
  CHECK(MyAny::Stream{}.index() == 1);         // handles made without a backend follow their list's choice
  CHECK(accel::AnyBackend::Stream{}.index() == builtin.index());

  accel::set_accelerator<MyAny>(MyAny{mock::Backend{}});
  CHECK(accel::get_accelerator<MyAny>().name() == "mock");
  CHECK(MyAny::Stream{}.index() == 0);
  CHECK(MyAny::Event{}.index() == 0);
  CHECK(accel::get_accelerator() == builtin);
  CHECK(accel::get_accelerator().name() == builtin.name());
  CHECK(accel::AnyBackend::Event{}.index() == builtin.index());

  // The reverse: overriding the built-in list leaves the user's alone.
  accel::set_accelerator(accel::AnyBackend{accel::CpuBackend{}});
  CHECK(accel::get_accelerator().name() == "cpu");
  CHECK(accel::get_accelerator<MyAny>().name() == "mock");
  // What the environment and the probes chose is each list's own too.
  CHECK(accel::accelerator_selection<MyAny>().probes.size() == 2);
  CHECK(accel::accelerator_selection<MyAny>().probes.front().name == "mock");
  CHECK(accel::accelerator_selection().probes.size() == std::variant_size_v<accel::AnyBackend::variant_type>);

  accel::set_accelerator(builtin);  // leave the process's selection as it was for the cases after this one
  CHECK(accel::get_accelerator() == builtin);
}
