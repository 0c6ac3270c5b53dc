// accel/random/default_generators.hpp — one default Generator per device, and DeepSpeed's seeding and
// state functions over them, written once for every backend.
//
// A backend's Random struct derives from DefaultGenerators<Devices> and adds its stream fills. The
// generators are created at first use (device_count() is fixed by then) and never destroyed, so fills
// enqueued from static destructors still find them.
#pragma once

#include <accel/random/generator.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace accel {

template <class Devices>
struct DefaultGenerators {
  [[nodiscard]] static Generator& default_generator() { return default_generator(Devices::current_device()); }
  [[nodiscard]] static Generator& default_generator(int device) {
    Devices::check_device(device);
    return generators()[device];
  }

  static void manual_seed(std::uint64_t seed) { default_generator().manual_seed(seed); }
  /// Seeds every device's generator (none when the backend has no device, like torch).
  static void manual_seed_all(std::uint64_t seed) {
    const int count = Devices::device_count();
    for (int i = 0; i < count; ++i) generators()[i].manual_seed(seed);
  }
  static std::uint64_t seed() { return default_generator().seed(); }
  [[nodiscard]] static std::uint64_t initial_seed() { return default_generator().initial_seed(); }

  [[nodiscard]] static std::array<std::byte, 16> get_rng_state() { return default_generator().get_state(); }
  [[nodiscard]] static std::array<std::byte, 16> get_rng_state(int device) {
    return default_generator(device).get_state();
  }
  static void set_rng_state(std::span<const std::byte> state) { default_generator().set_state(state); }
  static void set_rng_state(std::span<const std::byte> state, int device) {
    default_generator(device).set_state(state);
  }

 private:
  static Generator* generators() {
    static Generator* const all = new Generator[static_cast<std::size_t>(Devices::device_count())];  // leaked
    return all;
  }
};

}  // namespace accel
