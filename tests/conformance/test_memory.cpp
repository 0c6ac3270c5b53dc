// MemoryApi conformance: the caching allocator counts, caches, reuses and fails the same way everywhere.
#include "backends.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace {

template <class B>
std::int64_t stat_of(const B& b, const char* key) {
  const auto flat = b.memory_stats().flat();
  const auto it = flat.find(key);
  REQUIRE_MESSAGE(it != flat.end(), "memory_stats() lacks " << key);
  return it->second;
}

}  // namespace

TEST_CASE_TEMPLATE_DEFINE("memory: allocation is counted, cached and released like torch", B, memory_counts) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  b.synchronize();
  b.empty_cache();
  const std::size_t allocated0 = b.memory_allocated();
  const auto segments0 = stat_of(b, "segment.all.current");
  const auto requested0 = stat_of(b, "requested_bytes.all.current");
  const auto s = b.current_stream();

  void* p = b.raw_alloc(1000, s);
  REQUIRE(p != nullptr);
  CHECK(b.memory_allocated() == allocated0 + 1024);  // rounded to 512 B
  CHECK(b.on_accelerator(p));
  CHECK(stat_of(b, "requested_bytes.all.current") == requested0 + 1000);  // what was asked, before rounding
  CHECK(stat_of(b, "segment.small_pool.current") >= 1);
  CHECK(b.memory_reserved() >= allocated0 + 1024);
  CHECK(b.memory_cached() == b.memory_reserved());
  CHECK(b.max_memory_allocated() >= b.memory_allocated());

  b.raw_delete(p);
  CHECK(b.memory_allocated() == allocated0);
  CHECK(b.memory_reserved() >= 1024);  // cached, not returned
  CHECK(stat_of(b, "requested_bytes.all.current") == requested0);
  void* again = b.raw_alloc(1000, s);
  CHECK(again == p);  // a cache hit on the same stream reuses the block
  b.raw_delete(again);
  b.empty_cache();
  CHECK(stat_of(b, "segment.all.current") == segments0);
}

TEST_CASE_TEMPLATE_DEFINE("memory: peaks and resets follow torch's semantics", B, memory_peaks) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  const auto s = b.current_stream();
  b.reset_peak_memory_stats();
  const std::size_t base = b.memory_allocated();
  void* big = b.raw_alloc(8 << 20, s);
  b.raw_delete(big);
  CHECK(b.max_memory_allocated() == base + (8 << 20));
  CHECK(b.memory_allocated() == base);
  b.reset_max_memory_allocated();
  CHECK(b.max_memory_allocated() == base);
  CHECK(stat_of(b, "allocation.all.allocated") >= 1);
  b.reset_accumulated_memory_stats();
  CHECK(stat_of(b, "allocation.all.allocated") == 0);
  CHECK(stat_of(b, "allocation.all.freed") == 0);
  CHECK(stat_of(b, "num_alloc_retries") == 0);
  b.empty_cache();
  b.reset_max_memory_cached();
  CHECK(b.max_memory_cached() == b.memory_reserved());
}

TEST_CASE_TEMPLATE_DEFINE("memory: bad frees and bad sizes are typed errors that change nothing", B, memory_errors) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  const auto s = b.current_stream();
  CHECK(b.raw_alloc(0, s) == nullptr);
  b.raw_delete(nullptr);

  void* p = b.raw_alloc(4096, s);
  const auto before = b.memory_stats().flat();
  int not_ours = 0;
  CHECK_THROWS_AS(b.raw_delete(&not_ours), accel::InvalidArgumentError);
  CHECK_THROWS_AS(b.raw_delete(static_cast<char*>(p) + 16), accel::InvalidArgumentError);
  CHECK(b.memory_stats().flat() == before);
  b.raw_delete(p);
  const auto after_free = b.memory_stats().flat();
  CHECK_THROWS_AS(b.raw_delete(p), accel::InvalidArgumentError);  // double free
  CHECK(b.memory_stats().flat() == after_free);

  const auto ooms = stat_of(b, "num_ooms");
  try {
    (void)b.raw_alloc(std::numeric_limits<std::size_t>::max() / 2, s);
    FAIL("a huge allocation succeeded");
  } catch (const accel::OutOfMemoryError& e) {
    CHECK(e.requested_bytes() == std::numeric_limits<std::size_t>::max() / 2);
    CHECK(std::string(e.what()).find(b.device_name(b.current_device())) != std::string::npos);
  }
  CHECK(stat_of(b, "num_ooms") == ooms + 1);
  void* still_works = b.raw_alloc(4096, s);  // the allocator stays usable
  CHECK(still_works != nullptr);
  b.raw_delete(still_works);
}

// The block bookkeeping of the cache-hit path (caching_allocator.hpp): a freed block merges with free
// neighbours on either side, a merged or split free block is re-sorted when its new size passes
// another free block's, and the next request still gets the best fit (smallest size, then lowest
// address) on its stream. Addresses are relative to the first block: one small-pool segment.
TEST_CASE_TEMPLATE_DEFINE("memory: try_raw_delete frees what the backend holds and reports the rest", B,
                          memory_try_raw_delete) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  const auto s = b.current_stream();
  const std::size_t allocated0 = b.memory_allocated();
  void* p = b.raw_alloc(3000, s);
  REQUIRE(p != nullptr);
  CHECK(b.memory_allocated() == allocated0 + 3072);
  CHECK(b.try_raw_delete(p));
  CHECK(b.memory_allocated() == allocated0);
  // Freed already, inside a segment but not a live block, and memory no allocator holds: false, and
  // nothing changes.
  const auto allocations = stat_of(b, "allocation.all.current");
  CHECK_FALSE(b.try_raw_delete(p));
  void* q = b.raw_alloc(4096, s);
  CHECK_FALSE(b.try_raw_delete(static_cast<char*>(q) + 512));
  int on_stack = 0;
  CHECK_FALSE(b.try_raw_delete(&on_stack));
  CHECK(stat_of(b, "allocation.all.current") == allocations + 1);
  CHECK(b.try_raw_delete(nullptr));
  CHECK(b.try_raw_delete(q));
  CHECK(b.memory_allocated() == allocated0);
}

TEST_CASE_TEMPLATE_DEFINE("memory: blocks split, merge and are reused best-fit", B, memory_best_fit) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  b.empty_cache();
  typename B::Stream s;  // a new stream: no cached block of its own yet
  const auto splits0 = stat_of(b, "inactive_split.small_pool.current");
  const auto split_bytes0 = stat_of(b, "inactive_split_bytes.small_pool.current");
  const auto active0 = stat_of(b, "active_bytes.all.current");
  const auto segments0 = stat_of(b, "segment.all.current");
  const auto at = [&](std::size_t n) { return static_cast<char*>(b.raw_alloc(n, s)); };

  // [a 4K][g1 4K][x 8K][g2 4K][c 12K][g3 4K][rest of the 2 MiB segment]
  char* a = at(4096);
  char* g1 = at(4096);
  char* x = at(8192);
  char* g2 = at(4096);
  char* c = at(12288);
  char* g3 = at(4096);
  CHECK(g1 == a + 4096);
  CHECK(x == a + 8192);
  CHECK(g2 == a + 16384);
  CHECK(c == a + 20480);
  CHECK(g3 == a + 32768);
  CHECK(stat_of(b, "inactive_split.small_pool.current") == splits0 + 1);  // the rest

  b.raw_delete(a);
  b.raw_delete(x);
  b.raw_delete(c);
  CHECK(stat_of(b, "inactive_split.small_pool.current") == splits0 + 4);
  b.raw_delete(g1);  // merges with a (before) and x (after): 16 KiB, now larger than c's 12 KiB
  CHECK(stat_of(b, "inactive_split.small_pool.current") == splits0 + 3);
  char* p = at(12288);
  CHECK(p == c);  // the exact fit, not a split of the merged 16 KiB block
  char* q = at(16384);
  CHECK(q == a);
  b.raw_delete(p);
  b.raw_delete(q);

  // A split whose remainder (3.5 KiB) becomes smaller than another free block (c, 12 KiB).
  char* r = at(12800);
  CHECK(r == a);  // c is too small; the 16 KiB block is the best fit
  char* t = at(3584);
  CHECK(t == a + 12800);  // the remainder is the exact fit
  b.raw_delete(t);
  b.raw_delete(r);

  b.raw_delete(g2);  // merges both ways: [a..c] is one free block
  b.raw_delete(g3);  // and with the rest: the segment is whole again
  CHECK(stat_of(b, "inactive_split.small_pool.current") == splits0);
  CHECK(stat_of(b, "inactive_split_bytes.small_pool.current") == split_bytes0);
  CHECK(stat_of(b, "active_bytes.all.current") == active0);
  char* whole = at(8192);
  CHECK(whole == a);
  b.raw_delete(whole);
  s.synchronize();
  b.empty_cache();
  CHECK(stat_of(b, "segment.all.current") == segments0);
}

TEST_CASE_TEMPLATE_DEFINE("memory: record_stream holds a block until the other stream is done", B, memory_record_stream) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  typename B::Stream owner;
  typename B::Stream user;
  void* p = b.raw_alloc(64 << 10, owner);
  std::atomic<bool> release{false};
  user.enqueue([&] {
    while (!release.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
  });
  b.record_stream(p, user);
  b.raw_delete(p);
  void* q = b.raw_alloc(64 << 10, owner);
  CHECK(q != p);  // p may still be in use on `user`
  release = true;
  user.synchronize();
  b.raw_delete(q);
  void* r = b.raw_alloc(64 << 10, owner);
  void* t = b.raw_alloc(64 << 10, owner);
  CHECK((r == p || t == p));  // once `user` is done, p is free for its own stream again
  b.raw_delete(r);
  b.raw_delete(t);
}

// The README's engine makes a stream per step; a destroyed stream's cached blocks must serve the
// streams after it (torch recycles its streams from a pool), or every step caches a new working set.
TEST_CASE_TEMPLATE_DEFINE("memory: a stream made per step keeps one step's working set reserved", B,
                          memory_stream_per_step) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  b.synchronize();
  b.empty_cache();
  const std::size_t reserved0 = b.memory_reserved();
  const std::size_t allocated0 = b.memory_allocated();
  const auto retries0 = stat_of(b, "num_alloc_retries");
  // Both pools; the two large buffers share one 20 MiB segment. About 17.3 MiB a step.
  constexpr std::size_t counts[] = {750, 75 << 10, 5 << 18, 3 << 20};  // floats
  std::size_t working_set = 0;
  for (const std::size_t n : counts) working_set += n * sizeof(float);
  std::size_t most = 0;
  for (int step = 0; step < 1000; ++step) {
    typename B::Stream stream;
    accel::FloatBuffer<B> a(counts[0], stream);
    accel::FloatBuffer<B> g(counts[1], stream);
    accel::FloatBuffer<B> w(counts[2], stream);
    accel::FloatBuffer<B> m(counts[3], stream);
    b.copy_async(stream, m.data(), w.data(), 4096);  // work in stream order that uses the buffers
    most = std::max(most, b.memory_reserved() - reserved0);
  }  // the buffers go back to the stream's cache, then the stream is destroyed (drained)
  MESSAGE(b.name() << ": " << working_set << " bytes a step; at most " << most << " bytes reserved over 1,000 steps");
  CHECK(most <= 2 * working_set);
  CHECK(b.memory_reserved() - reserved0 <= 2 * working_set);
  CHECK(b.memory_allocated() == allocated0);
  CHECK(stat_of(b, "num_alloc_retries") == retries0);  // never through the out-of-memory path
  b.empty_cache();
  CHECK(b.memory_reserved() <= reserved0);
}

TEST_CASE_TEMPLATE_DEFINE("memory: a memory fraction caps what can be reserved", B, memory_fraction) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  const auto s = b.current_stream();
  b.empty_cache();
  const std::size_t total = b.total_memory();
  // Allow 64 MiB; a 256 MiB request must fail, even when the device has room.
  b.set_per_process_memory_fraction(double(64 << 20) / double(total));
  CHECK_THROWS_AS((void)b.raw_alloc(256 << 20, s), accel::OutOfMemoryError);
  void* fits = b.raw_alloc(16 << 20, s);
  CHECK(fits != nullptr);
  b.raw_delete(fits);
  b.set_per_process_memory_fraction(1.0);
  CHECK_THROWS_WITH_AS(b.set_per_process_memory_fraction(0.0), doctest::Contains("the fraction must be in (0, 1]"),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(b.set_per_process_memory_fraction(1.5), doctest::Contains("the fraction must be in (0, 1]"),
                       accel::InvalidArgumentError);
  b.empty_cache();
}

TEST_CASE_TEMPLATE_DEFINE("memory: device totals and pinned host memory", B, memory_info_pinning) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  const accel::MemoryInfo info = b.get_memory_info();
  CHECK(info.total == b.total_memory());
  CHECK(info.free <= info.total);
  CHECK(b.available_memory() <= b.total_memory());
  CHECK(b.total_memory() > (256u << 20));

  std::vector<char> host(1 << 20);
  int on_stack = 0;
  CHECK_FALSE(b.on_accelerator(&on_stack));
  CHECK_FALSE(b.is_pinned(host.data()));
  b.pin_memory(host.data(), host.size());
  CHECK(b.is_pinned(host.data()));
  CHECK(b.is_pinned(host.data() + host.size() - 1));
  CHECK_FALSE(b.is_pinned(&on_stack));
  CHECK(b.unpin_memory(host.data()));
  CHECK_FALSE(b.is_pinned(host.data()));
  CHECK_FALSE(b.unpin_memory(host.data()));  // not pinned any more
  // Refusals name the range, in one wording on every backend.
  CHECK_THROWS_WITH_AS(b.pin_memory(host.data(), 0), doctest::Contains(", 0 bytes): the range is empty"),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(b.pin_memory(nullptr, 64), doctest::Contains(", 64 bytes): the range is empty"),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(b.pin_memory(host.data(), ~std::size_t{0}), doctest::Contains("the range wraps around the address space"),
                       accel::InvalidArgumentError);
  CHECK_FALSE(b.is_pinned(host.data()));
}

// host_alloc and its siblings are not in MemoryApi (AnyBackend lacks them) but both backends have them,
// written once (memory/pinned.hpp): the same behaviour and messages on each.
TEST_CASE_TEMPLATE_DEFINE("memory: host_alloc serves cached pinned host memory", B, memory_host_alloc) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  b.host_empty_cache();
  const std::int64_t before = b.host_memory_stats().allocation.all().current;
  auto* p = static_cast<unsigned char*>(b.host_alloc(1000));
  REQUIRE(p != nullptr);
  CHECK(b.is_pinned(p));
  CHECK(b.is_pinned(p + 999));
  CHECK_FALSE(b.on_accelerator(p));
  CHECK(&b.pinned_allocator() == &b.pinned_allocator());
  CHECK(b.host_memory_stats().allocation.all().current == before + 1);
  CHECK(b.host_memory_stats().allocated_bytes.all().current == b.pinned_allocator().stats().allocated_bytes.all().current);
  std::fill(p, p + 1000, static_cast<unsigned char>(0xA5));
  CHECK(p[999] == 0xA5);

  // The device allocator refuses it and says where it came from.
  try {
    b.raw_delete(p);
    FAIL("raw_delete accepted host_alloc memory");
  } catch (const accel::InvalidArgumentError& e) {
    CHECK(std::string(e.what()).find("; it is pinned host memory from host_alloc: free it with host_free") !=
          std::string::npos);
  }

  typename B::Stream side;
  Gate gate;
  gate.hold(side);
  b.host_record_stream(p, side);
  b.host_free(p);
  void* while_busy = b.host_alloc(1000, b.current_stream());
  CHECK(while_busy != p);  // held: `side` has not reached the point where the block was freed
  gate.open();
  side.synchronize();
  b.host_free(nullptr);  // a no-op
  int local = 0;
  CHECK_THROWS_AS(b.host_free(&local), accel::InvalidArgumentError);

  void* again = b.host_alloc(1000, b.current_stream());
  CHECK(again == p);  // cached (the use on `side` is over)
  b.host_free(again);
  b.host_free(while_busy);
  CHECK(b.host_memory_stats().allocation.all().current == before);
  b.host_empty_cache();
  CHECK(b.host_memory_stats().reserved_bytes.all().current == 0);
}

TEST_CASE_TEMPLATE_DEFINE("memory: Buffer owns typed memory on a stream", B, memory_buffer) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  const std::size_t base = b.memory_allocated();
  {
    accel::FloatBuffer<B> weights(1000);
    CHECK(weights.size() == 1000);
    CHECK(weights.bytes() == 4000);
    CHECK(b.memory_allocated() == base + 4096);
    CHECK(b.on_accelerator(weights.data()));
    accel::Buffer<float, B> moved = std::move(weights);
    CHECK(moved.size() == 1000);
    CHECK(weights.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
    accel::ByteBuffer<B> bytes(10);
    CHECK(b.memory_allocated() == base + 4096 + 512);
  }
  CHECK(b.memory_allocated() == base);
}

TEST_CASE_TEMPLATE_DEFINE("memory: copy_async copies in stream order; a null pointer is refused", B, memory_copy) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  typename B::Stream stream;
  std::vector<std::uint32_t> source(4096), back(4096, 0);
  for (std::size_t i = 0; i < source.size(); ++i) source[i] = static_cast<std::uint32_t>(i * 2654435761u);
  accel::Buffer<std::uint32_t, B> device(source.size(), stream);
  accel::Buffer<std::uint32_t, B> copy(source.size(), stream);
  // A null pointer is an InvalidArgumentError naming it, and the stream stays usable (the copies below).
  CHECK_THROWS_WITH_AS(b.copy_async(stream, nullptr, source.data(), 64), "copy_async: null destination for 64 bytes",
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(b.copy_async(stream, device.data(), nullptr, 64), "copy_async: null source for 64 bytes",
                       accel::InvalidArgumentError);
  b.copy_async(stream, nullptr, nullptr, 0);  // zero bytes: nothing to check, nothing to do
  // Partly overlapping ranges are refused (undefined for memcpy and cudaMemcpyAsync), either way round.
  CHECK_THROWS_WITH_AS(b.copy_async(stream, source.data() + 8, source.data(), 64), doctest::Contains("partly overlap (64 bytes"),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(b.copy_async(stream, source.data(), source.data() + 1, 64), doctest::Contains("partly overlap"),
                       accel::InvalidArgumentError);
  b.copy_async(stream, source.data(), source.data(), 64);  // onto itself: allowed, the bytes stay
  b.copy_async(stream, device.data(), source.data(), device.bytes());
  b.copy_async(stream, copy.data(), device.data(), device.bytes());
  b.copy_async(stream, back.data(), copy.data(), copy.bytes());
  b.copy_async(stream, back.data(), copy.data(), 0);  // zero bytes: nothing to do
  stream.synchronize();
  CHECK(back == source);
}

TEST_CASE_TEMPLATE_DEFINE("memory: max_memory_reserved keeps the high-water mark until a reset", B,
                          memory_reserved_peak) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  const int dev = b.current_device();
  const auto s = b.current_stream();
  b.empty_cache();
  b.reset_peak_memory_stats();
  const std::size_t reserved0 = b.memory_reserved();
  CHECK(b.max_memory_reserved() == reserved0);
  constexpr std::size_t big_bytes = std::size_t{32} << 20;
  void* big = b.raw_alloc(big_bytes, s);
  const std::size_t reserved_peak = b.memory_reserved();
  CHECK(reserved_peak >= reserved0 + big_bytes);
  b.raw_delete(big);
  b.empty_cache();
  CHECK(b.memory_reserved() == reserved0);
  CHECK(b.max_memory_reserved() == reserved_peak);
  CHECK(b.max_memory_reserved(dev) == reserved_peak);
  CHECK(b.max_memory_cached(dev) == reserved_peak);
  CHECK(stat_of(b, "reserved_bytes.all.peak") == static_cast<std::int64_t>(reserved_peak));
  b.reset_peak_memory_stats(dev);
  CHECK(b.max_memory_reserved(dev) == reserved0);
}

TEST_CASE_TEMPLATE_DEFINE("memory: every per-device call refuses a device that does not exist", B, memory_bad_device) {
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  const B b;
  for (const int bad : {-1, b.device_count()}) {
    CAPTURE(bad);
    const auto before = b.memory_stats().flat();
    CHECK_THROWS_AS((void)b.memory_allocated(bad), accel::InvalidArgumentError);
    CHECK_THROWS_AS((void)b.max_memory_allocated(bad), accel::InvalidArgumentError);
    CHECK_THROWS_AS((void)b.memory_reserved(bad), accel::InvalidArgumentError);
    CHECK_THROWS_AS((void)b.max_memory_reserved(bad), accel::InvalidArgumentError);
    CHECK_THROWS_AS((void)b.memory_cached(bad), accel::InvalidArgumentError);
    CHECK_THROWS_AS((void)b.memory_stats(bad), accel::InvalidArgumentError);
    CHECK_THROWS_AS(b.reset_peak_memory_stats(bad), accel::InvalidArgumentError);
    CHECK_THROWS_AS(b.reset_accumulated_memory_stats(bad), accel::InvalidArgumentError);
    CHECK_THROWS_AS(b.reset_max_memory_allocated(bad), accel::InvalidArgumentError);
    CHECK_THROWS_AS(b.set_per_process_memory_fraction(0.5, bad), accel::InvalidArgumentError);
    CHECK_THROWS_AS((void)b.total_memory(bad), accel::InvalidArgumentError);
    CHECK_THROWS_AS((void)b.available_memory(bad), accel::InvalidArgumentError);
    CHECK_THROWS_AS((void)b.get_memory_info(bad), accel::InvalidArgumentError);
    CHECK(b.memory_stats().flat() == before);  // nothing changed on the real device
  }
}

TEST_CASE_TEMPLATE_APPLY(memory_copy, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(memory_counts, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(memory_peaks, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(memory_errors, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(memory_try_raw_delete, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(memory_record_stream, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(memory_best_fit, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(memory_fraction, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(memory_info_pinning, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(memory_buffer, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(memory_host_alloc, accel::enabled_backends_t<std::tuple>);
TEST_CASE_TEMPLATE_APPLY(memory_stream_per_step, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(memory_reserved_peak, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(memory_bad_device, ConformanceBackends);
