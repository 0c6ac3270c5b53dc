// accel/cuda/detail/visible_devices.hpp — reading CUDA_VISIBLE_DEVICES the way the CUDA driver does.
//
// Public entry points (namespace accel::cuda, re-exported by accel/cuda/env.hpp):
//   parse_visible_devices("0,2")            -> {0, 2}
//   parse_visible_devices("GPU-8932f937,GPU-5d1a")   -> {"GPU-8932f937", "GPU-5d1a"}  (UUIDs, possibly abbreviated)
//   parse_visible_devices("MIG-2b41c6a4-...") -> {"MIG-2b41c6a4-..."}  (MIG instances, new and
//                                              legacy "MIG-GPU-<uuid>/<gi>/<ci>" forms)
//   visible_devices_from_env()              -> nullopt when the variable is unset (every device visible)
// The rules are the driver's (as torch's _parse_visible_devices reproduces them), so the count agrees
// with what the CUDA runtime will enumerate:
//   - entries are comma-separated; surrounding whitespace is ignored;
//   - an ordinal is read like strtoul: its leading digits ("1gpu2" is 1);
//   - the first entry that is neither an ordinal nor a "GPU-"/"MIG-" UUID (e.g. "-1", "", "abc")
//     ends the list: "0,1,-1,2" is {0, 1};
//   - a repeated entry makes the whole list empty (the driver then exposes no device);
//   - "" (set but empty) is an empty list: no device visible.
// No CUDA header is needed: this header is usable in any build (e.g. by a launcher).
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace accel::cuda {

/// One entry of CUDA_VISIBLE_DEVICES: a device ordinal, or a UUID string kept verbatim
/// ("GPU-8932f937-..." or an abbreviation of it, "MIG-..."). Converts implicitly from either, so a
/// list reads like the variable: std::vector<VisibleDevice>{0, std::string("GPU-5d1a")}.
/// A plain class, not std::variant<int, std::string>, whose instantiations every includer would parse.
class VisibleDevice {
 public:
  VisibleDevice(int ordinal) noexcept : ordinal_(ordinal) {}              // NOLINT: implicit by design
  VisibleDevice(std::string uuid) noexcept : uuid_(std::move(uuid)) {}   // NOLINT: implicit by design

  [[nodiscard]] bool is_ordinal() const noexcept { return ordinal_ >= 0; }
  /// The device ordinal; -1 for a UUID entry.
  [[nodiscard]] int ordinal() const noexcept { return ordinal_; }
  /// The UUID as written ("GPU-...", "MIG-..."); empty for an ordinal entry.
  [[nodiscard]] const std::string& uuid() const noexcept { return uuid_; }

  friend bool operator==(const VisibleDevice&, const VisibleDevice&) = default;

 private:
  int ordinal_ = -1;
  std::string uuid_;
};

/// True when `d` names a MIG compute instance ("MIG-...").
[[nodiscard]] inline bool is_mig(const VisibleDevice& d) noexcept { return d.uuid().starts_with("MIG-"); }

namespace detail {

inline std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// strtoul-like: the value of the leading decimal digits (an optional '+' first), or nullopt when
// there are none or the entry is negative.
inline std::optional<int> leading_ordinal(std::string_view s) noexcept {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  long long value = 0;
  std::size_t digits = 0;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') {
    value = value * 10 + (s[digits] - '0');
    if (value > 1'000'000) return std::nullopt;  // no such device; also keeps the arithmetic in range
    ++digits;
  }
  if (digits == 0) return std::nullopt;
  return static_cast<int>(value);
}

}  // namespace detail

/// Parses a CUDA_VISIBLE_DEVICES value by the driver's rules (see the top of this header).
[[nodiscard]] inline std::vector<VisibleDevice> parse_visible_devices(std::string_view value) {
  std::vector<VisibleDevice> devices;
  if (detail::trim(value).empty()) return devices;
  std::size_t pos = 0;
  while (pos <= value.size()) {
    const std::size_t comma = std::min(value.find(',', pos), value.size());
    const std::string_view item = detail::trim(value.substr(pos, comma - pos));
    VisibleDevice entry(-1);
    if (item.starts_with("GPU-") || item.starts_with("MIG-")) {
      if (item.size() == 4) break;  // a bare prefix names nothing
      entry = VisibleDevice(std::string(item));
    } else if (const auto ordinal = detail::leading_ordinal(item)) {
      entry = VisibleDevice(*ordinal);
    } else {
      break;  // an invalid entry ends the list
    }
    for (const auto& seen : devices) {
      if (seen == entry) return {};  // a repeated device: the driver exposes none
    }
    devices.push_back(std::move(entry));
    pos = comma + 1;
  }
  return devices;
}

/// CUDA_VISIBLE_DEVICES of this process, parsed; nullopt when unset (every device is visible).
[[nodiscard]] inline std::optional<std::vector<VisibleDevice>> visible_devices_from_env() {
  const char* value = std::getenv("CUDA_VISIBLE_DEVICES");
  if (value == nullptr) return std::nullopt;
  return parse_visible_devices(value);
}

}  // namespace accel::cuda
