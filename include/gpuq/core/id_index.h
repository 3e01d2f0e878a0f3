// A hash index from job ids to positions, for ids stored elsewhere (the plan's
// jobs, the state's entries). Open addressing over one flat array: no node per
// id and no copy of it, which std::unordered_map<std::string, size_t> would make
// (bench_core's PlanParse and StateDecode measure the difference).
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace gpuq {

class IdIndex {
 public:
  static constexpr size_t npos = static_cast<size_t>(-1);

  /// The position of `id`, or npos. `key(p)` is the id stored at position p.
  template <typename Key>
  size_t find(std::string_view id, const Key& key) const {
    if (slots_.empty()) return npos;
    const Slot& x = slots_[slot(id, hash(id), key)];
    return x.pos1 ? x.pos1 - 1 : npos;
  }

  /// The position of `id` if it is recorded; else records it at `pos` and returns npos.
  template <typename Key>
  size_t find_or_insert(std::string_view id, size_t pos, const Key& key) {
    if ((count_ + 1) * 4 > slots_.size() * 3) grow(count_ + 1);
    uint32_t h = hash(id);
    Slot& x = slots_[slot(id, h, key)];
    if (x.pos1) return x.pos1 - 1;
    x = {static_cast<uint32_t>(pos + 1), h};
    ++count_;
    return npos;
  }

  /// Records that `id` (not yet recorded) is at position `pos`.
  void insert(std::string_view id, size_t pos) {
    if ((count_ + 1) * 4 > slots_.size() * 3) grow(count_ + 1);
    place({static_cast<uint32_t>(pos + 1), hash(id)});
    ++count_;
  }

  /// Room for `n` ids without growing.
  void reserve(size_t n) {
    if (n * 4 > slots_.size() * 3) grow(n);
  }
  size_t size() const { return count_; }

 private:
  struct Slot {
    uint32_t pos1 = 0;  ///< position + 1; 0 = empty
    uint32_t hash = 0;
  };
  static uint32_t hash(std::string_view id) { return static_cast<uint32_t>(std::hash<std::string_view>{}(id)); }
  size_t mask() const { return slots_.size() - 1; }
  // The slot holding `id`, or the empty slot where it would go.
  template <typename Key>
  size_t slot(std::string_view id, uint32_t h, const Key& key) const {
    size_t s = h & mask();
    while (slots_[s].pos1 && !(slots_[s].hash == h && key(slots_[s].pos1 - 1) == id)) s = (s + 1) & mask();
    return s;
  }
  void place(Slot x) {
    size_t s = x.hash & mask();
    while (slots_[s].pos1) s = (s + 1) & mask();
    slots_[s] = x;
  }
  void grow(size_t n) {
    size_t size = 16;
    while (size * 3 < n * 4 + 4) size *= 2;
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(size, Slot{});
    for (const Slot& x : old)
      if (x.pos1) place(x);
  }

  std::vector<Slot> slots_;
  size_t count_ = 0;
};

}  // namespace gpuq
