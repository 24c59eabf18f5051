// Offset placement of lifetime intervals in one arena (internal to the memory planner).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kiln::passes {

/// One buffer to place: it lives over positions [first, last] (inclusive) and needs `bytes`.
struct Block {
  int64_t first = 0;
  int64_t last = 0;
  uint64_t bytes = 0;
};

/// How a block picks among the gaps that hold it.
enum class GapRule : uint8_t {
  kFirstFit,  ///< the lowest offset (TFLite's and ExecuTorch's greedy-by-size)
  kBestFit,   ///< the tightest gap, the lowest offset among equals; the top if none holds it
};

/// Greedy by size: blocks largest first (ties: the earlier block; the planner passes them in
/// `first` order), each at an aligned offset chosen by `rule` among the gaps left by the already
/// placed blocks whose lifetimes intersect its own. Those are found through a segment tree over
/// buckets of positions (blocks live at a point) plus lists of blocks by start bucket (blocks
/// starting inside the interval), so the cost is O(n log n + conflicts + bucket neighbours),
/// not O(n^2). Returns the arena size (the largest
/// offset + bytes) and writes one offset per block. Blocks need first <= last, first >= 0 and
/// bytes > 0; `alignment` is a power of two; the caller checked that the blocks' aligned sizes
/// add up to less than 2^63.
uint64_t place_greedy_by_size(std::span<const Block> blocks, uint64_t alignment, GapRule rule,
                              std::vector<uint64_t>* offsets);

}  // namespace kiln::passes
