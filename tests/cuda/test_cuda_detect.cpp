// CUDA detection against stand-in driver libraries (fake_driver/), so its logic is tested on machines
// without a GPU: NVML counting with every CUDA_VISIBLE_DEVICES form, the driver-version check, the
// MIG and no-NVML fallbacks to cuInit, a driver that NVML lists but that cannot initialise (confirmed in a
// child process, with a bounded wait), and the reasons given. CTest runs this binary twice:
//   test_cuda_detect_nvml    LD_LIBRARY_PATH has fake libcuda.so.1 and libnvidia-ml.so.1  (-ts=nvml)
//   test_cuda_detect_driver  LD_LIBRARY_PATH has only the fake libcuda.so.1              (-ts=driver)
// Each case calls the uncached detect_devices() after setting the fakes' answers.
#include "support/scoped_env.hpp"

#include <accel/cuda/detail/detect.hpp>

#include <doctest/doctest.h>

#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <utility>

namespace {

using accel::cuda::detail::Detection;
using accel::cuda::detail::detect_devices;

bool fake_driver_loaded() {
  const auto& api = accel::cuda::detail::driver();
  if (!api.loaded) MESSAGE("SKIPPED: the fake libcuda.so.1 is not on LD_LIBRARY_PATH: " << api.error);
  return api.loaded;
}

int cu_init_calls() {
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  const bool loaded = library != nullptr;
  REQUIRE(loaded);
  auto* calls = reinterpret_cast<int (*)()>(dlsym(library, "fake_cu_init_calls"));
  const bool exported = calls != nullptr;
  REQUIRE(exported);
  const int n = calls();
  dlclose(library);
  return n;
}

// Forgets the cuInit calls of earlier cases: the fake driver is uninitialised in this process again.
void reset_fake_driver() {
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  const bool loaded = library != nullptr;
  REQUIRE(loaded);
  auto* reset = reinterpret_cast<void (*)()>(dlsym(library, "fake_cu_reset"));
  const bool exported = reset != nullptr;
  REQUIRE(exported);
  reset();
  dlclose(library);
}

// detect_devices() with `env` set (CUDA_VISIBLE_DEVICES is unset unless `env` sets it).
Detection detect(std::initializer_list<std::pair<const char*, const char*>> env) {
  const ScopedEnv unset{{"CUDA_VISIBLE_DEVICES", nullptr}};
  const ScopedEnv scoped(env);
  return detect_devices();
}

bool mentions(const std::string& text, const char* what) { return text.find(what) != std::string::npos; }

}  // namespace

TEST_SUITE("nvml") {
  TEST_CASE("detect: NVML counts the GPUs without initialising the driver") {
    if (!fake_driver_loaded()) return;
    REQUIRE(accel::cuda::detail::nvml().loaded);
    const int before = cu_init_calls();
    const Detection found = detect({{"CUDA_VISIBLE_DEVICES", nullptr}});
    CHECK(found.count == 2);
    CHECK(found.reason.empty());
    CHECK(found.driver_version == 13000);
    CHECK_FALSE(found.driver_initialised);
    CHECK(cu_init_calls() == before);  // fork-safe: cuInit was never called
  }

  TEST_CASE("detect: CUDA_VISIBLE_DEVICES ordinals are matched against NVML's GPUs") {
    if (!fake_driver_loaded()) return;
    CHECK(detect({{"CUDA_VISIBLE_DEVICES", "1"}}).count == 1);
    CHECK(detect({{"CUDA_VISIBLE_DEVICES", "1,0"}}).count == 2);
    CHECK(detect({{"CUDA_VISIBLE_DEVICES", "0,5,1"}}).count == 1);  // the driver stops at a missing ordinal
    CHECK(detect({{"CUDA_VISIBLE_DEVICES", "0,-1,1"}}).count == 1);
    const Detection none = detect({{"CUDA_VISIBLE_DEVICES", ""}});
    CHECK(none.count == 0);
    CHECK(mentions(none.reason, "CUDA_VISIBLE_DEVICES=''"));
    CHECK(detect({{"CUDA_VISIBLE_DEVICES", "0,0"}}).count == 0);  // a repeated entry hides every GPU
    const Detection missing = detect({{"CUDA_VISIBLE_DEVICES", "7"}});
    CHECK(missing.count == 0);
    CHECK(mentions(missing.reason, "CUDA_VISIBLE_DEVICES='7'"));
  }

  TEST_CASE("detect: GPU UUIDs, abbreviated or not, select GPUs (DeepSpeed breaks on these)") {
    if (!fake_driver_loaded()) return;
    CHECK(detect({{"CUDA_VISIBLE_DEVICES", "GPU-bbbb-2"}}).count == 1);
    CHECK(detect({{"CUDA_VISIBLE_DEVICES", "GPU-bb,GPU-a"}}).count == 2);
    CHECK(detect({{"CUDA_VISIBLE_DEVICES", "GPU-a,GPU-zzzz"}}).count == 1);
    CHECK(detect({{"CUDA_VISIBLE_DEVICES", "GPU-"}}).count == 0);
    const ScopedEnv ambiguous_gpus{{"FAKE_NVML_UUIDS", "GPU-ab-1,GPU-ab-2"}};
    CHECK(detect({{"CUDA_VISIBLE_DEVICES", "GPU-ab"}}).count == 0);  // ambiguous abbreviation
    CHECK(detect({{"CUDA_VISIBLE_DEVICES", "GPU-ab-2"}}).count == 1);
  }

  TEST_CASE("detect: MIG instances and GPUs in MIG mode are counted by the driver") {
    if (!fake_driver_loaded()) return;
    const Detection mig_uuid = detect({{"CUDA_VISIBLE_DEVICES", "MIG-1234"}, {"FAKE_CU_COUNT", "1"}});
    CHECK(mig_uuid.count == 1);
    CHECK(mig_uuid.driver_initialised);
    const Detection mig_mode = detect({{"CUDA_VISIBLE_DEVICES", nullptr}, {"FAKE_NVML_MIG", "1"}, {"FAKE_CU_COUNT", "7"}});
    CHECK(mig_mode.count == 7);
    CHECK(mig_mode.driver_initialised);
  }

  TEST_CASE("detect: a driver older than the runtime is reported as such") {
    if (!fake_driver_loaded()) return;
    const Detection old = detect({{"FAKE_CU_DRIVER_VERSION", "12020"}});
    CHECK(old.count == 0);
    CHECK(mentions(old.reason, "CUDA driver 12.2 is older than the runtime"));
    CHECK(mentions(old.reason, "update the NVIDIA driver"));
    const Detection minor_newer = detect({{"FAKE_CU_DRIVER_VERSION", "13020"}, {"CUDA_VISIBLE_DEVICES", nullptr}});
    CHECK(minor_newer.count == 2);
    const Detection broken = detect({{"FAKE_CU_DRIVER_VERSION", "0"}});
    CHECK(broken.count == 0);
    CHECK(mentions(broken.reason, "no CUDA driver (cuDriverGetVersion"));
  }

  TEST_CASE("detect: NVML lists GPUs but cuInit fails: unavailable with the reason, and this process stays uninitialised") {
    if (!fake_driver_loaded()) return;
    reset_fake_driver();
    const Detection broken = detect({{"FAKE_CU_INIT", "999"}});
    CHECK(broken.count == 0);  // before: 2, and the first real call threw
    CHECK(mentions(broken.reason, "CUDA driver unusable (cuInit: CUDA_ERROR_UNKNOWN"));
    CHECK(mentions(broken.reason, "although NVML lists 2 GPUs"));
    CHECK_FALSE(broken.driver_initialised);
    const Detection no_device = detect({{"FAKE_CU_INIT", "100"}, {"CUDA_VISIBLE_DEVICES", "1"}});
    CHECK(no_device.count == 0);
    CHECK(no_device.reason ==
          "no CUDA device (cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected) although NVML lists 1 GPU");
    const Detection zero = detect({{"FAKE_CU_COUNT", "0"}});
    CHECK(zero.count == 0);
    CHECK(mentions(zero.reason, "cuDeviceGetCount returned 0"));
    const Detection working = detect({});
    CHECK(working.count == 2);
    CHECK(working.reason.empty());
    // cuInit ran in child processes only: this process can still fork and initialise CUDA later.
    CHECK(cu_init_calls() == 0);
  }

  TEST_CASE("detect: a driver that hangs in cuInit is reported after a bounded wait") {
    if (!fake_driver_loaded()) return;
    reset_fake_driver();
    const auto t0 = std::chrono::steady_clock::now();
    const Detection hung = detect({{"FAKE_CU_INIT_SLEEP_MS", "20000"}, {"ACCEL_CUDA_INIT_TIMEOUT", "0.25"}});
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(hung.count == 0);
    CHECK(mentions(hung.reason, "cuInit did not return within 0.25 s"));
    CHECK(mentions(hung.reason, "ACCEL_CUDA_INIT_TIMEOUT"));
    CHECK(seconds < 5.0);
    const Detection bad = detect({{"ACCEL_CUDA_INIT_TIMEOUT", "soon"}});
    CHECK(bad.count == 0);
    CHECK(mentions(bad.reason, "ACCEL_CUDA_INIT_TIMEOUT='soon' is not a number of seconds"));
    CHECK(cu_init_calls() == 0);
  }

  TEST_CASE("detect: a probe ended from outside (compute-sanitizer) leaves NVML's answer standing") {
    if (!fake_driver_loaded()) return;
    reset_fake_driver();
    const auto t0 = std::chrono::steady_clock::now();
    const Detection d = detect({{"FAKE_CU_INIT_KILL_PARENT", "1"}});
    CHECK(d.count == 2);  // before: 0, "the process probing cuInit was lost", and no GPU under the sanitizer
    CHECK(d.reason.empty());
    CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 10.0);
    CHECK(cu_init_calls() == 0);  // still not initialised here
  }

  TEST_CASE("detect: under a CUDA injection tool (ncu, nsys, compute-sanitizer) no probe runs; NVML's answer stands") {
    if (!fake_driver_loaded()) return;
    reset_fake_driver();
    // A tool that injects through the driver (CUDA_INJECTION64_PATH), and Nsight Compute 2025.3 as seen
    // on an H200 (no CUDA_INJECTION64_PATH; its process tracking's token). A probe would hang for 20 s,
    // as cuInit in a forked child did under Nsight Compute.
    const std::pair<const char*, const char*> tools[] = {{"CUDA_INJECTION64_PATH", "/opt/nsight/libInjection.so"},
                                                         {"NV_TPS_LAUNCH_TOKEN", "Interactive Profile"}};
    for (const auto& [variable, value] : tools) {
      CAPTURE(variable);
      const auto t0 = std::chrono::steady_clock::now();
      const Detection d = detect({{variable, value}, {"FAKE_CU_INIT_SLEEP_MS", "20000"}, {"ACCEL_CUDA_INIT_TIMEOUT", "10"}});
      CHECK(d.count == 2);
      CHECK(d.reason.empty());
      CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 5.0);
      CHECK(cu_init_calls() == 0);
    }
  }

  TEST_CASE("detect: a process that initialised the driver itself needs no probe") {
    if (!fake_driver_loaded()) return;
    reset_fake_driver();
    REQUIRE(accel::cuda::detail::driver().init(0) == CUDA_SUCCESS);
    // A probe would fail (FAKE_CU_INIT applies to new cuInit calls): the driver already works here.
    const Detection d = detect({{"FAKE_CU_INIT", "999"}});
    CHECK(d.count == 2);
    CHECK(cu_init_calls() == 1);
    reset_fake_driver();
  }

  TEST_CASE("detect: the cached answer is the backend's") {
    if (!fake_driver_loaded()) return;
    const auto& cached = accel::cuda::detail::detection();
    CHECK(cached.count == detect_devices().count);
  }
}

TEST_SUITE("driver") {
  TEST_CASE("detect: without NVML, cuInit and cuDeviceGetCount count the devices") {
    if (!fake_driver_loaded()) return;
    REQUIRE_FALSE(accel::cuda::detail::nvml().loaded);
    CHECK(mentions(accel::cuda::detail::nvml().error, "libnvidia-ml.so.1"));
    const Detection three = detect({{"FAKE_CU_COUNT", "3"}});
    CHECK(three.count == 3);
    CHECK(three.driver_initialised);
    const Detection none = detect({{"FAKE_CU_INIT", "100"}});
    CHECK(none.count == 0);
    CHECK(none.reason == "no CUDA device (cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected)");
    const Detection broken = detect({{"FAKE_CU_INIT", "999"}});
    CHECK(broken.count == 0);
    CHECK(mentions(broken.reason, "CUDA driver unusable (cuInit: CUDA_ERROR_UNKNOWN"));
    const Detection zero = detect({{"FAKE_CU_COUNT", "0"}});
    CHECK(zero.count == 0);
    CHECK(mentions(zero.reason, "no CUDA device"));
  }
}
