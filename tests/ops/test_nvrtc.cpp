// CUDA ops without a GPU: NVRTC compiles every CUDA kernel to a cubin for sm_80 and sm_90 (through the
// cache), reports compile errors with its log, and the CUDA backend's builders say why they cannot
// load here. Skipped, saying so, where NVRTC is missing. On a GPU: the CUDA fused Adam and tensor ops
// compute the CPU kernels' bits, and fused Adam matches a float64 reference step by step (fp32
// relative error <= 1e-6); those cases skip, saying so, without a device.
#include "ops_test_support.hpp"

#include <accel/core/bfloat16.hpp>
#include <accel/ops/nvrtc.hpp>
#include <accel/ops/registry.hpp>

#if defined(ACCEL_HAS_CUDA)
#include <accel/cuda/ops.hpp>
#endif

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

namespace {

using accel::ops::OpBuilder;

bool have_nvrtc() {
  if (!accel::ops::nvrtc().loaded) {
    MESSAGE("skipped: " << accel::ops::nvrtc().error);
    return false;
  }
  return true;
}

OpBuilder cuda_builder(const accel::ops::OpSpec& spec) {
  OpBuilder b(spec, &accel::ops::nvrtc_toolchain, "cuda");
  b.set_cache_dir(ops_test::cache_dir());
  return b;
}

}  // namespace

TEST_CASE("NVRTC compiles every CUDA kernel to a cubin for sm_80 and sm_90, once") {
  if (!have_nvrtc()) return;
  MESSAGE(accel::ops::nvrtc().identity() << " from " << accel::ops::nvrtc().library);
  for (const auto& spec : {accel::ops::specs::cuda_fused_adam(), accel::ops::specs::cuda_tensor_ops(),
                           accel::ops::specs::cuda_random_fill(), accel::ops::specs::cuda_nn_ops()}) {
    for (const int sm : {80, 90}) {
      CAPTURE(spec.name);
      CAPTURE(sm);
      auto b = cuda_builder(spec);
      b.set_arch(sm);
      CHECK(b.is_compatible().ok);
      const auto first = accel::ops::nvrtc_build(b, sm);
      REQUIRE(first.payload.size() > 4);
      CHECK(first.payload.compare(0, 4, "\x7f" "ELF") == 0);
      for (const auto& entry : spec.entry_points) {  // every kernel is in the cubin
        CHECK(first.payload.find(entry) != std::string::npos);
      }
      // The ABI tag in the modules of the ops that take accel's ABI structs (kernels/cuda/cuda_common.cuh).
      if (accel::ops::uses_ops_abi(spec)) {
        CHECK(accel::ops::cubin_abi_version(first.payload) == accel::ops::abi_version);
      } else {
        CHECK_FALSE(accel::ops::cubin_abi_version(first.payload).has_value());
      }
      const auto again = accel::ops::nvrtc_build(b, sm);
      CHECK_FALSE(again.compiled);
      CHECK(again.payload == first.payload);
      const auto cmd = b.build_command();
      CHECK(cmd.arch == "sm_" + std::to_string(sm));
      CHECK(cmd.str().find("--fmad=false") != std::string::npos);
      CHECK(b.is_cached());
    }
  }
  // Keys differ by architecture.
  auto b = cuda_builder(accel::ops::specs::cuda_tensor_ops());
  CHECK(accel::ops::nvrtc_build_command(b, 80).key != accel::ops::nvrtc_build_command(b, 90).key);
}

TEST_CASE("NVRTC: PTX for a virtual architecture, and compile errors with the log and options") {
  if (!have_nvrtc()) return;
  const auto out = accel::ops::nvrtc_compile("extern \"C\" __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }",
                                             "k.cu", {"--gpu-architecture=compute_90"});
  CHECK(out.ptx.find(".entry k") != std::string::npos);
  CHECK(out.cubin.empty());
  try {
    (void)accel::ops::nvrtc_compile("__global__ void k( { }", "broken.cu", {"--gpu-architecture=sm_90"});
    FAIL("a broken kernel compiled");
  } catch (const accel::CompileError& e) {
    CHECK(e.log().find("broken.cu") != std::string::npos);
    CHECK(e.command().find("sm_90") != std::string::npos);
  }
  // Through a builder: the cache stays clean.
  const auto dir = ops_test::temp_dir("kernels");
  std::filesystem::copy(accel::ops::default_kernel_dir(), dir, std::filesystem::copy_options::recursive);
  ops_test::write_text(dir / "cuda" / "tensor_ops.cu", "#include \"cuda_common.cuh\"\n__global__ void k( {}\n");
  auto b = cuda_builder(accel::ops::specs::cuda_tensor_ops());
  b.set_kernel_dir(dir).set_cache_dir(ops_test::temp_dir("cache-nvrtc-err")).set_arch(90);
  CHECK_THROWS_AS((void)accel::ops::nvrtc_build(b, 90), accel::CompileError);
  for (const auto& f : std::filesystem::recursive_directory_iterator(b.cache_dir())) {
    if (f.is_regular_file()) CHECK(f.path().extension() == ".lock");
  }
  // An architecture NVRTC does not know is a reason, not a crash.
  b.set_arch(12);
  CHECK_FALSE(b.is_compatible().ok);
}

TEST_CASE("NVRTC: cubin_problem accepts cubins and fatbinaries, and says what else it was given") {
  using accel::ops::cubin_problem;
  CHECK(cubin_problem("") == "neither a CUDA ELF cubin nor a fatbinary (0 bytes, starting with nothing)");
  CHECK(cubin_problem("garbage\n") == "neither a CUDA ELF cubin nor a fatbinary (8 bytes, starting 0x676172626167650a)");
  CHECK(cubin_problem(std::string("\x7f" "ELF", 4) + "short").find("cut short (9 bytes") != std::string::npos);
  // This test program: an ELF file, for x86-64 (EM_X86_64 = 62).
  const std::string self = ops_test::read_text("/proc/self/exe");
  CHECK(cubin_problem(self) == "an ELF file for machine 62, not a CUDA cubin (EM_CUDA = 190)");
  std::string fatbin(16, '\0');
  const std::uint32_t magic = 0xBA55ED50u;
  std::memcpy(fatbin.data(), &magic, 4);
  CHECK(cubin_problem(fatbin).empty());
  if (!have_nvrtc()) return;
  const auto out = accel::ops::nvrtc_compile("extern \"C\" __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }",
                                             "k.cu", {"--gpu-architecture=sm_90"});
  CHECK(cubin_problem(out.cubin).empty());
  CHECK(cubin_problem(out.cubin.substr(0, out.cubin.size() / 2)).find("a CUDA ELF file cut short") != std::string::npos);
  std::string big_endian = out.cubin;
  big_endian[5] = 2;
  CHECK(cubin_problem(big_endian) == "an ELF file that is not 64-bit little-endian, as cubins are");
}

TEST_CASE("AOT cubins: the ABI tag is read from the cubin's symbols; another ABI's cubin, or an untagged one "
          "for an op that takes accel's ABI structs, is refused") {
  using accel::ops::cubin_abi_problem;
  using accel::ops::cubin_abi_version;
  const std::string expects = "this accel expects " + std::to_string(accel::ops::abi_version);
  CHECK_FALSE(cubin_abi_version("").has_value());
  CHECK_FALSE(cubin_abi_version(ops_test::read_text("/proc/self/exe")).has_value());  // an ELF file, not a cubin
  std::string fatbin(16, '\0');
  const std::uint32_t magic = 0xBA55ED50u;
  std::memcpy(fatbin.data(), &magic, 4);
  CHECK_FALSE(cubin_abi_version(fatbin).has_value());
  CHECK(cubin_abi_problem(fatbin, false).empty());
  CHECK(cubin_abi_problem(fatbin, true).find("a fatbinary, whose ABI tag") == 0);
  CHECK(accel::ops::uses_ops_abi(accel::ops::specs::cuda_fused_adam()));
  CHECK(accel::ops::uses_ops_abi(accel::ops::specs::cuda_nn_ops()));
  CHECK_FALSE(accel::ops::uses_ops_abi(accel::ops::specs::cuda_random_fill()));
  if (!have_nvrtc()) return;
  const auto cubin = [](const std::string& tag) {
    return accel::ops::nvrtc_compile(tag + "extern \"C\" __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n",
                                     "k.cu", {"--gpu-architecture=sm_90"})
        .cubin;
  };
  const std::string current =
      cubin("extern \"C\" __device__ const int accel_ops_abi_version = " + std::to_string(accel::ops::abi_version) + ";\n");
  const std::string other = cubin("extern \"C\" __device__ const int accel_ops_abi_version = 77;\n");
  const std::string untagged = cubin("");
  const std::string no_value = cubin("extern \"C\" __device__ int accel_ops_abi_version;\n");  // no initial value stored
  CHECK(cubin_abi_version(current) == accel::ops::abi_version);
  CHECK(cubin_abi_version(other) == 77);
  CHECK_FALSE(cubin_abi_version(untagged).has_value());
  CHECK_FALSE(cubin_abi_version(no_value).has_value());
  CHECK_FALSE(cubin_abi_version(current.substr(0, current.size() / 2)).has_value());  // cut short
  CHECK(cubin_abi_problem(current, true).empty());
  CHECK(cubin_abi_problem(other, false) == "its ABI version is 77, " + expects +
                                               " (built by another accel release: rebuild it with kernels/aot.cmake)");
  CHECK(cubin_abi_problem(untagged, true).find("it carries no ABI tag") == 0);
  CHECK(cubin_abi_problem(untagged, false).empty());  // a user's op without accel's structs

#if defined(ACCEL_HAS_CUDA)
  // What the CUDA backend's load() takes (no device needed to look): the real kernel's cubin, not the others.
  const auto dir = ops_test::temp_dir("aot");
  auto b = cuda_builder(accel::ops::specs::cuda_tensor_ops());
  b.set_aot_dir(dir);
  b.set_arch(90);
  const std::string real = accel::ops::nvrtc_build(b, 90).payload;
  const auto aot_problem = [&](const std::string& bytes) {
    ops_test::write_text(dir / "tensor_ops.sm_90.cubin", bytes);
    std::filesystem::path path;
    std::string problem;
    const std::string taken = accel::cuda::detail::aot_cubin(b, 90, path, problem);
    CHECK(path == dir / "tensor_ops.sm_90.cubin");
    CHECK(taken.empty() == !problem.empty());
    return problem;
  };
  CHECK(aot_problem(real).empty());
  CHECK(aot_problem(other) == "its ABI version is 77, " + expects +
                                  " (built by another accel release: rebuild it with kernels/aot.cmake)");
  CHECK(aot_problem(untagged).find("it carries no ABI tag") == 0);
#endif
}

TEST_CASE("NVRTC: a cached cubin that is not one is evicted and compiled once more; a refused one commits nothing") {
  if (!have_nvrtc()) return;
  auto b = cuda_builder(accel::ops::specs::cuda_tensor_ops());
  b.set_cache_dir(ops_test::temp_dir("nvrtc-evict")).set_arch(90);
  const auto cmd = accel::ops::nvrtc_build_command(b, 90);
  accel::ops::JitCache cache(b.cache_dir());
  // A committed entry with a valid footer whose payload no driver loads (a compiler or disk that lied).
  (void)cache.get_or_build(b.name(), cmd.key, "cubin", [](const std::filesystem::path& tmp) { ops_test::write_text(tmp, "garbage"); });
  REQUIRE(b.is_cached());
  const auto before = accel::ops::JitCache::stats();
  const auto entry = accel::ops::nvrtc_build(b, 90);
  CHECK(entry.compiled);
  CHECK(accel::ops::cubin_problem(entry.payload).empty());
  CHECK(accel::ops::JitCache::stats().rebuilt == before.rebuilt + 1);
  CHECK_FALSE(accel::ops::nvrtc_build(b, 90).compiled);  // the good entry is reused

  // The CUDA backend loads a new cubin as a module before committing it: one it refuses commits nothing.
  auto other = cuda_builder(accel::ops::specs::cuda_tensor_ops());
  other.set_cache_dir(ops_test::temp_dir("nvrtc-refused")).set_arch(90);
  try {
    (void)accel::ops::nvrtc_build(other, 90, [](std::string_view) { return std::string("refused by the test"); });
    FAIL("a refused cubin was returned");
  } catch (const accel::CompileError& e) {
    CHECK(std::string(e.what()).find("NVRTC reported success, but its cubin for sm_90 is unusable (refused by the test)") !=
          std::string::npos);
  }
  CHECK_FALSE(other.is_cached());
}

TEST_CASE("NVRTC: random_fill includes accel's random headers, and they are part of its cache key") {
  if (!have_nvrtc()) return;
  // A copy of the tree's layout: <root>/kernels beside <root>/include.
  const auto root = ops_test::temp_dir("random-fill");
  const std::filesystem::path kernels = accel::ops::default_kernel_dir();
  std::filesystem::copy(kernels, root / "kernels", std::filesystem::copy_options::recursive);
  std::filesystem::create_directories(root / "include" / "accel");
  std::filesystem::copy(kernels / ".." / "include" / "accel" / "random", root / "include" / "accel" / "random",
                        std::filesystem::copy_options::recursive);
  auto b = cuda_builder(accel::ops::specs::cuda_random_fill());
  b.set_kernel_dir(root / "kernels").set_cache_dir(ops_test::temp_dir("cache-random-fill")).set_arch(90);
  const auto cmd = b.build_command();
  CHECK(cmd.str().find("-I" + (root / "kernels" / ".." / "include").string()) != std::string::npos);
  const auto first = accel::ops::nvrtc_build(b, 90);
  CHECK(first.compiled);
  // An edit of a header the kernel includes gives a new key (and a new compile), not a stale cubin.
  const auto header = root / "include" / "accel" / "random" / "detail" / "block_fill.hpp";
  ops_test::write_text(header, ops_test::read_text(header) + "\n// edited\n");
  CHECK(b.build_command().key != cmd.key);
  CHECK(accel::ops::nvrtc_build(b, 90).compiled);
  // Without accel's headers beside the kernels, the build says which file it cannot read.
  std::filesystem::remove_all(root / "include");
  try {
    (void)accel::ops::nvrtc_build(b, 90);
    FAIL("random_fill built without accel's headers");
  } catch (const accel::InvalidArgumentError& e) {
    CHECK(std::string(e.what()).find("block_fill.hpp") != std::string::npos);
  }
}

#if defined(ACCEL_HAS_CUDA)
static_assert(accel::OpApi<accel::cuda::Ops>);

TEST_CASE("cuda op builders: the table, and what happens without a device") {
  using accel::cuda::Ops;
  CHECK(Ops::op_names() == std::vector<std::string>{"fused_adam", "cpu_adam", "tensor_ops", "random_fill", "nn_ops"});
  CHECK(Ops::create_op_builder("RandomFillBuilder").name() == "random_fill");
  CHECK(Ops::create_op_builder("fused_adam").kind() == accel::ops::OpKind::cuda);
  CHECK(Ops::create_op_builder("CPUAdamBuilder").kind() == accel::ops::OpKind::host);
  CHECK_THROWS_AS((void)Ops::create_op_builder("transformer"), accel::InvalidArgumentError);
  const auto cmd = Ops::build_extension("fused_adam");
  CHECK(cmd.str().find("fused_adam.cu") != std::string::npos);
  if (accel::cuda::Devices::device_count() == 0) {
    MESSAGE("no CUDA device: checking the no-device answers (kernel launches are not tested here)");
    CHECK(cmd.arch == "sm_80");
    auto b = Ops::create_op_builder("fused_adam");
    const auto c = b.is_compatible();
    CHECK_FALSE(c.ok);
    CHECK(c.str().find("no CUDA device") != std::string::npos);
    CHECK_THROWS_AS((void)b.load(), accel::BackendUnavailableError);
    b.set_arch(90);  // compiling for an explicit architecture still works
    const auto cubin = accel::ops::nvrtc_build(b.set_cache_dir(ops_test::cache_dir()), 90);
    CHECK(accel::ops::cubin_problem(cubin.payload).empty());  // a CUDA ELF cubin, not just some bytes
    const auto rows = Ops::op_table();
    CHECK_FALSE(rows[0].compatible.ok);
    CHECK(rows[1].compatible.ok);  // cpu_adam is a host op
    MESSAGE("\n" << accel::ops::format_op_table(rows));
  } else {
    MESSAGE("CUDA device present: kernel launches are checked by the cases below (and benchmarks/ops/bench_adam_gpu)");
  }
}

TEST_CASE("cuda op builders: is_cached() counts a well-formed AOT cubin, as load() uses it, and not a malformed one") {
  if (!have_nvrtc()) return;
  auto b = accel::cuda::Ops::create_op_builder("tensor_ops");
  b.set_arch(80).set_cache_dir(ops_test::temp_dir("cache-aot-cubin"));
  const auto aot = ops_test::temp_dir("aot-cubin");
  b.set_aot_dir(aot);
  CHECK_FALSE(b.is_cached());
  ops_test::write_text(aot / "tensor_ops.sm_80.cubin", "not a cubin");  // before the fix: loaded unchecked
  CHECK_FALSE(b.is_cached());
  const auto built = accel::ops::nvrtc_build(b.set_cache_dir(ops_test::temp_dir("cache-aot-cubin-src")), 80);
  b.set_cache_dir(ops_test::temp_dir("cache-aot-cubin-empty"));
  ops_test::write_text(aot / "tensor_ops.sm_80.cubin", built.payload);
  CHECK(b.is_cached());  // before the fix: false, though load() would take the AOT cubin
  CHECK_FALSE(std::filesystem::exists(b.cache_dir() / "v1"));
}
#endif

#if defined(ACCEL_HAS_CUDA)
namespace {

template <class T>
struct DeviceArray {
  T* p = nullptr;
  std::size_t n = 0;
  explicit DeviceArray(const std::vector<T>& host) : n(host.size()) {
    void* raw = nullptr;
    REQUIRE(cudaMalloc(&raw, n * sizeof(T)) == cudaSuccess);
    p = static_cast<T*>(raw);
    REQUIRE(cudaMemcpy(p, host.data(), n * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
    // A pageable upload may return before its DMA lands, and the legacy stream's copy is not ordered
    // before work on accel's (non-blocking) streams: wait for it.
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { (void)cudaFree(p); }
  std::vector<T> get() const {
    std::vector<T> host(n);
    REQUIRE(cudaMemcpy(host.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return host;
  }
};

/// Moves each array of t one element on (element sizes in bytes) and drops one element: a tensor
/// misaligned for the vector path, made the same way on the host and on the device.
void drop_first_element(accel::ops::AdamTensor& t, std::size_t state_bytes, std::size_t grad_bytes,
                        std::size_t copy_bytes) {
  const auto on = [](void* p, std::size_t bytes) { return p == nullptr ? p : static_cast<char*>(p) + bytes; };
  t.param = on(t.param, state_bytes);
  t.grad = static_cast<const char*>(t.grad) + grad_bytes;
  t.exp_avg = on(t.exp_avg, state_bytes);
  t.exp_avg_sq = on(t.exp_avg_sq, state_bytes);
  t.max_exp_avg_sq = on(t.max_exp_avg_sq, state_bytes);
  t.model_copy = on(t.model_copy, copy_bytes);
  t.numel -= 1;
}

}  // namespace

TEST_CASE("cuda fused Adam and tensor ops compute the CPU kernels' bits (needs a GPU)") {
  if (accel::cuda::Devices::device_count() == 0) {
    MESSAGE("skipped: no CUDA device");
    return;
  }
  using accel::Dtype;
  const auto gpu = accel::cuda::Ops::get_op_builder<accel::ops::FusedAdam>().load();
  const auto gpu_ops = accel::cuda::Ops::get_op_builder<accel::ops::TensorOps>().load();
  accel::cuda::Stream stream;
  // Shapes that exercise the 4-wide path, the tails, several chunks and a misaligned tensor.
  const std::vector<std::size_t> sizes{1, 3, 4097, 16384 * 3 + 5, 100003};
  for (const bool amsgrad : {false, true}) {
    for (const bool copy : {false, true}) {
      CAPTURE(amsgrad);
      CAPTURE(copy);
      accel::ops::AdamOptions o;
      o.adamw = true;
      o.amsgrad = amsgrad;
      o.weight_decay = 0.01;
      const accel::ops::AdamDtypes d{Dtype::float32, Dtype::float32,
                                     copy ? std::optional<Dtype>(Dtype::bfloat16) : std::nullopt};
      std::vector<std::vector<float>> p, g, m, v, x;
      std::vector<std::vector<std::uint16_t>> c;
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        p.push_back(ops_test::random_floats(sizes[i], 10 + unsigned(i), -1, 1));
        g.push_back(ops_test::random_floats(sizes[i], 20 + unsigned(i), -1, 1));
        m.push_back(ops_test::random_floats(sizes[i], 30 + unsigned(i), -0.01f, 0.01f));
        v.push_back(ops_test::random_floats(sizes[i], 40 + unsigned(i), 0, 1e-4f));
        x.push_back(v.back());
        c.push_back(std::vector<std::uint16_t>(sizes[i]));
      }
      std::vector<std::unique_ptr<DeviceArray<float>>> dp, dg, dm, dv, dx;
      std::vector<std::unique_ptr<DeviceArray<std::uint16_t>>> dc;
      std::vector<accel::ops::AdamTensor> host_t, dev_t;
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        dp.push_back(std::make_unique<DeviceArray<float>>(p[i]));
        dg.push_back(std::make_unique<DeviceArray<float>>(g[i]));
        dm.push_back(std::make_unique<DeviceArray<float>>(m[i]));
        dv.push_back(std::make_unique<DeviceArray<float>>(v[i]));
        dx.push_back(std::make_unique<DeviceArray<float>>(x[i]));
        dc.push_back(std::make_unique<DeviceArray<std::uint16_t>>(c[i]));
        const auto n = std::int64_t(sizes[i]);
        host_t.push_back({p[i].data(), g[i].data(), m[i].data(), v[i].data(), x[i].data(), c[i].data(), n});
        dev_t.push_back({dp[i]->p, dg[i]->p, dm[i]->p, dv[i]->p, dx[i]->p, dc[i]->p, n});
      }
      for (auto* t : {&host_t[2], &dev_t[2]}) {  // misaligned: the scalar path
        drop_first_element(*t, sizeof(float), sizeof(float), sizeof(std::uint16_t));
      }
      for (int step = 1; step <= 3; ++step) {
        gpu.step(stream, dev_t, o, step, d);
        ops_test::adam().step_sync(host_t, o, step, d);
      }
      stream.synchronize();
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        CHECK(dp[i]->get() == p[i]);
        CHECK(dm[i]->get() == m[i]);
        CHECK(dv[i]->get() == v[i]);
        if (amsgrad) CHECK(dx[i]->get() == x[i]);
        if (copy) CHECK(dc[i]->get() == c[i]);
      }
    }
  }
  // bf16 params and states (8 elements per 16-byte access on the GPU), bf16 or fp32 grads: the same bits
  // as the CPU kernel, through the 8-wide path, its tails and a misaligned tensor (the scalar path).
  for (const Dtype grad_dtype : {Dtype::bfloat16, Dtype::float32}) {
    for (const bool amsgrad : {false, true}) {
      CAPTURE(grad_dtype);
      CAPTURE(amsgrad);
      accel::ops::AdamOptions o;
      o.adamw = !amsgrad;  // Adam with L2 decay in one of the two
      o.amsgrad = amsgrad;
      o.weight_decay = 0.01;
      const accel::ops::AdamDtypes d{Dtype::bfloat16, grad_dtype, std::nullopt};
      const auto bf16 = [](const std::vector<float>& f) {
        std::vector<std::uint16_t> out(f.size());
        for (std::size_t k = 0; k < f.size(); ++k) out[k] = accel::bfloat16(f[k]).bits();
        return out;
      };
      std::vector<std::vector<std::uint16_t>> p, m, v, x, g16;
      std::vector<std::vector<float>> g32;
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        p.push_back(bf16(ops_test::random_floats(sizes[i], 50 + unsigned(i), -1, 1)));
        g32.push_back(ops_test::random_floats(sizes[i], 60 + unsigned(i), -1, 1));
        g16.push_back(bf16(g32.back()));
        m.push_back(bf16(ops_test::random_floats(sizes[i], 70 + unsigned(i), -0.01f, 0.01f)));
        v.push_back(bf16(ops_test::random_floats(sizes[i], 80 + unsigned(i), 0, 1e-4f)));
        x.push_back(v.back());
      }
      std::vector<std::unique_ptr<DeviceArray<std::uint16_t>>> dp, dm, dv, dx, dg16;
      std::vector<std::unique_ptr<DeviceArray<float>>> dg32;
      std::vector<accel::ops::AdamTensor> host_t, dev_t;
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        dp.push_back(std::make_unique<DeviceArray<std::uint16_t>>(p[i]));
        dm.push_back(std::make_unique<DeviceArray<std::uint16_t>>(m[i]));
        dv.push_back(std::make_unique<DeviceArray<std::uint16_t>>(v[i]));
        dx.push_back(std::make_unique<DeviceArray<std::uint16_t>>(x[i]));
        dg16.push_back(std::make_unique<DeviceArray<std::uint16_t>>(g16[i]));
        dg32.push_back(std::make_unique<DeviceArray<float>>(g32[i]));
        const bool g_is_bf16 = grad_dtype == Dtype::bfloat16;
        const auto n = std::int64_t(sizes[i]);
        host_t.push_back({p[i].data(), g_is_bf16 ? static_cast<void*>(g16[i].data()) : g32[i].data(), m[i].data(),
                          v[i].data(), x[i].data(), nullptr, n});
        dev_t.push_back({dp[i]->p, g_is_bf16 ? static_cast<void*>(dg16[i]->p) : dg32[i]->p, dm[i]->p, dv[i]->p,
                         dx[i]->p, nullptr, n});
      }
      for (auto* t : {&host_t[2], &dev_t[2]}) {  // misaligned: the scalar path
        const std::size_t grad_bytes = grad_dtype == Dtype::bfloat16 ? sizeof(std::uint16_t) : sizeof(float);
        drop_first_element(*t, sizeof(std::uint16_t), grad_bytes, 0);
      }
      for (int step = 1; step <= 3; ++step) {
        gpu.step(stream, dev_t, o, step, d);
        ops_test::adam().step_sync(host_t, o, step, d);
      }
      stream.synchronize();
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        CHECK(dp[i]->get() == p[i]);
        CHECK(dm[i]->get() == m[i]);
        CHECK(dv[i]->get() == v[i]);
        if (amsgrad) CHECK(dx[i]->get() == x[i]);
      }
    }
  }

  // Tensor ops: cast to bf16, L2 norm, isfinite.
  const auto a = ops_test::random_floats(300000, 5, -3, 3);
  DeviceArray<float> da(a);
  DeviceArray<std::uint16_t> db(std::vector<std::uint16_t>(a.size()));
  gpu_ops.cast(stream, db.p, Dtype::bfloat16, da.p, Dtype::float32, std::int64_t(a.size()));
  std::vector<std::uint16_t> want(a.size());
  ops_test::tensor_ops().host().cast(want.data(), Dtype::bfloat16, a.data(), Dtype::float32, std::int64_t(a.size()));
  DeviceArray<float> norm(std::vector<float>(1, -1.0f));
  DeviceArray<int> flag(std::vector<int>(1, -1));
  const std::vector<accel::ops::TensorRef> refs{{da.p, std::int64_t(a.size()), Dtype::float32},
                                                {db.p, std::int64_t(a.size()), Dtype::bfloat16}};
  gpu_ops.l2norm(stream, refs, norm.p);
  gpu_ops.all_finite(stream, refs, flag.p);
  stream.synchronize();
  CHECK(db.get() == want);
  const std::vector<accel::ops::TensorRef> host_refs{{a.data(), std::int64_t(a.size()), Dtype::float32},
                                                     {want.data(), std::int64_t(a.size()), Dtype::bfloat16}};
  const float cpu_norm = ops_test::tensor_ops().l2norm_sync(host_refs);
  CHECK(std::abs(norm.get()[0] - cpu_norm) <= 1e-6f * cpu_norm);
  CHECK(flag.get()[0] == 1);
}

namespace {

/// One Adam step in double for one element (torch's formula; test_adam.cpp's reference for the CPU).
struct RefAdam {
  double p, m, v, vmax;
};
RefAdam ref_adam_step(double p, double g, double m, double v, double vmax, const accel::ops::AdamOptions& o,
                      std::int64_t step) {
  if (o.maximize) g = -g;
  if (!o.adamw) g += o.weight_decay * p;
  if (o.adamw) p *= 1.0 - o.lr * o.weight_decay;
  m = o.beta1 * m + (1.0 - o.beta1) * g;
  v = o.beta2 * v + (1.0 - o.beta2) * g * g;
  double vu = v;
  if (o.amsgrad) {
    vmax = std::max(vmax, v);
    vu = vmax;
  }
  const double bc1 = o.bias_correction ? 1.0 - std::pow(o.beta1, double(step)) : 1.0;
  const double bc2 = o.bias_correction ? 1.0 - std::pow(o.beta2, double(step)) : 1.0;
  p -= (o.lr / bc1) * m / (std::sqrt(vu) / std::sqrt(bc2) + o.eps);
  return {p, m, v, vmax};
}

}  // namespace

TEST_CASE("cuda fused Adam matches a float64 reference (fp32, relative error <= 1e-6 per step; needs a GPU)") {
  if (accel::cuda::Devices::device_count() == 0) {
    MESSAGE("skipped: no CUDA device");
    return;
  }
  const auto gpu = accel::cuda::Ops::get_op_builder<accel::ops::FusedAdam>().load();
  accel::cuda::Stream stream;
  accel::ops::AdamOptions o;
  std::vector<std::size_t> sizes{1, 3, 64, 1000, 4097, 65536 + 5, 250001};
  SUBCASE("Adam") {}
  SUBCASE("Adam with L2 weight decay") { o.weight_decay = 0.01; }
  SUBCASE("AdamW") {
    o.adamw = true;
    o.weight_decay = 0.1;
    o.lr = 3e-3;
  }
  SUBCASE("AMSGrad") {
    o.amsgrad = true;
    o.weight_decay = 0.01;
  }
  SUBCASE("AdamW + AMSGrad + maximize") {
    o.adamw = o.amsgrad = o.maximize = true;
    o.weight_decay = 0.05;
  }
  SUBCASE("no bias correction, other betas") {
    o.bias_correction = false;
    o.beta1 = 0.8;
    o.beta2 = 0.95;
    o.eps = 1e-6;
  }
  SUBCASE("AdamW over 300 tensors (more than one launch)") {
    o.adamw = true;
    o.weight_decay = 0.01;
    sizes.clear();
    for (std::size_t i = 0; i < 300; ++i) sizes.push_back((i * 37) % 1000 + 1);
  }
  // Host copies of the fp32 state (the reference starts each step from the kernel's own last state).
  std::vector<std::vector<float>> p, m, v, x;
  std::vector<std::unique_ptr<DeviceArray<float>>> dp, dg, dm, dv, dx;
  std::vector<accel::ops::AdamTensor> tensors;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    p.push_back(ops_test::random_floats(sizes[i], 500 + 7 * unsigned(i), -1.0f, 1.0f));
    m.push_back(ops_test::random_floats(sizes[i], 501 + 7 * unsigned(i), -0.01f, 0.01f));
    v.push_back(ops_test::random_floats(sizes[i], 502 + 7 * unsigned(i), 0.0f, 1e-4f));
    x.push_back(v.back());
    dp.push_back(std::make_unique<DeviceArray<float>>(p[i]));
    dg.push_back(std::make_unique<DeviceArray<float>>(std::vector<float>(sizes[i])));
    dm.push_back(std::make_unique<DeviceArray<float>>(m[i]));
    dv.push_back(std::make_unique<DeviceArray<float>>(v[i]));
    dx.push_back(std::make_unique<DeviceArray<float>>(x[i]));
    tensors.push_back({dp[i]->p, dg[i]->p, dm[i]->p, dv[i]->p, dx[i]->p, nullptr, std::int64_t(sizes[i])});
  }
  const auto rel = [](double got, double want, double scale) { return std::abs(got - want) / std::max(scale, 1e-30); };
  double worst = 0;
  for (int step = 1; step <= 12; ++step) {
    std::vector<std::vector<float>> g;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      g.push_back(ops_test::random_floats(sizes[i], 9000 + 131 * unsigned(step) + unsigned(i), -1.0f, 1.0f));
      REQUIRE(cudaMemcpy(dg[i]->p, g[i].data(), sizes[i] * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
    }
    // (Seen on an H200: without this wait, one step in a run read half-uploaded gradients.)
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    gpu.step(stream, tensors, o, step);
    stream.synchronize();
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const auto np = dp[i]->get(), nm = dm[i]->get(), nv = dv[i]->get(), nx = dx[i]->get();
      for (std::size_t k = 0; k < sizes[i]; ++k) {
        const double p0 = p[i][k], g0 = g[i][k], m0 = m[i][k], v0 = v[i][k];
        const RefAdam r = ref_adam_step(p0, g0, m0, v0, x[i][k], o, step);
        // Each result relative to the magnitude of the terms that made it. m's terms cancel at times
        // (beta1*m0 against (1-beta1)*g); the absolute error that leaves in m reaches p through
        // step_size * m / denom, so p's scale includes that path, not only |p0| and the update.
        const double gg = std::abs(g0) + o.weight_decay * std::abs(p0);
        const double m_scale = o.beta1 * std::abs(m0) + (1 - o.beta1) * gg;
        const double bc1 = o.bias_correction ? 1.0 - std::pow(o.beta1, double(step)) : 1.0;
        const double bc2 = o.bias_correction ? 1.0 - std::pow(o.beta2, double(step)) : 1.0;
        const double denom = std::sqrt(o.amsgrad ? r.vmax : r.v) / std::sqrt(bc2) + o.eps;
        worst = std::max(worst, rel(nm[k], r.m, m_scale));
        worst = std::max(worst, rel(nv[k], r.v, o.beta2 * v0 + (1 - o.beta2) * gg * gg));
        worst = std::max(worst, rel(np[k], r.p, std::abs(p0) + std::abs(r.p - p0) + o.lr / bc1 * m_scale / denom));
        if (o.amsgrad) worst = std::max(worst, rel(nx[k], r.vmax, r.vmax));
      }
      p[i] = np;
      m[i] = nm;
      v[i] = nv;
      x[i] = nx;
    }
  }
  MESSAGE("max relative error per step on cuda:" << gpu.device() << ": " << worst);
  CHECK(worst <= 1e-6);
}
#endif
