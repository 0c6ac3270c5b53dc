// BasicAnyBackend over two backends that share their handle types (issue 19, item 16): a user's
// backend that delegates to the CPU backend — streams, events, graphs and all, as
// examples/user_backend.cpp's SimBackend does — listed beside the CPU backend. Every AnyStream,
// AnyEvent, AnyGraph, ... is then a std::variant with the same type twice; alternatives are chosen by
// position. Every member of the AnyBackend and of its handles is called here, through each of the
// two alternatives, and checked.
#include <accel/accel.hpp>
#include <accel/op_builders.hpp>

#include <doctest/doctest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <variant>
#include <chrono>
#include <thread>
#include <vector>

namespace {

// Delegates everything to the CPU backend, its types included; only the name is its own.
struct DelegatingBackend : accel::CpuBackend {
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "delegate"; }
};

using SharedTypes = accel::BasicAnyBackend<DelegatingBackend, accel::CpuBackend>;

static_assert(accel::Accelerator<DelegatingBackend>);
static_assert(accel::Accelerator<SharedTypes>);
static_assert(std::is_same_v<SharedTypes::Stream::variant_type, std::variant<accel::cpu::Stream, accel::cpu::Stream>>);
static_assert(std::is_same_v<SharedTypes::Event::variant_type, std::variant<accel::cpu::Event, accel::cpu::Event>>);
static_assert(std::is_trivially_copyable_v<SharedTypes::StreamRef>);
// A concrete ref names no backend of this list by its type alone: no implicit conversion (which of the
// two would it be?); std::in_place_index says which.
static_assert(!std::is_convertible_v<accel::cpu::StreamRef, SharedTypes::StreamRef>);
static_assert(std::is_constructible_v<SharedTypes::StreamRef, std::in_place_index_t<1>, accel::cpu::StreamRef>);
// Lists whose types differ keep the implicit conversion.
static_assert(std::is_convertible_v<accel::cpu::StreamRef, accel::AnyBackend::StreamRef>);

struct Expect {
  std::size_t index;
  std::string_view name;
};

// Calls every member of `any` (whose alternative is number expect.index) and of its handles.
void exercise(const SharedTypes& any, Expect expect) {
  INFO("alternative " << expect.name);
  // ---- identity and selection state ----
  CHECK(any.index() == expect.index);
  CHECK(any.variant().index() == expect.index);
  CHECK(any.name() == expect.name);
  CHECK(any.holds<DelegatingBackend>() == (expect.index == 0));
  CHECK(any.holds<accel::CpuBackend>() == (expect.index == 1));
  CHECK(any.device_type() == accel::DeviceType::cpu);
  CHECK(any == SharedTypes(accel::BackendIndex{expect.index}));
  CHECK_FALSE(any == SharedTypes(accel::BackendIndex{1 - expect.index}));

  // ---- devices ----
  const int count = accel::CpuBackend::device_count();
  CHECK(any.device_count() == count);
  CHECK(any.is_available());
  CHECK(any.availability().available);
  CHECK(any.device_name() == "cpu");
  CHECK(any.device_name(0) == "cpu:0");
  CHECK(any.device(0) == accel::Device(accel::DeviceType::cpu, 0));
  any.set_device(0);
  CHECK(any.current_device() == 0);
  CHECK(any.current_device_name() == "cpu:0");
  {
    const SharedTypes::DeviceGuard guard(expect.index, count - 1);
    CHECK(any.current_device() == count - 1);
  }
  CHECK(any.current_device() == 0);

  // ---- streams ----
  const SharedTypes::StreamRef current = any.current_stream();
  CHECK(current.index() == expect.index);
  CHECK(current.backend_name() == expect.name);
  CHECK(any.current_stream(0) == current);
  const SharedTypes::StreamRef dflt = any.default_stream();
  CHECK(dflt.index() == expect.index);
  CHECK(any.default_stream(0) == dflt);
  CHECK(dflt == current);  // the default stream is current until set_stream
  const SharedTypes::Stream stream = any.create_stream();
  CHECK(stream.index() == expect.index);
  const SharedTypes::StreamRef ref = stream;
  CHECK(ref.index() == expect.index);
  CHECK(ref.backend_name() == expect.name);
  CHECK(ref.device_index() == 0);
  CHECK(stream.device_index() == 0);
  CHECK(ref.id() == stream.id());
  if (expect.index == 1) {
    CHECK(ref.get<accel::CpuBackend>().id() == stream.id());
    CHECK_THROWS_AS((void)ref.get<DelegatingBackend>(), accel::InvalidArgumentError);
  } else {
    CHECK(ref.get<DelegatingBackend>().id() == stream.id());
    CHECK_THROWS_AS((void)ref.get<accel::CpuBackend>(), accel::InvalidArgumentError);
  }
  any.set_stream(ref);
  CHECK(any.current_stream() == ref);
  any.set_stream(dflt);
  {
    const auto guard = any.stream(ref);
    CHECK(any.current_stream() == ref);
  }
  CHECK(any.current_stream() == dflt);
  // A stream of the other alternative is another backend's, though of the same C++ type.
  const SharedTypes other(accel::BackendIndex{1 - expect.index});
  CHECK_THROWS_AS(other.set_stream(ref), accel::InvalidArgumentError);
  CHECK_THROWS_AS(ref.wait_stream(other.create_stream()), accel::InvalidArgumentError);

  int ran = 0;
  stream.enqueue([&] { ++ran; });
  ref.enqueue([&] { ++ran; });
  stream.synchronize();
  CHECK(ran == 2);
  CHECK(stream.query());
  CHECK(ref.query());
  CHECK_FALSE(stream.is_capturing());
  CHECK_FALSE(ref.is_capturing());
  const SharedTypes::Stream second(expect.index, 0, 0);
  second.wait_stream(stream);
  ref.wait_stream(second);
  ref.synchronize();
  any.synchronize();
  any.synchronize(0);

  // ---- events ----
  SharedTypes::Event start(true);
  SharedTypes::Event end(accel::EventOptions{.enable_timing = true});
  SharedTypes::Event plain;
  CHECK(start.timing_enabled());
  CHECK_FALSE(plain.timing_enabled());
  CHECK_FALSE(start.external());
  start.record(ref);
  CHECK(start.index() == expect.index);
  CHECK(start.backend_name() == expect.name);
  stream.enqueue([&] { ++ran; });
  stream.enqueue([] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });  // between the two events
  end.record(ref);
  plain.record(ref);
  second.wait(plain);
  ref.wait(end);
  end.synchronize();
  CHECK(end.query());
  CHECK(start.elapsed_time(end) >= 19.5F);  // the 20 ms task ran between them (a forwarding stub would say 0)
  CHECK(ran == 3);
  {
    const auto guard = any.stream(ref);
    SharedTypes::Event on_current;  // on the list's selected backend, like every handle made without one
    CHECK(on_current.index() == SharedTypes{}.index());
    stream.enqueue([&] { ++ran; });
    on_current.record();  // on that backend's current stream: `ref`'s stream (both backends share it)
    on_current.synchronize();
    CHECK(ran == 4);
  }
  SharedTypes::Event foreign;
  foreign.record(other.create_stream());
  CHECK(foreign.index() == 1 - expect.index);
  CHECK_THROWS_AS(ref.wait(foreign), accel::InvalidArgumentError);
  CHECK_THROWS_AS((void)start.elapsed_time(foreign), accel::InvalidArgumentError);

  // ---- memory ----
  any.empty_cache();
  const std::size_t allocated = any.memory_allocated();
  void* p = any.raw_alloc(4096, ref);
  CHECK(p != nullptr);
  CHECK(any.on_accelerator(p));
  CHECK(any.memory_allocated() == allocated + 4096);
  CHECK(any.memory_allocated(0) == allocated + 4096);
  CHECK(any.max_memory_allocated() >= allocated + 4096);
  CHECK(any.max_memory_allocated(0) >= allocated + 4096);
  CHECK(any.memory_reserved() >= any.memory_allocated());
  CHECK(any.memory_reserved(0) >= any.memory_allocated(0));
  CHECK(any.max_memory_reserved() >= any.memory_reserved());
  CHECK(any.max_memory_reserved(0) >= any.memory_reserved(0));
  CHECK(any.memory_cached() == any.memory_reserved());
  CHECK(any.memory_cached(0) == any.memory_reserved(0));
  CHECK(any.max_memory_cached() == any.max_memory_reserved());
  CHECK(any.max_memory_cached(0) == any.max_memory_reserved(0));
  CHECK(any.total_memory() == accel::CpuBackend{}.total_memory());  // both alternatives are the CPU's
  CHECK(any.total_memory(0) == any.total_memory());
  CHECK(any.available_memory() <= any.total_memory());
  CHECK(any.available_memory(0) <= any.total_memory(0));
  CHECK(any.memory_stats().flat().at("allocated_bytes.all.current") == static_cast<std::int64_t>(allocated + 4096));
  CHECK(any.memory_stats(0).flat().at("allocated_bytes.all.current") == static_cast<std::int64_t>(allocated + 4096));
  const accel::MemoryInfo info = any.get_memory_info();
  CHECK(info.total == any.total_memory());
  CHECK(any.get_memory_info(0).total == info.total);
  std::array<unsigned char, 4096> host{};
  host.fill(0x5a);
  any.copy_async(ref, p, host.data(), host.size());
  any.record_stream(p, second);
  ref.synchronize();
  CHECK(static_cast<unsigned char*>(p)[4095] == 0x5a);
  any.raw_delete(p);
  second.synchronize();
  CHECK(any.memory_allocated() == allocated);
  any.reset_max_memory_allocated();
  any.reset_max_memory_allocated(0);
  CHECK(any.max_memory_allocated() == allocated);
  any.reset_max_memory_cached();
  any.reset_max_memory_cached(0);
  any.reset_peak_memory_stats();
  any.reset_peak_memory_stats(0);
  CHECK(any.max_memory_reserved() == any.memory_reserved());
  any.reset_accumulated_memory_stats();
  any.reset_accumulated_memory_stats(0);
  CHECK(any.memory_stats().flat().at("allocation.all.allocated") == 0);
  any.set_per_process_memory_fraction(1.0);
  any.set_per_process_memory_fraction(1.0, 0);
  std::vector<unsigned char> pageable(8192, 1);
  any.pin_memory(pageable.data(), pageable.size());
  CHECK(any.is_pinned(pageable.data()));
  CHECK(any.unpin_memory(pageable.data()));
  CHECK_FALSE(any.is_pinned(pageable.data()));
  CHECK_FALSE(any.on_accelerator(pageable.data()));
  {
    accel::FloatBuffer<SharedTypes> buffer(16, ref);  // Buffer<T, AnyBackend> follows the stream
    CHECK(buffer.size() == 16);
    CHECK(any.memory_allocated() > allocated);
  }
  ref.synchronize();
  CHECK(any.memory_allocated() == allocated);

  // ---- dtypes, profiling, environment ----
  CHECK(any.is_fp16_supported() == accel::CpuBackend::is_fp16_supported());
  CHECK(any.is_bf16_supported() == accel::CpuBackend::is_bf16_supported());
  CHECK(any.supported_dtypes() == accel::CpuBackend::supported_dtypes());
  CHECK(any.range_push("step") == 1);
  CHECK(any.range_push("comm", "domain") == 1);
  CHECK(any.range_pop("domain") == 0);
  CHECK(any.range_pop() == 0);
  CHECK(any.communication_backend_name() == "mpi");
  CHECK(any.export_envs() == accel::CpuBackend::export_envs());
  CHECK(any.visible_devices_envs() == std::vector<std::string>{"ACCEL_CPU_VISIBLE_DEVICES"});
  accel::EnvMap env;
  const std::array<int, 2> ids{0, 1};
  any.set_visible_devices_envs(env, ids);
  CHECK(env.at("ACCEL_CPU_VISIBLE_DEVICES") == "0,1");
  int lazy = 0;
  any.lazy_call([&] { ++lazy; });
  CHECK(lazy == 1);

  // ---- random numbers ----
  any.manual_seed(1234);
  CHECK(any.initial_seed() == 1234);
  any.manual_seed_all(99);
  CHECK(any.initial_seed() == 99);
  const accel::Generator::State state = any.get_rng_state();
  CHECK(any.get_rng_state(0) == state);
  std::array<float, 64> first{};
  std::array<float, 64> again{};
  std::array<std::uint32_t, 8> bits{};
  std::array<float, 64> normal{};
  any.fill_uniform(ref, first.data(), first.size());
  any.set_rng_state(state);
  any.fill_uniform(ref, again.data(), again.size());
  any.set_rng_state(state, 0);
  any.fill_bits(ref, bits.data(), bits.size());
  any.fill_normal(ref, normal.data(), normal.size(), 0.0F, 1.0F);
  ref.synchronize();
  CHECK(std::memcmp(first.data(), again.data(), sizeof first) == 0);  // the state replays the draw
  for (const float x : first) CHECK((x > 0.0F && x <= 1.0F));
  CHECK(any.default_generator().initial_seed() == 99);
  CHECK(&any.default_generator(0) == &any.default_generator());
  const std::uint64_t fresh = any.seed();
  CHECK(any.initial_seed() == fresh);

  // ---- op builders (no compile: names, commands, the table) ----
  const std::vector<std::string> ops = any.op_names();
  REQUIRE_FALSE(ops.empty());
  CHECK(ops == accel::CpuBackend{}.op_names());
  CHECK(any.create_op_builder(ops.front()).name() == ops.front());
  CHECK(any.build_extension(ops.front()).argv == accel::CpuBackend{}.build_extension(ops.front()).argv);
  CHECK_FALSE(any.build_extension(ops.front()).argv.empty());
  CHECK(any.get_op_builder<accel::ops::TensorOps>().name() == "tensor_ops");
  CHECK(any.op_table().size() == ops.size());
  CHECK(any.op_builder_dir() == accel::CpuBackend{}.op_builder_dir());
  CHECK_FALSE(any.op_builder_dir().empty());

  // ---- graphs ----
  SharedTypes::Graph graph = any.create_graph();
  CHECK(graph.index() == expect.index);
  CHECK(graph.backend_name() == expect.name);
  CHECK_FALSE(graph.captured());
  int replays = 0;
  {
    auto capture = any.capture_to_graph(graph, ref, any.graph_pool_handle(), accel::CaptureMode::relaxed);
    CHECK(ref.is_capturing());
    ref.enqueue([&] { ++replays; });
    any.synchronize();  // relaxed: a device synchronize during the capture is allowed (global would refuse it)
    capture.end();
  }
  CHECK(graph.captured());
  CHECK(replays == 0);  // recorded, not run
  any.replay_graph(graph, ref);
  any.replay_graph(graph, ref);
  ref.synchronize();
  CHECK(replays == 2);
  {
    const auto guard = any.stream(ref);
    SharedTypes::Graph on_current = any.create_graph();
    {
      auto capture = any.capture_to_graph(on_current);  // the current stream: `ref`
      CHECK(any.is_current_stream_capturing());
      ref.enqueue([&] { replays += 10; });
      capture.end();
    }
    CHECK_FALSE(any.is_current_stream_capturing());
    any.replay_graph(on_current);
    ref.synchronize();
    CHECK(replays == 12);
  }
  CHECK_THROWS_AS(graph.replay(other.create_stream()), accel::InvalidArgumentError);
  {  // An empty graph follows the stream it is captured on, here the other backend's; a captured one stays.
    SharedTypes::Graph follows = any.create_graph();
    const auto elsewhere = other.create_stream();
    {
      auto capture = any.capture_to_graph(follows, elsewhere);
      elsewhere.enqueue([&] { replays += 100; });
      capture.end();
    }
    CHECK(follows.index() == other.index());
    CHECK(follows.captured());
    follows.replay(elsewhere);
    elsewhere.synchronize();
    CHECK(replays == 112);
    CHECK_THROWS_WITH_AS((void)any.capture_to_graph(follows, ref), doctest::Contains("capture_to_graph"),
                         accel::InvalidArgumentError);
    CHECK(follows.index() == other.index());  // the refused capture left it as it was
  }
  {  // A graph being captured stays on its backend: a capture on the other backend's stream is refused,
     // and the capture in progress goes on (replacing the graph would have abandoned it).
    SharedTypes::Graph busy = any.create_graph();
    const auto elsewhere = other.create_stream();
    auto capture = any.capture_to_graph(busy, ref);
    ref.enqueue([&] { replays += 1000; });
    CHECK_THROWS_WITH_AS((void)any.capture_to_graph(busy, elsewhere), doctest::Contains("already in progress"),
                         accel::InvalidStateError);
    CHECK(busy.index() == expect.index);
    CHECK(busy.capturing());
    CHECK(ref.is_capturing());
    capture.end();
    CHECK_FALSE(busy.capturing());
    busy.replay(ref);
    ref.synchronize();
    CHECK(replays == 1112);
  }
  graph.reset();
  CHECK_FALSE(graph.captured());
  (void)graph.pool();
}

}  // namespace

TEST_CASE("a user's backend sharing the CPU backend's types joins an AnyBackend: every member works") {
  exercise(SharedTypes{DelegatingBackend{}}, {0, "delegate"});
  exercise(SharedTypes{accel::CpuBackend{}}, {1, "cpu"});
  // accel::visit enters the concrete backend, which tells them apart though their types are shared.
  const auto which = [](auto b) { return std::string(decltype(b)::name()); };
  CHECK(accel::visit(SharedTypes{DelegatingBackend{}}, which) == "delegate");
  CHECK(accel::visit(SharedTypes{accel::CpuBackend{}}, which) == "cpu");
  // Streams handed over by position.
  accel::cpu::Stream owned;
  const std::uint64_t id = owned.id();
  const SharedTypes::Stream adopted(std::in_place_index<0>, std::move(owned));
  CHECK(adopted.index() == 0);
  CHECK(adopted.id() == id);
  const SharedTypes::StreamRef viewed(std::in_place_index<1>, accel::cpu::Streams::default_stream());
  CHECK(viewed.backend_name() == "cpu");
}
