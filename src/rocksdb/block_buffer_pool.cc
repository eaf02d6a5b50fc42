#include "rocksdb/block_buffer_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <new>

namespace rocksdcp {

namespace {

constexpr uint64_t kHugePage = uint64_t{2} << 20;
constexpr uint64_t kMagicMalloc = 0x52444350'4d414c4cull;  // "RDCPMALL"
constexpr uint64_t kMagicPooled = 0x52444350'504f4f4cull;  // "RDCPPOOL"

// Sits just before every pointer Allocate returns, so that Deallocate,
// which gets only the pointer, knows where the memory came from.
struct Header {
  uint64_t capacity;  // Of the whole mapping; 0 for malloc.
  uint64_t magic;
};
static_assert(sizeof(Header) == 16);

// Pooled buffers start their data a cache line in, header just before it.
constexpr uint64_t kPooledOffset = 64;

Header* HeaderOf(void* p) {
  return reinterpret_cast<Header*>(static_cast<char*>(p) - sizeof(Header));
}

}  // namespace

BlockBufferPool::BlockBufferPool(const Options& options) : options_(options) {}

BlockBufferPool::~BlockBufferPool() {
  for (const Buffer& b : kept_) Unmap(b.base, b.capacity);
}

uint64_t BlockBufferPool::RoundUp(uint64_t size) {
  // Steps of at most 1/16 of the size: pieces of one tensor are equal, and
  // the last, shorter one still fits a buffer of the others' class.
  const uint64_t granule =
      std::max<uint64_t>(64 << 10, std::bit_floor(size) / 16);
  return (size + granule - 1) / granule * granule;
}

void* BlockBufferPool::Map(uint64_t capacity) {
  const bool huge = options_.huge_pages && capacity >= kHugePage;
  // Huge pages need 2 MiB alignment: over-map, then trim both ends.
  const uint64_t length = huge ? capacity + kHugePage : capacity;
  void* p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  if (!huge) return p;
  const auto start = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = (start + kHugePage - 1) & ~(kHugePage - 1);
  if (aligned > start) ::munmap(p, aligned - start);
  const uintptr_t end = start + length;
  if (end > aligned + capacity) {
    ::munmap(reinterpret_cast<void*>(aligned + capacity),
             end - (aligned + capacity));
  }
  // Huge pages over the whole 2 MiB steps only: a block is a piece plus a
  // few hundred bytes, and a huge page for those would add 2 MiB of
  // resident memory to every buffer. Advice only: without THP the kernel
  // maps 4 KiB pages as usual.
  ::madvise(reinterpret_cast<void*>(aligned), capacity / kHugePage * kHugePage,
            MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

void BlockBufferPool::Unmap(void* base, uint64_t capacity) {
  ::munmap(base, capacity);
}

void BlockBufferPool::ShrinkLocked(uint64_t extra, std::vector<Buffer>* out) {
  while (!kept_.empty() &&
         stats_.kept_bytes + stats_.outstanding_bytes + extra >
             options_.capacity_bytes) {
    auto oldest = std::min_element(kept_.begin(), kept_.end(),
                                   [](const Buffer& a, const Buffer& b) {
                                     return a.last_used < b.last_used;
                                   });
    stats_.kept_bytes -= oldest->capacity;
    stats_.unmapped_bytes += oldest->capacity;
    out->push_back(*oldest);
    *oldest = kept_.back();
    kept_.pop_back();
  }
}

void* BlockBufferPool::Allocate(size_t size) {
  if (size < options_.min_pooled_bytes) {
    void* base = std::malloc(size + sizeof(Header));
    if (base == nullptr) throw std::bad_alloc();  // As operator new[] would.
    auto* h = static_cast<Header*>(base);
    *h = Header{0, kMagicMalloc};
    return h + 1;
  }
  const uint64_t needed = RoundUp(uint64_t{size} + kPooledOffset);
  std::vector<Buffer> release;
  void* base = nullptr;
  uint64_t capacity = needed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.pooled_allocations;
    // The smallest kept buffer that fits, unless it is more than twice the
    // size: that one is worth keeping for a larger block.
    auto best = kept_.end();
    for (auto it = kept_.begin(); it != kept_.end(); ++it) {
      if (it->capacity >= needed && it->capacity <= 2 * needed &&
          (best == kept_.end() || it->capacity < best->capacity)) {
        best = it;
      }
    }
    if (best != kept_.end()) {
      base = best->base;
      capacity = best->capacity;
      stats_.kept_bytes -= capacity;
      ++stats_.reused;
      *best = kept_.back();
      kept_.pop_back();
    } else {
      ShrinkLocked(needed, &release);
      stats_.mapped_bytes += needed;
    }
    stats_.outstanding_bytes += capacity;
  }
  for (const Buffer& b : release) Unmap(b.base, b.capacity);
  if (base == nullptr) {
    base = Map(capacity);
    if (base == nullptr) {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.outstanding_bytes -= capacity;
      stats_.mapped_bytes -= capacity;
      throw std::bad_alloc();
    }
  }
  char* data = static_cast<char*>(base) + kPooledOffset;
  *HeaderOf(data) = Header{capacity, kMagicPooled};
  return data;
}

void BlockBufferPool::Deallocate(void* p) {
  if (p == nullptr) return;
  const Header h = *HeaderOf(p);
  if (h.magic != kMagicPooled) {
    std::free(HeaderOf(p));
    return;
  }
  void* base = static_cast<char*>(p) - kPooledOffset;
  std::vector<Buffer> release;
  bool keep = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.outstanding_bytes -= h.capacity;
    if (h.capacity <= options_.capacity_bytes) {
      // Make room among the kept buffers only: what others hold is theirs.
      while (!kept_.empty() &&
             stats_.kept_bytes + h.capacity > options_.capacity_bytes) {
        auto oldest = std::min_element(kept_.begin(), kept_.end(),
                                       [](const Buffer& a, const Buffer& b) {
                                         return a.last_used < b.last_used;
                                       });
        stats_.kept_bytes -= oldest->capacity;
        stats_.unmapped_bytes += oldest->capacity;
        release.push_back(*oldest);
        *oldest = kept_.back();
        kept_.pop_back();
      }
      kept_.push_back(Buffer{base, h.capacity, ++clock_});
      stats_.kept_bytes += h.capacity;
      keep = true;
    } else {
      stats_.unmapped_bytes += h.capacity;
    }
  }
  for (const Buffer& b : release) Unmap(b.base, b.capacity);
  if (!keep) Unmap(base, h.capacity);
}

BlockBufferPool::Stats BlockBufferPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace rocksdcp
