// accel/cpu/device.hpp — the CPU backend's devices.
//
// The host is one device by default. ACCEL_CPU_DEVICE_COUNT=N exposes N logical CPU devices (each
// with its own allocator, streams and generator) so multi-device code paths can be tested without a
// GPU; ACCEL_CPU_VISIBLE_DEVICES, like CUDA_VISIBLE_DEVICES, then selects a subset ("0,2").
// Both are read once, at first use. synchronize() lives with the streams (cpu/stream.hpp).
#pragma once

#include <accel/backend/devices.hpp>
#include <accel/concepts/device.hpp>
#include <accel/core/device.hpp>
#include <accel/core/error.hpp>
#include <accel/detail/min_max.hpp>

#include <charconv>
#include <cstdlib>
#include <string>
#include <string_view>

namespace accel::cpu {

namespace detail {

inline int parse_positive_env(const char* name, int fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  const std::string_view text(value);
  int parsed = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), parsed);
  if (ec != std::errc{} || end != text.data() + text.size() || parsed < 1 || parsed > 4096) {
    throw InvalidArgumentError(std::string(name) + "='" + std::string(text) +
                               "' is not a device count (expected an integer in [1, 4096])");
  }
  return parsed;
}

// Counts the entries of ACCEL_CPU_VISIBLE_DEVICES ("0,2" -> 2), each checked against `exposed`.
inline int count_visible(int exposed) {
  const char* value = std::getenv("ACCEL_CPU_VISIBLE_DEVICES");
  if (value == nullptr) return exposed;
  const std::string_view text(value);
  if (text.empty()) return 0;  // like CUDA_VISIBLE_DEVICES="": no device visible
  int count = 0;
  std::string seen(static_cast<std::size_t>(exposed), '\0');  // a flag per device (not vector<bool>: compile cost)
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = accel::detail::min_of(text.find(',', pos), text.size());
    const std::string_view item = text.substr(pos, comma - pos);
    int id = -1;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (item.empty() || ec != std::errc{} || end != item.data() + item.size() || id < 0 || id >= exposed) {
      throw InvalidArgumentError("ACCEL_CPU_VISIBLE_DEVICES='" + std::string(text) + "': '" +
                                 std::string(item) + "' is not a device in [0, " + std::to_string(exposed) +
                                 ")");
    }
    if (seen[static_cast<std::size_t>(id)] != '\0') {
      throw InvalidArgumentError("ACCEL_CPU_VISIBLE_DEVICES='" + std::string(text) + "': device " +
                                 std::to_string(id) + " is listed twice");
    }
    seen[static_cast<std::size_t>(id)] = '\1';
    ++count;
    pos = comma + 1;
  }
  return count;
}

/// The two variables, parsed together: the visible count and whether the backend can serve.
struct DeviceEnv {
  int count = 0;
  Availability availability;
};

/// Reads the variables now (the fuzzer and tests call this; the backend reads them once, device_env()).
inline DeviceEnv read_device_env() {
  try {
    const int n = count_visible(parse_positive_env("ACCEL_CPU_DEVICE_COUNT", 1));
    if (n == 0) return {0, {false, "ACCEL_CPU_VISIBLE_DEVICES is empty: no CPU device is visible"}};
    return {n, {true, {}}};
  } catch (const Error& e) {
    return {0, {false, e.what()}};
  }
}

/// The variables as read at first use: device_count() and availability() always agree, whatever the
/// process does to its environment later.
inline const DeviceEnv& device_env() {
  static const DeviceEnv env = read_device_env();
  return env;
}

inline int& current_device_slot() noexcept {
  thread_local int current = 0;
  return current;
}

}  // namespace detail

/// Device enumeration and selection for accel::CpuBackend; the naming and index checks are shared
/// (backend/devices.hpp).
struct Devices : DeviceNames<Devices, DeviceType::cpu> {
  /// Logical CPU devices: 1, or ACCEL_CPU_DEVICE_COUNT filtered by ACCEL_CPU_VISIBLE_DEVICES.
  /// A malformed variable is reported by availability(); device_count() itself never throws.
  [[nodiscard]] static int device_count() noexcept { return detail::device_env().count; }

  /// Available unless a variable is malformed or hides every device; read once, with device_count().
  [[nodiscard]] static Availability availability() { return detail::device_env().availability; }

  [[nodiscard]] static bool is_available() noexcept { return device_count() > 0; }

  static void set_device(int index) {
    check_device(index);
    detail::current_device_slot() = index;
  }

  [[nodiscard]] static int current_device() noexcept { return detail::current_device_slot(); }

  /// Makes a device current for the calling thread; restores the previous one when destroyed.
  class DeviceGuard {
   public:
    explicit DeviceGuard(int index) : previous_(current_device()) { set_device(index); }
    DeviceGuard(const DeviceGuard&) = delete;
    DeviceGuard& operator=(const DeviceGuard&) = delete;
    ~DeviceGuard() { detail::current_device_slot() = previous_; }
    [[nodiscard]] int previous_device() const noexcept { return previous_; }

   private:
    int previous_;
  };
};

}  // namespace accel::cpu
