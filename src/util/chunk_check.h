// Checking that a tensor's chunks tile it exactly: DCP's
// _validate_global_plan for one tensor. The save planner checks the chunks
// it is about to record; the load planner checks the chunks it reads back,
// since checkpoint metadata comes from disk and is untrusted. Each caller
// wraps the problem in its own status code and names the item.

#ifndef ROCKSDCP_SRC_UTIL_CHUNK_CHECK_H_
#define ROCKSDCP_SRC_UTIL_CHUNK_CHECK_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rocksdcp/metadata.h"

namespace rocksdcp::util {

// Product of `sizes`, or nullopt if a size is negative or the product
// overflows int64_t.
std::optional<int64_t> CheckedVolume(const std::vector<int64_t>& sizes);

// Returns what is wrong with `chunks` as a tiling of a tensor of `size`, or
// "" if nothing is: the size's volume must fit in int64_t, every chunk must
// have the tensor's rank and lie within its size, no two chunks may share
// an element, and together they must cover every element. Chunks with a
// zero extent hold no elements, so they overlap nothing.
//
// Takes O(2^k n log n) time for n chunks, where k is the number of
// dimensions that some chunk splits (1 or 2 for the layouts sharding
// produces), by counting the chunks' 2^k corners. Only past 2^24 corners,
// with k > 3, does it fall back to comparing chunks pairwise, which can
// take O(n^2).
std::string ChunkTilingProblem(const std::vector<int64_t>& size,
                               const std::vector<ChunkStorageMetadata>& chunks);

}  // namespace rocksdcp::util

#endif  // ROCKSDCP_SRC_UTIL_CHUNK_CHECK_H_
