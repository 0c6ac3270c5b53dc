// DtypeApi, ProfileApi, EnvApi and FlagsApi conformance.
#include "backends.hpp"

#include <algorithm>
#include <array>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

TEST_CASE_TEMPLATE_DEFINE("dtypes: supported_dtypes agrees with the fp16/bf16 answers", B, dtypes) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  const auto dtypes = b.supported_dtypes();
  const auto has = [&](accel::Dtype d) { return std::find(dtypes.begin(), dtypes.end(), d) != dtypes.end(); };
  CHECK(has(accel::Dtype::float32));
  CHECK(has(accel::Dtype::float16) == b.is_fp16_supported());
  CHECK(has(accel::Dtype::bfloat16) == b.is_bf16_supported());
  // DeepSpeed's rule: Triton on a CUDA device of compute capability >= 8.0 (where bfloat16 is computed
  // too), never on the CPU.
  if (b.device_type() == accel::DeviceType::cpu) {
    CHECK_FALSE(b.is_triton_supported());
  } else {
    CHECK(b.is_triton_supported() == b.is_bf16_supported());
  }
}

TEST_CASE_TEMPLATE_DEFINE("profile: ranges nest per thread and per domain", B, ranges) {
  const B b;
  CHECK(b.range_push("step") == 1);
  CHECK(b.range_push("forward") == 2);
  CHECK(b.range_push("allreduce", "comm") == 1);
  // accel::profile::range_depth reads the same per-thread, per-domain counts the backend keeps
  CHECK(accel::profile::range_depth() == 2);
  CHECK(accel::profile::range_depth("comm") == 1);
  CHECK(accel::profile::range_depth("elsewhere") == 0);
  int other_thread_depth = -1;
  std::thread([&] { other_thread_depth = accel::profile::range_depth(); }).join();
  CHECK(other_thread_depth == 0);  // another thread's ranges are its own
  CHECK(b.range_pop("comm") == 0);
  CHECK(accel::profile::range_depth("comm") == 0);
  CHECK(b.range_pop() == 1);
  CHECK(b.range_pop() == 0);
  CHECK_THROWS_AS(b.range_pop(), accel::InvalidStateError);
  CHECK_THROWS_AS(b.range_pop("comm"), accel::InvalidStateError);
}

TEST_CASE_TEMPLATE_DEFINE("env: launcher variables and lazy_call", B, env) {
  const B b;
  // DeepSpeed's names: the CPU's collectives over MPI (accel/comm), CUDA's over NCCL.
  const bool cpu = b.device_type() == accel::DeviceType::cpu;
  CHECK(std::string_view(b.communication_backend_name()) == (cpu ? "mpi" : "nccl"));
  CHECK(b.visible_devices_envs() ==
        std::vector<std::string>{cpu ? "ACCEL_CPU_VISIBLE_DEVICES" : "CUDA_VISIBLE_DEVICES"});
  CHECK(b.export_envs() == (cpu ? std::vector<std::string>{"ACCEL_", "OMP_", "OMPI_MCA_"}
                                : std::vector<std::string>{"NCCL", "CUDA"}));
  // This program does not include accel/comm, so the engine's version says where it comes from.
  CHECK(b.communication_backend_version().rfind("unavailable in this program: communication goes through accel/comm", 0) == 0);
  const auto names = b.visible_devices_envs();
  REQUIRE_FALSE(names.empty());
  accel::EnvMap env{{"PATH", "/usr/bin"}};
  const std::array<int, 3> ids{0, 2, 3};
  b.set_visible_devices_envs(env, ids);
  for (const auto& name : names) CHECK(env.at(name) == "0,2,3");
  CHECK(env.at("PATH") == "/usr/bin");
  const std::array<int, 1> negative{-1};
  CHECK_THROWS_AS(b.set_visible_devices_envs(env, negative), accel::InvalidArgumentError);
  // The launcher's export list (DeepSpeed's runner forwards variables with these prefixes to every node)
  // carries the variable that picks the devices, so a multi-node launch keeps each rank's selection.
  const auto prefixes = b.export_envs();
  REQUIRE_FALSE(prefixes.empty());
  for (const auto& name : names) {
    CAPTURE(name);
    CHECK(std::any_of(prefixes.begin(), prefixes.end(), [&](const std::string& p) { return name.starts_with(p); }));
  }
  for (const auto& p : prefixes) CHECK_FALSE(p.empty());

  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  b.synchronize();  // the runtime is initialised from here on
  int calls = 0;
  b.lazy_call([&] { ++calls; });
  CHECK(calls == 1);
  // Any callable: a std::function, a function pointer; empty ones are ignored.
  b.lazy_call(std::function<void()>([&] { calls += 10; }));
  CHECK(calls == 11);
  static int pointer_calls = 0;
  pointer_calls = 0;
  b.lazy_call(+[] { ++pointer_calls; });
  CHECK(pointer_calls == 1);
  b.lazy_call(std::function<void()>{});
  void (*null_callback)() = nullptr;
  b.lazy_call(null_callback);
  CHECK(calls == 11);
  CHECK(pointer_calls == 1);
  // Once initialised, a callback's exception reaches the caller, and the next callback still runs.
  CHECK_THROWS_WITH_AS(b.lazy_call([] { throw std::runtime_error("from a lazy callback"); }), "from a lazy callback",
                       std::runtime_error);
  b.lazy_call([&] { calls += 100; });
  CHECK(calls == 111);
}

TEST_CASE_TEMPLATE_DEFINE("flags: compile-time constants", B, flags) {
  // Every accel backend is asynchronous — the CPU's streams are worker queues, unlike DeepSpeed's CPU
  // accelerator, which answers true to all four — so work is timed with events and ordered explicitly.
  static_assert(!B::is_synchronized_device);
  static_assert(!B::use_host_timers);
  static_assert(!B::resolves_data_dependency);
  static_assert(!B::handles_memory_backpressure);
}

TEST_CASE_TEMPLATE_APPLY(dtypes, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(ranges, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(env, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(flags, ConformanceBackends);
