// BlockBufferPool hands freed buffers out again, for blocks of about their
// size, and never keeps more than its capacity.

#include "rocksdb/block_buffer_pool.h"

#include <gtest/gtest.h>

#include <cstring>

namespace rocksdcp {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

class BlockBufferPoolTest : public ::testing::Test {
 protected:
  static BlockBufferPool::Options Capacity(uint64_t bytes) {
    BlockBufferPool::Options o;
    o.capacity_bytes = bytes;
    return o;
  }

  // Allocates `size` bytes and writes every one of them.
  static void* Touch(BlockBufferPool& pool, size_t size) {
    void* p = pool.Allocate(size);
    std::memset(p, 0xab, size);
    return p;
  }
};

TEST_F(BlockBufferPoolTest, FreedBufferIsHandedOutAgain) {
  BlockBufferPool pool(Capacity(64 * kMiB));
  void* a = Touch(pool, 4 * kMiB);
  pool.Deallocate(a);
  void* b = Touch(pool, 4 * kMiB);
  EXPECT_EQ(a, b);
  pool.Deallocate(b);
  const auto stats = pool.stats();
  EXPECT_EQ(stats.pooled_allocations, 2u);
  EXPECT_EQ(stats.reused, 1u);
  EXPECT_EQ(stats.outstanding_bytes, 0u);
  EXPECT_GE(stats.kept_bytes, 4 * kMiB);
}

TEST_F(BlockBufferPoolTest, SlightlySmallerBlocksShareABuffer) {
  // A tensor's last piece is shorter than the others.
  BlockBufferPool pool(Capacity(64 * kMiB));
  void* a = Touch(pool, 8 * kMiB + 5);
  pool.Deallocate(a);
  void* b = Touch(pool, 7 * kMiB + 300);
  EXPECT_EQ(a, b);
  pool.Deallocate(b);
}

TEST_F(BlockBufferPoolTest, MuchSmallerBlocksGetTheirOwnBuffer) {
  BlockBufferPool pool(Capacity(64 * kMiB));
  void* big = Touch(pool, 16 * kMiB);
  pool.Deallocate(big);
  void* small = Touch(pool, 2 * kMiB);
  EXPECT_NE(big, small);
  // The big one is still there for the next big block.
  void* big2 = Touch(pool, 16 * kMiB);
  EXPECT_EQ(big, big2);
  pool.Deallocate(small);
  pool.Deallocate(big2);
}

TEST_F(BlockBufferPoolTest, ConcurrentBuffersAreDistinct) {
  BlockBufferPool pool(Capacity(64 * kMiB));
  void* a = Touch(pool, 4 * kMiB);
  void* b = Touch(pool, 4 * kMiB);
  EXPECT_NE(a, b);
  pool.Deallocate(a);
  pool.Deallocate(b);
  EXPECT_EQ(pool.stats().reused, 0u);
}

TEST_F(BlockBufferPoolTest, KeepsNoMoreThanItsCapacity) {
  BlockBufferPool pool(Capacity(10 * kMiB));
  std::vector<void*> held;
  for (int i = 0; i < 4; ++i) held.push_back(Touch(pool, 4 * kMiB));
  for (void* p : held) pool.Deallocate(p);
  const auto stats = pool.stats();
  EXPECT_LE(stats.kept_bytes, 10 * kMiB);
  EXPECT_GT(stats.kept_bytes, 0u);
  EXPECT_EQ(stats.mapped_bytes, stats.kept_bytes + stats.unmapped_bytes);
  EXPECT_EQ(stats.outstanding_bytes, 0u);
}

TEST_F(BlockBufferPoolTest, ReleasesKeptBuffersBeforeMappingPastCapacity) {
  BlockBufferPool pool(Capacity(12 * kMiB));
  pool.Deallocate(Touch(pool, 5 * kMiB));
  ASSERT_GT(pool.stats().kept_bytes, 0u);
  // Too large to reuse the kept 5 MiB buffer, and both don't fit: the
  // kept one goes first.
  void* p = Touch(pool, 11 * kMiB);
  EXPECT_EQ(pool.stats().kept_bytes, 0u);
  pool.Deallocate(p);
  EXPECT_LE(pool.stats().kept_bytes, 12 * kMiB);
}

TEST_F(BlockBufferPoolTest, BuffersLargerThanTheCapacityAreNotKept) {
  BlockBufferPool pool(Capacity(2 * kMiB));
  pool.Deallocate(Touch(pool, 3 * kMiB));
  const auto stats = pool.stats();
  EXPECT_EQ(stats.kept_bytes, 0u);
  EXPECT_EQ(stats.unmapped_bytes, stats.mapped_bytes);
}

TEST_F(BlockBufferPoolTest, SmallAllocationsBypassThePool) {
  BlockBufferPool pool(Capacity(64 * kMiB));
  void* p = Touch(pool, 4096);
  void* q = Touch(pool, 1);
  pool.Deallocate(p);
  pool.Deallocate(q);
  pool.Deallocate(nullptr);
  const auto stats = pool.stats();
  EXPECT_EQ(stats.pooled_allocations, 0u);
  EXPECT_EQ(stats.kept_bytes, 0u);
}

TEST_F(BlockBufferPoolTest, ZeroCapacityKeepsNothing) {
  BlockBufferPool pool(Capacity(0));
  pool.Deallocate(Touch(pool, 4 * kMiB));
  pool.Deallocate(Touch(pool, 4 * kMiB));
  const auto stats = pool.stats();
  EXPECT_EQ(stats.reused, 0u);
  EXPECT_EQ(stats.kept_bytes, 0u);
}

TEST_F(BlockBufferPoolTest, WithoutHugePagesToo) {
  BlockBufferPool::Options o = Capacity(64 * kMiB);
  o.huge_pages = false;
  BlockBufferPool pool(o);
  void* a = Touch(pool, 3 * kMiB);
  pool.Deallocate(a);
  EXPECT_EQ(Touch(pool, 3 * kMiB), a);
  pool.Deallocate(a);
}

}  // namespace
}  // namespace rocksdcp
