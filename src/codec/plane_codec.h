// The byte-plane codec of compressed pieces: a payload of fixed-size
// elements is cut into planes, plane k holding byte k of every element
// (byte 0 first, as the element lies in memory: little-endian), and each
// plane is compressed with zstd on its own, or stored as it is when zstd
// does not make it smaller.
//
// Why planes: a trained model's bf16 or fp32 weights have a narrow range
// of exponents, so the plane that holds the exponent bits compresses well
// while the mantissa planes hardly compress at all. Compressed together,
// zstd sees neither pattern (about 1.27x on bf16); apart, the exponent
// plane alone takes most of the gain (ZipNN, arXiv 2411.05239).
//
// Stored form (schema/checkpoint.fbs, ChunkPiece version 3): the stored
// planes back to back, and the size of each. A plane of n elements whose
// stored size is n is stored as it is; a smaller one is exactly one zstd
// frame that records its content size, n; a larger one is corrupt.
//
// Not thread-safe: use one encoder or decoder per thread. Each keeps its
// zstd context and buffers from call to call, so a stream of pieces
// touches fresh memory only when a piece is larger than any before it.

#ifndef ROCKSDCP_SRC_CODEC_PLANE_CODEC_H_
#define ROCKSDCP_SRC_CODEC_PLANE_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "rocksdcp/status.h"

namespace rocksdcp::codec {

// The most planes a payload has: one per byte of its largest element
// (complex128, 16 bytes).
inline constexpr size_t kMaxPlanes = 16;

class PlaneEncoder {
 public:
  // `level`: zstd's compression level (1 is its fastest positive level;
  // negative levels trade ratio for more speed).
  explicit PlaneEncoder(int level);
  ~PlaneEncoder();
  PlaneEncoder(const PlaneEncoder&) = delete;
  PlaneEncoder& operator=(const PlaneEncoder&) = delete;

  // Encodes `size` bytes of `elem`-byte elements into stored() and
  // plane_sizes(), which stay valid until the next Encode.
  // REQUIRES: 1 <= elem <= kMaxPlanes, size % elem == 0,
  // size / elem < 4 GiB.
  Status Encode(const uint8_t* data, size_t size, size_t elem);

  std::string_view stored() const;
  // The most memory zstd's context takes at `level` for planes of up to
  // `plane_bytes`.
  static uint64_t ContextBytes(int level, uint64_t plane_bytes);
  const std::vector<uint32_t>& plane_sizes() const { return plane_sizes_; }

 private:
  struct Rep;
  std::unique_ptr<Rep> rep_;
  std::vector<uint32_t> plane_sizes_;
};

class PlaneDecoder {
 public:
  PlaneDecoder();
  ~PlaneDecoder();
  PlaneDecoder(const PlaneDecoder&) = delete;
  PlaneDecoder& operator=(const PlaneDecoder&) = delete;

  // Decodes `planes` stored planes (`stored`, their sizes `plane_sizes`)
  // into `out`: `size` bytes of `planes`-byte elements. Checks everything
  // before it decodes: the plane count, each plane's size against its n =
  // size / planes bytes, their sum against stored.size(); then that each
  // compressed plane is one whole zstd frame declaring n bytes, and that
  // it decodes to exactly n. Corruption saying which check failed
  // otherwise. Never writes outside [out, out + size), nor decodes more
  // than n bytes of any plane, whatever the stored bytes.
  Status Decode(std::string_view stored, const uint32_t* plane_sizes,
                size_t planes, uint8_t* out, size_t size);

 private:
  struct Rep;
  std::unique_ptr<Rep> rep_;
};

}  // namespace rocksdcp::codec

#endif  // ROCKSDCP_SRC_CODEC_PLANE_CODEC_H_
