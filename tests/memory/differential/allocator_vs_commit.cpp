// Differential check of accel::CachingAllocator against its version at another commit (namespace
// accel_old, extracted by run.sh): the same random operations on two identical fake devices —
// allocations of 1 B to 40 MiB on three streams (a third of them the request of the block freed
// last, on its stream), frees (half of them of the latest allocation, some freed twice), record_stream
// and event completion,
// empty_cache, graph pools (begin/end_allocate_to_pool, release_pool, shared pools), resets, a memory
// fraction and several ACCEL_ALLOC_CONF settings (max_split_size, roundup_power2_divisions, garbage
// collection, max_non_split_rounding) — and after every operation the returned pointers, the
// out-of-memory errors and their messages, all memory_stats() keys and snapshot() must be identical.
// For changes to the allocator's internals that must not change its behaviour. Run by hand:
//   bash tests/memory/differential/run.sh [commit] [seeds] [steps]
#include <accel/memory/caching_allocator.hpp>
#include <accel_old/memory/caching_allocator.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

struct FakeStream {
  std::uint64_t sid = 0;
  std::uint64_t id() const noexcept { return sid; }
};
struct FakeEvent {
  std::shared_ptr<bool> done;
  std::uint64_t stream = 0;
};

struct FakeDevice {
  std::size_t capacity = std::size_t{64} << 20;
  std::size_t used = 0;
  std::uintptr_t next = std::uintptr_t{1} << 40;
  std::map<std::uintptr_t, std::size_t> live;
  std::vector<FakeEvent> events;
};

template <int Side>
FakeDevice& dev() {
  static FakeDevice d;
  return d;
}

template <int Side, class MemoryInfoT>
struct FakeMem {
  using stream_type = FakeStream;
  using event_type = FakeEvent;
  static void* allocate(int, std::size_t bytes) noexcept {
    FakeDevice& d = dev<Side>();
    if (bytes > d.capacity - d.used) return nullptr;
    d.used += bytes;
    std::uintptr_t a = d.next;
    d.next += bytes + 4096;
    d.live[a] = bytes;
    return reinterpret_cast<void*>(a);
  }
  static void deallocate(int, void* p, std::size_t bytes) noexcept {
    FakeDevice& d = dev<Side>();
    auto it = d.live.find(reinterpret_cast<std::uintptr_t>(p));
    if (it == d.live.end() || it->second != bytes) {
      std::fprintf(stderr, "bad dealloc\n");
      std::abort();
    }
    d.used -= bytes;
    d.live.erase(it);
  }
  static FakeEvent record_event(FakeStream s) {
    FakeEvent e{std::make_shared<bool>(false), s.sid};
    dev<Side>().events.push_back(e);
    return e;
  }
  static bool event_done(const FakeEvent& e) { return *e.done; }
  static void event_synchronize(const FakeEvent& e) { *e.done = true; }
  static MemoryInfoT memory_info(int) { return {dev<Side>().capacity - dev<Side>().used, dev<Side>().capacity}; }
  static std::string device_name(int) { return "fake:0"; }
};

using NewMem = FakeMem<0, accel::MemoryInfo>;
using OldMem = FakeMem<1, accel_old::MemoryInfo>;

template <class S>
std::string dump_snapshot(const std::vector<S>& segs) {
  std::string out;
  for (const auto& s : segs) {
    out += "seg " + std::to_string(s.address) + " " + std::to_string(s.total_size) + " a" + std::to_string(s.allocated_size) +
           " act" + std::to_string(s.active_size) + " st" + std::to_string(s.stream) + " sm" +
           std::to_string(s.is_small_pool) + " pool" + std::to_string(s.pool_id) + ":";
    for (const auto& b : s.blocks) {
      out += " [" + std::to_string(b.address) + "," + std::to_string(b.size) + "," + std::to_string(b.requested_size) + "," +
             std::to_string(static_cast<int>(b.state)) + "]";
    }
    out += "\n";
  }
  return out;
}

int main(int argc, char** argv) {
  const unsigned seeds = argc > 1 ? std::atoi(argv[1]) : 50;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 4000;
  long total_ops = 0;
  for (unsigned seed = 1; seed <= seeds; ++seed) {
    std::mt19937_64 rng(seed);
    dev<0>() = FakeDevice{};
    dev<1>() = FakeDevice{};
    const std::size_t cap = (seed % 3 == 0) ? (std::size_t{48} << 20) : (std::size_t{400} << 20);
    dev<0>().capacity = dev<1>().capacity = cap;
    std::string conf;
    switch (seed % 5) {
      case 1: conf = "max_split_size_mb:24"; break;
      case 2: conf = "roundup_power2_divisions:4"; break;
      case 3: conf = "max_split_size_mb:40,garbage_collection_threshold:0.6"; break;
      case 4: conf = "roundup_power2_divisions:[256:8,512:2,>:1],max_non_split_rounding_mb:30,max_split_size_mb:20"; break;
      default: break;
    }
    accel::AllocatorConfig cn = accel::AllocatorConfig::parse(conf);
    accel_old::AllocatorConfig co = accel_old::AllocatorConfig::parse(conf);
    auto an = std::make_unique<accel::CachingAllocator<NewMem>>(0, cn);
    auto ao = std::make_unique<accel_old::CachingAllocator<OldMem>>(0, co);
    if (seed % 2 == 1) {
      an->set_memory_fraction(0.7);
      ao->set_memory_fraction(0.7);
    }
    std::vector<void*> live;
    std::map<void*, std::pair<std::size_t, std::uint64_t>> requests;  // live pointer -> (bytes, stream)
    void* last_freed = nullptr;
    void* newest = nullptr;  // the latest allocation, while live
    std::pair<std::size_t, std::uint64_t> last_freed_request{0, 0};
    std::vector<std::uint64_t> capturing;  // routes, as stream_id * 1000 + pool_id
    std::uint64_t next_pool = 1;
    std::vector<std::uint64_t> pools;
    const auto fail = [&](const char* what, int step) {
      std::fprintf(stderr, "seed %u step %d: mismatch in %s\n", seed, step, what);
      std::fprintf(stderr, "new:\n%s\nold:\n%s\n", dump_snapshot(an->snapshot()).c_str(), dump_snapshot(ao->snapshot()).c_str());
      std::exit(1);
    };
    for (int step = 0; step < steps; ++step) {
      const unsigned op = rng() % 100;
      ++total_ops;
      if (op < 45) {  // allocate
        std::size_t bytes;
        const unsigned kind = rng() % 10;
        if (kind < 6) bytes = 1 + rng() % 4096;
        else if (kind < 8) bytes = 1 + rng() % (std::size_t{2} << 20);
        else bytes = 1 + rng() % (std::size_t{40} << 20);
        if (rng() % 50 == 0) bytes = 0;
        FakeStream s{1 + rng() % 3};
        // A third of the time the request of the block freed last, on its stream (the allocator may
        // hand that block back without merging it first: it must give what the merge would).
        if (last_freed != nullptr && rng() % 3 == 0) {
          bytes = last_freed_request.first + rng() % 2;
          s = FakeStream{last_freed_request.second};
        }
        void* pn = nullptr;
        void* po = nullptr;
        bool en = false, eo = false;
        std::string mn, mo;
        try { pn = an->allocate(bytes, s); } catch (const accel::OutOfMemoryError& e) { en = true; mn = e.what(); }
        try { po = ao->allocate(bytes, s); } catch (const accel_old::OutOfMemoryError& e) { eo = true; mo = e.what(); }
        if (en != eo || pn != po) fail("allocate result", step);
        if (en && mn != mo) {
          std::fprintf(stderr, "%s\n%s\n", mn.c_str(), mo.c_str());
          fail("oom message", step);
        }
        if (pn != nullptr) {
          live.push_back(pn);
          requests[pn] = {bytes, s.sid};
          newest = pn;
        }
      } else if (op < 85) {  // free
        if (live.empty()) continue;
        std::size_t i = rng() % live.size();
        if (newest != nullptr && rng() % 2 == 0) i = std::find(live.begin(), live.end(), newest) - live.begin();
        void* p = live[i];
        if (p == newest) newest = nullptr;
        live[i] = live.back();
        live.pop_back();
        an->free(p);
        ao->free(p);
        last_freed = p;
        last_freed_request = requests.at(p);
        requests.erase(p);
        if (rng() % 20 == 0) {  // freed twice: both refuse it, with the same message
          std::string mn, mo;
          try { an->free(p); } catch (const accel::InvalidArgumentError& e) { mn = e.what(); }
          try { ao->free(p); } catch (const accel_old::InvalidArgumentError& e) { mo = e.what(); }
          if (mn.empty() || mn != mo) fail("second free", step);
          if (an->is_allocated(p) || ao->is_allocated(p)) fail("is_allocated after free", step);
        }
      } else if (op < 90) {  // record_stream
        if (live.empty()) continue;
        void* p = live[rng() % live.size()];
        FakeStream s{1 + rng() % 4};
        an->record_stream(p, s);
        ao->record_stream(p, s);
      } else if (op < 94) {  // complete the events of one stream (both sides: same indices)
        const std::uint64_t sid = 1 + rng() % 4;
        for (auto* d : {&dev<0>(), &dev<1>()}) {
          for (auto& e : d->events) {
            if (e.stream == sid) *e.done = true;
          }
        }
      } else if (op < 95) {
        an->empty_cache();
        ao->empty_cache();
      } else if (op < 97) {  // graph pools
        const unsigned g = rng() % 3;
        if (g == 0 && capturing.size() < 2) {
          const std::uint64_t sid = 1 + rng() % 3;
          bool already = false;
          for (auto c : capturing) already |= c / 1000 == sid;
          if (!already) {
            const bool shared = !pools.empty() && rng() % 3 == 0;
            const std::uint64_t pid = shared ? pools[rng() % pools.size()] : next_pool++;
            an->begin_allocate_to_pool(pid, sid);
            ao->begin_allocate_to_pool(pid, sid);
            capturing.push_back(sid * 1000 + pid);
            pools.push_back(pid);  // one entry per hold (release_pool once per hold)
          }
        } else if (g == 1 && !capturing.empty()) {
          const std::uint64_t r = capturing.back();
          capturing.pop_back();
          an->end_allocate_to_pool(r % 1000, r / 1000);
          ao->end_allocate_to_pool(r % 1000, r / 1000);
        } else if (g == 2 && !pools.empty()) {
          const std::size_t i = rng() % pools.size();
          const std::uint64_t pid = pools[i];
          bool routed = false;
          for (auto c : capturing) routed |= c % 1000 == pid;
          if (!routed) {
            an->release_pool(pid);
            ao->release_pool(pid);
            pools[i] = pools.back();
            pools.pop_back();
          }
        }
      } else if (op < 98) {
        an->reset_peak_stats();
        ao->reset_peak_stats();
      } else if (op < 99) {
        an->reset_accumulated_stats();
        ao->reset_accumulated_stats();
      } else {
        if (an->pool_reserved_bytes(1) != ao->pool_reserved_bytes(1)) fail("pool_reserved_bytes", step);
      }
      const auto fn = an->stats().flat();
      const auto fo = ao->stats().flat();
      if (fn != fo) {
        for (const auto& [k, v] : fn) {
          if (fo.at(k) != v) std::fprintf(stderr, "  %s: new %lld old %lld\n", k.c_str(), (long long)v, (long long)fo.at(k));
        }
        fail("stats", step);
      }
      if (dump_snapshot(an->snapshot()) != dump_snapshot(ao->snapshot())) fail("snapshot", step);
      const auto san = an->allocated_bytes();
      const auto sao = ao->allocated_bytes();
      if (san.current != sao.current || san.peak != sao.peak || san.allocated != sao.allocated || san.freed != sao.freed) {
        fail("allocated_bytes()", step);
      }
    }
    for (void* p : live) {
      an->free(p);
      ao->free(p);
    }
    an->empty_cache();
    ao->empty_cache();
    if (dump_snapshot(an->snapshot()) != dump_snapshot(ao->snapshot())) fail("final snapshot", -1);
    if (an->stats().flat() != ao->stats().flat()) fail("final stats", -1);
  }
  std::printf("identical over %u seeds, %ld operations\n", seeds, total_ops);
  return 0;
}
