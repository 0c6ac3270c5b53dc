// CUDA_VISIBLE_DEVICES (accel::cuda::parse_visible_devices; no CUDA header needed). Whatever the
// text: no crash; no entry twice (a repeat empties the list); ordinals in [0, 1e6]; UUID entries
// start with "GPU-"/"MIG-" and name something, contain no ',' and no outer space; and the list,
// written back as "a,b,c", parses to itself.
#include "fuzz_main.hpp"

#include <accel/cuda/detail/visible_devices.hpp>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_cuda_visible_devices: invariant broken: %s\n", what);
  std::abort();
}

}  // namespace

void accel_fuzz_one(std::string_view text) {
  const auto devices = accel::cuda::parse_visible_devices(text);
  std::string joined;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const auto& d = devices[i];
    for (std::size_t j = 0; j < i; ++j) {
      if (devices[j] == d) fail("an entry appears twice");
    }
    if (d.is_ordinal()) {
      if (!d.uuid().empty()) fail("an ordinal entry holds a UUID");
      if (d.ordinal() > 1'000'000) fail("ordinal out of range");
      joined += std::to_string(d.ordinal());
    } else {
      const std::string& uuid = d.uuid();
      if (d.ordinal() != -1) fail("a UUID entry holds an ordinal");
      if (!(uuid.starts_with("GPU-") || uuid.starts_with("MIG-")) || uuid.size() <= 4) fail("bad UUID entry");
      if (uuid.find(',') != std::string::npos) fail("UUID entry holds a comma");
      if (std::isspace(static_cast<unsigned char>(uuid.back()))) fail("UUID entry not trimmed");
      if (accel::cuda::is_mig(d) != uuid.starts_with("MIG-")) fail("is_mig disagrees");
      joined += uuid;
    }
    joined += ',';
  }
  if (!joined.empty()) joined.pop_back();
  if (accel::cuda::parse_visible_devices(joined) != devices) fail("the list does not round-trip");
}
