// DeviceApi conformance: every backend enumerates, names, selects and guards devices the same way.
#include "backends.hpp"

#include <optional>
#include <string>
#include <type_traits>

TEST_CASE_TEMPLATE_DEFINE("devices: count, names, selection", B, device_names) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  REQUIRE(b.device_count() >= 1);
  CHECK(b.is_available());
  CHECK(b.availability().reason.empty());
  CHECK(b.device_name() == std::string(b.name()));
  for (int i = 0; i < b.device_count(); ++i) {
    CHECK(b.device_name(i) == std::string(b.name()) + ":" + std::to_string(i));
    CHECK(b.device(i) == accel::Device(b.device_type(), i));
    CHECK(b.device(i).str() == b.device_name(i));
  }
  const int before = b.current_device();
  b.set_device(b.device_count() - 1);
  CHECK(b.current_device() == b.device_count() - 1);
  CHECK(b.current_device_name() == b.device_name(b.device_count() - 1));
  b.set_device(before);
  CHECK(b.current_device() == before);
}

TEST_CASE_TEMPLATE_DEFINE("devices: out-of-range indices throw and change nothing", B, device_errors) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  const int count = b.device_count();
  const int before = b.current_device();
  const std::string expected = std::string(b.name()) + ":" + std::to_string(count) + " does not exist (device_count() == " +
                               std::to_string(count) + ")";
  try {
    b.set_device(count);
    FAIL("set_device accepted an index out of range");
  } catch (const accel::InvalidArgumentError& e) {
    CHECK(std::string(e.what()) == expected);
  }
  CHECK_THROWS_AS(b.set_device(-1), accel::InvalidArgumentError);
  CHECK_THROWS_AS((void)b.device_name(count), accel::InvalidArgumentError);
  CHECK_THROWS_AS((void)b.device(count + 5), accel::InvalidArgumentError);
  CHECK_THROWS_AS(b.synchronize(count), accel::InvalidArgumentError);
  CHECK_THROWS_AS(typename B::DeviceGuard{count}, accel::InvalidArgumentError);
  CHECK(b.current_device() == before);
}

TEST_CASE_TEMPLATE_DEFINE("devices: DeviceGuard restores the previous device", B, device_guard) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  const int last = b.device_count() - 1;
  b.set_device(0);
  {
    typename B::DeviceGuard guard{last};
    CHECK(b.current_device() == last);
    if constexpr (!std::is_same_v<B, accel::AnyBackend>) CHECK(guard.previous_device() == 0);
    {
      typename B::DeviceGuard inner{0};
      CHECK(b.current_device() == 0);
    }
    CHECK(b.current_device() == last);
  }
  CHECK(b.current_device() == 0);
  b.synchronize();
  b.synchronize(last);
}

TEST_CASE_TEMPLATE_DEFINE("devices: torch.accelerator's names select the same device", B, device_torch_names) {
  const B b;
  // current_accelerator() answers without a device (torch: the build's accelerator, no index).
  const std::optional<accel::Device> accelerator = b.current_accelerator();
  REQUIRE(accelerator.has_value());
  CHECK(*accelerator == accel::Device(b.device_type()));
  CHECK_FALSE(accelerator->has_index());
  CHECK(b.current_accelerator(true).has_value() == b.is_available());
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const int before = b.current_device();
  const int last = b.device_count() - 1;
  CHECK(b.current_device_index() == before);
  b.set_device_index(last);
  CHECK(b.current_device() == last);
  CHECK(b.current_device_index() == last);
  b.set_device_index(-1);  // torch: a negative index does nothing
  CHECK(b.current_device_index() == last);
  CHECK_THROWS_AS(b.set_device_index(b.device_count()), accel::InvalidArgumentError);
  CHECK(b.current_device_index() == last);
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
  b.set_device_idx(0);  // torch 2.6's spellings
  CHECK(b.current_device_idx() == 0);
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
  b.set_device_index(before);
  CHECK(b.current_device() == before);
}

TEST_CASE_TEMPLATE_APPLY(device_names, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(device_torch_names, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(device_errors, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(device_guard, ConformanceBackends);
