// user_backend — a third backend, defined here and not in accel's headers, chosen at run time and
// dispatched the same way as the built-in ones.
//
// "sim" stands for the simulator of some accelerator. A simulator runs on the host, so it reuses the
// CPU backend's machinery — streams, events, caching allocator, generators, graphs, op builders — by
// inheriting CpuBackend, and writes only what makes it a backend of its own: its name, its devices
// (the chips of the simulated board) and the variable that selects them. Because everything else is
// inherited, it keeps satisfying accel::Accelerator when the concept gains an area: the CPU backend
// gains it the same day.
//
//   ACCEL_BACKEND=sim user_backend                               runs the engine on the simulator
//   ACCEL_BACKEND=sim ACCEL_SIM_VISIBLE_DEVICES=0,1,2 user_backend   a board of three chips
//   user_backend                                                 the first available: cpu
#include <accel/accel.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

namespace sim {

// The visible chips: ACCEL_SIM_VISIBLE_DEVICES lists their ids ("0,1"); unset, the board's two.
// -1 when the list is malformed.
inline int visible_chips() {
  static const int count = [] {
    const char* text = std::getenv("ACCEL_SIM_VISIBLE_DEVICES");
    if (text == nullptr) return 2;
    int n = 0;
    for (const char* p = text; *p != '\0'; ++n) {
      char* end = nullptr;
      (void)std::strtol(p, &end, 10);
      if (end == p || (*end != ',' && *end != '\0')) return -1;
      p = *end == ',' ? end + 1 : end;
    }
    return n;
  }();
  return count;
}

// Each chip is backed by one logical CPU device: called first thing in main, before the CPU backend
// reads its device count (once). A count the user set explicitly is kept; availability() checks it.
inline void provision() {
  if (visible_chips() > 0) ::setenv("ACCEL_CPU_DEVICE_COUNT", std::to_string(visible_chips()).c_str(), 0);
}

}  // namespace sim

struct SimBackend : accel::CpuBackend {
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "sim"; }
  // The chips' memory is host memory, which is what DeviceType::cpu means to callers.
  [[nodiscard]] static constexpr accel::DeviceType device_type() noexcept { return accel::DeviceType::cpu; }

  // Devices: the visible chips. The inherited functions index the CPU backend's devices, so the sim
  // is available only when there are exactly as many: then an index means the same to all of them.
  [[nodiscard]] static accel::Availability availability() {
    const int chips = sim::visible_chips();
    if (chips < 0) return {false, "ACCEL_SIM_VISIBLE_DEVICES is malformed (expected ids such as 0,1)"};
    if (chips == 0) return {false, "ACCEL_SIM_VISIBLE_DEVICES is empty: no simulated chip is visible"};
    if (chips != CpuBackend::device_count()) {
      return {false, std::to_string(chips) + " simulated chips need as many logical CPU devices, and "
                     "ACCEL_CPU_DEVICE_COUNT gives " + std::to_string(CpuBackend::device_count())};
    }
    return {true, {}};
  }
  [[nodiscard]] static int device_count() { return availability().available ? sim::visible_chips() : 0; }
  [[nodiscard]] static bool is_available() { return device_count() > 0; }
  [[nodiscard]] static std::string device_name() { return "sim"; }
  [[nodiscard]] static std::string device_name(int i) {
    if (i < 0 || i >= device_count()) {
      throw accel::InvalidArgumentError("sim:" + std::to_string(i) + " does not exist (device_count() == " +
                                        std::to_string(device_count()) + ")");
    }
    return "sim:" + std::to_string(i);
  }
  [[nodiscard]] static std::string current_device_name() { return device_name(current_device()); }

  // What a launcher sets to give each process its chips (DeepSpeed's visible_devices_envs).
  [[nodiscard]] static std::vector<std::string> visible_devices_envs() { return {"ACCEL_SIM_VISIBLE_DEVICES"}; }
  static void set_visible_devices_envs(accel::EnvMap& env, std::span<const int> ids) {
    std::string list;
    for (const int id : ids) list += (list.empty() ? "" : ",") + std::to_string(id);
    env.insert_or_assign("ACCEL_SIM_VISIBLE_DEVICES", list);
  }
};

static_assert(accel::Accelerator<SimBackend>, "SimBackend must satisfy accel::Accelerator");

// The user's own list: the CPU backend, then the simulator (priority order when ACCEL_BACKEND is unset).
using Backends = accel::BasicAnyBackend<accel::CpuBackend, SimBackend>;

// Written once against the concept; accel::visit instantiates it for the chosen backend, so every call
// inside is a direct call. It draws uniforms on the last device, records the draw as a graph and
// replays it, and checks what it reads back (through pinned host memory, as on a GPU).
template <accel::Accelerator B>
struct Engine {
  B b;

  bool run() const {
    const int device = b.device_count() - 1;
    typename B::DeviceGuard on_device(device);
    typename B::Stream stream;
    b.manual_seed(1234);
    constexpr std::size_t n = std::size_t{1} << 16;
    accel::FloatBuffer<B> x(n, stream);
    auto* host = static_cast<float*>(b.host_alloc(n * sizeof(float), stream));

    typename B::Graph graph = b.create_graph();
    {
      auto capture = b.capture_to_graph(graph, stream);  // recorded, not run
      b.fill_uniform(stream, x.data(), n);
      capture.end();
    }
    bool ok = true;
    double previous = -1.0;
    for (int replay = 0; replay < 3; ++replay) {  // each replay draws fresh numbers
      b.replay_graph(graph, stream);
      b.copy_async(stream, host, x.data(), n * sizeof(float));
      stream.synchronize();
      double sum = 0.0;
      for (std::size_t i = 0; i < n; ++i) sum += host[i];
      const double mean = sum / static_cast<double>(n);
      std::printf("  %s replay %d: mean of %zu uniforms %.4f\n", b.device_name(device).c_str(), replay, n, mean);
      ok = ok && mean > 0.49 && mean < 0.51 && mean != previous;
      previous = mean;
    }
    b.host_free(host);
    std::printf("  %zu bytes allocated on %s, %s\n", b.memory_allocated(device), b.device_name(device).c_str(),
                ok ? "ok" : "FAILED");
    return ok;
  }
};

int main() {
  sim::provision();
  try {
    const Backends backend;  // ACCEL_BACKEND=cpu|sim, else the first available
    std::printf("backend %.*s: %d device(s), visible-devices variable %s\n", static_cast<int>(backend.name().size()),
                backend.name().data(), backend.device_count(), backend.visible_devices_envs().front().c_str());
    const bool ok = accel::visit(backend, [](auto b) { return Engine<decltype(b)>{b}.run(); });
    std::printf("engine on %.*s: %s\n", static_cast<int>(backend.name().size()), backend.name().data(),
                ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "user_backend: %s\n", e.what());
    return 2;
  }
}
