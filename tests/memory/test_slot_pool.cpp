// accel::detail::SlotPool, the caching allocator's store for its own records: chunk sizes, the free
// list's order, trim() dropping exactly the chunks none of whose slots is in use, and the mappings it
// gives back. The allocator's tests see it only through bookkeeping_bytes() at a peak and at zero.
#include <accel/memory/detail/slot_pool.hpp>

#include <doctest/doctest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

namespace {

using Pool64 = accel::detail::SlotPool<64, 8>;  // 64 slots fill one page exactly
using Pool48 = accel::detail::SlotPool<48, 16>;  // a page holds 85 slots and 16 bytes over

constexpr std::size_t slot_pool_page = 4096;

std::uintptr_t address_of(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// Takes n slots, filling each with its index (a slot's whole size is the caller's).
template <class Pool>
std::vector<void*> take_slots(Pool& pool, std::size_t n, std::size_t slot_size) {
  pool.reserve(n);
  std::vector<void*> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = pool.take();
    std::memset(out[i], static_cast<int>(i & 0xff), slot_size);
  }
  return out;
}

#if defined(ACCEL_SLOT_POOL_MMAP)
// Whether the page at p is mapped in this process (msync reports ENOMEM for an unmapped range).
bool page_mapped(const void* p) {
  void* page = reinterpret_cast<void*>(address_of(p) & ~std::uintptr_t{slot_pool_page - 1});
  if (::msync(page, slot_pool_page, MS_ASYNC) == 0) return true;
  return errno != ENOMEM;
}
#endif

}  // namespace

TEST_CASE("SlotPool: chunks of 64 slots first, then as many as exist, up to 4096 slots, in whole pages") {
  Pool64 pool;
  CHECK(pool.bytes() == 0);
  CHECK(pool.has(0));
  CHECK_FALSE(pool.has(1));

  pool.reserve(1);
  CHECK(pool.bytes() == slot_pool_page);  // 64 slots × 64 bytes
  CHECK(pool.has(64));
  CHECK_FALSE(pool.has(65));
  pool.reserve(64);  // already there: nothing grows
  CHECK(pool.bytes() == slot_pool_page);

  pool.reserve(65);  // a second chunk as large as what exists: 64 slots
  CHECK(pool.bytes() == 2 * slot_pool_page);
  CHECK(pool.has(128));
  CHECK_FALSE(pool.has(129));
  pool.reserve(129);  // then 128
  CHECK(pool.bytes() == 4 * slot_pool_page);
  CHECK(pool.has(256));
  CHECK_FALSE(pool.has(257));

  // 64, 64, 128, 256, ..., 4096, then 4096 a chunk: 20,480 slots cover 20,000. Without the cap the
  // chunks would reach 32,768 slots.
  Pool64 big;
  big.reserve(20000);
  CHECK(big.bytes() == 20480 * 64);
  CHECK(big.has(20480));
  CHECK_FALSE(big.has(20481));
  big.reserve(20481);  // one more chunk of the cap, not of what exists
  CHECK(big.bytes() == (20480 + 4096) * 64);
}

TEST_CASE("SlotPool: a slot size that does not divide a page gets every slot the page holds") {
  Pool48 pool;
  pool.reserve(1);
  CHECK(pool.bytes() == slot_pool_page);  // 64 × 48 = 3072 bytes, rounded up to the page
  CHECK(pool.has(85));                    // 4096 / 48
  CHECK_FALSE(pool.has(86));
  const auto slots = take_slots(pool, 85, 48);
  CHECK_FALSE(pool.has(1));
  std::set<std::uintptr_t> distinct;
  for (void* p : slots) {
    CHECK(address_of(p) % 16 == 0);
    distinct.insert(address_of(p));
  }
  CHECK(distinct.size() == 85);
  CHECK(*distinct.rbegin() - *distinct.begin() == 84 * 48);  // one chunk, packed
  for (std::size_t i = 0; i < slots.size(); ++i) {            // no slot overwrote another
    CHECK(static_cast<const unsigned char*>(slots[i])[47] == (i & 0xff));
  }
  for (void* p : slots) pool.give(p);
  CHECK(pool.has(85));
}

TEST_CASE("SlotPool: take() and give() are a stack, the first slot of a chunk first") {
  Pool64 pool;
  pool.reserve(1);
  void* first = pool.take();
  void* second = pool.take();
  CHECK(address_of(second) == address_of(first) + 64);  // a new chunk is handed out in address order
#if defined(ACCEL_SLOT_POOL_MMAP)
  CHECK(address_of(first) % slot_pool_page == 0);  // the chunk's start: a mapping of its own
#endif
  CHECK(pool.has(62));
  CHECK_FALSE(pool.has(63));
  pool.give(first);
  pool.give(second);
  CHECK(pool.has(64));
  CHECK(pool.take() == second);  // last given, first taken
  CHECK(pool.take() == first);
  pool.give(first);
  pool.give(second);
}

TEST_CASE("SlotPool: trim() unmaps exactly the chunks whose slots are all free, keeping the free list's order") {
  Pool64 pool;
  const auto a = take_slots(pool, 64, 64);   // chunk A: 64 slots
  const auto b = take_slots(pool, 64, 64);   // chunk B: 64
  const auto c = take_slots(pool, 128, 64);  // chunk C: 128
  REQUIRE(pool.bytes() == 4 * slot_pool_page);
  CHECK_FALSE(pool.has(1));

  pool.trim();  // every slot in use: nothing goes
  CHECK(pool.bytes() == 4 * slot_pool_page);

  // Every slot of C (its first, the chunk's start, last), one of A, one of B: the list's tail is C's.
  for (std::size_t i = c.size(); i-- > 0;) pool.give(c[i]);
  pool.give(a[5]);
  pool.give(b[7]);
  CHECK(pool.has(130));
  pool.trim();
  CHECK(pool.bytes() == 2 * slot_pool_page);  // C gone, A and B kept
  CHECK(pool.has(2));
  CHECK_FALSE(pool.has(3));
#if defined(ACCEL_SLOT_POOL_MMAP)
  CHECK_FALSE(page_mapped(c[0]));
  CHECK_FALSE(page_mapped(c[127]));
  CHECK(page_mapped(a[0]));
  CHECK(page_mapped(b[0]));
#endif
  CHECK(pool.take() == b[7]);  // the kept slots in their order
  CHECK(pool.take() == a[5]);
  CHECK_FALSE(pool.has(1));

  // A chunk with one slot in use stays; the others' slots were never part of it.
  for (std::size_t i = 0; i < b.size(); ++i) pool.give(b[i]);
  for (std::size_t i = 1; i < a.size(); ++i) pool.give(a[i]);
  std::memset(a[0], 0xab, 64);
  pool.trim();
  CHECK(pool.bytes() == slot_pool_page);  // B gone, A (a[0] in use) kept
  CHECK(pool.has(63));
  CHECK_FALSE(pool.has(64));
#if defined(ACCEL_SLOT_POOL_MMAP)
  CHECK_FALSE(page_mapped(b[0]));
  CHECK(page_mapped(a[0]));
#endif
  CHECK(static_cast<const unsigned char*>(a[0])[63] == 0xab);  // the slot in use kept its contents

  // Everything free: everything goes, and the pool starts again from a first chunk.
  pool.give(a[0]);
  pool.trim();
  CHECK(pool.bytes() == 0);
  CHECK_FALSE(pool.has(1));
#if defined(ACCEL_SLOT_POOL_MMAP)
  CHECK_FALSE(page_mapped(a[0]));
#endif
  pool.trim();  // an empty pool: nothing to do
  CHECK(pool.bytes() == 0);
  const auto again = take_slots(pool, 65, 64);
  CHECK(pool.bytes() == 2 * slot_pool_page);  // 64, then 64 again: the count restarted from zero
  // The free list holds nothing of the chunks unmapped before: a partial trim walks all of it.
  for (std::size_t i = 1; i < again.size(); ++i) pool.give(again[i]);
  pool.trim();
  CHECK(pool.bytes() == slot_pool_page);  // again[0] keeps the first chunk; the second was all free
  pool.give(again[0]);
  pool.trim();
  CHECK(pool.bytes() == 0);
}

TEST_CASE("SlotPool: trim() finds each slot's chunk among many, at a chunk's first and last slot too") {
  Pool64 pool;
  std::vector<std::vector<void*>> chunks;
  std::size_t total = 0;
  for (std::size_t slots : {64, 64, 128, 256, 512, 1024}) {  // six chunks, wherever mmap puts them
    chunks.push_back(take_slots(pool, slots, 64));
    total += slots;
  }
  REQUIRE(pool.bytes() == total * 64);
  // Free the chunks of odd index entirely, and all but the first or the last slot of the others.
  std::size_t kept_bytes = 0;
  std::size_t kept_free = 0;
  for (std::size_t k = 0; k < chunks.size(); ++k) {
    const auto& slots = chunks[k];
    if (k % 2 == 1) {
      for (void* p : slots) pool.give(p);
      continue;
    }
    const std::size_t in_use = k % 4 == 0 ? 0 : slots.size() - 1;
    for (std::size_t i = 0; i < slots.size(); ++i) {
      if (i != in_use) pool.give(slots[i]);
    }
    kept_bytes += slots.size() * 64;
    kept_free += slots.size() - 1;
  }
  pool.trim();
  CHECK(pool.bytes() == kept_bytes);
  CHECK(pool.has(kept_free));
  CHECK_FALSE(pool.has(kept_free + 1));
  // Each free slot now lies in a kept chunk.
  std::vector<void*> taken;
  while (pool.has(1)) taken.push_back(pool.take());
  for (void* p : taken) {
    bool inside_kept = false;
    for (std::size_t k = 0; k < chunks.size(); k += 2) {
      const auto lo = address_of(chunks[k].front());
      inside_kept = inside_kept || (address_of(p) >= lo && address_of(p) < lo + chunks[k].size() * 64);
    }
    CHECK(inside_kept);
  }
  for (void* p : taken) pool.give(p);
  for (std::size_t k = 0; k < chunks.size(); k += 2) pool.give(chunks[k][k % 4 == 0 ? 0 : chunks[k].size() - 1]);
  pool.trim();
  CHECK(pool.bytes() == 0);
}

#if defined(ACCEL_SLOT_POOL_MMAP)
TEST_CASE("SlotPool: destruction unmaps every chunk") {
  void* first = nullptr;
  void* second = nullptr;
  {
    Pool64 pool;
    first = take_slots(pool, 64, 64).front();
    second = take_slots(pool, 64, 64).front();  // a second chunk, its slot still in use
    CHECK(page_mapped(first));
    CHECK(page_mapped(second));
  }
  CHECK_FALSE(page_mapped(first));
  CHECK_FALSE(page_mapped(second));
}
#endif
