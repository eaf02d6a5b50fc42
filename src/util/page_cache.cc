#include "util/page_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <vector>

// cachestat(2), Linux 6.5: the same number on every architecture.
#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif

namespace rocksdcp::util {

namespace {

struct CachestatRange {
  uint64_t off;
  uint64_t len;
};

struct Cachestat {
  uint64_t nr_cache;
  uint64_t nr_dirty;
  uint64_t nr_writeback;
  uint64_t nr_evicted;
  uint64_t nr_recently_evicted;
};

// Cleared once the kernel says it has no cachestat.
std::atomic<bool> g_has_cachestat{true};

// mincore(2) of a mapping of the pages, never touched. Its munmap costs
// every thread of the process a TLB flush, hence cachestat first.
bool Mincore(int fd, uint64_t first, uint64_t mapped, CachedPages* pages) {
  void* at = ::mmap(nullptr, mapped, PROT_READ, MAP_SHARED, fd,
                    static_cast<off_t>(first));
  if (at == MAP_FAILED) return false;
  std::vector<unsigned char> in_core(pages->total);
  const bool asked = ::mincore(at, mapped, in_core.data()) == 0;
  ::munmap(at, mapped);
  if (!asked) return false;
  for (unsigned char c : in_core) pages->cached += c & 1u;
  return true;
}

}  // namespace

std::optional<CachedPages> PagesInCache(const std::string& path,
                                        uint64_t offset, uint64_t length) {
  if (length == 0) return CachedPages{};
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t first = offset / page * page;
  const uint64_t mapped = offset + length - first;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  CachedPages pages;
  pages.total = (mapped + page - 1) / page;
  bool asked = false;
  if (g_has_cachestat.load(std::memory_order_relaxed)) {
    CachestatRange range{first, mapped};
    Cachestat cs{};
    if (::syscall(__NR_cachestat, fd, &range, &cs, 0) == 0) {
      pages.cached = std::min(cs.nr_cache, pages.total);
      asked = true;
    } else if (errno == ENOSYS) {
      g_has_cachestat.store(false, std::memory_order_relaxed);
    }
  }
  if (!asked) asked = Mincore(fd, first, mapped, &pages);
  ::close(fd);
  if (!asked) return std::nullopt;
  return pages;
}

}  // namespace rocksdcp::util
