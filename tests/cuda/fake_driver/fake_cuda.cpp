// A stand-in libcuda.so.1 for testing CUDA detection on machines without a driver. It exports only the
// entry points accel's detection looks up; environment variables choose its answers at call time:
//   FAKE_CU_DRIVER_VERSION (13000)   cuDriverGetVersion
//   FAKE_CU_INIT (0)                 cuInit's CUresult (100 = CUDA_ERROR_NO_DEVICE)
//   FAKE_CU_INIT_SLEEP_MS (0)        cuInit first sleeps this long (a driver that hangs)
//   FAKE_CU_INIT_KILL_PARENT (0)     1: cuInit first kills its parent process with SIGKILL (what a tool
//                                    following forked processes, compute-sanitizer, did to the probe's
//                                    supervisor), then sleeps until killed itself
//   FAKE_CU_COUNT (2)                cuDeviceGetCount
// fake_cu_init_calls() tells how often cuInit ran in this process, fake_cu_reset() forgets it (the
// driver is then uninitialised again). Never linked: tests put its folder on LD_LIBRARY_PATH.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include <signal.h>
#include <unistd.h>

namespace {
int env_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::atoi(value) : fallback;
}
std::atomic<int> init_calls{0};
std::atomic<bool> initialised{false};  // a cuInit that succeeded; cuDeviceGetCount needs one
}  // namespace

extern "C" {

__attribute__((visibility("default"))) int fake_cu_init_calls() { return init_calls.load(); }

__attribute__((visibility("default"))) void fake_cu_reset() {
  init_calls.store(0);
  initialised.store(false);
}

__attribute__((visibility("default"))) int cuInit(unsigned /*flags*/) {
  if (env_int("FAKE_CU_INIT_KILL_PARENT", 0) == 1) {
    ::kill(::getppid(), SIGKILL);
    std::this_thread::sleep_for(std::chrono::seconds(30));  // PR_SET_PDEATHSIG ends it sooner
  }
  if (const int ms = env_int("FAKE_CU_INIT_SLEEP_MS", 0); ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  ++init_calls;
  const int status = env_int("FAKE_CU_INIT", 0);
  if (status == 0) initialised.store(true);
  return status;
}

__attribute__((visibility("default"))) int cuDriverGetVersion(int* version) {
  *version = env_int("FAKE_CU_DRIVER_VERSION", 13000);
  return 0;
}

__attribute__((visibility("default"))) int cuDeviceGetCount(int* count) {
  if (!initialised.load()) return 3;  // CUDA_ERROR_NOT_INITIALIZED
  *count = env_int("FAKE_CU_COUNT", 2);
  return 0;
}

__attribute__((visibility("default"))) int cuDeviceGet(int* device, int ordinal) {
  *device = ordinal;
  return 0;
}

__attribute__((visibility("default"))) int cuDevicePrimaryCtxGetState(int /*device*/, unsigned* flags, int* active) {
  *flags = 0;
  *active = 0;
  return 0;
}

__attribute__((visibility("default"))) int cuGetErrorName(int status, const char** name) {
  *name = status == 100 ? "CUDA_ERROR_NO_DEVICE" : status == 3 ? "CUDA_ERROR_NOT_INITIALIZED" : "CUDA_ERROR_UNKNOWN";
  return 0;
}

__attribute__((visibility("default"))) int cuGetErrorString(int status, const char** text) {
  *text = status == 100 ? "no CUDA-capable device is detected" : "fake error";
  return 0;
}

}  // extern "C"
