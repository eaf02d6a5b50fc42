#include "util/staging_pool.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "test_util.h"

namespace rocksdcp::util {
namespace {

using Block = StagingPool::Block;

class StagingPoolTest : public ::testing::Test {
 protected:
  void Make(uint64_t capacity, bool prefault = false) {
    auto pool = StagingPool::Create(capacity, prefault);
    ASSERT_OK(pool);
    pool_ = std::move(pool).value();
  }
  uint64_t Offset(const Block& b) const {
    return static_cast<uint64_t>(b.data - base_);
  }
  // Allocates, and remembers the first block's address as the region base.
  Block Alloc(uint64_t bytes) {
    std::optional<Block> b = pool_->Allocate(bytes);
    EXPECT_TRUE(b.has_value()) << bytes << " bytes";
    if (!b) return {};
    if (base_ == nullptr) base_ = b->data;
    return *b;
  }

  std::unique_ptr<StagingPool> pool_;
  std::byte* base_ = nullptr;
};

TEST_F(StagingPoolTest, BlocksAreAlignedAndRounded) {
  Make(4096);
  Block a = Alloc(1);
  Block b = Alloc(65);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data) % 64, 0u);
  EXPECT_EQ(a.size, 64u);
  EXPECT_EQ(b.size, 128u);
  EXPECT_EQ(Offset(b), 64u);
  EXPECT_EQ(pool_->free_bytes(), 4096u - 192u);
}

TEST_F(StagingPoolTest, CapacityIsTheBudgetRoundedDown) {
  Make(1000);
  EXPECT_EQ(pool_->capacity(), 960u);
  Make(0);
  EXPECT_EQ(pool_->capacity(), 0u);
  EXPECT_FALSE(pool_->Allocate(1).has_value());
}

TEST_F(StagingPoolTest, FullPoolRefusesUntilAFree) {
  Make(256);
  Block a = Alloc(128);
  Block b = Alloc(128);
  EXPECT_FALSE(pool_->Allocate(64).has_value());
  pool_->Free(a);
  Block c = Alloc(64);
  EXPECT_EQ(Offset(c), 0u);
  pool_->Free(b);
  pool_->Free(c);
  EXPECT_EQ(pool_->free_bytes(), 256u);
}

TEST_F(StagingPoolTest, FreedNeighboursMergeInAnyOrder) {
  // Three blocks filling the pool, freed middle, last, first: the whole
  // pool must then be one free range again.
  Make(3 * 1024);
  Block a = Alloc(1024);
  Block b = Alloc(1024);
  Block c = Alloc(1024);
  pool_->Free(b);
  EXPECT_FALSE(pool_->Allocate(2048).has_value());
  pool_->Free(c);
  Block bc = Alloc(2048);
  EXPECT_EQ(Offset(bc), 1024u);
  pool_->Free(bc);
  pool_->Free(a);
  Block all = Alloc(3 * 1024);
  EXPECT_EQ(Offset(all), 0u);
}

TEST_F(StagingPoolTest, FragmentationCanRefuseWhatFreeBytesWouldAllow) {
  Make(3 * 64);
  Block a = Alloc(64);
  Block b = Alloc(64);
  Block c = Alloc(64);
  pool_->Free(a);
  pool_->Free(c);
  EXPECT_EQ(pool_->free_bytes(), 128u);
  EXPECT_FALSE(pool_->Allocate(128).has_value());
  pool_->Free(b);
  EXPECT_TRUE(pool_->Allocate(128).has_value());
}

TEST_F(StagingPoolTest, RandomAllocationsNeverOverlapAndAllComeBack) {
  const uint64_t kCapacity = 1 << 20;
  Make(kCapacity);
  std::mt19937_64 rng(42);
  std::vector<Block> live;
  for (int step = 0; step < 5000; ++step) {
    if (!live.empty() && (rng() % 2 == 0)) {
      const size_t i = rng() % live.size();
      // Each block holds its own index; a neighbour's overlap would clobber
      // it.
      uint64_t tag;
      std::memcpy(&tag, live[i].data, sizeof(tag));
      ASSERT_EQ(tag, reinterpret_cast<uintptr_t>(live[i].data));
      pool_->Free(live[i]);
      live.erase(live.begin() + static_cast<ptrdiff_t>(i));
    } else {
      const uint64_t bytes = 1 + rng() % (kCapacity / 16);
      std::optional<Block> b = pool_->Allocate(bytes);
      if (!b) continue;
      ASSERT_GE(b->size, bytes);
      std::memset(b->data, 0xAB, b->size);
      const uint64_t tag = reinterpret_cast<uintptr_t>(b->data);
      std::memcpy(b->data, &tag, sizeof(tag));
      live.push_back(*b);
    }
  }
  for (const Block& b : live) pool_->Free(b);
  EXPECT_EQ(pool_->free_bytes(), kCapacity);
  EXPECT_TRUE(pool_->Allocate(kCapacity).has_value());
}

TEST_F(StagingPoolTest, TouchedBytesIsTheHighWaterMark) {
  Make(4096);
  EXPECT_EQ(pool_->touched_bytes(), 0u);
  Block a = Alloc(1024);
  EXPECT_EQ(pool_->touched_bytes(), 1024u);
  pool_->Free(a);
  // Reusing the low end touches nothing new.
  Alloc(512);
  EXPECT_EQ(pool_->touched_bytes(), 1024u);
  Alloc(1024);
  EXPECT_EQ(pool_->touched_bytes(), 1536u);

  Make(4096, /*prefault=*/true);
  EXPECT_EQ(pool_->touched_bytes(), 4096u);
}

TEST_F(StagingPoolTest, FreeAllEmptiesThePool) {
  Make(1024);
  Alloc(512);
  Alloc(512);
  pool_->FreeAll();
  EXPECT_EQ(pool_->free_bytes(), 1024u);
  EXPECT_TRUE(pool_->Allocate(1024).has_value());
}

}  // namespace
}  // namespace rocksdcp::util
