#include "util/partition.h"

namespace rocksdcp::util {

std::vector<size_t> SplitByWeight(const std::vector<uint64_t>& weights,
                                  size_t parts) {
  const size_t n = weights.size();
  // Long double: exact for any total of a real plan (< 2^64 bytes), and
  // the shares need fractions.
  long double total = 0;
  for (uint64_t w : weights) total += w;
  std::vector<size_t> bounds(parts + 1, 0);
  bounds[parts] = n;
  size_t i = 0;
  long double sum = 0;
  for (size_t p = 1; p < parts; ++p) {
    const long double target = total * p / parts;
    // Leave at least one element for each run that follows, and take at
    // least one for this run.
    const size_t last = n - (parts - p);
    if (i < bounds[p - 1] + 1) sum += weights[i++];
    while (i < last && sum + weights[i] / 2.0L <= target) sum += weights[i++];
    bounds[p] = i;
  }
  return bounds;
}

}  // namespace rocksdcp::util
