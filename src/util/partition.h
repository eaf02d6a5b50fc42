// Splitting a sequence into contiguous runs of about equal weight: how
// WriteData shares a rank's key-sorted items among its writer threads, so
// that each thread writes an ascending run of keys into its own SST files.

#ifndef ROCKSDCP_SRC_UTIL_PARTITION_H_
#define ROCKSDCP_SRC_UTIL_PARTITION_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rocksdcp::util {

// Cuts [0, weights.size()) into `parts` contiguous, non-empty runs whose
// total weights are as even as whole elements allow (each run ends where
// the running total comes closest to its share). Returns parts + 1
// boundaries: run i is [b[i], b[i + 1]).
// REQUIRES: 1 <= parts <= weights.size().
std::vector<size_t> SplitByWeight(const std::vector<uint64_t>& weights,
                                  size_t parts);

}  // namespace rocksdcp::util

#endif  // ROCKSDCP_SRC_UTIL_PARTITION_H_
