// Encoding and verified decoding of ChunkPiece values (schema/checkpoint.fbs).

#ifndef ROCKSDCP_SRC_FORMAT_PIECE_CODEC_H_
#define ROCKSDCP_SRC_FORMAT_PIECE_CODEC_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "format/checksum.h"
#include "rocksdcp/status.h"
#include "rocksdcp/tensor.h"

namespace rocksdcp::format {

inline constexpr char kPieceIdentifier[] = "RDCP";
// Version 2 (written now): the piece's XXH3 is seeded with the XXH3 of its
// key, so a piece only verifies under the key it was written for.
// Version 1 (read still): seed 0, bound to no key.
inline constexpr uint16_t kPieceFormatVersion = 2;
inline constexpr uint16_t kUnboundPieceFormatVersion = 1;

// NOTE: values equal fb::ItemKind, which reaches disk.
enum class ItemKind : uint8_t { kTensor = 0, kBytes = 1 };

struct PieceHeader {
  ItemKind kind = ItemKind::kTensor;
  // For tensor pieces; ignored (kUInt8 on decode) for bytes.
  DType dtype = DType::kUInt8;
  std::vector<int64_t> chunk_offsets;
  std::vector<int64_t> chunk_sizes;
  uint32_t piece = 0;
  uint32_t num_pieces = 1;
  uint64_t byte_offset = 0;
  uint64_t byte_length = 0;
};

// Encodes pieces into one reused buffer, so encoding a stream of pieces
// touches fresh memory only when a piece is larger than any before it.
// Not thread-safe; use one per thread.
class PieceEncoder {
 public:
  PieceEncoder();
  ~PieceEncoder();
  PieceEncoder(const PieceEncoder&) = delete;
  PieceEncoder& operator=(const PieceEncoder&) = delete;

  // Encodes one piece, to be stored under `key`. `fill` writes exactly
  // header.byte_length payload bytes to the pointer it is given (the
  // value's own data vector, so the payload is copied once). The XXH3 is
  // computed over what `fill` wrote, seeded with the XXH3 of `key`.
  // With `payload_hash`, also sets it to the XXH3-128 of the payload,
  // while it is in cache. The returned bytes stay valid until the next
  // Encode.
  // REQUIRES: header.byte_length < 2 GiB minus the header's size.
  std::string_view Encode(const PieceHeader& header, std::string_view key,
                          const std::function<void(uint8_t*)>& fill,
                          Hash128* payload_hash = nullptr);

 private:
  struct Rep;
  std::unique_ptr<Rep> rep_;
};

struct DecodedPiece {
  PieceHeader header;
  // Points into the value passed to DecodePiece.
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  uint64_t xxh3 = 0;
  // kPieceFormatVersion, or kUnboundPieceFormatVersion for an older piece.
  uint16_t format_version = kPieceFormatVersion;
};

// Verifies and decodes a piece value: the FlatBuffers Verifier, the file
// identifier, the format version, a known dtype and kind, offsets and sizes
// of equal rank, data length == byte_length, and the XXH3 of the data.
// Returns Corruption saying which check failed; never reads out of bounds.
// A version 2 piece verifies only under the `key` it was written for: read
// under another (moved there from another item, with its checksum intact),
// it fails as a checksum mismatch that says so.
Result<DecodedPiece> DecodePiece(std::string_view value, std::string_view key);

}  // namespace rocksdcp::format

#endif  // ROCKSDCP_SRC_FORMAT_PIECE_CODEC_H_
