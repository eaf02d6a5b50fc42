#include "util/partition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

namespace rocksdcp::util {
namespace {

// Checks the contract: parts + 1 ascending boundaries from 0 to n, every run
// non-empty; returns each run's weight.
std::vector<uint64_t> RunWeights(const std::vector<uint64_t>& w, size_t parts) {
  const std::vector<size_t> b = SplitByWeight(w, parts);
  EXPECT_EQ(b.size(), parts + 1);
  EXPECT_EQ(b.front(), 0u);
  EXPECT_EQ(b.back(), w.size());
  std::vector<uint64_t> sums;
  for (size_t i = 0; i + 1 < b.size(); ++i) {
    EXPECT_LT(b[i], b[i + 1]) << "run " << i << " is empty";
    sums.push_back(
        std::accumulate(w.begin() + b[i], w.begin() + b[i + 1], uint64_t{0}));
  }
  return sums;
}

TEST(SplitByWeightTest, EqualWeightsSplitEvenly) {
  const std::vector<uint64_t> w(12, 5);
  EXPECT_EQ(RunWeights(w, 3), (std::vector<uint64_t>{20, 20, 20}));
  EXPECT_EQ(RunWeights(w, 1), (std::vector<uint64_t>{60}));
  EXPECT_EQ(RunWeights(w, 12), std::vector<uint64_t>(12, 5));
}

TEST(SplitByWeightTest, RunsAreWithinOneElementOfTheirShare) {
  std::vector<uint64_t> w;
  for (uint64_t i = 0; i < 200; ++i) w.push_back(1 + (i * 7919) % 64);
  const uint64_t total = std::accumulate(w.begin(), w.end(), uint64_t{0});
  const uint64_t largest = *std::max_element(w.begin(), w.end());
  for (size_t parts : {2, 3, 5, 8}) {
    for (uint64_t sum : RunWeights(w, parts)) {
      EXPECT_LE(sum, total / parts + largest) << parts;
      EXPECT_GE(sum + largest, total / parts) << parts;
    }
  }
}

TEST(SplitByWeightTest, OneHeavyElementGetsARunOfItsOwn) {
  EXPECT_EQ(RunWeights({1, 1, 100, 1, 1}, 3),
            (std::vector<uint64_t>{2, 100, 2}));
}

TEST(SplitByWeightTest, ZeroWeightsStillGiveNonEmptyRuns) {
  EXPECT_EQ(RunWeights({0, 0, 0, 0}, 4), (std::vector<uint64_t>{0, 0, 0, 0}));
  RunWeights({0, 0, 0, 0, 0, 0, 0}, 3);
}

}  // namespace
}  // namespace rocksdcp::util
