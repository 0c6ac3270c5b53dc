// accel/memory/detail/pointer_map.hpp — a small open-addressing hash map from addresses to T*.
//
// The caching allocator's allocated-block index: one probe sequence per lookup, no node allocation
// per entry (linear probing, Fibonacci hashing, backward-shift deletion, load factor <= 1/2).
// Not thread-safe: the allocator calls it under its mutex. Key 0 (nullptr) is reserved for "empty".
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace accel::detail {

template <class T>
class PointerMap {
 public:
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  PointerMap() : slots_(min_capacity), mask_(min_capacity - 1), shift_(64 - std::bit_width(min_capacity - 1)) {}

  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  [[nodiscard]] bool empty() const noexcept { return count_ == 0; }

  /// The value stored for `key`, or nullptr.
  [[nodiscard]] T* find(std::uintptr_t key) const noexcept {
    const std::size_t i = find_index(key);
    return i == npos ? nullptr : slots_[i].value;
  }

  /// The slot holding `key`, or npos; valid until the next insert or erase.
  [[nodiscard]] std::size_t find_index(std::uintptr_t key) const noexcept {
    for (std::size_t i = home(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return i;
      if (s.key == 0) return npos;
    }
  }
  /// The value in slot i (from find_index).
  [[nodiscard]] T* value_at(std::size_t i) const noexcept { return slots_[i].value; }

  /// Makes room for one more entry; the only member that may throw (std::bad_alloc).
  [[gnu::always_inline]] void reserve_one() {
    if ((count_ + 1) * 2 > mask_ + 1) [[unlikely]] rehash((mask_ + 1) * 2);
  }

  /// Whether one more entry fits without a rehash.
  [[nodiscard]] bool has_room_for_one() const noexcept { return (count_ + 1) * 2 <= mask_ + 1; }

  /// Rehashes into a smaller table when at most an eighth of this one is used, leaving it at most a
  /// quarter full (so that the next insertions do not grow it again at once). Never throws: without
  /// memory for the smaller table it keeps this one.
  void shrink() noexcept {
    std::size_t capacity = min_capacity;
    while (capacity < count_ * 4) capacity *= 2;
    if (capacity * 2 > mask_ + 1) return;
    try {
      rehash(capacity);
    } catch (...) {
    }
  }

  /// Bytes of the table.
  [[nodiscard]] std::size_t bytes() const noexcept { return slots_.capacity() * sizeof(Slot); }

  /// Inserts a key that is not present. Call reserve_one() first.
  void insert(std::uintptr_t key, T* value) noexcept {
    std::size_t i = home(key);
    while (slots_[i].key != 0) i = (i + 1) & mask_;
    slots_[i] = Slot{key, value};
    ++count_;
  }

  /// Removes `key` and returns its value, or nullptr when absent.
  T* erase(std::uintptr_t key) noexcept {
    const std::size_t i = find_index(key);
    if (i == npos) return nullptr;
    T* value = slots_[i].value;
    erase_at(i);
    return value;
  }

  /// Removes the entry in slot i (from find_index).
  void erase_at(std::size_t i) noexcept {
    const std::size_t mask = mask_;
    // Backward-shift deletion: pull later members of the probe run into the hole.
    for (std::size_t j = (i + 1) & mask; slots_[j].key != 0; j = (j + 1) & mask) {
      const std::size_t h = home(slots_[j].key);
      const bool movable = (i <= j) ? (h <= i || h > j) : (h <= i && h > j);
      if (movable) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i] = Slot{};
    --count_;
  }

  /// Calls f(key, value) for every entry.
  template <class F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_) {
      if (s.key != 0) f(s.key, s.value);
    }
  }

 private:
  static constexpr std::size_t min_capacity = 64;
  struct Slot {
    std::uintptr_t key = 0;
    T* value = nullptr;
  };

  [[nodiscard]] std::size_t home(std::uintptr_t key) const noexcept {
    return static_cast<std::size_t>((static_cast<std::uint64_t>(key) * 0x9E3779B97F4A7C15ull) >> shift_);
  }

  void rehash(std::size_t capacity) {
    std::vector<Slot> old(capacity);  // the only allocation: if it throws, nothing changed
    old.swap(slots_);
    mask_ = capacity - 1;
    shift_ = 64 - std::bit_width(capacity - 1);
    count_ = 0;
    for (const Slot& s : old) {
      if (s.key != 0) insert(s.key, s.value);
    }
  }

  std::vector<Slot> slots_;
  std::size_t mask_;  // slots_.size() - 1
  int shift_;
  std::size_t count_ = 0;
};

}  // namespace accel::detail
