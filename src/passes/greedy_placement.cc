#include "greedy_placement.h"

#include <algorithm>

namespace kiln::passes {
namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

// A placed block as the index stores it: lifetime and memory range, so a query reads contiguous
// arrays and never the blocks themselves.
struct Placed {
  int64_t first, last;
  uint64_t begin, end;
};

// Placed blocks indexed by time. An interval intersects [a, b] iff it holds a, or starts in
// (a, b]; the two sets are disjoint, so every conflict is reported once.
//  - holds a: a segment tree whose leaves are buckets of kBucket positions. A block sits in the
//    O(log n) nodes that cover its buckets; the walk from a's bucket to the root sees every block
//    that touches that bucket and keeps the ones that hold a.
//  - starts in (a, b]: blocks listed by the bucket of their start; the buckets from a's to b's
//    are scanned.
// Buckets keep the tree small enough to stay in cache; each node's list is contiguous.
class TimeIndex {
 public:
  static constexpr int64_t kBucket = 16;

  explicit TimeIndex(int64_t positions) {
    size_t buckets = static_cast<size_t>((positions + kBucket - 1) / kBucket);
    size_ = 1;
    while (size_ < buckets) size_ <<= 1;
    tree_.resize(2 * size_);
    starts_.resize(buckets);
  }

  void insert(const Placed& p) {
    size_t lo = static_cast<size_t>(p.first / kBucket) + size_;
    size_t hi = static_cast<size_t>(p.last / kBucket) + size_ + 1;
    while (lo < hi) {
      if (lo & 1) tree_[lo++].push_back(p);
      if (hi & 1) tree_[--hi].push_back(p);
      lo >>= 1;
      hi >>= 1;
    }
    starts_[static_cast<size_t>(p.first / kBucket)].push_back(p);
  }

  template <typename F>
  void for_each_intersecting(int64_t a, int64_t b, F&& fn) const {
    for (size_t node = static_cast<size_t>(a / kBucket) + size_; node >= 1; node >>= 1) {
      for (const Placed& p : tree_[node]) {
        if (p.first <= a && a <= p.last) fn(p);
      }
    }
    for (int64_t k = a / kBucket, end = b / kBucket; k <= end; ++k) {
      for (const Placed& p : starts_[static_cast<size_t>(k)]) {
        if (a < p.first && p.first <= b) fn(p);
      }
    }
  }

 private:
  size_t size_ = 1;
  std::vector<std::vector<Placed>> tree_;
  std::vector<std::vector<Placed>> starts_;
};

// Block indices by bytes, largest first, stable (blocks come in `first` order, so ties keep the
// earlier block first): an LSD radix sort over the bits the sizes use.
std::vector<int32_t> by_size(std::span<const Block> blocks) {
  const size_t n = blocks.size();
  std::vector<int32_t> order(n), tmp(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<int32_t>(i);
  uint64_t max_bytes = 0;
  for (const Block& b : blocks) max_bytes = std::max(max_bytes, b.bytes);
  constexpr int kBits = 11;
  constexpr size_t kRadix = size_t{1} << kBits;
  std::vector<size_t> count(kRadix);
  for (int shift = 0; shift < 64 && (max_bytes >> shift) != 0; shift += kBits) {
    std::fill(count.begin(), count.end(), 0);
    // Digits of ~bytes: ascending order of ~bytes is descending order of bytes.
    auto digit = [&](int32_t i) {
      return static_cast<size_t>((~blocks[static_cast<size_t>(i)].bytes >> shift) & (kRadix - 1));
    };
    for (int32_t i : order) ++count[digit(i)];
    size_t sum = 0;
    for (size_t& c : count) {
      size_t c0 = c;
      c = sum;
      sum += c0;
    }
    for (int32_t i : order) tmp[count[digit(i)]++] = i;
    order.swap(tmp);
  }
  return order;
}

}  // namespace

uint64_t place_greedy_by_size(std::span<const Block> blocks, uint64_t alignment, GapRule rule,
                              std::vector<uint64_t>* offsets) {
  offsets->assign(blocks.size(), 0);
  if (blocks.empty()) return 0;
  std::vector<int32_t> order = by_size(blocks);
  int64_t positions = 0;
  for (const Block& b : blocks) positions = std::max(positions, b.last + 1);
  TimeIndex index(positions);

  struct Range {
    uint64_t begin, end;
  };
  std::vector<Range> taken;
  uint64_t arena = 0;
  for (int32_t i : order) {
    const Block& b = blocks[static_cast<size_t>(i)];
    taken.clear();
    index.for_each_intersecting(b.first, b.last,
                                [&](const Placed& p) { taken.push_back({p.begin, p.end}); });
    std::sort(taken.begin(), taken.end(), [](const Range& x, const Range& y) {
      return x.begin < y.begin || (x.begin == y.begin && x.end < y.end);
    });
    // Walk the gaps between the taken ranges, lowest first; `cand` is the aligned start of the
    // current gap.
    uint64_t cand = 0;
    uint64_t best = UINT64_MAX, best_gap = UINT64_MAX;
    for (const Range& r : taken) {
      if (r.begin >= cand && r.begin - cand >= b.bytes) {
        uint64_t gap = r.begin - cand;
        if (rule == GapRule::kFirstFit) {
          best = cand;
          break;
        }
        if (gap < best_gap) {
          best_gap = gap;
          best = cand;
        }
      }
      cand = std::max(cand, align_up(r.end, alignment));
    }
    uint64_t off = best != UINT64_MAX ? best : cand;
    (*offsets)[static_cast<size_t>(i)] = off;
    arena = std::max(arena, off + b.bytes);
    index.insert({b.first, b.last, off, off + b.bytes});
  }
  return arena;
}

}  // namespace kiln::passes
