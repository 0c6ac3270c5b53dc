// accel/dispatch/any_backend.hpp — accel::AnyBackend: the backend chosen at run time.
//
// BasicAnyBackend<Bs...> is a std::variant of backend policies with the same member API as a backend,
// forwarding each call to the active one, so `Engine<AnyBackend>` compiles and runs (dispatching per
// call). For the hot path, enter static code once with accel::visit (dispatch/visit.hpp).
// `AnyBackend{}` is the process's selected backend (get_accelerator()); `AnyBackend{CpuBackend{}}`
// a given one. A user's own backend joins with `BasicAnyBackend<MyBackend, CpuBackend>` or
// `enabled_backends_t<BasicAnyBackend, MyBackend>` — also one that reuses another backend's stream,
// event or graph types (dispatch/any_stream.hpp chooses alternatives by position).
#pragma once

#include <accel/concepts/accelerator.hpp>
#include <accel/dispatch/any_graph.hpp>
#include <accel/dispatch/any_stream.hpp>
#include <accel/dispatch/backend_list.hpp>
#include <accel/ops/detail/kernel_dir.hpp>
#include <accel/random/generator.hpp>

#include <concepts>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace accel {

template <class... Bs>
class BasicAnyBackend {
  static_assert(sizeof...(Bs) > 0, "BasicAnyBackend needs at least one backend");

 public:
  using variant_type = std::variant<Bs...>;
  using Stream = AnyStream<Bs...>;
  using StreamRef = AnyStreamRef<Bs...>;
  using Event = AnyEvent<Bs...>;
  using StreamGuard = AnyStreamGuard<Bs...>;
  using DeviceGuard = AnyDeviceGuard<Bs...>;
  using Graph = AnyGraph<Bs...>;
  using GraphCapture = AnyGraphCapture<Bs...>;

  // A flag holds for AnyBackend only if it holds for every alternative, so code that branches on it
  // at compile time stays correct whichever backend is chosen at run time.
  static constexpr bool is_synchronized_device = (Bs::is_synchronized_device && ...);
  static constexpr bool use_host_timers = (Bs::use_host_timers && ...);
  static constexpr bool resolves_data_dependency = (Bs::resolves_data_dependency && ...);
  static constexpr bool handles_memory_backpressure = (Bs::handles_memory_backpressure && ...);

  /// The selected backend (ACCEL_BACKEND, else the first available in priority order).
  BasicAnyBackend() : BasicAnyBackend(detail::selected_backend_index<Bs...>(), 0) {}
  template <class B>
    requires(std::same_as<B, Bs> || ...)
  BasicAnyBackend(B backend) noexcept : backend_(backend) {}  // NOLINT(google-explicit-constructor)
  /// Backend number `index` in Bs...
  BasicAnyBackend(std::size_t index, int /*tag*/) {
    detail::with_index<sizeof...(Bs)>(index, [&](auto i) { backend_.template emplace<i()>(); });
  }

  [[nodiscard]] std::size_t index() const noexcept { return backend_.index(); }
  template <class B>
  [[nodiscard]] bool holds() const noexcept {
    return std::holds_alternative<B>(backend_);
  }
  [[nodiscard]] const variant_type& variant() const noexcept { return backend_; }

  // ---- identity ----
  [[nodiscard]] DeviceType device_type() const { return call([](auto b) { return b.device_type(); }); }
  [[nodiscard]] std::string_view name() const { return call([](auto b) { return std::string_view(b.name()); }); }

  // ---- devices ----
  [[nodiscard]] int device_count() const { return call([](auto b) { return b.device_count(); }); }
  [[nodiscard]] bool is_available() const { return call([](auto b) { return b.is_available(); }); }
  [[nodiscard]] Availability availability() const { return call([](auto b) { return b.availability(); }); }
  [[nodiscard]] std::string device_name() const { return call([](auto b) { return b.device_name(); }); }
  [[nodiscard]] std::string device_name(int i) const { return call([&](auto b) { return b.device_name(i); }); }
  [[nodiscard]] Device device(int i) const { return call([&](auto b) { return b.device(i); }); }
  void set_device(int i) const { call([&](auto b) { b.set_device(i); }); }
  [[nodiscard]] int current_device() const { return call([](auto b) { return b.current_device(); }); }
  [[nodiscard]] std::string current_device_name() const {
    return call([](auto b) { return b.current_device_name(); });
  }
  void synchronize() const { call([](auto b) { b.synchronize(); }); }
  void synchronize(int i) const { call([&](auto b) { b.synchronize(i); }); }

  // ---- streams ----
  // Streams are wrapped by this backend's position, not their type: two backends may share one.
  [[nodiscard]] StreamRef current_stream() const {
    return call_indexed([](auto i, auto b) { return StreamRef(std::in_place_index<i()>, b.current_stream()); });
  }
  [[nodiscard]] StreamRef current_stream(int dev) const {
    return call_indexed([&](auto i, auto b) { return StreamRef(std::in_place_index<i()>, b.current_stream(dev)); });
  }
  [[nodiscard]] StreamRef default_stream() const {
    return call_indexed([](auto i, auto b) { return StreamRef(std::in_place_index<i()>, b.default_stream()); });
  }
  [[nodiscard]] StreamRef default_stream(int dev) const {
    return call_indexed([&](auto i, auto b) { return StreamRef(std::in_place_index<i()>, b.default_stream(dev)); });
  }
  void set_stream(StreamRef s) const { on_stream(s, [](auto b, auto ref) { b.set_stream(ref); }); }
  [[nodiscard]] StreamGuard stream(StreamRef s) const { return StreamGuard(s); }
  /// A new stream on this backend (current device).
  [[nodiscard]] Stream create_stream() const { return Stream(index()); }

  // ---- memory ----
  // Memory follows the stream's backend (so Buffer<T, AnyBackend> works whichever backend its stream
  // belongs to); raw_delete finds the backend that owns the pointer, this one first.
  [[nodiscard]] void* raw_alloc(std::size_t bytes, StreamRef s) const {
    return detail::visit_indexed(s.variant(), [&](auto i, auto ref) {
      return detail::backend_at<i(), Bs...>{}.raw_alloc(bytes, ref);
    });
  }
  void raw_delete(void* p) const {
    if (p == nullptr || call([&](auto b) { return b.on_accelerator(p); })) {
      call([&](auto b) { b.raw_delete(p); });
      return;
    }
    const bool freed = ([&] {
      if (!Bs{}.on_accelerator(p)) return false;
      Bs{}.raw_delete(p);
      return true;
    }() || ...);
    if (!freed) call([&](auto b) { b.raw_delete(p); });  // reports the foreign pointer
  }
  void copy_async(StreamRef s, void* dst, const void* src, std::size_t bytes) const {
    detail::visit_indexed(s.variant(), [&](auto i, auto ref) {
      detail::backend_at<i(), Bs...>{}.copy_async(ref, dst, src, bytes);
    });
  }
  void record_stream(void* p, StreamRef s) const {
    detail::visit_indexed(s.variant(), [&](auto i, auto ref) { detail::backend_at<i(), Bs...>{}.record_stream(p, ref); });
  }
  void empty_cache() const { call([](auto b) { b.empty_cache(); }); }
#define ACCEL_ANY_SIZE_QUERY(fn)                                                                    \
  [[nodiscard]] std::size_t fn() const { return call([](auto b) { return b.fn(); }); }            \
  [[nodiscard]] std::size_t fn(int dev) const { return call([&](auto b) { return b.fn(dev); }); }
#define ACCEL_ANY_RESET(fn)                           \
  void fn() const { call([](auto b) { b.fn(); }); } \
  void fn(int dev) const { call([&](auto b) { b.fn(dev); }); }
  ACCEL_ANY_SIZE_QUERY(memory_allocated)
  ACCEL_ANY_SIZE_QUERY(max_memory_allocated)
  ACCEL_ANY_SIZE_QUERY(memory_reserved)
  ACCEL_ANY_SIZE_QUERY(max_memory_reserved)
  ACCEL_ANY_SIZE_QUERY(memory_cached)
  ACCEL_ANY_SIZE_QUERY(max_memory_cached)
  ACCEL_ANY_SIZE_QUERY(total_memory)
  ACCEL_ANY_SIZE_QUERY(available_memory)
  ACCEL_ANY_RESET(reset_max_memory_allocated)
  ACCEL_ANY_RESET(reset_max_memory_cached)
  ACCEL_ANY_RESET(reset_peak_memory_stats)
  ACCEL_ANY_RESET(reset_accumulated_memory_stats)
#undef ACCEL_ANY_SIZE_QUERY
#undef ACCEL_ANY_RESET
  [[nodiscard]] MemoryStats memory_stats() const { return call([](auto b) { return b.memory_stats(); }); }
  [[nodiscard]] MemoryStats memory_stats(int dev) const { return call([&](auto b) { return b.memory_stats(dev); }); }
  [[nodiscard]] MemoryInfo get_memory_info() const { return call([](auto b) { return b.get_memory_info(); }); }
  [[nodiscard]] MemoryInfo get_memory_info(int dev) const {
    return call([&](auto b) { return b.get_memory_info(dev); });
  }
  void set_per_process_memory_fraction(double f) const { call([&](auto b) { b.set_per_process_memory_fraction(f); }); }
  void set_per_process_memory_fraction(double f, int dev) const {
    call([&](auto b) { b.set_per_process_memory_fraction(f, dev); });
  }
  void pin_memory(void* p, std::size_t bytes) const { call([&](auto b) { b.pin_memory(p, bytes); }); }
  [[nodiscard]] bool unpin_memory(void* p) const { return call([&](auto b) { return b.unpin_memory(p); }); }
  [[nodiscard]] bool is_pinned(const void* p) const { return call([&](auto b) { return b.is_pinned(p); }); }
  [[nodiscard]] bool on_accelerator(const void* p) const { return call([&](auto b) { return b.on_accelerator(p); }); }

  // ---- dtypes ----
  [[nodiscard]] bool is_fp16_supported() const { return call([](auto b) { return b.is_fp16_supported(); }); }
  [[nodiscard]] bool is_bf16_supported() const { return call([](auto b) { return b.is_bf16_supported(); }); }
  [[nodiscard]] std::vector<Dtype> supported_dtypes() const { return call([](auto b) { return b.supported_dtypes(); }); }

  // ---- profiling ----
  int range_push(std::string_view msg) const { return call([&](auto b) { return b.range_push(msg); }); }
  int range_push(std::string_view msg, std::string_view domain) const {
    return call([&](auto b) { return b.range_push(msg, domain); });
  }
  int range_pop() const { return call([](auto b) { return b.range_pop(); }); }
  int range_pop(std::string_view domain) const { return call([&](auto b) { return b.range_pop(domain); }); }

  // ---- environment ----
  [[nodiscard]] std::string_view communication_backend_name() const {
    return call([](auto b) { return std::string_view(b.communication_backend_name()); });
  }
  [[nodiscard]] std::vector<std::string> export_envs() const { return call([](auto b) { return b.export_envs(); }); }
  [[nodiscard]] std::vector<std::string> visible_devices_envs() const {
    return call([](auto b) { return b.visible_devices_envs(); });
  }
  void set_visible_devices_envs(EnvMap& env, std::span<const int> ids) const {
    call([&](auto b) { b.set_visible_devices_envs(env, ids); });
  }
  template <std::invocable Callback>
  void lazy_call(Callback&& fn) const {
    call([&](auto b) { b.lazy_call(std::forward<Callback>(fn)); });
  }

  // ---- random numbers ----
  void manual_seed(std::uint64_t seed) const { call([&](auto b) { b.manual_seed(seed); }); }
  void manual_seed_all(std::uint64_t seed) const { call([&](auto b) { b.manual_seed_all(seed); }); }
  std::uint64_t seed() const { return call([](auto b) { return b.seed(); }); }
  [[nodiscard]] std::uint64_t initial_seed() const { return call([](auto b) { return b.initial_seed(); }); }
  [[nodiscard]] Generator::State get_rng_state() const { return call([](auto b) { return b.get_rng_state(); }); }
  [[nodiscard]] Generator::State get_rng_state(int dev) const {
    return call([&](auto b) { return b.get_rng_state(dev); });
  }
  void set_rng_state(std::span<const std::byte> state) const { call([&](auto b) { b.set_rng_state(state); }); }
  void set_rng_state(std::span<const std::byte> state, int dev) const {
    call([&](auto b) { b.set_rng_state(state, dev); });
  }
  [[nodiscard]] Generator& default_generator() const {
    return call([](auto b) -> Generator& { return b.default_generator(); });
  }
  [[nodiscard]] Generator& default_generator(int dev) const {
    return call([&](auto b) -> Generator& { return b.default_generator(dev); });
  }
  // Fills go to the stream's backend, like memory; the generator defaults to that device's.
  template <class T, class... Args>
  void fill_bits(StreamRef s, T* p, std::size_t n, Args&&... args) const {
    on_stream_backend(s, [&](auto b, auto ref) { b.fill_bits(ref, p, n, std::forward<Args>(args)...); });
  }
  template <class T, class... Args>
  void fill_uniform(StreamRef s, T* p, std::size_t n, Args&&... args) const {
    on_stream_backend(s, [&](auto b, auto ref) { b.fill_uniform(ref, p, n, std::forward<Args>(args)...); });
  }
  template <class T, class... Args>
  void fill_normal(StreamRef s, T* p, std::size_t n, Args&&... args) const {
    on_stream_backend(s, [&](auto b, auto ref) { b.fill_normal(ref, p, n, std::forward<Args>(args)...); });
  }

  // ---- op builders ----
  // Opt-in like the backends' own (cpu/detail/ops_api.hpp): these compile where <accel/op_builders.hpp> is
  // included (it defines the ops:: types); elsewhere a call is a compile error naming that header.
  // op_type<T> is T, named dependently so that it need be complete only where a call instantiates it.
  template <class T>
  using op_type = ops::detail::after_t<BasicAnyBackend, T>;
  [[nodiscard]] std::string op_builder_dir() const { return call([](auto b) { return b.op_builder_dir(); }); }
  [[nodiscard]] op_type<ops::OpBuilder> create_op_builder(std::string_view name) const {
    return call([&](auto b) { return b.create_op_builder(name); });
  }
  /// The active backend's builder for Op, as the common ops::OpBuilder (its load() gives an ops::LoadedOp);
  /// for the typed op, enter the concrete backend with accel::visit.
  template <class Op>
  [[nodiscard]] op_type<ops::OpBuilder> get_op_builder() const {
    return call([](auto b) -> op_type<ops::OpBuilder> { return b.template get_op_builder<Op>(); });
  }
  [[nodiscard]] op_type<ops::BuildCommand> build_extension(std::string_view name) const {
    return call([&](auto b) { return b.build_extension(name); });
  }
  [[nodiscard]] std::vector<std::string> op_names() const { return call([](auto b) { return b.op_names(); }); }
  [[nodiscard]] op_type<std::vector<ops::OpStatus>> op_table() const { return call([](auto b) { return b.op_table(); }); }

  // ---- graphs ----
  // A graph follows the stream it is captured on (an empty graph may change backend).
  [[nodiscard]] Graph create_graph() const { return Graph(index()); }
  [[nodiscard]] GraphCapture capture_to_graph(Graph& g) const { return GraphCapture(g, current_stream()); }
  [[nodiscard]] GraphCapture capture_to_graph(Graph& g, StreamRef s, GraphPoolId pool = {},
                                              CaptureMode mode = CaptureMode::global) const {
    return GraphCapture(g, s, pool, mode);
  }
  void replay_graph(Graph& g) const { g.replay(); }
  void replay_graph(Graph& g, StreamRef s) const { g.replay(s); }
  [[nodiscard]] GraphPoolId graph_pool_handle() const noexcept { return GraphPoolId::make(); }
  [[nodiscard]] bool is_current_stream_capturing() const { return current_stream().is_capturing(); }

  friend bool operator==(const BasicAnyBackend& a, const BasicAnyBackend& b) noexcept { return a.index() == b.index(); }

 private:
  template <class F>
  decltype(auto) call(F&& f) const {
    return detail::visit_indexed(backend_, [&](auto, auto b) -> decltype(auto) { return f(b); });
  }
  template <class F>
  decltype(auto) call_indexed(F&& f) const {
    return detail::visit_indexed(backend_, std::forward<F>(f));
  }
  template <class F>
  static decltype(auto) on_stream_backend(StreamRef s, F&& f) {
    return detail::visit_indexed(s.variant(), [&](auto i, auto ref) -> decltype(auto) {
      return f(detail::backend_at<i(), Bs...>{}, ref);
    });
  }
  // Stream-taking calls go to the stream's backend, which must be this one.
  template <class F>
  decltype(auto) on_stream(StreamRef s, F&& f) const {
    if (s.index() != index()) detail::throw_backend_mismatch("stream argument", name(), s.backend_name());
    return detail::visit_indexed(backend_, [&](auto i, auto b) -> decltype(auto) {
      return f(b, std::get<i()>(s.variant()));
    });
  }

  variant_type backend_;
};

/// The enabled backends of this build, chosen at run time.
using AnyBackend = enabled_backends_t<BasicAnyBackend>;

}  // namespace accel
