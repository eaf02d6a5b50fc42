#include "util/staging_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <string>

namespace rocksdcp::util {

namespace {

uint64_t RoundUp(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

}  // namespace

Result<std::unique_ptr<StagingPool>> StagingPool::Create(uint64_t capacity,
                                                         bool prefault) {
  capacity -= capacity % kAlignment;
  if (capacity == 0) {
    return std::unique_ptr<StagingPool>(
        new StagingPool(nullptr, 0, 0, prefault));
  }
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  if (capacity > UINT64_MAX - page) {
    return Status::InvalidArgument("staging budget of " +
                                   std::to_string(capacity) +
                                   " bytes is too large");
  }
  const uint64_t mapped = RoundUp(capacity, page);
  // MAP_NORESERVE: the budget is a ceiling, not a demand; pages that no save
  // touches never cost memory (unless prefaulted).
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return Status::IOError(
        "reserving " + std::to_string(capacity) +
        " bytes of staging memory failed: " + std::strerror(errno));
  }
  auto* base = static_cast<std::byte*>(p);
#ifdef MADV_HUGEPAGE
  // Where transparent huge pages are opt-in ("madvise"), one fault then
  // maps 2 MiB instead of 4 KiB: first touch gets hundreds of times
  // cheaper. Only a hint; failure changes nothing.
  (void)madvise(base, mapped, MADV_HUGEPAGE);
#endif
  if (prefault) {
    bool populated = false;
#ifdef MADV_POPULATE_WRITE
    // Linux 5.14+: the kernel faults every page in, without a trip to user
    // space per page.
    populated = madvise(base, mapped, MADV_POPULATE_WRITE) == 0;
#endif
    if (!populated) {
      volatile std::byte* touch = base;
      for (uint64_t off = 0; off < mapped; off += page)
        touch[off] = std::byte{0};
    }
  }
  return std::unique_ptr<StagingPool>(
      new StagingPool(base, mapped, capacity, prefault));
}

StagingPool::StagingPool(std::byte* base, uint64_t mapped, uint64_t capacity,
                         bool prefaulted)
    : base_(base),
      mapped_(mapped),
      capacity_(capacity),
      touched_(prefaulted ? capacity : 0),
      free_bytes_(0) {
  FreeAll();
}

StagingPool::~StagingPool() {
  if (base_ != nullptr) munmap(base_, mapped_);
}

std::optional<StagingPool::Block> StagingPool::Allocate(uint64_t bytes) {
  assert(bytes > 0);
  if (bytes > free_bytes_) return std::nullopt;
  const uint64_t size = RoundUp(bytes, kAlignment);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < size) continue;
    const uint64_t offset = it->first;
    const uint64_t rest = it->second - size;
    free_.erase(it);
    if (rest > 0) free_.emplace(offset + size, rest);
    free_bytes_ -= size;
    if (offset + size > touched_) touched_ = offset + size;
    return Block{base_ + offset, size};
  }
  return std::nullopt;
}

void StagingPool::Free(const Block& block) {
  assert(block.data >= base_ && block.size > 0);
  uint64_t offset = static_cast<uint64_t>(block.data - base_);
  uint64_t size = block.size;
  assert(offset + size <= capacity_);
  auto next = free_.lower_bound(offset);
  assert(next == free_.end() || next->first >= offset + size);
  if (next != free_.end() && next->first == offset + size) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    assert(prev->first + prev->second <= offset);
    if (prev->first + prev->second == offset) {
      prev->second += size;
      free_bytes_ += block.size;
      return;
    }
  }
  free_.emplace_hint(next, offset, size);
  free_bytes_ += block.size;
}

void StagingPool::FreeAll() {
  free_.clear();
  if (capacity_ > 0) free_.emplace(0, capacity_);
  free_bytes_ = capacity_;
}

}  // namespace rocksdcp::util
