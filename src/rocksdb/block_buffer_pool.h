// BlockBufferPool: the memory RocksDB reads checkpoint blocks into,
// recycled.
//
// A piece is one RocksDB block of up to max_piece_bytes (128 KiB by
// default; up to 1 GiB), and without a block cache entry RocksDB allocates a
// fresh buffer for every block it reads, then frees it. Fresh memory costs a
// page fault per 4 KiB page on first touch (about 20 us on these VMs, far more
// than reading the page from the page cache), so a load that allocates a fresh
// buffer per piece spends most of its time faulting. This pool is the
// MemoryAllocator of the block cache that checkpoint column families use;
// RocksDB's BlockFetcher allocates block buffers through it even for reads
// with fill_cache = false. Freed buffers of at least `min_pooled_bytes` are
// kept and handed out again for blocks of about their size, so steady-state
// loads touch no fresh pages.
//
// Bounded: the pool keeps at most `capacity_bytes` of free buffers, and
// before it maps a new buffer it releases free ones (oldest first) until
// what it keeps plus what is handed out fits in `capacity_bytes`. What is
// handed out is bounded by the readers (their pieces in flight), not here.
//
// Thread-safe.

#ifndef ROCKSDCP_SRC_ROCKSDB_BLOCK_BUFFER_POOL_H_
#define ROCKSDCP_SRC_ROCKSDB_BLOCK_BUFFER_POOL_H_

#include <rocksdb/memory_allocator.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace rocksdcp {

class BlockBufferPool final : public rocksdb::MemoryAllocator {
 public:
  // Smaller allocations (index blocks, blocks of small items) go straight
  // to malloc, which recycles them well.
  static constexpr size_t kDefaultMinPooledBytes = size_t{1} << 20;

  struct Options {
    // The most bytes of free buffers kept for reuse. 0 disables pooling.
    uint64_t capacity_bytes = 256ull << 20;
    size_t min_pooled_bytes = kDefaultMinPooledBytes;
    // Ask for transparent huge pages (madvise(MADV_HUGEPAGE)) on pooled
    // buffers: one fault per 2 MiB instead of per 4 KiB on first touch,
    // and fewer TLB misses while the buffer is copied and hashed.
    bool huge_pages = true;
  };

  struct Stats {
    // Allocate calls of at least min_pooled_bytes, and how many of them a
    // kept buffer served.
    uint64_t pooled_allocations = 0;
    uint64_t reused = 0;
    // Bytes of buffers mapped fresh, and released back to the system.
    uint64_t mapped_bytes = 0;
    uint64_t unmapped_bytes = 0;
    // Now: free buffers kept, and pooled buffers handed out.
    uint64_t kept_bytes = 0;
    uint64_t outstanding_bytes = 0;
  };

  explicit BlockBufferPool(const Options& options);
  ~BlockBufferPool() override;

  const char* Name() const override { return "rocksdcp.BlockBufferPool"; }
  void* Allocate(size_t size) override;
  void Deallocate(void* p) override;

  Stats stats() const;
  const Options& options() const { return options_; }

 private:
  struct Buffer {
    void* base = nullptr;
    uint64_t capacity = 0;
    uint64_t last_used = 0;  // For releasing the oldest first.
  };

  // The capacity a buffer for `size` bytes (header included) is mapped
  // with: rounded up so that blocks of nearly equal size share buffers.
  static uint64_t RoundUp(uint64_t size);
  void* Map(uint64_t capacity);
  static void Unmap(void* base, uint64_t capacity);
  // Moves kept buffers to `out` (oldest first) until kept plus handed out
  // plus `extra` fits in the capacity. REQUIRES: mu_ held.
  void ShrinkLocked(uint64_t extra, std::vector<Buffer>* out);

  const Options options_;
  mutable std::mutex mu_;
  std::vector<Buffer> kept_;
  uint64_t clock_ = 0;
  Stats stats_;
};

}  // namespace rocksdcp

#endif  // ROCKSDCP_SRC_ROCKSDB_BLOCK_BUFFER_POOL_H_
