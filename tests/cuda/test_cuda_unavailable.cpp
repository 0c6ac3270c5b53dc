// CudaBackend where it may have no GPU: detection, the unavailable path, error mapping,
// CUDA_VISIBLE_DEVICES parsing. Adapts when a GPU is present (then the device checks run instead).
#include "support/lazy_init_contract.hpp"
#include "support/scoped_env.hpp"

#include <accel/cuda/backend.hpp>

#include <doctest/doctest.h>

#include <array>
#include <cstdlib>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using accel::CudaBackend;
using accel::cuda::VisibleDevice;

constexpr CudaBackend cuda{};

bool mentions(const std::string& text, const char* word) { return text.find(word) != std::string::npos; }

cudaError_t fail_with(cudaError_t status) { return status; }

}  // namespace

// ---- the contract, at compile time --------------------------------------------------------------

static_assert(accel::Accelerator<CudaBackend>);
static_assert(std::is_empty_v<CudaBackend> && std::is_trivially_copyable_v<CudaBackend>);
static_assert(CudaBackend::device_type() == accel::DeviceType::cuda);
static_assert(CudaBackend::name() == "cuda");
static_assert(!CudaBackend::is_synchronized_device && !CudaBackend::use_host_timers &&
              !CudaBackend::resolves_data_dependency && !CudaBackend::handles_memory_backpressure);
static_assert(std::is_trivially_copyable_v<accel::cuda::StreamRef>);
static_assert(!std::is_constructible_v<accel::cuda::StreamRef, int, int>);
static_assert(!std::is_constructible_v<accel::cuda::StreamRef, std::nullptr_t, int>);
static_assert(!std::is_copy_constructible_v<accel::cuda::Stream> && std::is_nothrow_move_constructible_v<accel::cuda::Stream>);
static_assert(!std::is_copy_constructible_v<accel::cuda::Event> && std::is_nothrow_move_constructible_v<accel::cuda::Event>);
static_assert(accel::RawMemoryPolicy<accel::cuda::DeviceMemory>);
static_assert(accel::cuda::is_sticky(cudaErrorIllegalAddress) && !accel::cuda::is_sticky(cudaErrorInvalidValue));
static_assert(accel::cuda::errc_of(cudaErrorMemoryAllocation) == accel::Errc::out_of_memory);

// ---- detection ------------------------------------------------------------------------------------

TEST_CASE("cuda: detection never throws and explains itself") {
  const int count = cuda.device_count();
  const accel::Availability availability = cuda.availability();
  CHECK(cuda.is_available() == (count > 0));
  CHECK(availability.available == (count > 0));
  CHECK(cuda.device_name() == "cuda");
  if (count == 0) {
    MESSAGE("no CUDA device here: " << availability.reason);
    CHECK_FALSE(availability.reason.empty());
    CHECK((mentions(availability.reason, "driver") || mentions(availability.reason, "device")));
    if (!accel::cuda::detail::driver().loaded) {
      CHECK(mentions(availability.reason, "no CUDA driver"));
      CHECK(mentions(availability.reason, "libcuda.so.1"));
    }
    CHECK_FALSE(accel::cuda::Environment::is_initialized());  // detection initialised nothing
    if (!accel::cuda::detail::driver().loaded) CHECK(CudaBackend::driver_version() == 0);
  } else {
    MESSAGE("CUDA devices here: " << count);
    CHECK(count >= 1);
    CHECK(availability.reason.empty());
    CHECK(cuda.device_name(0) == "cuda:0");
    CHECK(cuda.device(0) == accel::Device(accel::DeviceType::cuda, 0));
    CHECK(CudaBackend::driver_version() >= CudaBackend::runtime_version() / 1000 * 1000);
    CHECK_FALSE(cuda.product_name(0).empty());
  }
  static_assert(CudaBackend::runtime_version() == CUDART_VERSION);
  CHECK(cuda.device_count() == count);  // cached, stable
}

TEST_CASE("cuda: out-of-range devices are InvalidArgumentError when CUDA is available") {
  const int count = cuda.device_count();
  if (count == 0) return;
  try {
    cuda.set_device(count);
    FAIL("set_device accepted an index out of range");
  } catch (const accel::InvalidArgumentError& e) {
    CHECK(std::string(e.what()) == "cuda:" + std::to_string(count) + " does not exist (device_count() == " +
                                       std::to_string(count) + ")");
  }
  CHECK_THROWS_AS(accel::cuda::Stream{count}, accel::InvalidArgumentError);
}

// ---- the unavailable path ----------------------------------------------------------------------------

TEST_CASE("cuda: without a device every call that needs one throws BackendUnavailableError") {
  if (cuda.is_available()) {
    MESSAGE("SKIPPED: a CUDA device is present");
    return;
  }
  const std::string reason = cuda.availability().reason;
  try {
    cuda.set_device(0);
    FAIL("set_device(0) succeeded without a device");
  } catch (const accel::BackendUnavailableError& e) {
    CHECK(mentions(e.what(), reason.c_str()));
    CHECK(e.code() == accel::Errc::backend_unavailable);
  }
  CHECK_THROWS_AS((void)cuda.current_device(), accel::BackendUnavailableError);
  CHECK_THROWS_AS((void)cuda.current_device_name(), accel::BackendUnavailableError);
  CHECK_THROWS_AS((void)cuda.device_name(0), accel::BackendUnavailableError);
  CHECK_THROWS_AS((void)cuda.device(0), accel::BackendUnavailableError);
  CHECK_THROWS_AS((void)cuda.product_name(0), accel::BackendUnavailableError);
  CHECK_THROWS_AS((void)cuda.compute_capability(0), accel::BackendUnavailableError);
  CHECK_THROWS_AS(CudaBackend::DeviceGuard{0}, accel::BackendUnavailableError);
  CHECK_THROWS_AS(cuda.synchronize(), accel::BackendUnavailableError);
  CHECK_THROWS_AS(cuda.synchronize(0), accel::BackendUnavailableError);

  CHECK_THROWS_AS(CudaBackend::Stream{}, accel::BackendUnavailableError);
  CHECK_THROWS_AS(CudaBackend::Stream(0, 0), accel::BackendUnavailableError);
  CHECK_THROWS_AS((void)cuda.current_stream(), accel::BackendUnavailableError);
  CHECK_THROWS_AS((void)cuda.default_stream(0), accel::BackendUnavailableError);
  CHECK_THROWS_AS((void)accel::cuda::StreamRef(cudaStream_t{}, 0), accel::BackendUnavailableError);
  CHECK_THROWS_AS((void)cuda.stream_from_pool(0), accel::BackendUnavailableError);

  CHECK_THROWS_AS((void)cuda.memory_allocated(), accel::BackendUnavailableError);
  CHECK_THROWS_AS((void)cuda.memory_stats(0), accel::BackendUnavailableError);
  CHECK_THROWS_AS((void)cuda.total_memory(), accel::BackendUnavailableError);
  CHECK_THROWS_AS((void)cuda.get_memory_info(0), accel::BackendUnavailableError);
  cuda.empty_cache();  // nothing cached: nothing to do
  CHECK_THROWS_AS((void)cuda.pinned_allocator(), accel::BackendUnavailableError);
  int host = 0;
  CHECK_THROWS_AS((void)cuda.host_alloc(64), accel::BackendUnavailableError);
  CHECK_THROWS_AS((void)cuda.host_memory_stats(), accel::BackendUnavailableError);
  CHECK_THROWS_AS(cuda.host_free(&host), accel::BackendUnavailableError);
  cuda.host_free(nullptr);  // a no-op
  cuda.host_empty_cache();  // nothing cached: nothing to do
  CHECK_THROWS_AS(cuda.pin_memory(&host, sizeof host), accel::BackendUnavailableError);
  CHECK_FALSE(cuda.is_pinned(&host));
  CHECK_FALSE(cuda.unpin_memory(&host));
  CHECK_FALSE(cuda.on_accelerator(&host));
  CHECK_THROWS_AS(cuda.raw_delete(&host), accel::InvalidArgumentError);
  cuda.raw_delete(nullptr);

  CHECK_FALSE(cuda.is_fp16_supported());
  CHECK_FALSE(cuda.is_bf16_supported());
  CHECK_THROWS_AS((void)cuda.supported_dtypes(), accel::BackendUnavailableError);

  // Events need no device until they are recorded.
  CudaBackend::Event untimed;
  CudaBackend::Event timed{true};
  CHECK(untimed.query());
  untimed.synchronize();
  CHECK_FALSE(timed.recorded());
  CHECK_THROWS_AS((void)timed.elapsed_time(timed), accel::InvalidStateError);
  CHECK_THROWS_AS((void)timed.elapsed_time(untimed), accel::InvalidStateError);
  CHECK_THROWS_AS(untimed.record(), accel::BackendUnavailableError);
  CudaBackend::Event moved = std::move(timed);
  CHECK(moved.timing_enabled());
}

TEST_CASE("cuda: lazy_call waits for the runtime, which detection does not start") {
  if (cuda.is_available()) {
    cuda.synchronize();  // initialises the runtime
    int calls = 0;
    cuda.lazy_call([&] { ++calls; });
    CHECK(calls == 1);
    return;
  }
  static int calls = 0;
  cuda.lazy_call([] { ++calls; });
  CHECK(calls == 0);
  CHECK_FALSE(accel::cuda::Environment::is_initialized());
  cuda.lazy_call({});  // an empty callback is ignored
}

// Run by its own ctest entry (test_cuda_lazy_init): it needs a process whose CUDA runtime accel has not
// initialised, and leaves it initialised. The trigger is what set_device(), a DeviceGuard, a stream or
// an allocation call once the runtime is up (detail::ensure_lazy_init), so it runs without a GPU.
TEST_CASE("cuda: lazy_call follows torch's lazy-init contract from several threads" * doctest::skip()) {
  REQUIRE_FALSE(accel::cuda::Environment::is_initialized());
  accel_test::check_lazy_init_contract([](std::function<void()> fn) { cuda.lazy_call(std::move(fn)); },
                                       [] { accel::cuda::detail::ensure_lazy_init(); },
                                       [] { return accel::cuda::Environment::is_initialized(); });
}

TEST_CASE("cuda: profiling and launcher environment need no device") {
  CHECK(cuda.range_push("step") == 1);
  CHECK(cuda.range_push("allreduce", "comm") == 1);
  CHECK(cuda.range_pop("comm") == 0);
  CHECK(cuda.range_pop() == 0);
  CHECK_THROWS_AS(cuda.range_pop(), accel::InvalidStateError);

  CHECK(cuda.communication_backend_name() == "nccl");
  CHECK(cuda.export_envs() == std::vector<std::string>{"NCCL", "CUDA"});
  CHECK(cuda.visible_devices_envs() == std::vector<std::string>{"CUDA_VISIBLE_DEVICES"});
  accel::EnvMap env;
  const std::array<int, 3> ids{0, 2, 3};
  cuda.set_visible_devices_envs(env, ids);
  CHECK(env.at("CUDA_VISIBLE_DEVICES") == "0,2,3");
}

// ---- errors -----------------------------------------------------------------------------------------

TEST_CASE("cuda: CudaError carries the status, its name, the call and the site") {
  const unsigned line = __LINE__ + 1;
  const accel::CudaError e(cudaErrorIllegalAddress, "kernel<<<1, 1>>>()");
  CHECK(e.status() == cudaErrorIllegalAddress);
  CHECK(e.native_code() == 700);
  CHECK(e.name() == "cudaErrorIllegalAddress");
  CHECK(e.description() == "an illegal memory access was encountered");
  CHECK(e.call() == "kernel<<<1, 1>>>()");
  CHECK(e.where().line() == line);
  CHECK(e.code() == accel::Errc::context_lost);
  CHECK(e.context_lost());
  const std::string what = e.what();
  CHECK(mentions(what, "kernel<<<1, 1>>>() failed with cudaErrorIllegalAddress"));
  CHECK(mentions(what, "test_cuda_unavailable.cpp:"));
  CHECK(mentions(what, "context is unusable"));

  for (const cudaError_t sticky : {cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorAssert,
                                   cudaErrorHardwareStackError, cudaErrorIllegalInstruction, cudaErrorMisalignedAddress,
                                   cudaErrorInvalidAddressSpace, cudaErrorInvalidPc, cudaErrorLaunchTimeout,
                                   cudaErrorECCUncorrectable}) {
    CAPTURE(accel::cuda::error_name(sticky));
    CHECK(accel::CudaError(sticky, "x").code() == accel::Errc::context_lost);
  }
  CHECK(accel::CudaError(cudaErrorMemoryAllocation, "cudaMalloc").code() == accel::Errc::out_of_memory);
  CHECK(accel::CudaError(cudaErrorNoDevice, "cudaSetDevice").code() == accel::Errc::backend_unavailable);
  CHECK(accel::CudaError(cudaErrorInsufficientDriver, "x").code() == accel::Errc::backend_unavailable);
  CHECK(accel::CudaError(cudaErrorInvalidValue, "x").code() == accel::Errc::invalid_argument);
  CHECK(accel::CudaError(cudaErrorNotReady, "x").code() == accel::Errc::runtime_failure);
  CHECK_FALSE(accel::CudaError(cudaErrorNotReady, "x").context_lost());
  CHECK(mentions(accel::CudaError(cudaErrorInvalidValue, "f()", ::accel::source_location::current(), "on cuda:1").what(),
                 "on cuda:1: f() failed"));
  // The statuses that mean "no CUDA in this process" (constexpr: decided without a driver), and the
  // runtime's own texts, which need none either.
  static_assert(accel::cuda::is_unavailable(cudaErrorNoDevice));
  static_assert(accel::cuda::is_unavailable(cudaErrorInsufficientDriver));
  static_assert(accel::cuda::is_unavailable(cudaErrorStubLibrary));
  static_assert(accel::cuda::is_unavailable(cudaErrorInitializationError));
  static_assert(!accel::cuda::is_unavailable(cudaErrorMemoryAllocation));
  static_assert(!accel::cuda::is_unavailable(cudaErrorIllegalAddress));
  static_assert(!accel::cuda::is_unavailable(cudaSuccess));
  CHECK(accel::cuda::error_string(cudaErrorMemoryAllocation) == "out of memory");
  CHECK(accel::cuda::error_name(cudaErrorNoDevice) == "cudaErrorNoDevice");
}

TEST_CASE("cuda: ACCEL_CUDA_CHECK throws the exception each status maps to") {
  ACCEL_CUDA_CHECK(fail_with(cudaSuccess));
  try {
    ACCEL_CUDA_CHECK(fail_with(cudaErrorLaunchFailure));
    FAIL("no exception");
  } catch (const accel::CudaError& e) {
    CHECK(e.call() == "fail_with(cudaErrorLaunchFailure)");
    CHECK(e.code() == accel::Errc::context_lost);
    CHECK(std::string(e.where().file_name()).find("test_cuda_unavailable.cpp") != std::string::npos);
  }
  try {
    ACCEL_CUDA_CHECK(fail_with(cudaErrorMemoryAllocation));
    FAIL("no exception");
  } catch (const accel::OutOfMemoryError& e) {
    CHECK(e.native_code() == cudaErrorMemoryAllocation);
    CHECK(mentions(e.what(), "cudaErrorMemoryAllocation"));
  }
  for (const cudaError_t unavailable : {cudaErrorNoDevice, cudaErrorInsufficientDriver, cudaErrorStubLibrary,
                                        cudaErrorSystemDriverMismatch, cudaErrorInitializationError}) {
    CAPTURE(accel::cuda::error_name(unavailable));
    CHECK_THROWS_AS(ACCEL_CUDA_CHECK(fail_with(unavailable)), accel::BackendUnavailableError);
  }
  CHECK_THROWS_AS(ACCEL_CUDA_CHECK(fail_with(cudaErrorInvalidValue)), accel::CudaError);
  CHECK(ACCEL_CUDA_CHECK_NOTHROW(fail_with(cudaSuccess)));
  CHECK_FALSE(ACCEL_CUDA_CHECK_NOTHROW(fail_with(cudaErrorCudartUnloading)));  // silent: CUDA is shutting down
  CHECK_FALSE(ACCEL_CUDA_CHECK_NOTHROW(fail_with(cudaErrorInvalidValue)));     // reported on stderr
}

// ---- CUDA_VISIBLE_DEVICES ---------------------------------------------------------------------------

TEST_CASE("cuda: parse_visible_devices follows the driver's rules") {
  using accel::cuda::parse_visible_devices;
  using V = std::vector<VisibleDevice>;
  CHECK(parse_visible_devices("").empty());
  CHECK(parse_visible_devices("  ").empty());
  CHECK(parse_visible_devices("0") == V{0});
  CHECK(parse_visible_devices("0,1,3") == V{0, 1, 3});
  CHECK(parse_visible_devices(" 2 , 0 ") == V{2, 0});
  CHECK(parse_visible_devices("+1") == V{1});
  CHECK(parse_visible_devices("1gpu2,2ampere") == V{1, 2});  // strtoul: the leading digits
  CHECK(parse_visible_devices("0,1,-1,2") == V{0, 1});        // an invalid entry ends the list
  CHECK(parse_visible_devices("0,,1") == V{0});
  CHECK(parse_visible_devices("-1").empty());
  CHECK(parse_visible_devices("abc,0").empty());
  CHECK(parse_visible_devices("0,1,0").empty());  // a repeated device hides every device
  CHECK(parse_visible_devices("99999999999").empty());

  const auto uuids = parse_visible_devices("GPU-8932f937-d72c-4106-c12f-20bd9faed9f6, GPU-5d1a");
  REQUIRE(uuids.size() == 2);
  CHECK(uuids[0].uuid() == "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6");
  CHECK(uuids[1].uuid() == "GPU-5d1a");  // an abbreviation, kept verbatim
  CHECK_FALSE(accel::cuda::is_mig(uuids[0]));
  CHECK(parse_visible_devices("GPU-5d1a,GPU-5d1a").empty());
  CHECK(parse_visible_devices("GPU-5d1a,GPU-") == V{std::string("GPU-5d1a")});

  const auto mig = parse_visible_devices("MIG-2b41c6a4-0c87-5b6e-a9f1-8f1e3c3b6d21,MIG-GPU-8932f937-d72c-4106-c12f-20bd9faed9f6/1/0");
  REQUIRE(mig.size() == 2);
  CHECK(accel::cuda::is_mig(mig[0]));
  CHECK(accel::cuda::is_mig(mig[1]));
  CHECK(mig[1].uuid() == "MIG-GPU-8932f937-d72c-4106-c12f-20bd9faed9f6/1/0");
  CHECK_FALSE(accel::cuda::is_mig(VisibleDevice{3}));
  CHECK(VisibleDevice{3}.is_ordinal());
  CHECK(VisibleDevice{3}.ordinal() == 3);
  CHECK(VisibleDevice{3}.uuid().empty());
  CHECK_FALSE(mig[0].is_ordinal());
  CHECK(mig[0].ordinal() == -1);
  CHECK(VisibleDevice{3} != VisibleDevice{std::string("GPU-3")});

  CHECK(parse_visible_devices("GPU-5d1a,1") == V{std::string("GPU-5d1a"), 1});  // mixed forms
}

TEST_CASE("cuda: visible_devices_from_env reads CUDA_VISIBLE_DEVICES") {
  ScopedEnv env{{"CUDA_VISIBLE_DEVICES", nullptr}};
  CHECK_FALSE(accel::cuda::visible_devices_from_env().has_value());  // unset: every device
  env.set("CUDA_VISIBLE_DEVICES", "");
  REQUIRE(accel::cuda::visible_devices_from_env().has_value());
  CHECK(accel::cuda::visible_devices_from_env()->empty());  // set but empty: none
  env.set("CUDA_VISIBLE_DEVICES", "1,MIG-abc");
  CHECK(*accel::cuda::visible_devices_from_env() == std::vector<VisibleDevice>{1, std::string("MIG-abc")});
}

TEST_CASE("cuda: uncached detection agrees with the cached answer") {
  const auto fresh = accel::cuda::detail::detect_devices();
  CHECK(fresh.count == cuda.device_count());
  CHECK(fresh.reason == accel::cuda::detail::detection().reason);
}
