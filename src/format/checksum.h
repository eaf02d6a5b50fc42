// XXH3-64 of a byte range, through xxHash's runtime-dispatching entry point
// on x86-64 (xxh_x86dispatch.h picks AVX2/SSE2 for this CPU), through the
// plain XXH3 functions elsewhere (same results). Seed 0.

#ifndef ROCKSDCP_SRC_FORMAT_CHECKSUM_H_
#define ROCKSDCP_SRC_FORMAT_CHECKSUM_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rocksdcp::format {

uint64_t Xxh3(const void* data, size_t size);
// XXH3-64 with `seed`: what binds a piece's checksum to its key.
uint64_t Xxh3(const void* data, size_t size, uint64_t seed);
inline uint64_t Xxh3(std::string_view bytes) {
  return Xxh3(bytes.data(), bytes.size());
}

// A 128-bit hash of a piece's payload: identity of content, not integrity
// (the XXH3-64 above is that), so unseeded: equal bytes hash equal under
// any key.
struct Hash128 {
  uint64_t low = 0;
  uint64_t high = 0;
  friend bool operator==(const Hash128&, const Hash128&) = default;
};
// XXH3-128, seed 0.
Hash128 Xxh3_128(const void* data, size_t size);

}  // namespace rocksdcp::format

#endif  // ROCKSDCP_SRC_FORMAT_CHECKSUM_H_
