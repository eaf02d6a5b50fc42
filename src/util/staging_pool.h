// StagingPool: one region of host memory, reserved once and carved into
// variable-size blocks that are freed in any order, so that every save of
// an AsyncCheckpointer copies into memory earlier saves already touched.
//
// Why not malloc: the first write to a fresh page costs a page fault, up to
// about 20 us per 4 KiB on small VMs, so a fresh 1 GiB of staging buffers
// per save would cost seconds. malloc returns large blocks to the kernel on
// free and gets fresh ones next time; this region stays mapped, and stays
// touched.
//
// Blocks are placed first-fit from the region's start, and a freed block
// merges with free neighbours, so memory stays in as few pieces as the
// order of frees allows and touched memory (the low end) is reused first.
//
// Thread safety: not synchronised; the owner serialises calls.

#ifndef ROCKSDCP_SRC_UTIL_STAGING_POOL_H_
#define ROCKSDCP_SRC_UTIL_STAGING_POOL_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>

#include "rocksdcp/status.h"

namespace rocksdcp::util {

class StagingPool {
 public:
  // Every block starts on, and is sized in, multiples of this: a cache
  // line, and enough for any dtype and for SIMD copies.
  static constexpr uint64_t kAlignment = 64;

  struct Block {
    std::byte* data = nullptr;
    // The size reserved: the request rounded up to kAlignment.
    uint64_t size = 0;
  };

  // A pool of `capacity` bytes (rounded down to kAlignment). The address
  // space is reserved now; with `prefault`, every page is touched now too,
  // so that no later copy pays for first touch. Capacity 0 is a pool that
  // never has room.
  static Result<std::unique_ptr<StagingPool>> Create(uint64_t capacity,
                                                     bool prefault);
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  uint64_t capacity() const { return capacity_; }
  uint64_t free_bytes() const { return free_bytes_; }
  // Bytes from the region's start up to the end of the highest block ever
  // handed out (all of it when prefaulted): memory that is already
  // resident, so copying into it costs no page faults.
  uint64_t touched_bytes() const { return touched_; }

  // A block of at least `bytes` bytes, or nullopt if no free range is
  // large enough (the caller waits for frees and retries).
  // REQUIRES: bytes > 0.
  std::optional<Block> Allocate(uint64_t bytes);

  // Returns `block` to the pool.
  // REQUIRES: `block` came from Allocate and was not freed since.
  void Free(const Block& block);

  // Frees every block.
  void FreeAll();

 private:
  StagingPool(std::byte* base, uint64_t mapped, uint64_t capacity,
              bool prefaulted);

  std::byte* const base_;
  const uint64_t mapped_;    // Bytes mapped: capacity rounded up to a page.
  const uint64_t capacity_;  // Bytes usable.
  uint64_t touched_;
  uint64_t free_bytes_;
  // Free ranges, offset -> size: disjoint, never adjacent (adjacent ranges
  // are merged), all within [0, capacity_).
  std::map<uint64_t, uint64_t> free_;
};

}  // namespace rocksdcp::util

#endif  // ROCKSDCP_SRC_UTIL_STAGING_POOL_H_
