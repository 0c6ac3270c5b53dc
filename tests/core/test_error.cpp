#include <accel/core/error.hpp>

#include <doctest/doctest.h>

#include <string>

TEST_CASE("Error carries its category, native code and call site") {
  const int line = __LINE__ + 2;
  try {
    throw accel::Error(accel::Errc::runtime_failure, "boom", 700);
  } catch (const std::runtime_error& base) {
    const auto& e = dynamic_cast<const accel::Error&>(base);
    CHECK(std::string(e.what()) == "boom");
    CHECK(e.code() == accel::Errc::runtime_failure);
    CHECK(e.native_code() == 700);
    CHECK(e.where().line() == static_cast<unsigned>(line));
    CHECK(std::string(e.where().file_name()).find("test_error.cpp") != std::string::npos);
  }
}

TEST_CASE("Error subclasses map to their categories") {
  CHECK(accel::InvalidArgumentError("x").code() == accel::Errc::invalid_argument);
  CHECK(accel::OutOfMemoryError("x", 42).code() == accel::Errc::out_of_memory);
  CHECK(accel::OutOfMemoryError("x", 42).requested_bytes() == 42);
  CHECK(accel::BackendUnavailableError("x").code() == accel::Errc::backend_unavailable);
  CHECK(accel::InvalidStateError("x").code() == accel::Errc::invalid_state);
  CHECK(accel::NotSupportedError("x").code() == accel::Errc::not_supported);
  const accel::CompileError ce("nvrtc failed", "nvrtc -arch=sm_90 adam.cu", "adam.cu(3): error: x");
  CHECK(ce.code() == accel::Errc::compile_failed);
  CHECK(ce.log() == "adam.cu(3): error: x");
  CHECK(std::string(ce.what()).find("nvrtc -arch=sm_90 adam.cu") != std::string::npos);
  CHECK(std::string(ce.what()).find("adam.cu(3): error: x") != std::string::npos);
  CHECK(accel::to_string(accel::Errc::context_lost) == "context_lost");
}
