// Encoding and verified decoding of ChunkPiece values (schema/checkpoint.fbs).

#ifndef ROCKSDCP_SRC_FORMAT_PIECE_CODEC_H_
#define ROCKSDCP_SRC_FORMAT_PIECE_CODEC_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
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
// Version 3: a compressed piece (bound to its key as version 2 is). Only a
// piece that compression made smaller is written so; the others stay
// version 2, which readers from before compression read too.
inline constexpr uint16_t kCompressedPieceFormatVersion = 3;
// A compressed piece stores at least 1 / kMaxCompressionRatio of its
// payload: a writer keeps a piece that would compress more uncompressed,
// and a reader refuses one that claims more. So decoding a store's pieces
// takes time in proportion to the bytes it holds, whatever it claims.
// 128 KiB of zeros compress 4,000-fold.
inline constexpr uint64_t kMaxCompressionRatio = 1 << 15;

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

// How a PieceEncoder compresses pieces (schema/checkpoint.fbs,
// PieceCodec::BytePlaneZstd).
struct PieceCompression {
  // zstd's level for each plane.
  int level = 1;
  // A piece is stored compressed only if that saves at least this share
  // of its payload; else it is written as an uncompressed piece.
  double min_saving = 0.05;
};

// Encodes pieces into one reused buffer, so encoding a stream of pieces
// touches fresh memory only when a piece is larger than any before it.
// Not thread-safe; use one per thread.
class PieceEncoder {
 public:
  // Writes every piece uncompressed (version 2).
  PieceEncoder();
  // Compresses each piece that is at least 64 bytes, keeping it compressed
  // (version 3) when that saves compression.min_saving of it.
  explicit PieceEncoder(const PieceCompression& compression);
  ~PieceEncoder();
  PieceEncoder(const PieceEncoder&) = delete;
  PieceEncoder& operator=(const PieceEncoder&) = delete;

  // Encodes one piece, to be stored under `key`. `fill` writes exactly
  // header.byte_length payload bytes to the pointer it is given (the
  // value's own data vector, so the payload is copied once). The XXH3 is
  // computed over what `fill` wrote, seeded with the XXH3 of `key`.
  // With `payload_hash`, also sets it to the XXH3-128 of the payload,
  // while it is in cache. The returned bytes stay valid until the next
  // Encode. A compressing encoder has `fill` write into a buffer of its
  // own, then compresses it: the XXH3 then covers the stored bytes, and
  // the piece's payload_xxh3 the payload.
  // REQUIRES: header.byte_length < 2 GiB minus the header's size.
  // With `compress` false, a compressing encoder writes this piece
  // uncompressed, as a plain encoder does.
  std::string_view Encode(const PieceHeader& header, std::string_view key,
                          const std::function<void(uint8_t*)>& fill,
                          Hash128* payload_hash = nullptr,
                          bool compress = true);

  // Whether the last piece Encode returned is compressed.
  bool last_compressed() const;

  // Where the payload (the `data` bytes) of the last piece Encode returned
  // starts in the value it returned.
  size_t last_payload_offset() const;

 private:
  struct Rep;
  std::unique_ptr<Rep> rep_;
};

struct DecodedPiece {
  PieceHeader header;
  // The payload: in the value passed to DecodePiece, or, for a compressed
  // piece, in the PieceDecodeBuffer it was decoded into.
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  // The bytes the value stores for the payload: `size` unless compressed.
  uint64_t stored_size = 0;
  uint64_t xxh3 = 0;
  // kPieceFormatVersion, kCompressedPieceFormatVersion, or
  // kUnboundPieceFormatVersion for an older piece.
  uint16_t format_version = kPieceFormatVersion;
};

// Where DecodePiece decodes compressed pieces, reused from piece to piece
// (so a stream of pieces touches fresh memory only when one is larger than
// any before it). Not thread-safe: use one per thread. A DecodedPiece that
// points into it is valid until the buffer's next use.
class PieceDecodeBuffer {
 public:
  PieceDecodeBuffer();
  ~PieceDecodeBuffer();
  PieceDecodeBuffer(const PieceDecodeBuffer&) = delete;
  PieceDecodeBuffer& operator=(const PieceDecodeBuffer&) = delete;

 private:
  friend Result<DecodedPiece> DecodePiece(
      std::string_view value, std::string_view key, PieceDecodeBuffer* buffer,
      std::optional<uint64_t> expected_length);
  struct Rep;
  std::unique_ptr<Rep> rep_;
};

// Verifies and decodes a piece value: the FlatBuffers Verifier, the file
// identifier, the format version, a known dtype and kind, offsets and sizes
// of equal rank, data length == byte_length, and the XXH3 of the data.
// Returns Corruption saying which check failed; never reads out of bounds.
// A version 2 piece verifies only under the `key` it was written for: read
// under another (moved there from another item, with its checksum intact),
// it fails as a checksum mismatch that says so.
// A compressed (version 3) piece is checked before it is decoded: its
// codec, one plane per byte of its element, the planes' sizes against its
// byte_length and against what `data` holds, and the XXH3 of the stored
// bytes; it is then decoded into `buffer` (PlaneDecoder::Decode's checks:
// nothing is decoded beyond byte_length), and the decoded payload checked
// against payload_xxh3.
// With `expected_length` (what the metadata says the piece holds), a piece
// claiming another byte_length is refused before anything is decoded, so
// that a forged claim never sizes the decode buffer.
Result<DecodedPiece> DecodePiece(
    std::string_view value, std::string_view key, PieceDecodeBuffer* buffer,
    std::optional<uint64_t> expected_length = std::nullopt);

}  // namespace rocksdcp::format

#endif  // ROCKSDCP_SRC_FORMAT_PIECE_CODEC_H_
