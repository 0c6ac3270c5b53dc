// accel's profile ranges reach a profiler attached the way Nsight Systems attaches: NVTX_INJECTION64_PATH
// names a tool library (here nvtx_tool.cpp, which records what it is told), accel loads NVTX's library
// (libnvtx3interop.so.1) at the first range, and NVTX hands the calls to the tool. Also: the attribute
// structure accel passes has NVTX's layout, and a library that cannot serve is refused whole.
// Run by CTest with NVTX_INJECTION64_PATH set (tests/core/CMakeLists.txt).
#include "support/scoped_env.hpp"

#include <accel/profile/ranges.hpp>

#include <nvtx3/nvToolsExt.h>  // the real layout, to compare with accel's declaration

#include <doctest/doctest.h>

#include <dlfcn.h>

#include <cstddef>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using accel::profile::detail::NvtxEventAttributes;

static_assert(sizeof(NvtxEventAttributes) == sizeof(nvtxEventAttributes_t));
static_assert(offsetof(NvtxEventAttributes, version) == offsetof(nvtxEventAttributes_t, version));
static_assert(offsetof(NvtxEventAttributes, size) == offsetof(nvtxEventAttributes_t, size));
static_assert(offsetof(NvtxEventAttributes, category) == offsetof(nvtxEventAttributes_t, category));
static_assert(offsetof(NvtxEventAttributes, color_type) == offsetof(nvtxEventAttributes_t, colorType));
static_assert(offsetof(NvtxEventAttributes, color) == offsetof(nvtxEventAttributes_t, color));
static_assert(offsetof(NvtxEventAttributes, payload_type) == offsetof(nvtxEventAttributes_t, payloadType));
static_assert(offsetof(NvtxEventAttributes, payload) == offsetof(nvtxEventAttributes_t, payload));
static_assert(offsetof(NvtxEventAttributes, message_type) == offsetof(nvtxEventAttributes_t, messageType));
static_assert(offsetof(NvtxEventAttributes, message) == offsetof(nvtxEventAttributes_t, message));

std::string tool_log() {
  const char* tool = std::getenv("NVTX_INJECTION64_PATH");
  REQUIRE(tool != nullptr);
  void* handle = ::dlopen(tool, RTLD_NOW | RTLD_NOLOAD);  // NVTX loaded it: no second copy
  REQUIRE_MESSAGE(handle != nullptr, "the tool was not loaded by NVTX: " << tool);
  const auto log = reinterpret_cast<const char* (*)()>(::dlsym(handle, "accel_test_nvtx_log"));
  const bool found = log != nullptr;
  REQUIRE_MESSAGE(found, "the tool lacks accel_test_nvtx_log");
  std::string text = log();
  ::dlclose(handle);
  return text;
}

}  // namespace

TEST_CASE("NVTX: accel's attributes have NVTX's values") {
  const NvtxEventAttributes a;
  CHECK(a.version == NVTX_VERSION);
  CHECK(a.size == NVTX_EVENT_ATTRIB_STRUCT_SIZE);
  CHECK(a.message_type == NVTX_MESSAGE_TYPE_ASCII);
  CHECK(a.category == 0);
  CHECK(a.color_type == NVTX_COLOR_UNKNOWN);
  CHECK(a.payload_type == NVTX_PAYLOAD_UNKNOWN);
}

TEST_CASE("NVTX: ranges reach the attached tool through NVTX's library, default domain and named ones") {
  REQUIRE(accel::profile::has_nvtx());
  REQUIRE(accel::profile::detail::nvtx_wanted());
  CHECK(accel::profile::range_push("step") == 1);
  const auto& nvtx = accel::profile::detail::nvtx();
  REQUIRE_MESSAGE(nvtx.loaded, "NVTX's library did not load (see stderr)");
  CHECK(nvtx.library.find("nvtx3interop") != std::string::npos);
  CHECK(accel::profile::range_push("forward", "accel.engine") == 1);
  CHECK(accel::profile::range_push("attention", "accel.engine") == 2);
  CHECK(accel::profile::range_pop("accel.engine") == 1);
  CHECK(accel::profile::range_push("backward", "accel.comm") == 1);
  CHECK(accel::profile::range_pop("accel.comm") == 0);
  CHECK(accel::profile::range_pop("accel.engine") == 0);
  CHECK(accel::profile::range_pop() == 0);
  CHECK(tool_log() ==
        "attached;push step;domain accel.engine;push 1:forward;push 1:attention;pop 1;domain accel.comm;push 2:backward;"
        "pop 2;pop 1;pop;");
  // An unbalanced pop is refused by accel before NVTX sees it.
  CHECK_THROWS_AS(accel::profile::range_pop(), accel::InvalidStateError);
  CHECK(tool_log().substr(tool_log().size() - 4) == "pop;");
}

TEST_CASE("NVTX: a library that cannot serve is refused whole, naming what it lacks") {
  const auto missing = accel::profile::detail::load_nvtx({"/nonexistent/libnvtx3interop.so.1"});
  CHECK_FALSE(missing.loaded);
  const bool none = missing.range_push_a == nullptr;
  CHECK(none);
  // The tool library loads but is not NVTX: nothing of it is used.
  const auto wrong = accel::profile::detail::load_nvtx({std::getenv("NVTX_INJECTION64_PATH")});
  CHECK_FALSE(wrong.loaded);
  const bool nothing = wrong.range_push_a == nullptr && wrong.domain_range_pop == nullptr;
  CHECK(nothing);
}

TEST_CASE("NVTX: loaded only when a tool is attached or ACCEL_NVTX_LIBRARY names a library") {
  const char* tool_env = std::getenv("NVTX_INJECTION64_PATH");
  REQUIRE_MESSAGE(tool_env != nullptr, "CTest sets NVTX_INJECTION64_PATH to the fake tool library");
  const std::string tool = tool_env;
  ScopedEnv env{{"NVTX_INJECTION64_PATH", nullptr}, {"ACCEL_NVTX_LIBRARY", nullptr}};
  CHECK_FALSE(accel::profile::detail::nvtx_wanted());
  env.set("ACCEL_NVTX_LIBRARY", "/opt/x/libnvtx3interop.so.1");
  CHECK(accel::profile::detail::nvtx_wanted());
  env.set("CUDA_HOME", "/opt/cuda-x");
  env.unset("CUDA_PATH");
  const auto candidates = accel::profile::detail::nvtx_library_candidates();
  const std::vector<std::string> expected{"/opt/x/libnvtx3interop.so.1", "libnvtx3interop.so.1", "libnvtx3interop.so",
                                          "/opt/cuda-x/lib64/libnvtx3interop.so.1",
                                          "/usr/local/cuda/lib64/libnvtx3interop.so.1"};
  CHECK(candidates == expected);
  env.unset("ACCEL_NVTX_LIBRARY");
  env.set("NVTX_INJECTION64_PATH", tool.c_str());
  CHECK(accel::profile::detail::nvtx_wanted());
}
