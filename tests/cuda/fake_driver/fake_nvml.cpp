// A stand-in libnvidia-ml.so.1 for testing CUDA detection without a driver (see fake_cuda.cpp):
//   FAKE_NVML_INIT (0)                     nvmlInit_v2's result
//   FAKE_NVML_UUIDS ("GPU-aaaa-1,GPU-bbbb-2")  the GPUs, in NVML order
//   FAKE_NVML_MIG ("")                     comma-separated indices of GPUs in MIG mode
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {
std::vector<std::string> env_list(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  std::string text = value != nullptr ? value : fallback;
  std::vector<std::string> items;
  std::size_t pos = 0;
  while (!text.empty() && pos <= text.size()) {
    const std::size_t comma = text.find(',', pos);
    items.push_back(text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return items;
}
std::vector<std::string> uuids() { return env_list("FAKE_NVML_UUIDS", "GPU-aaaa-1,GPU-bbbb-2"); }
}  // namespace

extern "C" {

__attribute__((visibility("default"))) int nvmlInit_v2() {
  const char* value = std::getenv("FAKE_NVML_INIT");
  return value != nullptr ? std::atoi(value) : 0;
}

__attribute__((visibility("default"))) int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = static_cast<unsigned>(uuids().size());
  return 0;
}

__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  *device = reinterpret_cast<void*>(static_cast<std::uintptr_t>(index) + 1);
  return 0;
}

__attribute__((visibility("default"))) int nvmlDeviceGetUUID(void* device, char* buffer, unsigned size) {
  const auto all = uuids();
  const auto index = reinterpret_cast<std::uintptr_t>(device) - 1;
  if (index >= all.size() || all[index].size() + 1 > size) return 1;
  std::memcpy(buffer, all[index].c_str(), all[index].size() + 1);
  return 0;
}

__attribute__((visibility("default"))) int nvmlDeviceGetMigMode(void* device, unsigned* current, unsigned* pending) {
  const auto index = std::to_string(reinterpret_cast<std::uintptr_t>(device) - 1);
  *current = 0;
  for (const auto& mig : env_list("FAKE_NVML_MIG", "")) {
    if (mig == index) *current = 1;
  }
  *pending = *current;
  return 0;
}

}  // extern "C"
