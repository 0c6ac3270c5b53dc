// accel/core/device.hpp — accel::Device: a backend kind plus an optional device index.
//
// Parses and prints torch's spelling: "cpu", "cpu:0", "cuda", "cuda:1". Parsing is strict:
// "cuda:-1", "gpu:0", "cuda:1x", "cuda:", "cuda:01" (leading zeros, as torch refuses them) and " cuda" are rejected with an InvalidArgumentError that
// quotes the input and lists the valid forms. A Device without an index means "the current device".
#pragma once

#include <accel/core/error.hpp>

#include <charconv>
#include <compare>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

namespace accel {

/// Kind of device a backend drives.
enum class DeviceType : std::uint8_t { cpu = 0, cuda = 1 };

/// Lower-case name of a device type, as used in device strings ("cpu", "cuda").
[[nodiscard]] constexpr std::string_view to_string(DeviceType type) noexcept {
  switch (type) {
    case DeviceType::cpu: return "cpu";
    case DeviceType::cuda: return "cuda";
  }
  return "unknown";
}

/// A device: backend kind and, optionally, an index (no index = the current device of that kind).
class Device {
 public:
  static constexpr int no_index = -1;

  constexpr explicit Device(DeviceType type, int index = no_index) : type_(type), index_(index) {
    if (index < no_index) {
      throw InvalidArgumentError(std::string(to_string(type)) + ":" + std::to_string(index) +
                                 " is not a device: indices are >= 0");
    }
  }

  /// Parses "cpu", "cpu:0", "cuda", "cuda:1". Throws InvalidArgumentError on anything else.
  [[nodiscard]] static Device parse(std::string_view text) {
    const auto fail = [&](std::string_view why) -> InvalidArgumentError {
      return InvalidArgumentError("invalid device string '" + std::string(text) + "': " + std::string(why) +
                                  " (expected 'cpu', 'cpu:N', 'cuda' or 'cuda:N' with N >= 0)");
    };
    const auto colon = text.find(':');
    const std::string_view kind = text.substr(0, colon);
    DeviceType type{};
    if (kind == "cpu") {
      type = DeviceType::cpu;
    } else if (kind == "cuda") {
      type = DeviceType::cuda;
    } else {
      throw fail("unknown device type '" + std::string(kind) + "'");
    }
    if (colon == std::string_view::npos) return Device(type);
    const std::string_view digits = text.substr(colon + 1);
    if (digits.empty()) throw fail("missing index after ':'");
    if (digits.front() < '0' || digits.front() > '9') throw fail("index must be a non-negative integer");
    // torch refuses "cuda:01" and "cuda:00" ("Invalid device string"); so does accel, rather than reading 1 and 0.
    if (digits.size() > 1 && digits.front() == '0') throw fail("leading zeros in the index");
    int index = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc::result_out_of_range) throw fail("index out of range");
    if (ec != std::errc{} || end != digits.data() + digits.size()) {
      throw fail("trailing characters after the index");
    }
    return Device(type, index);
  }

  [[nodiscard]] constexpr DeviceType type() const noexcept { return type_; }
  [[nodiscard]] constexpr bool has_index() const noexcept { return index_ != no_index; }
  /// The index, or Device::no_index (-1) when none was given.
  [[nodiscard]] constexpr int index() const noexcept { return index_; }
  [[nodiscard]] constexpr bool is_cpu() const noexcept { return type_ == DeviceType::cpu; }
  [[nodiscard]] constexpr bool is_cuda() const noexcept { return type_ == DeviceType::cuda; }

  /// "cuda:1", or "cuda" without an index.
  [[nodiscard]] std::string str() const {
    std::string out(to_string(type_));
    if (has_index()) out += ":" + std::to_string(index_);
    return out;
  }

  friend constexpr bool operator==(const Device&, const Device&) = default;
  friend constexpr auto operator<=>(const Device&, const Device&) = default;
  // A template over the stream type, so this header needs only <iosfwd>: printing is instantiated
  // where the caller included <ostream>.
  template <class CharT, class Traits>
  friend std::basic_ostream<CharT, Traits>& operator<<(std::basic_ostream<CharT, Traits>& os, const Device& v) {
    return os << v.str();
  }

 private:
  DeviceType type_;
  int index_;
};

}  // namespace accel
