// host_staging.hpp — the host end of a step's transfers: its batch going in, its losses and gradient
// norm coming out, one slot per step the engine may have in flight.
//
// With the next step enqueued before this one's losses are read (--run-ahead), the host must not
// write a batch into memory a pending copy still reads, nor read losses a pending copy still writes:
// step s uses slot s % 2, and at most two steps are in flight. On a device with its own memory the
// slots are page-locked (B::pin_memory), so the copies are asynchronous: a copy into pageable memory
// returns only once it is done, which would wait for the whole step and undo the overlap. On the CPU
// backend (no DMA) they stay pageable; its copies are stream tasks either way.
#pragma once

#include <accel/accel.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

#include <unistd.h>

namespace engine {

template <class B>
class HostStaging {
 public:
  struct Slot {
    std::int32_t* inputs = nullptr;   // [tokens]
    std::int32_t* targets = nullptr;  // [tokens]
    float* losses = nullptr;          // [losses]
    float* norm = nullptr;            // [1]
  };

  /// Two slots of `tokens` inputs and targets and `losses` per-token losses each.
  HostStaging(const B& b, std::size_t tokens, std::size_t losses) : b_(b) {
    const auto round = [](std::size_t n, std::size_t to) { return (n + to - 1) / to * to; };
    const std::size_t per_slot = round(2 * tokens * sizeof(std::int32_t), 64) + round((losses + 1) * sizeof(float), 64);
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE) > 0 ? ::sysconf(_SC_PAGESIZE) : 4096);
    bytes_ = round(2 * per_slot, page);
    void* p = std::aligned_alloc(page, bytes_);
    if (p == nullptr) throw std::bad_alloc();
    memory_.reset(static_cast<std::byte*>(p));
    for (std::size_t s = 0; s < slots_.size(); ++s) {
      std::byte* at = memory_.get() + s * per_slot;
      slots_[s].inputs = reinterpret_cast<std::int32_t*>(at);
      slots_[s].targets = slots_[s].inputs + tokens;
      slots_[s].losses = reinterpret_cast<float*>(at + round(2 * tokens * sizeof(std::int32_t), 64));
      slots_[s].norm = slots_[s].losses + losses;
    }
    if (b.device_type() != accel::DeviceType::cpu) {
      try {
        b_.pin_memory(memory_.get(), bytes_);
        pinned_ = true;
      } catch (const std::exception&) {
        // Pageable slots are correct, only synchronous (each step's losses are waited for at once).
      }
    }
  }

  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;
  ~HostStaging() { release(); }

  /// Step `step`'s slot.
  [[nodiscard]] const Slot& slot(std::int64_t step) const noexcept { return slots_[static_cast<std::size_t>(step & 1)]; }

 private:
  struct Free {
    void operator()(std::byte* p) const noexcept { std::free(p); }
  };

  void release() noexcept {
    if (pinned_ && memory_) {
      try {
        (void)b_.unpin_memory(memory_.get());
      } catch (...) {  // a backend that cannot unlock the pages: they are freed all the same
      }
    }
    pinned_ = false;
    memory_.reset();
  }

  B b_;
  std::unique_ptr<std::byte, Free> memory_;
  std::size_t bytes_ = 0;
  std::array<Slot, 2> slots_{};
  bool pinned_ = false;
};

}  // namespace engine
