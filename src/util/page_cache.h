// Asking the kernel which pages of a file its page cache holds.

#ifndef ROCKSDCP_SRC_UTIL_PAGE_CACHE_H_
#define ROCKSDCP_SRC_UTIL_PAGE_CACHE_H_

#include <cstdint>
#include <optional>
#include <string>

namespace rocksdcp::util {

struct CachedPages {
  uint64_t cached = 0;  // Pages in the page cache.
  uint64_t total = 0;   // Pages that hold the bytes asked about.
};

// Of the pages that hold bytes [offset, offset + length) of the file at
// `path`, those in the page cache: cachestat(2) (Linux 6.5 on), which
// counts pages being read too, else mincore(2) of a mapping of them that is
// never touched, which counts only those read. Neither reads anything or
// adds to the process's memory. Pages past the file's end count as not
// cached. nullopt when the kernel can't tell: the file can't be opened or
// mapped.
std::optional<CachedPages> PagesInCache(const std::string& path,
                                        uint64_t offset, uint64_t length);

}  // namespace rocksdcp::util

#endif  // ROCKSDCP_SRC_UTIL_PAGE_CACHE_H_
