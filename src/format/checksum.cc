#include "format/checksum.h"

// ROCKSDCP_XXH3_NO_DISPATCH: the static CLI's copy of this file, since
// Debian's libxxhash.a (unlike its .so) has no dispatch functions.
#if (defined(__x86_64__) || defined(_M_X64)) && \
    !defined(ROCKSDCP_XXH3_NO_DISPATCH)
#include <xxh_x86dispatch.h>
#define ROCKSDCP_XXH3_64 XXH3_64bits_dispatch
#define ROCKSDCP_XXH3_64_SEED XXH3_64bits_withSeed_dispatch
#define ROCKSDCP_XXH3_128 XXH3_128bits_dispatch
#else
// Elsewhere (aarch64: NEON, chosen at compile time inside libxxhash; x86-64
// without dispatch: SSE2) the plain entry points; XXH3 is defined bit for bit,
// so the hashes are the same as the x86 dispatcher's.
#include <xxhash.h>
#define ROCKSDCP_XXH3_64 XXH3_64bits
#define ROCKSDCP_XXH3_64_SEED XXH3_64bits_withSeed
#define ROCKSDCP_XXH3_128 XXH3_128bits
#endif

namespace rocksdcp::format {

uint64_t Xxh3(const void* data, size_t size) {
  return ROCKSDCP_XXH3_64(data, size);
}

uint64_t Xxh3(const void* data, size_t size, uint64_t seed) {
  return ROCKSDCP_XXH3_64_SEED(data, size, seed);
}

Hash128 Xxh3_128(const void* data, size_t size) {
  const XXH128_hash_t h = ROCKSDCP_XXH3_128(data, size);
  return {h.low64, h.high64};
}

}  // namespace rocksdcp::format
