#include "format/checksum.h"

#include <xxh_x86dispatch.h>

namespace rocksdcp::format {

uint64_t Xxh3(const void* data, size_t size) {
  return XXH3_64bits_dispatch(data, size);
}

uint64_t Xxh3(const void* data, size_t size, uint64_t seed) {
  return XXH3_64bits_withSeed_dispatch(data, size, seed);
}

}  // namespace rocksdcp::format
