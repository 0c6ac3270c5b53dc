#include <accel/core/device.hpp>

#include <doctest/doctest.h>

#include <sstream>

using accel::Device;
using accel::DeviceType;

TEST_CASE("Device parses and prints torch's spelling") {
  CHECK(Device::parse("cpu") == Device(DeviceType::cpu));
  CHECK_FALSE(Device::parse("cpu").has_index());
  CHECK(Device::parse("cpu:0") == Device(DeviceType::cpu, 0));
  CHECK(Device::parse("cuda:1").type() == DeviceType::cuda);
  CHECK(Device::parse("cuda:1").index() == 1);
  CHECK(Device::parse("cuda:12").str() == "cuda:12");
  CHECK(Device(DeviceType::cuda).str() == "cuda");
  CHECK(Device(DeviceType::cpu, 3).str() == "cpu:3");
  std::ostringstream os;
  os << Device(DeviceType::cuda, 2);
  CHECK(os.str() == "cuda:2");
}

TEST_CASE("Device rejects malformed strings with a message that quotes them") {
  for (const char* bad : {"cuda:-1", "gpu:0", "cuda:1x", "cuda:", "", ":0", " cuda", "cuda: 1", "CPU",
                          "cuda:99999999999999999999", "cuda:+1", "cpu:0:0", "cuda:01", "cuda:00"}) {
    CAPTURE(bad);
    try {
      (void)Device::parse(bad);
      FAIL("parse accepted a malformed device string");
    } catch (const accel::InvalidArgumentError& e) {
      CHECK(e.code() == accel::Errc::invalid_argument);
      CHECK(std::string(e.what()).find("'" + std::string(bad) + "'") != std::string::npos);
    }
  }
  CHECK_THROWS_AS(Device(DeviceType::cuda, -2), accel::InvalidArgumentError);
}

TEST_CASE("Device refuses an index with leading zeros, as torch does") {
  for (const char* bad : {"cuda:01", "cuda:00", "cpu:007", "cuda:0000000000000000000001"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS((void)Device::parse(bad),
                         ("invalid device string '" + std::string(bad) +
                          "': leading zeros in the index (expected 'cpu', 'cpu:N', 'cuda' or 'cuda:N' with N >= 0)")
                             .c_str(),
                         accel::InvalidArgumentError);
  }
  CHECK(Device::parse("cuda:0") == Device(DeviceType::cuda, 0));
  CHECK(Device::parse("cpu:0").index() == 0);
  CHECK(Device::parse("cuda:10").index() == 10);
}

TEST_CASE("Device ordering and equality include the index") {
  CHECK(Device(DeviceType::cuda, 0) != Device(DeviceType::cuda, 1));
  CHECK(Device(DeviceType::cpu, 0) < Device(DeviceType::cuda, 0));
  CHECK(Device(DeviceType::cpu) != Device(DeviceType::cpu, 0));
}
