// A stand-in for a profiler's NVTX injection library (what Nsight Systems names in
// NVTX_INJECTION64_PATH): NVTX calls InitializeInjectionNvtx2 at its first call, the tool puts its own
// functions into NVTX's tables, and records every range it is told of, for test_profile_nvtx to read.
#define NVTX_NO_IMPL  // the types of NVTX's injection interface, none of its implementation
#include <nvtx3/nvToolsExt.h>

#include <mutex>
#include <string>

namespace {

std::mutex log_mutex;
std::string log_text;
int domains = 0;

void note(const std::string& line) {
  const std::lock_guard lock(log_mutex);
  log_text += line + ";";
}

int push_a(const char* message) {
  note(std::string("push ") + message);
  return 0;
}
int pop() {
  note("pop");
  return 0;
}
nvtxDomainHandle_t domain_create_a(const char* name) {
  note(std::string("domain ") + name);
  return reinterpret_cast<nvtxDomainHandle_t>(static_cast<std::uintptr_t>(++domains) * 16);
}
int domain_push_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* a) {
  std::string line = "push " + std::to_string(reinterpret_cast<std::uintptr_t>(domain) / 16) + ":";
  if (a != nullptr && a->version == NVTX_VERSION && a->size == NVTX_EVENT_ATTRIB_STRUCT_SIZE &&
      a->messageType == NVTX_MESSAGE_TYPE_ASCII && a->message.ascii != nullptr) {
    line += a->message.ascii;
  } else {
    line += "<malformed attributes>";
  }
  note(line);
  return 0;
}
int domain_pop(nvtxDomainHandle_t domain) {
  note("pop " + std::to_string(reinterpret_cast<std::uintptr_t>(domain) / 16));
  return 0;
}

template <class F>
void install(NvtxFunctionTable table, unsigned int size, unsigned int id, F f) {
  // size: NVTX's last index into the table
  if (table != nullptr && id <= size && table[id] != nullptr) *table[id] = reinterpret_cast<NvtxFunctionPointer>(f);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr) return 0;
  NvtxFunctionTable core = nullptr, core2 = nullptr;
  unsigned int core_size = 0, core2_size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size) == 0) return 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size) == 0) return 0;
  install(core, core_size, NVTX_CBID_CORE_RangePushA, push_a);
  install(core, core_size, NVTX_CBID_CORE_RangePop, pop);
  install(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, domain_create_a);
  install(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, domain_push_ex);
  install(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, domain_pop);
  note("attached");
  return 1;
}

/// What the tool was told, "event;event;...".
__attribute__((visibility("default"))) const char* accel_test_nvtx_log() {
  const std::lock_guard lock(log_mutex);
  static std::string copy;
  copy = log_text;
  return copy.c_str();
}

}  // extern "C"
