// cuda::Random's fills: the no-GPU path (the unavailable error, thrown before the generator moves), and
// on a GPU the random_fill kernels against the host (accel::rng::fill_*) and the CPU backend: bits,
// uniforms and normals byte for byte, for awkward lengths, offsets and alignments, with
// offsets read from device memory (graph-safe Philox), and inside a captured CUDA graph.
// The GPU cases skip, saying so, without a device.
#include "cuda_test_support.hpp"

#include <accel/cpu/backend.hpp>
#include <accel/cuda/backend.hpp>
#include <accel/op_builders.hpp>  // the op table (create_op_builder) is opt-in
#include <accel/random/fill.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using accel::CudaBackend;
using accel::cuda::detail::RandomFillKind;
constexpr CudaBackend cuda{};

// A view of cuda:0's default stream made without asking CUDA (the public constructors check the
// device first), so the fills' own checks can be reached on a machine without a GPU.
struct UncheckedStreamRef : accel::cuda::StreamRef {
  UncheckedStreamRef() : StreamRef(nullptr, accel::cuda::detail::default_stream_id(0), 0) {}
};

// Distance in ulps on the ordered line of floating-point values (+0 and -0 are both 0).
std::int64_t ordered(float x) {
  std::uint32_t b = 0;
  std::memcpy(&b, &x, sizeof b);
  return (b & 0x80000000u) != 0 ? -static_cast<std::int64_t>(b & 0x7FFFFFFFu) : static_cast<std::int64_t>(b);
}
std::int64_t ordered(double x) {
  std::uint64_t b = 0;
  std::memcpy(&b, &x, sizeof b);
  const auto mag = static_cast<std::int64_t>(b & 0x7FFFFFFFFFFFFFFFull);
  return (b >> 63) != 0 ? -mag : mag;
}
template <class T>
std::int64_t max_ulps(const std::vector<T>& a, const std::vector<T>& b) {
  REQUIRE(a.size() == b.size());
  std::int64_t worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::int64_t d = ordered(a[i]) - ordered(b[i]);
    worst = std::max(worst, d < 0 ? -d : d);
  }
  return worst;
}
template <class T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Device memory with room for `shift` elements in front of the output, filled with a pattern so
// that writes outside [shift, shift + n) show.
template <class T>
class DeviceVector {
 public:
  DeviceVector(std::size_t n, std::size_t shift) : n_(n), shift_(shift), total_(n + shift + 8) {
    REQUIRE(cudaMalloc(&base_, total_ * sizeof(T)) == cudaSuccess);
    REQUIRE(cudaMemset(base_, 0xA5, total_ * sizeof(T)) == cudaSuccess);
    // cudaMemset runs on the legacy default stream, which the fills' non-blocking stream does not wait
    // for: without this the pattern could land on top of a fill (seen on an H200 at 2^21 elements).
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  ~DeviceVector() { (void)cudaFree(base_); }
  [[nodiscard]] T* data() const { return static_cast<T*>(base_) + shift_; }
  /// The output, after checking that nothing around it was written.
  std::vector<T> get() const {
    std::vector<T> all(total_);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    REQUIRE(cudaMemcpy(all.data(), base_, total_ * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    std::vector<unsigned char> pattern(sizeof(T), 0xA5);
    bool untouched = true;
    for (std::size_t i = 0; i < total_; ++i) {
      if (i >= shift_ && i < shift_ + n_) continue;
      untouched = untouched && std::memcmp(&all[i], pattern.data(), sizeof(T)) == 0;
    }
    CHECK(untouched);
    return {all.begin() + static_cast<std::ptrdiff_t>(shift_), all.begin() + static_cast<std::ptrdiff_t>(shift_ + n_)};
  }

 private:
  void* base_ = nullptr;
  std::size_t n_, shift_, total_;
};

template <class T>
std::vector<T> host_fill(RandomFillKind kind, std::size_t n, std::uint64_t seed, std::uint64_t offset, double mean,
                         double stddev) {
  std::vector<T> out(n);
  const std::span<T> s(out);
  if constexpr (std::is_same_v<T, std::uint32_t>) {
    accel::rng::fill_bits(s, seed, offset);
  } else if constexpr (std::is_same_v<T, float>) {
    if (kind == RandomFillKind::uniform_float) {
      accel::rng::fill_uniform(s, seed, offset);
    } else {
      accel::rng::fill_normal(s, seed, offset, static_cast<float>(mean), static_cast<float>(stddev));
    }
  } else {
    if (kind == RandomFillKind::uniform_double) {
      accel::rng::fill_uniform(s, seed, offset);
    } else {
      accel::rng::fill_normal(s, seed, offset, mean, stddev);
    }
  }
  return out;
}

bool is_normal(RandomFillKind k) { return k == RandomFillKind::normal_float || k == RandomFillKind::normal_double; }

// Compares: equal bytes for every kind (normals included: host and device share one log/sin/cos);
// returns the largest distance seen in ulps for normals, so a failure says how far off it was.
template <class T>
std::int64_t compare(RandomFillKind kind, const std::vector<T>& got, const std::vector<T>& want) {
  CHECK(same_bytes(got, want));
  if constexpr (std::is_floating_point_v<T>) {
    if (is_normal(kind)) return max_ulps(got, want);
  }
  return same_bytes(got, want) ? 0 : -1;
}

template <class T>
void check_kind(accel::cuda::StreamRef s, RandomFillKind kind) {
  const std::vector<std::size_t> lengths{1, 3, 4, 5, 17, 1001, 4 * 65536 + 9, (std::size_t{1} << 21) + 3};
  const std::vector<std::uint64_t> offsets{0, 1, 2, 3, 4, 4 * 65535, 4 * 65536 + 6, (std::uint64_t{1} << 40) + 4};
  std::int64_t worst = 0;
  for (const std::size_t n : lengths) {
    for (const std::uint64_t offset : offsets) {
      for (std::size_t shift = 0; shift < 16 / sizeof(T); ++shift) {
        if (n > 5000 && shift != 0 && shift != 1) continue;
        CAPTURE(n);
        CAPTURE(offset);
        CAPTURE(shift);
        const std::uint64_t seed = 0x9E3779B97F4A7C15ULL ^ n;
        DeviceVector<T> out(n, shift);
        accel::cuda::detail::launch_random_fill(s, kind, out.data(), n, seed, offset, nullptr, 0, 0.5, 2.0);
        worst = std::max(worst, compare(kind, out.get(), host_fill<T>(kind, n, seed, offset, 0.5, 2.0)));
      }
    }
  }
  // doctest prints a const char* as a pointer: std::string makes it text.
  const std::string summary = std::string(accel::cuda::RandomFillOp::kernel_name(kind)) +
                              ": largest difference from the host " + std::to_string(worst) +
                              (is_normal(kind) ? " ulp" : " (bytes differ: -1)");
  MESSAGE(summary);
}

}  // namespace

// ---- without a GPU ----------------------------------------------------------------------------------

TEST_CASE("cuda random: without a device, fills throw BackendUnavailableError and leave the generator as it was") {
  if (cuda.is_available()) {
    MESSAGE("SKIPPED: a CUDA device is present (the GPU cases below run instead)");
    return;
  }
  using R = accel::cuda::Random;
  const UncheckedStreamRef s;
  accel::Generator g(1234);
  (void)g.reserve(100);  // somewhere other than the start
  const auto before = g.get_state();
  std::uint32_t bits[4];
  float f[4];
  double d[4];
  CHECK_THROWS_AS(R::fill_bits(s, bits, 4, g), accel::BackendUnavailableError);
  CHECK_THROWS_AS(R::fill_uniform(s, f, 4, g), accel::BackendUnavailableError);
  CHECK_THROWS_AS(R::fill_uniform(s, d, 4, g), accel::BackendUnavailableError);
  CHECK_THROWS_AS(R::fill_normal(s, f, 4, 0.0f, 1.0f, g), accel::BackendUnavailableError);
  CHECK_THROWS_AS(R::fill_normal(s, d, 4, 0.0, 1.0, g), accel::BackendUnavailableError);
  CHECK(g.get_state() == before);
  // The default generators: the device check comes first.
  CHECK_THROWS_AS(R::fill_uniform(s, f, 4), accel::BackendUnavailableError);
  CHECK_THROWS_AS(cuda.fill_normal(s, d, 4, 0.0, 1.0), accel::BackendUnavailableError);
  // The message is the backend's usual one.
  try {
    R::fill_uniform(s, f, 4, g);
  } catch (const accel::BackendUnavailableError& e) {
    CHECK(std::string(e.what()).find(cuda.availability().reason) != std::string::npos);
  }
  // A null pointer is the caller's error, whatever the machine; n == 0 does nothing.
  CHECK_THROWS_AS(R::fill_bits(s, nullptr, 3, g), accel::InvalidArgumentError);
  CHECK_NOTHROW(R::fill_uniform(s, f, 0, g));
  CHECK_NOTHROW(R::fill_uniform(s, static_cast<float*>(nullptr), 0, g));
  CHECK(g.get_state() == before);
  // The detail entry points the graph code uses.
  CHECK_THROWS_AS(accel::cuda::detail::launch_random_fill(s, RandomFillKind::uniform_float, f, 4, 1, 0, nullptr, 0),
                  accel::BackendUnavailableError);
  CHECK_THROWS_AS(accel::cuda::detail::launch_random_fill(s, RandomFillKind::bits, nullptr, 4, 1, 0, nullptr, 0),
                  accel::InvalidArgumentError);
  CHECK_NOTHROW(accel::cuda::detail::launch_random_fill(s, RandomFillKind::bits, nullptr, 0, 1, 0, nullptr, 0));
  // A pointer not aligned to the kernel's element would fault on the device: refused first, anywhere.
  CHECK_THROWS_WITH_AS(accel::cuda::detail::launch_random_fill(s, RandomFillKind::normal_double,
                                                               reinterpret_cast<void*>(std::uintptr_t{0x1004}), 4, 1, 0,
                                                               nullptr, 0),
                       doctest::Contains("is not aligned to its 8-byte elements"), accel::InvalidArgumentError);
  CHECK_THROWS_AS((void)accel::cuda::detail::random_fill_op(0), accel::BackendUnavailableError);
  // The op is in the table and says why it cannot load here.
  auto b = cuda.create_op_builder("random_fill");
  CHECK(b.kind() == accel::ops::OpKind::cuda);
  CHECK_FALSE(b.is_compatible().ok);
  CHECK_THROWS_AS((void)b.load(), accel::BackendUnavailableError);
}

// ---- on a GPU ---------------------------------------------------------------------------------------

TEST_CASE("cuda random: each kernel writes what accel::rng::fill_* writes (any length, offset, alignment)") {
  SKIP_WITHOUT_GPU();
  CudaBackend::Stream stream;
  const accel::cuda::StreamRef s = stream;
  check_kind<std::uint32_t>(s, RandomFillKind::bits);
  check_kind<float>(s, RandomFillKind::uniform_float);
  check_kind<double>(s, RandomFillKind::uniform_double);
  check_kind<float>(s, RandomFillKind::normal_float);
  check_kind<double>(s, RandomFillKind::normal_double);
}

TEST_CASE("cuda random: the CUDA backend's fills equal the CPU backend's for the same calls") {
  SKIP_WITHOUT_GPU();
  constexpr accel::CpuBackend cpu{};
  const auto cs = cpu.current_stream();
  CudaBackend::Stream stream;
  const accel::cuda::StreamRef s = stream;
  accel::Generator gc(20240611), gg(20240611);
  const std::size_t n = 100003;
  std::vector<std::uint32_t> cb(n);
  std::vector<float> cu(n), cn(n);
  std::vector<double> cd(n), cdn(n);
  DeviceVector<std::uint32_t> db(n, 0);
  DeviceVector<float> du(n, 1), dn(n, 0);
  DeviceVector<double> dd(n, 0), ddn(n, 1);
  // One sequence on each backend: bits, uniform, normal, double uniform, double normal, twice over.
  for (int round = 0; round < 2; ++round) {
    cpu.fill_bits(cs, cb.data(), n, gc);
    cpu.fill_uniform(cs, cu.data(), n, gc);
    cpu.fill_normal(cs, cn.data(), n, 1.0f, 3.0f, gc);
    cpu.fill_uniform(cs, cd.data(), n, gc);
    cpu.fill_normal(cs, cdn.data(), n, -1.0, 0.5, gc);
    cs.synchronize();
    cuda.fill_bits(s, db.data(), n, gg);
    cuda.fill_uniform(s, du.data(), n, gg);
    cuda.fill_normal(s, dn.data(), n, 1.0f, 3.0f, gg);
    cuda.fill_uniform(s, dd.data(), n, gg);
    cuda.fill_normal(s, ddn.data(), n, -1.0, 0.5, gg);
    CHECK(gg.get_state() == gc.get_state());  // the same reservations
    CHECK(same_bytes(db.get(), cb));
    CHECK(same_bytes(du.get(), cu));
    CHECK(same_bytes(dd.get(), cd));
    const auto nf = max_ulps(dn.get(), cn);
    const auto nd = max_ulps(ddn.get(), cdn);
    CHECK(same_bytes(dn.get(), cn));
    CHECK(same_bytes(ddn.get(), cdn));
    MESSAGE("normals vs the CPU backend: float " << nf << " ulp, double " << nd << " ulp");
  }
  // The default generators move alike too.
  cpu.manual_seed(77);
  cuda.manual_seed(77);
  cpu.fill_uniform(cs, cu.data(), 10);
  cuda.fill_uniform(s, du.data(), 10);
  CHECK(cpu.get_rng_state() == cuda.get_rng_state());
  cs.synchronize();
  std::vector<float> first(cu.begin(), cu.begin() + 10), got = du.get();
  CHECK(std::memcmp(got.data(), first.data(), 10 * sizeof(float)) == 0);
  cpu.manual_seed_all(accel::Generator::default_seed);
  cuda.manual_seed_all(accel::Generator::default_seed);
}

TEST_CASE("cuda random: offsets read from device memory (graph-safe Philox), also inside a captured graph") {
  SKIP_WITHOUT_GPU();
  CudaBackend::Stream stream;
  const accel::cuda::StreamRef s = stream;
  (void)accel::cuda::detail::random_fill_op(s.device_index());  // loaded before any capture
  void* raw = nullptr;
  REQUIRE(cudaMalloc(&raw, 2 * sizeof(std::uint64_t)) == cudaSuccess);
  auto* state = static_cast<std::uint64_t*>(raw);
  const auto set_state = [&](std::uint64_t seed, std::uint64_t offset) {
    const std::uint64_t host[2] = {seed, offset};
    REQUIRE(cudaMemcpy(state, host, sizeof host, cudaMemcpyHostToDevice) == cudaSuccess);
    // A small pageable upload returns once staged, and the legacy stream is not ordered before s
    // (non-blocking): wait for it to land.
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  };
  const std::size_t n = 5000;
  DeviceVector<float> u(n, 1);
  DeviceVector<double> d(n, 0);

  // Outside a graph: seed and offset arguments are ignored, the device state plus intra_offset used.
  set_state(42, 4096);
  accel::cuda::detail::launch_random_fill(s, RandomFillKind::uniform_float, u.data(), n, 1, 0, state, 8);
  CHECK(same_bytes(u.get(), host_fill<float>(RandomFillKind::uniform_float, n, 42, 4104, 0, 1)));

  // Captured once, replayed with new state: new numbers each replay.
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaStreamBeginCapture(s.get(), cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  accel::cuda::detail::launch_random_fill(s, RandomFillKind::uniform_float, u.data(), n, 0, 0, state, 0);
  const std::uint64_t intra = 4 * ((n + 3) / 4);
  accel::cuda::detail::launch_random_fill(s, RandomFillKind::normal_double, d.data(), n, 0, 0, state, intra, 1.0, 2.0);
  REQUIRE(cudaStreamEndCapture(s.get(), &graph) == cudaSuccess);
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  for (const std::uint64_t offset : {std::uint64_t{0}, std::uint64_t{1} << 20}) {
    CAPTURE(offset);
    set_state(7, offset);
    REQUIRE(cudaGraphLaunch(exec, s.get()) == cudaSuccess);
    CHECK(same_bytes(u.get(), host_fill<float>(RandomFillKind::uniform_float, n, 7, offset, 0, 1)));
    CHECK(same_bytes(d.get(), host_fill<double>(RandomFillKind::normal_double, n, 7, offset + intra, 1.0, 2.0)));
  }
  (void)cudaGraphExecDestroy(exec);
  (void)cudaGraphDestroy(graph);
  (void)cudaFree(raw);
}

TEST_CASE("cuda random: fills captured with capture_to_graph draw fresh numbers at each replay") {
  SKIP_WITHOUT_GPU();
  CudaBackend::Stream stream;
  const accel::cuda::StreamRef s = stream;
  const int dev = s.device_index();
  const std::size_t n = 3001;
  DeviceVector<float> u(n, 0);
  DeviceVector<double> d(n, 1);
  cuda.manual_seed(99);
  auto graph = cuda.create_graph();
  {
    auto capture = cuda.capture_to_graph(graph, s);
    cuda.fill_uniform(s, u.data(), n);  // the first fill on this device may load the op here
    cuda.fill_normal(s, d.data(), n, 0.0, 1.0);
    capture.end();
  }
  CHECK(graph.random_draws() == 2);
  CHECK(cuda.default_generator(dev).offset() == 0);  // the capture reserved nothing
  for (int replay = 0; replay < 2; ++replay) {
    CAPTURE(replay);
    // What the same two calls made eagerly now would get.
    const std::uint64_t off_u = cuda.default_generator(dev).offset();
    const std::uint64_t off_d = off_u + 4 * ((n + 3) / 4);
    cuda.replay_graph(graph, s);
    CHECK(cuda.default_generator(dev).offset() == off_d + accel::Generator::wide_words(off_d, n));
    CHECK(same_bytes(u.get(), host_fill<float>(RandomFillKind::uniform_float, n, 99, off_u, 0, 1)));
    CHECK(same_bytes(d.get(), host_fill<double>(RandomFillKind::normal_double, n, 99, off_d, 0.0, 1.0)));
  }
  cuda.manual_seed_all(accel::Generator::default_seed);
}

TEST_CASE("cuda random: argument checks on a GPU") {
  SKIP_WITHOUT_GPU();
  const auto s = cuda.current_stream();
  accel::Generator g(3);
  const auto before = g.get_state();
  CHECK_THROWS_AS(cuda.fill_uniform(s, static_cast<float*>(nullptr), 5, g), accel::InvalidArgumentError);
  CHECK_NOTHROW(cuda.fill_uniform(s, static_cast<float*>(nullptr), 0, g));
  CHECK(g.get_state() == before);
}
