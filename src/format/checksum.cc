#include "format/checksum.h"

#include <xxh_x86dispatch.h>

namespace rocksdcp::format {

uint64_t Xxh3(const void* data, size_t size) {
  return XXH3_64bits_dispatch(data, size);
}

uint64_t Xxh3(const void* data, size_t size, uint64_t seed) {
  return XXH3_64bits_withSeed_dispatch(data, size, seed);
}

Hash128 Xxh3_128(const void* data, size_t size) {
  const XXH128_hash_t h = XXH3_128bits_dispatch(data, size);
  return {h.low64, h.high64};
}

}  // namespace rocksdcp::format
