// accel/dispatch/forward/rng.hpp — RngApi (concepts/rng.hpp) of BasicAnyBackend<Bs...>.
//
// Seeds and states are the active backend's; fills go to the stream's backend, like memory, and the
// generator defaults to that device's.
#pragma once

#include <accel/dispatch/any_stream.hpp>
#include <accel/dispatch/detail/forward.hpp>
#include <accel/random/generator.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

namespace accel {

template <class... Bs>
struct AnyRngApi {
  void manual_seed(std::uint64_t seed) const { detail::on_active(*this, [&](auto b) { b.manual_seed(seed); }); }
  void manual_seed_all(std::uint64_t seed) const { detail::on_active(*this, [&](auto b) { b.manual_seed_all(seed); }); }
  std::uint64_t seed() const { return detail::on_active(*this, [](auto b) { return b.seed(); }); }
  [[nodiscard]] std::uint64_t initial_seed() const {
    return detail::on_active(*this, [](auto b) { return b.initial_seed(); });
  }
  [[nodiscard]] Generator::State get_rng_state() const {
    return detail::on_active(*this, [](auto b) { return b.get_rng_state(); });
  }
  [[nodiscard]] Generator::State get_rng_state(int dev) const {
    return detail::on_active(*this, [&](auto b) { return b.get_rng_state(dev); });
  }
  void set_rng_state(std::span<const std::byte> state) const {
    detail::on_active(*this, [&](auto b) { b.set_rng_state(state); });
  }
  void set_rng_state(std::span<const std::byte> state, int dev) const {
    detail::on_active(*this, [&](auto b) { b.set_rng_state(state, dev); });
  }
  [[nodiscard]] Generator& default_generator() const {
    return detail::on_active(*this, [](auto b) -> Generator& { return b.default_generator(); });
  }
  [[nodiscard]] Generator& default_generator(int dev) const {
    return detail::on_active(*this, [&](auto b) -> Generator& { return b.default_generator(dev); });
  }

  template <class T, class... Args>
  void fill_bits(const AnyStreamRef<Bs...>& s, T* p, std::size_t n, Args&&... args) const {
    detail::on_stream_backend(*this, s, [&](auto b, auto ref) { b.fill_bits(ref, p, n, std::forward<Args>(args)...); });
  }
  template <class T, class... Args>
  void fill_uniform(const AnyStreamRef<Bs...>& s, T* p, std::size_t n, Args&&... args) const {
    detail::on_stream_backend(*this, s,
                              [&](auto b, auto ref) { b.fill_uniform(ref, p, n, std::forward<Args>(args)...); });
  }
  template <class T, class... Args>
  void fill_normal(const AnyStreamRef<Bs...>& s, T* p, std::size_t n, Args&&... args) const {
    detail::on_stream_backend(*this, s,
                              [&](auto b, auto ref) { b.fill_normal(ref, p, n, std::forward<Args>(args)...); });
  }
};

}  // namespace accel
