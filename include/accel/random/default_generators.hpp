// accel/random/default_generators.hpp — one default Generator per device, and DeepSpeed's seeding and
// state functions over them, written once for every backend.
//
// A backend's Random struct derives from DefaultGenerators<Devices> and adds its stream fills. The
// generators are created at first use (device_count() is fixed by then) and never destroyed, so fills
// enqueued from static destructors still find them. They are locked across fork() (pthread_atfork), so
// a child never inherits a generator whose mutex another thread held: its first fill cannot hang.
// A generator mutex is a leaf lock (nothing is taken while holding it), so the order against the
// other fork handlers does not matter.
#pragma once

#include <accel/random/generator.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#endif

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
  static Generator* generators() { return table().all; }

  // The generators and their count, fixed at first use; the fork handlers use only these.
  struct Table {
    Generator* all;
    int count;
  };
  static const Table& table() {
    static const Table t = [] {
      const int count = Devices::device_count();
      Table created{new Generator[static_cast<std::size_t>(count)], count};  // leaked
#if defined(__unix__) || defined(__APPLE__)
      ::pthread_atfork([] { for_each_generator([](const Generator& g) { g.lock_for_fork(); }); },
                       [] { for_each_generator([](const Generator& g) { g.unlock_after_fork(); }); },
                       [] { for_each_generator([](const Generator& g) { g.unlock_after_fork(); }); });
#endif
      return created;
    }();
    return t;
  }
  template <class F>
  static void for_each_generator(F f) noexcept {
    const Table& t = table();
    for (int i = 0; i < t.count; ++i) f(t.all[i]);
  }
};

}  // namespace accel
