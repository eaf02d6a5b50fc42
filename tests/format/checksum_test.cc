#include "format/checksum.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rocksdcp::format {
namespace {

// Fixed XXH3 values, computed on x86-64 with xxHash 0.8.1's plain
// XXH3_64bits / XXH3_64bits_withSeed / XXH3_128bits: what every stored
// piece's checksum (and a content hash) is. On x86-64 Xxh3 goes through
// xxh_x86dispatch.h, elsewhere (aarch64) through the plain functions
// (checksum.cc): these pin both to the same results, so that a store
// written on one machine verifies on the other. The lengths cross XXH3's
// internal boundaries (0, 1-3, 4-8, 9-16, 17-128, 129-240, >240 bytes,
// and more than one 1 KiB stripe block).
struct Vector {
  size_t size;
  uint64_t xxh3;
  uint64_t xxh3_seeded;  // seed kSeed
  uint64_t low, high;    // XXH3-128
};
constexpr uint64_t kSeed = 0x9e3779b97f4a7c15u;
constexpr Vector kVectors[] = {
    {0, 0x2d06800538d394c2u, 0x602b0e2cd6662c8bu, 0x6001c324468d497fu,
     0x99aa06d3014798d8u},
    {3, 0x15f7093b173d005cu, 0x079dd5d54d89480au, 0x15f7093b173d005cu,
     0x46f66cb935381565u},
    {16, 0x7e484c18d74895d0u, 0xa106510078b0a252u, 0xf853dd94614dfa07u,
     0x650fe308c566747du},
    {17, 0x208bde5ee2bed407u, 0x0b2caf8bf9648effu, 0x78c349fe81b2f26cu,
     0x18217300b5132d5au},
    {128, 0xf92b70eaa21a6288u, 0x95425530beb89fe8u, 0x1e04fad9f0cacb4du,
     0xb4f87b99d2db8a51u},
    {129, 0xf8f76713f2bb60fau, 0x29fa850b97ed9666u, 0xc51bc887976aef63u,
     0x6881633650cd8924u},
    {240, 0xccc7375172c41f03u, 0x2d882e7899ff64ccu, 0x93e173833f75ab66u,
     0xde57aab31e77a2ffu},
    {241, 0x0b3b630948ce4a00u, 0x422e82e8913e49e0u, 0x0b3b630948ce4a00u,
     0x92b991a7192f3f08u},
    {1024, 0x23bc880ebf0d29c6u, 0x7e249adc60e1f9b4u, 0x23bc880ebf0d29c6u,
     0x4c17271c906df792u},
    {2999, 0x833c13adf8a44870u, 0xd53eb3049ddf8e8bu, 0x833c13adf8a44870u,
     0xe902cbdc25c110e7u},
};

TEST(ChecksumTest, Xxh3MatchesFixedValuesOnEveryArchitecture) {
  std::vector<unsigned char> bytes(3000);
  for (size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<unsigned char>(i * 31 + 7);
  }
  for (const Vector& v : kVectors) {
    SCOPED_TRACE(v.size);
    EXPECT_EQ(Xxh3(bytes.data(), v.size), v.xxh3);
    EXPECT_EQ(Xxh3(bytes.data(), v.size, kSeed), v.xxh3_seeded);
    EXPECT_EQ(Xxh3_128(bytes.data(), v.size), (Hash128{v.low, v.high}));
  }
}

}  // namespace
}  // namespace rocksdcp::format
