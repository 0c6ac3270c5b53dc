// accel/comm over NCCL, one rank (NCCL refuses two ranks on one GPU): every operation x element type x
// reduce op on a GPU, graph capture, the memory and device checks, abort. Without a GPU the device cases
// skip, saying why; what needs no GPU (loading NCCL, its version, a missing library) runs everywhere.
#include "support/scoped_env.hpp"

#include <accel/comm.hpp>
#include <accel/cuda/backend.hpp>

#include <doctest/doctest.h>

#include "cuda/cuda_test_support.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define COMM_TYPES float, double, accel::half, accel::bfloat16, std::int8_t, std::uint8_t, std::int32_t, std::int64_t

namespace {

using accel::ReduceOp;
using CB = accel::CudaBackend;
template <class T>
using DBuf = accel::Buffer<T, CB>;

template <class T>
T from_int(int v) {
  if constexpr (std::is_same_v<T, accel::half> || std::is_same_v<T, accel::bfloat16>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

template <class T>
std::vector<T> values(std::size_t n, int salt) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = from_int<T>(static_cast<int>((i * 7 + static_cast<std::size_t>(salt)) % 5) + 1);
  return v;
}

template <class T>
DBuf<T> upload(const std::vector<T>& v, accel::cuda::StreamRef s) {
  DBuf<T> d(v.size(), s);
  CB{}.copy_async(s, d.data(), v.data(), v.size() * sizeof(T));
  return d;
}

template <class T>
std::vector<T> download(const DBuf<T>& d, accel::cuda::StreamRef s) {
  std::vector<T> v(d.size());
  CB{}.copy_async(s, v.data(), d.data(), d.size() * sizeof(T));
  s.synchronize();
  return v;
}

template <class T>
std::vector<std::uint64_t> bits(const std::vector<T>& v) {
  std::vector<std::uint64_t> out(v.size(), 0);
  for (std::size_t i = 0; i < v.size(); ++i) std::memcpy(&out[i], &v[i], sizeof(T));
  return out;
}

}  // namespace

TEST_CASE("NCCL loads without a GPU and reports its version; a missing library is reported, not fatal") {
  const std::string version = CB{}.communication_backend_version();
  const auto& api = accel::comm::detail::nccl();
  if (api.loaded()) {
    CHECK(version.rfind("NCCL 2.", 0) == 0);
    CHECK(api.version >= 21400);
    CHECK(version.find(api.version_string()) != std::string::npos);
  } else {
    CHECK(version.rfind("unavailable: NCCL cannot be loaded", 0) == 0);
  }
  const accel::comm::detail::NcclApi* missing = [] {
    const ScopedEnv env{{"ACCEL_NCCL_LIBRARY", "/nonexistent/libnccl.so.2"}};
    return accel::comm::detail::load_nccl();
  }();
  CHECK_FALSE(missing->loaded());
  CHECK(missing->error.find("/nonexistent/libnccl.so.2") != std::string::npos);
  delete missing;
}

TEST_CASE("NCCL's result codes have names and hints") {
  using accel::comm::detail::NcclApi;
  CHECK(NcclApi::result_name(ncclSystemError) == "ncclSystemError");
  CHECK(NcclApi::hint(ncclSystemError).find("NCCL_SOCKET_IFNAME") != std::string::npos);
  CHECK(NcclApi::hint(ncclInvalidUsage).find("two ranks on one GPU") != std::string::npos);
  CHECK(NcclApi::hint(ncclRemoteError).find("remote peer") != std::string::npos);
}

TEST_CASE("world<CudaBackend> without a GPU is a clear BackendUnavailableError") {
  if (CB::is_available()) {
    MESSAGE("skipped: a GPU is present (world<CudaBackend> is tested by the cases below)");
    return;
  }
  // Without NCCL the library's absence is named first; with it, the missing device.
  const std::string expected = accel::comm::detail::nccl().loaded() ? "accel::comm::world<CudaBackend>: no CUDA device ("
                                                                    : "accel::comm::world<CudaBackend>: ";
  CHECK_THROWS_WITH_AS((void)accel::comm::world<CB>(), doctest::Contains(expected.c_str()),
                       accel::BackendUnavailableError);
}

TEST_CASE("NcclCommunicator::create refuses a size or rank out of range before touching NCCL or a GPU") {
  const ncclUniqueId id{};
  CHECK_THROWS_WITH_AS((void)accel::comm::NcclCommunicator::create(id, 0, 0, 0),
                       doctest::Contains("accel::comm::NcclCommunicator::create: size 0 is not a rank count: expected 1 "
                                         "or more"),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS((void)accel::comm::NcclCommunicator::create(id, 2, 2, 0),
                       doctest::Contains("accel::comm::NcclCommunicator::create: rank 2 is out of range: expected 0 to "
                                         "1 (size 2)"),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS((void)accel::comm::NcclCommunicator::create(id, 2, -1, 0),
                       doctest::Contains("rank -1 is out of range: expected 0 to 1 (size 2)"), accel::InvalidArgumentError);
}

TEST_CASE_TEMPLATE("NCCL, one rank: every operation of every type and reduce op", T, COMM_TYPES) {
  SKIP_WITHOUT_GPU();
  auto& c = accel::comm::world<CB>();
  REQUIRE(c.size() == 1);
  REQUIRE(c.rank() == 0);
  accel::cuda::Stream s(c.device());
  const std::size_t n = 1031;
  const std::vector<T> x = values<T>(n, 3);
  // Every output starts as something the result cannot be (x holds 1..5), so an operation that wrote
  // nothing — or a recycled block that happened to hold x — cannot pass as a one-rank identity.
  const auto poisoned = [&] { return upload(std::vector<T>(n, from_int<T>(-7)), s); };
  for (const ReduceOp op : accel::all_reduce_ops) {
    CAPTURE(accel::name(op));
    DBuf<T> a = upload(x, s);
    c.all_reduce(s, a, op);  // one rank: the result is the input (avg divides by 1)
    DBuf<T> out = poisoned();
    c.all_reduce(s, upload(x, s), out, op);
    DBuf<T> r = upload(x, s);
    c.reduce(s, r, 0, op);
    DBuf<T> rs = poisoned();
    c.reduce_scatter(s, upload(x, s), rs, op);
    CHECK(bits(download(a, s)) == bits(x));
    CHECK(bits(download(out, s)) == bits(x));
    CHECK(bits(download(r, s)) == bits(x));
    CHECK(bits(download(rs, s)) == bits(x));
  }
  DBuf<T> b = upload(x, s), g = poisoned(), t = poisoned(), sc = poisoned(), ga = poisoned(), recv = poisoned();
  c.broadcast(s, b, 0);
  c.all_gather(s, b, g);
  c.all_to_all(s, g, t);
  c.scatter(s, t, sc, 0);
  c.gather(s, sc, ga, 0);
  {
    auto group = c.group();  // a send to oneself needs its recv in the same group
    c.send(s, ga, 0);
    c.recv(s, recv, 0);
    group.end();
  }
  c.barrier(s);
  CHECK(bits(download(b, s)) == bits(x));
  CHECK(bits(download(g, s)) == bits(x));
  CHECK(bits(download(t, s)) == bits(x));
  CHECK(bits(download(sc, s)) == bits(x));
  CHECK(bits(download(ga, s)) == bits(x));
  CHECK(bits(download(recv, s)) == bits(x));
  s.synchronize();
  const auto entries = c.flight_recorder().entries();
  REQUIRE(entries.size() >= 8);
  const std::vector<std::string> last{"broadcast", "all_gather", "all_to_all", "scatter", "gather", "send", "recv", "barrier"};
  for (std::size_t i = 0; i < last.size(); ++i) {
    CHECK(std::string(entries[entries.size() - last.size() + i].op()) == last[i]);  // each call recorded, in order
  }
}

TEST_CASE("NCCL: a collective captured into a CUDA graph runs at each launch") {
  SKIP_WITHOUT_GPU();
  auto& c = accel::comm::world<CB>();
  CB b;
  accel::cuda::Stream s(c.device());
  const std::vector<float> ones(256, 1.0f);
  DBuf<float> x = upload(ones, s);
  DBuf<float> y(256, s);
  s.synchronize();
  auto graph = b.create_graph();
  {
    // Thread-local capture, as nccl-tests and PyTorch's ProcessGroupNCCL capture: NCCL's own threads may
    // call CUDA during the capture (seen on an H200: a global capture failed "operation failed due to a
    // previous error during capture" in one run of several).
    auto capture = b.capture_to_graph(graph, s, {}, accel::CaptureMode::per_thread);
    c.all_reduce(s, x, y, ReduceOp::max);
  }
  // Each replay reads x as it is then: a graph that ran once, or not at all, leaves another y.
  for (int i = 1; i <= 3; ++i) {
    const std::vector<float> xi(256, static_cast<float>(i * 10));
    b.copy_async(s, x.data(), xi.data(), xi.size() * sizeof(float));
    b.replay_graph(graph, s);
    CHECK(download(y, s) == xi);
  }
}

TEST_CASE("NCCL refuses host memory, memory of another device and streams of another device") {
  SKIP_WITHOUT_GPU();
  auto& c = accel::comm::world<CB>();
  accel::cuda::Stream s(c.device());
  std::vector<float> host(16, 1.0f);
  CHECK_THROWS_WITH_AS(c.all_reduce(s, host.data(), host.data(), host.size(), accel::Dtype::float32, ReduceOp::sum),
                       doctest::Contains("host memory"), accel::InvalidArgumentError);
  if (CB::device_count() > 1) {
    const int other = c.device() == 0 ? 1 : 0;
    accel::cuda::Stream elsewhere(other);
    DBuf<float> far(16, elsewhere);
    CHECK_THROWS_WITH_AS(c.all_reduce(elsewhere, far), doctest::Contains("the communicator's device is cuda:"),
                         accel::InvalidArgumentError);
    CHECK_THROWS_WITH_AS(c.all_reduce(s, far.data(), far.data(), 16, accel::Dtype::float32, ReduceOp::sum),
                         doctest::Contains("is memory of cuda:"), accel::InvalidArgumentError);
  }
}

TEST_CASE("NCCL: new_group of the one rank is a working communicator named after its list; bad lists are refused") {
  SKIP_WITHOUT_GPU();
  auto& w = accel::comm::world<CB>();
  CHECK_THROWS_WITH_AS((void)w.new_group(std::vector<int>{}), doctest::Contains("no rank listed"),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS((void)w.new_group(std::vector<int>{1}), doctest::Contains("rank 1 is out of range 0..0"),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS((void)w.new_group(std::vector<int>{0, 0}), doctest::Contains("rank 0 is listed twice"),
                       accel::InvalidArgumentError);
  if (accel::comm::detail::nccl().comm_split == nullptr) {
    MESSAGE("SKIPPED: this NCCL has no ncclCommSplit (NCCL < 2.18)");
    return;
  }
  accel::comm::NcclCommunicator g = w.new_group(std::vector<int>{0});
  REQUIRE(g.valid());
  CHECK(g.size() == 1);
  CHECK(g.rank() == 0);
  CHECK(g.name() == "group [0] of " + w.name());
  CHECK(g.device() == w.device());
  accel::cuda::Stream s(g.device());
  auto buf = upload(std::vector<std::int64_t>{3, -4, 5}, s);
  g.all_reduce(s, buf, ReduceOp::prod);
  CHECK(download(buf, s) == std::vector<std::int64_t>{3, -4, 5});  // one rank: the product is the input
  CHECK_FALSE(w.failed());
}

TEST_CASE("NCCL: split, then abort — later operations are refused with a CommError") {
  SKIP_WITHOUT_GPU();
  auto& w = accel::comm::world<CB>();
  if (accel::comm::detail::nccl().comm_split == nullptr) {
    MESSAGE("SKIPPED: this NCCL has no ncclCommSplit (NCCL < 2.18)");
    return;
  }
  accel::comm::NcclCommunicator c = w.split(0, 0);
  REQUIRE(c.valid());
  CHECK(c.size() == 1);
  CHECK(c.local_rank() == 0);
  CHECK(c.local_size() == 1);
  accel::cuda::Stream s(c.device());
  DBuf<std::int32_t> buf(4, s);
  c.all_reduce(s, buf);
  s.synchronize();
  c.abort();
  CHECK(c.failed());
  CHECK_THROWS_WITH_AS(c.all_reduce(s, buf), doctest::Contains("refused"), accel::comm::CommError);
}
