// A complete backend written outside the library, the way a user would write a third backend.
// Each area is its own struct so tests can drop one and check the concept rejects the result.
#pragma once

#include <accel/concepts/accelerator.hpp>
#include <accel/core/error.hpp>
#include <accel/cpu/ops.hpp>
#include <accel/random/fill.hpp>
#include <accel/random/generator.hpp>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <vector>

namespace mock {

inline std::map<void*, std::size_t>& live_blocks() {
  static std::map<void*, std::size_t> blocks;
  return blocks;
}

struct Flags {
  static constexpr accel::DeviceType device_type() { return accel::DeviceType::cpu; }
  static constexpr std::string_view name() { return "mock"; }
  static constexpr bool is_synchronized_device = true;
  static constexpr bool use_host_timers = true;
  static constexpr bool resolves_data_dependency = true;
  static constexpr bool handles_memory_backpressure = true;
};

struct Devices {
  static int device_count() { return 1; }
  static bool is_available() { return true; }
  static accel::Availability availability() { return {true, {}}; }
  static std::string device_name() { return "mock"; }
  static std::string device_name(int i) { return "mock:" + std::to_string(i); }
  static accel::Device device(int i) { return accel::Device(accel::DeviceType::cpu, i); }
  static void set_device(int) {}
  static int current_device() { return 0; }
  static std::string current_device_name() { return "mock:0"; }
  static void synchronize() {}
  static void synchronize(int) {}
  struct DeviceGuard {
    explicit DeviceGuard(int) {}
    DeviceGuard(const DeviceGuard&) = delete;
  };
  // torch.accelerator's names (accel::DeviceNames has them for a backend that derives from it).
  static std::optional<accel::Device> current_accelerator(bool = false) { return accel::Device(accel::DeviceType::cpu); }
  static int current_device_index() { return 0; }
  static void set_device_index(int) {}
};

// The same devices as written before DeviceApi took torch.accelerator's names.
struct OldDevices {
  static int device_count() { return 1; }
  static bool is_available() { return true; }
  static accel::Availability availability() { return {true, {}}; }
  static std::string device_name() { return "mock"; }
  static std::string device_name(int i) { return "mock:" + std::to_string(i); }
  static accel::Device device(int i) { return accel::Device(accel::DeviceType::cpu, i); }
  static void set_device(int) {}
  static int current_device() { return 0; }
  static std::string current_device_name() { return "mock:0"; }
  static void synchronize() {}
  static void synchronize(int) {}
  using DeviceGuard = Devices::DeviceGuard;
};

// While a graph captures, enqueued work is recorded here instead of run.
inline std::vector<std::function<void()>>*& capturing_into() {
  static std::vector<std::function<void()>>* tasks = nullptr;
  return tasks;
}

class Event;
class StreamRef {
 public:
  void synchronize() const {}
  bool query() const { return true; }
  void wait(const Event&) const {}
  void wait_stream(StreamRef) const {}
  template <class F>
  void enqueue(F&& f) const {  // synchronous device: run now, unless a graph captures
    if (auto* tasks = capturing_into()) {
      tasks->emplace_back(std::forward<F>(f));
    } else {
      f();
    }
  }
  bool is_capturing() const { return capturing_into() != nullptr; }
  int device_index() const { return 0; }
  std::uint64_t id() const { return id_; }
  friend bool operator==(StreamRef, StreamRef) = default;

 protected:
  std::uint64_t id_ = 0;
};
class Stream : public StreamRef {
 public:
  Stream() = default;
  Stream(int, int) {}
  Stream(Stream&&) = default;
  Stream& operator=(Stream&&) = default;
};
// Set by a test: the next events created from EventOptions fail, as cudaEventCreate can.
inline bool& fail_event_creation() {
  static bool fail = false;
  return fail;
}
class Event {
 public:
  Event() = default;
  explicit Event(bool timing) : timing_(timing) {}
  explicit Event(accel::EventOptions options) : timing_(options.enable_timing) {
    if (fail_event_creation()) throw accel::Error(accel::Errc::runtime_failure, "mock: event creation failed");
  }
  Event(Event&&) = default;
  Event& operator=(Event&&) = default;
  void record() { recorded_ = true; }
  void record(StreamRef) { recorded_ = true; }
  bool query() const { return true; }
  void synchronize() const {}
  float elapsed_time(const Event&) const { return 0.0F; }
  void wait(StreamRef) const {}
  void wait() const {}

 private:
  bool timing_ = false;
  bool recorded_ = false;
};
struct StreamGuard {
  explicit StreamGuard(StreamRef) {}
  StreamGuard(const StreamGuard&) = delete;
};

struct Streams {
  using Stream = mock::Stream;
  using StreamRef = mock::StreamRef;
  using Event = mock::Event;
  using StreamGuard = mock::StreamGuard;
  static StreamRef current_stream() { return {}; }
  static StreamRef current_stream(int) { return {}; }
  static StreamRef default_stream() { return {}; }
  static StreamRef default_stream(int) { return {}; }
  static void set_stream(StreamRef) {}
  static StreamGuard stream(StreamRef s) { return StreamGuard{s}; }
};

struct MemoryNoStats {
  static void* raw_alloc(std::size_t n, StreamRef) {
    void* p = std::malloc(n);
    live_blocks()[p] = n;
    return p;
  }
  static void raw_delete(void* p) {
    live_blocks().erase(p);
    std::free(p);
  }
  static void record_stream(void*, StreamRef) {}
  static void copy_async(StreamRef, void* dst, const void* src, std::size_t n) { std::memcpy(dst, src, n); }
  static void empty_cache() {}
  static std::size_t memory_allocated(int = 0) {
    std::size_t total = 0;
    for (const auto& [p, n] : live_blocks()) total += n;
    return total;
  }
  static std::size_t max_memory_allocated(int = 0) { return 0; }
  static void reset_max_memory_allocated(int = 0) {}
  static std::size_t memory_reserved(int = 0) { return memory_allocated(); }
  static std::size_t max_memory_reserved(int = 0) { return 0; }
  static std::size_t memory_cached(int = 0) { return memory_allocated(); }
  static std::size_t max_memory_cached(int = 0) { return 0; }
  static void reset_max_memory_cached(int = 0) {}
  static void reset_peak_memory_stats(int = 0) {}
  static void reset_accumulated_memory_stats(int = 0) {}
  static void set_per_process_memory_fraction(double, int = 0) {}
  static std::size_t total_memory(int = 0) { return 1 << 30; }
  static std::size_t available_memory(int = 0) { return 1 << 30; }
  static accel::MemoryInfo get_memory_info(int = 0) { return {1 << 30, 1 << 30}; }
  static void pin_memory(void*, std::size_t) {}
  static bool unpin_memory(void*) { return false; }
  static bool is_pinned(const void*) { return false; }
  static bool on_accelerator(const void*) { return true; }
};
struct Memory : MemoryNoStats {
  static accel::MemoryStats memory_stats(int = 0) { return {}; }
};

struct Dtypes {
  static bool is_fp16_supported() { return false; }
  static bool is_bf16_supported() { return false; }
  static std::vector<accel::Dtype> supported_dtypes() { return {accel::Dtype::float32}; }
  static bool is_triton_supported() { return false; }
};

struct Profiling {
  static int range_push(std::string_view) { return 1; }
  static int range_push(std::string_view, std::string_view) { return 1; }
  static int range_pop() { return 0; }
  static int range_pop(std::string_view) { return 0; }
};

struct Environment {
  static std::string_view communication_backend_name() { return "none"; }
  static std::string communication_backend_version() { return "unavailable: the mock has no engine"; }
  static std::vector<std::string> export_envs() { return {}; }
  static std::vector<std::string> visible_devices_envs() { return {}; }
  static void set_visible_devices_envs(accel::EnvMap&, std::span<const int>) {}
  static void lazy_call(std::function<void()> f) {
    if (f) f();
  }
};

// A synchronous device: fills run at once, with accel's Philox fills and generators.
struct Random {
  static accel::Generator& default_generator(int = 0) {
    static accel::Generator generator;
    return generator;
  }
  static void manual_seed(std::uint64_t s) { default_generator().manual_seed(s); }
  static void manual_seed_all(std::uint64_t s) { default_generator().manual_seed(s); }
  static std::uint64_t seed() { return default_generator().seed(); }
  static std::uint64_t initial_seed() { return default_generator().initial_seed(); }
  static accel::Generator::State get_rng_state(int = 0) { return default_generator().get_state(); }
  static void set_rng_state(std::span<const std::byte> state, int = 0) { default_generator().set_state(state); }
  static void fill_bits(StreamRef, std::uint32_t* p, std::size_t n, accel::Generator& g = default_generator()) {
    const auto [seed, offset] = g.reserve_position(n);
    accel::rng::fill_bits({p, n}, seed, offset);
  }
  template <class T>
  static void fill_uniform(StreamRef, T* p, std::size_t n, accel::Generator& g = default_generator()) {
    const auto [seed, offset] = std::is_same_v<T, double> ? g.reserve_wide_position(n) : g.reserve_position(n);
    accel::rng::fill_uniform(std::span<T>(p, n), seed, offset);
  }
  template <class T>
  static void fill_normal(StreamRef, T* p, std::size_t n, T mean, T stddev, accel::Generator& g = default_generator()) {
    const auto [seed, offset] = std::is_same_v<T, double> ? g.reserve_wide_position(n) : g.reserve_position(n);
    accel::rng::fill_normal(std::span<T>(p, n), seed, offset, mean, stddev);
  }
};

// Graphs: the recorded host functions, run again in order.
class Graph {
 public:
  Graph() = default;
  Graph(Graph&&) = default;
  Graph& operator=(Graph&&) = default;
  bool captured() const { return captured_; }
  bool capturing() const { return capturing_; }
  accel::GraphPoolId pool() const { return pool_; }
  void reset() {
    tasks_.clear();
    captured_ = false;
  }
  void replay() const {
    for (const auto& task : tasks_) task();
  }
  std::size_t size() const { return tasks_.size(); }

 private:
  friend class GraphCapture;
  std::vector<std::function<void()>> tasks_;
  accel::GraphPoolId pool_{};
  bool captured_ = false;
  bool capturing_ = false;
};
class GraphCapture {
 public:
  GraphCapture(Graph& g, accel::GraphPoolId pool) : graph_(&g) {
    g.pool_ = pool ? pool : accel::GraphPoolId::make();
    g.capturing_ = true;
    capturing_into() = &g.tasks_;
  }
  GraphCapture(GraphCapture&& other) noexcept : graph_(std::exchange(other.graph_, nullptr)) {}
  GraphCapture(const GraphCapture&) = delete;
  ~GraphCapture() { end(); }
  void end() {
    if (graph_ == nullptr) return;
    capturing_into() = nullptr;
    graph_->capturing_ = false;
    std::exchange(graph_, nullptr)->captured_ = true;
  }

 private:
  Graph* graph_;
};
struct Graphs {
  using Graph = mock::Graph;
  using GraphCapture = mock::GraphCapture;
  static Graph create_graph() { return {}; }
  static GraphCapture capture_to_graph(Graph& g, StreamRef = {}, accel::GraphPoolId pool = {},
                                       accel::CaptureMode = accel::CaptureMode::global) {
    return GraphCapture(g, pool);
  }
  static void replay_graph(Graph& g, StreamRef = {}) { g.replay(); }
  static accel::GraphPoolId graph_pool_handle() { return accel::GraphPoolId::make(); }
  static bool is_current_stream_capturing() { return capturing_into() != nullptr; }
};

// A user's backend with no ops of its own borrows the CPU backend's op builders, and launches their
// host kernels on its own streams (which run work inline): accel/ops/launch.hpp's host signature.
struct Ops : accel::cpu::Ops {
  static void launch_kernel(StreamRef, const accel::ops::Kernel& k, const accel::ops::LaunchShape& shape,
                            const void* args, std::size_t) {
    if (k.kind() != accel::ops::OpKind::host) throw accel::ops::detail::launch_kind_error("mock", k, accel::ops::OpKind::host);
    if (const int rc = reinterpret_cast<accel::ops::Kernel::HostFn*>(k.address())(args, shape.threads); rc != 0) {
      throw accel::InvalidArgumentError("mock: " + k.describe() + " refused its arguments");
    }
  }
};

struct Backend : Flags, Devices, Streams, Memory, Dtypes, Profiling, Environment, Ops, Random, Graphs {
  using DeviceGuard = Devices::DeviceGuard;
};

// The same backend with one area missing each.
struct NoStats : Flags, Devices, Streams, MemoryNoStats, Dtypes, Profiling, Environment, Ops, Random, Graphs {
  using DeviceGuard = Devices::DeviceGuard;
};
struct NoProfiling : Flags, Devices, Streams, Memory, Dtypes, Environment, Ops, Random, Graphs {
  using DeviceGuard = Devices::DeviceGuard;
};
struct NoFlags : Devices, Streams, Memory, Dtypes, Profiling, Environment, Ops, Random, Graphs {
  using DeviceGuard = Devices::DeviceGuard;
};
struct NoOps : Flags, Devices, Streams, Memory, Dtypes, Profiling, Environment, Random, Graphs {
  using DeviceGuard = Devices::DeviceGuard;
};
struct NoGraphs : Flags, Devices, Streams, Memory, Dtypes, Profiling, Environment, Ops, Random {
  using DeviceGuard = Devices::DeviceGuard;
};
struct NoDeviceGuard : Flags, Devices, Streams, Memory, Dtypes, Profiling, Environment, Ops, Random, Graphs {
  using DeviceGuard = void;
};
// A backend written against the concept before it took torch.accelerator's names.
struct OldBackend : Flags, OldDevices, Streams, Memory, Dtypes, Profiling, Environment, Ops, Random, Graphs {
  using DeviceGuard = OldDevices::DeviceGuard;
};

}  // namespace mock
