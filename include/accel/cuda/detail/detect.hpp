// accel/cuda/detail/detect.hpp — is there a usable CUDA device, and if not, why not.
//
// Detection must have no side effects: it creates no CUDA context and, where it can, does not even
// initialise the driver, because a process whose parent called cuInit() cannot use CUDA after fork()
// ("Cannot re-initialize CUDA in forked subprocess"). In order:
//   1. libcuda.so.1 is loaded with dlopen                   -> else "no CUDA driver (...)"
//   2. cuDriverGetVersion (needs no cuInit) >= the runtime's major version
//                                                           -> else "CUDA driver 12.2 is older than ..."
//   3. CUDA_VISIBLE_DEVICES, parsed by the driver's rules   -> "" or a repeated entry: no device
//   4. NVML counts the GPUs and matches ordinals / UUIDs against them (fork-safe, like torch's
//      PYTORCH_NVML_BASED_CUDA_CHECK); MIG instances and GPUs in MIG mode are left to step 5.
//      NVML answers while the driver itself cannot initialise (the system is not ready, a device node
//      is missing, a driver/library mismatch): so when NVML lists GPUs, cuInit(0) and cuDeviceGetCount
//      are confirmed in a short-lived child process (accel/detail/subprocess.hpp), which leaves this
//      process uninitialised and safe to fork. The wait is bounded: ACCEL_CUDA_INIT_TIMEOUT seconds
//      (default 30); a driver that does not answer in time is reported unusable. When this process has
//      already initialised the driver (cuDeviceGetCount works without cuInit), no child is needed; when
//      no child can be started (a sandbox without fork) or it is ended from outside (compute-sanitizer),
//      or a CUDA tool is attached (CUDA_INJECTION64_PATH; Nsight's process tracking, NV_TPS_LAUNCH_TOKEN:
//      a probe hung under ncu), NVML's answer stands. Cost: one fork() and
//      cuInit's own time in the child, once per process, only where NVML lists GPUs.
//   5. otherwise cuInit(0) + cuDeviceGetCount: no context, but the driver is initialised
// The answer is computed once per process (thread-safe) and cached.
#pragma once

#include <accel/cuda/detail/driver.hpp>
#include <accel/cuda/detail/visible_devices.hpp>
#include <accel/detail/format_number.hpp>
#include <accel/detail/subprocess.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <vector>

namespace accel::cuda::detail {

struct Detection {
  int count = 0;
  std::string reason;     ///< why count == 0
  int driver_version = 0; ///< cuDriverGetVersion, 0 when there is no driver
  bool driver_initialised = false;  ///< step 5 ran cuInit (fork after this point is unsafe)
};

inline std::string version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

// NVML's answer for the visible devices, or -1 when NVML cannot tell (not loaded, MIG involved).
inline int nvml_count(const std::optional<std::vector<VisibleDevice>>& visible) {
  const NvmlApi& api = nvml();
  if (!api.loaded) return -1;
  unsigned raw = 0;
  if (api.device_get_count(&raw) != nvml_success) return -1;
  std::vector<std::string> uuids;
  for (unsigned i = 0; i < raw; ++i) {
    NvmlDevice device = nullptr;
    if (api.device_get_handle_by_index(i, &device) != nvml_success) return -1;
    if (api.device_get_mig_mode != nullptr) {
      unsigned current = 0;
      unsigned pending = 0;
      // MIG mode changes what CUDA enumerates (compute instances, not GPUs): let the driver count.
      if (api.device_get_mig_mode(device, &current, &pending) == nvml_success && current == nvml_mig_enabled) {
        return -1;
      }
    }
    char uuid[nvml_uuid_buffer_size] = {};
    if (api.device_get_uuid(device, uuid, nvml_uuid_buffer_size) != nvml_success) return -1;
    uuids.emplace_back(uuid);
  }
  if (!visible) return static_cast<int>(raw);
  int count = 0;
  for (const auto& entry : *visible) {
    if (entry.is_ordinal()) {
      if (entry.ordinal() >= static_cast<int>(raw)) break;  // the driver stops at the first missing ordinal
    } else {
      const std::string& prefix = entry.uuid();
      if (is_mig(entry)) return -1;
      int matches = 0;
      for (const auto& uuid : uuids) matches += uuid.starts_with(prefix) ? 1 : 0;
      if (matches != 1) break;  // unknown or ambiguous abbreviation ends the list
    }
    ++count;
  }
  return count;
}

/// ACCEL_CUDA_INIT_TIMEOUT in seconds (default 30); 0 with `error` set when it is not a number > 0.
inline double driver_init_timeout(std::string& error) {
  const char* text = std::getenv("ACCEL_CUDA_INIT_TIMEOUT");
  if (text == nullptr || *text == '\0') return 30.0;
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(seconds > 0) || seconds > 86400) {
    error = std::string("ACCEL_CUDA_INIT_TIMEOUT='") + text + "' is not a number of seconds in (0, 86400]";
    return 0;
  }
  return seconds;
}

/// Why the driver cannot initialise although NVML lists `listed` GPUs, or empty when it can: cuInit(0) and
/// cuDeviceGetCount run in a short-lived child process, with a bounded wait (see the header comment).
inline std::string driver_init_problem(const DriverApi& api, int listed) {
  int count = 0;
  if (api.device_get_count(&count) == CUDA_SUCCESS) return {};  // initialised in this process already
  // Under a CUDA tool a forked child's cuInit is the tool's too: under Nsight Compute 2025.3 (which
  // tracks the process tree: NV_TPS_LAUNCH_TOKEN, its libraries by LD_PRELOAD) it never returned, so
  // every run waited out the timeout and then saw no GPU. Tools that inject through the driver set
  // CUDA_INJECTION64_PATH. NVML's answer stands there.
  for (const char* tool : {"CUDA_INJECTION64_PATH", "NV_TPS_LAUNCH_TOKEN"}) {
    if (const char* v = std::getenv(tool); v != nullptr && *v != '\0') return {};
  }
  std::string error;
  const double timeout = driver_init_timeout(error);
  if (timeout == 0) return "CUDA driver not checked: " + error;
  struct Probe {
    std::int32_t init = -1;
    std::int32_t count_status = -1;
    std::int32_t count = 0;
  };
  const auto probe = [&api]() -> int {
    Probe p;
    p.init = static_cast<std::int32_t>(api.init(0));
    int n = 0;
    if (p.init == CUDA_SUCCESS) p.count_status = static_cast<std::int32_t>(api.device_get_count(&n));
    p.count = n;
    return ::write(1, &p, sizeof p) == static_cast<ssize_t>(sizeof p) ? 0 : 1;
  };
  accel::detail::SubprocessOptions options;
  options.timeout_seconds = timeout;
  options.capture_stderr = false;  // what the driver prints goes where this process's stderr goes
  options.max_output = sizeof(Probe);
  const accel::detail::SubprocessResult r = accel::detail::run_in_child(probe, options);
  const std::string listed_text = " although NVML lists " + std::to_string(listed) + " GPU" + (listed == 1 ? "" : "s");
  if (r.outcome == accel::detail::SubprocessOutcome::timed_out) {
    return "CUDA driver unusable: cuInit did not return within " + accel::detail::format_number(timeout) +
           " s in a probe process" +
           listed_text + " (ACCEL_CUDA_INIT_TIMEOUT sets the limit)";
  }
  // No process could be started (a sandbox that forbids fork, no process left under RLIMIT_NPROC), or
  // its supervisor was ended from outside before it could report (seen under compute-sanitizer, which
  // follows forked processes): nothing is known beyond NVML's answer, which stands, as it did before
  // the probe existed. A driver that cannot initialise still fails at first use, with CUDA's error.
  if (r.outcome == accel::detail::SubprocessOutcome::not_started ||
      r.outcome == accel::detail::SubprocessOutcome::lost) {
    return {};
  }
  if (!r.ok() || r.output.size() != sizeof(Probe)) {
    return "CUDA driver unusable: the process probing cuInit " + r.describe() + listed_text;
  }
  Probe p;
  std::memcpy(&p, r.output.data(), sizeof p);
  if (p.init != CUDA_SUCCESS) {
    const auto status = static_cast<CUresult>(p.init);
    return (status == CUDA_ERROR_NO_DEVICE ? "no CUDA device (cuInit: " : "CUDA driver unusable (cuInit: ") +
           api.describe(status) + ")" + listed_text;
  }
  if (p.count_status != CUDA_SUCCESS) {
    return "CUDA driver unusable (cuDeviceGetCount: " + api.describe(static_cast<CUresult>(p.count_status)) + ")" +
           listed_text;
  }
  if (p.count <= 0) return "no CUDA device (cuDeviceGetCount returned 0" + listed_text + ")";
  return {};
}

inline Detection detect_devices() {
  Detection result;
  const DriverApi& api = driver();
  if (!api.loaded) {
    result.reason = "no CUDA driver (" + api.error + ")";
    return result;
  }
  if (const CUresult status = api.driver_get_version(&result.driver_version);
      status != CUDA_SUCCESS || result.driver_version <= 0) {
    result.reason = "no CUDA driver (cuDriverGetVersion: " + api.describe(status) + ")";
    return result;
  }
  if (result.driver_version / 1000 < CUDART_VERSION / 1000) {
    result.reason = "CUDA driver " + version_text(result.driver_version) + " is older than the runtime " +
                    version_text(CUDART_VERSION) + " this build uses (cudaErrorInsufficientDriver): update the "
                    "NVIDIA driver";
    return result;
  }
  const auto visible = visible_devices_from_env();
  if (visible && visible->empty()) {
    result.reason = std::string("no CUDA device visible: CUDA_VISIBLE_DEVICES='") +
                    std::getenv("CUDA_VISIBLE_DEVICES") + "' selects none";
    return result;
  }
  if (const int counted = nvml_count(visible); counted >= 0) {
    result.count = counted;
    if (counted > 0) {
      if (std::string problem = driver_init_problem(api, counted); !problem.empty()) {
        result.count = 0;
        result.reason = std::move(problem);
      }
    } else {
      result.reason = visible ? std::string("no CUDA device: CUDA_VISIBLE_DEVICES='") +
                                    std::getenv("CUDA_VISIBLE_DEVICES") + "' names no GPU NVML knows"
                              : "no CUDA device (NVML reports no GPU; driver " +
                                    version_text(result.driver_version) + ")";
    }
    return result;
  }
  result.driver_initialised = true;
  if (const CUresult status = api.init(0); status != CUDA_SUCCESS) {
    result.reason = (status == CUDA_ERROR_NO_DEVICE ? "no CUDA device (cuInit: " : "CUDA driver unusable (cuInit: ") +
                    api.describe(status) + ")";
    return result;
  }
  int count = 0;
  if (const CUresult status = api.device_get_count(&count); status != CUDA_SUCCESS) {
    result.reason = "CUDA driver unusable (cuDeviceGetCount: " + api.describe(status) + ")";
    return result;
  }
  result.count = count;
  if (count == 0) result.reason = "no CUDA device (cuDeviceGetCount returned 0)";
  return result;
}

/// The cached detection result (computed on first call, thread-safe). Never throws.
inline const Detection& detection() noexcept {
  static const Detection* const result = [] {
    try {
      return new Detection(detect_devices());
    } catch (const std::exception& e) {
      return new Detection{0, std::string("CUDA detection failed: ") + e.what(), 0, false};
    } catch (...) {
      return new Detection{0, "CUDA detection failed", 0, false};
    }
  }();
  return *result;
}

}  // namespace accel::cuda::detail
