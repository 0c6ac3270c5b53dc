// accel/cpu/detail/stream_queue.hpp — the FIFO of a worker stream: a chain of 4 KiB blocks of tasks.
//
// Producers append under the stream's mutex; the worker takes the whole chain at once (take_all),
// runs it without the lock and hands the emptied blocks back (recycle), which keeps a few for
// reuse. Unlike a growing vector, a burst of tasks never copies queued tasks, and its memory goes
// back to the allocator once the burst has run; in a steady stream, enqueueing allocates nothing.
// Not thread-safe by itself. Internal to the CPU backend.
#pragma once

#include <accel/cpu/detail/stream_task.hpp>

#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>

namespace accel::cpu::detail {

class StreamQueue {
 public:
  static constexpr std::uint32_t block_tasks = 63;  // 63 * 64 B + header: one 4 KiB block
  static constexpr std::size_t max_cached_blocks = 16;

  struct Block {
    Block* next = nullptr;
    std::uint32_t count = 0;
    alignas(64) unsigned char storage[block_tasks * sizeof(StreamTask)];  // one task per cache line

    [[nodiscard]] StreamTask& operator[](std::uint32_t i) noexcept {
      return *std::launder(reinterpret_cast<StreamTask*>(storage + i * sizeof(StreamTask)));
    }
  };

  StreamQueue() noexcept = default;
  StreamQueue(const StreamQueue&) = delete;
  StreamQueue& operator=(const StreamQueue&) = delete;
  ~StreamQueue() {
    destroy_chain(std::exchange(head_, nullptr));
    while (free_ != nullptr) delete std::exchange(free_, free_->next);
  }

  [[nodiscard]] bool empty() const noexcept { return head_ == nullptr; }
  /// Emptied blocks kept for the next pushes (at most max_cached_blocks).
  [[nodiscard]] std::size_t cached_blocks() const noexcept { return cached_; }

  /// Appends a task; on failure (no memory for a new block) nothing changed.
  void push(StreamTask&& task) {
    if (tail_ == nullptr || tail_->count == block_tasks) append_block();
    ::new (static_cast<void*>(tail_->storage + tail_->count * sizeof(StreamTask))) StreamTask(std::move(task));
    ++tail_->count;
  }

  /// Takes every queued task, in order, as a chain of blocks; the queue is empty afterwards.
  [[nodiscard]] Block* take_all() noexcept {
    tail_ = nullptr;
    return std::exchange(head_, nullptr);
  }

  /// Returns a chain from take_all whose tasks were all run and destroyed.
  void recycle(Block* chain) noexcept {
    while (chain != nullptr) {
      Block* b = std::exchange(chain, chain->next);
      if (cached_ < max_cached_blocks) {
        b->next = std::exchange(free_, b);
        ++cached_;
      } else {
        delete b;
      }
    }
  }

  /// Destroys the tasks of a chain without running them, and frees it.
  static void destroy_chain(Block* chain) noexcept {
    while (chain != nullptr) {
      Block* b = std::exchange(chain, chain->next);
      for (std::uint32_t i = 0; i < b->count; ++i) (*b)[i].~StreamTask();
      delete b;
    }
  }

 private:
  void append_block() {
    Block* b = free_;
    if (b != nullptr) {
      free_ = b->next;
      --cached_;
    } else {
      b = new Block;
    }
    b->next = nullptr;
    b->count = 0;
    (tail_ != nullptr ? tail_->next : head_) = b;
    tail_ = b;
  }

  Block* head_ = nullptr;
  Block* tail_ = nullptr;
  Block* free_ = nullptr;
  std::size_t cached_ = 0;
};

}  // namespace accel::cpu::detail
