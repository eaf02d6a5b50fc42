#include "format/piece_codec.h"

#include <flatbuffers/flatbuffers.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "format/checksum.h"
#include "format/fb_util.h"
#include "schema/checkpoint_generated.h"

namespace rocksdcp::format {

namespace {

// Room for everything in a piece value but the payload and the chunk's
// offsets and sizes: the table, its vtable, vector lengths, the identifier,
// alignment padding and the builder's scratch space.
constexpr size_t kHeaderSlack = 1024;

Status Bad(std::string why) {
  return Status::Corruption("chunk piece: " + std::move(why));
}

std::string Hex64(uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof(buf), "0x%016llx",
                static_cast<unsigned long long>(v));
  return buf;
}

// The byte size of a chunk of `sizes` elements of `dtype`.
// Corruption if a size is negative or the product overflows.
Result<uint64_t> ChunkBytes(const std::vector<int64_t>& offsets,
                            const std::vector<int64_t>& sizes, DType dtype) {
  uint64_t bytes = DTypeSize(dtype);
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (offsets[d] < 0 || sizes[d] < 0) {
      return Bad("negative chunk offset or size in dimension " +
                 std::to_string(d));
    }
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(sizes[d]),
                               &bytes)) {
      return Bad("chunk byte size overflows 64 bits");
    }
  }
  return bytes;
}

}  // namespace

struct PieceEncoder::Rep {
  // Allocates nothing until first used; the first Encode replaces it.
  flatbuffers::FlatBufferBuilder builder;
  // The initial size `builder` was made with: it holds a piece of up to
  // this size (header included) without reallocating.
  size_t reserved = 0;
};

PieceEncoder::PieceEncoder() : rep_(std::make_unique<Rep>()) {}
PieceEncoder::~PieceEncoder() = default;

std::string_view PieceEncoder::Encode(const PieceHeader& header,
                                      std::string_view key,
                                      const std::function<void(uint8_t*)>& fill,
                                      Hash128* payload_hash) {
  const bool is_tensor = header.kind == ItemKind::kTensor;
  const size_t needed = static_cast<size_t>(header.byte_length) + kHeaderSlack +
                        sizeof(int64_t) * (header.chunk_offsets.size() +
                                           header.chunk_sizes.size());
  // FlatBufferBuilder grows by reallocating to 1.5x and copying, which for a
  // 64 MiB piece means several large copies. A fresh builder sized for the
  // piece allocates exactly once, on first use; smaller pieces that follow
  // reuse its buffer through Clear().
  if (needed > rep_->reserved) {
    rep_->builder = flatbuffers::FlatBufferBuilder(needed);
    rep_->reserved = needed;
  }
  flatbuffers::FlatBufferBuilder& fbb = rep_->builder;
  fbb.Clear();

  flatbuffers::Offset<flatbuffers::Vector<int64_t>> offsets;
  flatbuffers::Offset<flatbuffers::Vector<int64_t>> sizes;
  if (is_tensor) {
    offsets = fbb.CreateVector(header.chunk_offsets);
    sizes = fbb.CreateVector(header.chunk_sizes);
  }
  uint8_t* data = nullptr;
  const auto data_vector = fbb.CreateUninitializedVector<uint8_t>(
      static_cast<size_t>(header.byte_length), &data);
  // `data` stays valid only until the builder next grows: fill and hash it
  // before the table is built.
  fill(data);
  const uint64_t xxh3 =
      Xxh3(data, static_cast<size_t>(header.byte_length), Xxh3(key));
  if (payload_hash != nullptr) {
    *payload_hash = Xxh3_128(data, static_cast<size_t>(header.byte_length));
  }

  const auto piece = fb::CreateChunkPiece(
      fbb, kPieceFormatVersion, static_cast<fb::ItemKind>(header.kind),
      is_tensor ? static_cast<fb::DType>(header.dtype) : fb::DType::Unknown,
      offsets, sizes, header.piece, header.num_pieces, header.byte_offset,
      header.byte_length, xxh3, data_vector);
  fbb.Finish(piece, kPieceIdentifier);
  return std::string_view(reinterpret_cast<const char*>(fbb.GetBufferPointer()),
                          fbb.GetSize());
}

// A piece is read in place, not copied to aligned memory as the small
// values are (AlignedBytes): it holds up to max_piece_bytes of data, and
// RocksDB hands it over wherever it sits in its block, so most pieces are
// misaligned. Reading one is nonetheless sound:
// - the root offset and vectors are read with memcpy (VerifiedRootInPlace,
//   ReadVectorLength, VectorElements, ReadLongs), never through a
//   flatbuffers::Vector object, which needs 4-byte alignment;
// - scalar fields are read by the generated accessors through
//   flatbuffers::ReadScalar, as the Verifier reads them too. ReadScalar is
//   FlatBuffers' one entry point for reading a scalar in a buffer, declared
//   (base.h) to work at any address and exempted from UBSan's alignment
//   check for that reason; it compiles to plain loads, which x86-64 and
//   aarch64 allow at any address.
// The fuzzer (fuzz/piece_fuzzer.cc) decodes every input at a misaligned
// address under UBSan to keep it that way.
Result<DecodedPiece> DecodePiece(std::string_view value, std::string_view key) {
  ROCKSDCP_ASSIGN_OR_RETURN(const fb::ChunkPiece* root,
                            VerifiedRootInPlace<fb::ChunkPiece>(
                                value, kPieceIdentifier, "chunk piece"));
  const fb::ChunkPiece& p = *root;

  const uint16_t version = p.format_version();
  if (version != kPieceFormatVersion && version != kUnboundPieceFormatVersion) {
    return Bad("unsupported piece format_version " + std::to_string(version));
  }

  DecodedPiece out;
  PieceHeader& h = out.header;
  const auto kind = static_cast<uint8_t>(p.kind());
  if (kind == static_cast<uint8_t>(ItemKind::kTensor)) {
    h.kind = ItemKind::kTensor;
    const auto dtype = static_cast<uint8_t>(p.dtype());
    if (!IsValidDType(dtype)) {
      return Bad("unknown dtype " + std::to_string(dtype));
    }
    h.dtype = static_cast<DType>(dtype);
    if (p.chunk_offsets() == nullptr || p.chunk_sizes() == nullptr) {
      return Bad("tensor piece lacks chunk_offsets or chunk_sizes");
    }
    h.chunk_offsets = ReadLongs(p.chunk_offsets());
    h.chunk_sizes = ReadLongs(p.chunk_sizes());
    if (h.chunk_offsets.size() != h.chunk_sizes.size()) {
      return Bad(
          "chunk_offsets has rank " + std::to_string(h.chunk_offsets.size()) +
          " but chunk_sizes has rank " + std::to_string(h.chunk_sizes.size()));
    }
  } else if (kind == static_cast<uint8_t>(ItemKind::kBytes)) {
    h.kind = ItemKind::kBytes;
    h.dtype = DType::kUInt8;
    if (p.chunk_offsets() != nullptr || p.chunk_sizes() != nullptr) {
      return Bad("bytes piece has chunk_offsets or chunk_sizes");
    }
  } else {
    return Bad("unknown item kind " + std::to_string(kind));
  }

  h.piece = p.piece();
  h.num_pieces = p.num_pieces();
  h.byte_offset = p.byte_offset();
  h.byte_length = p.byte_length();
  if (h.piece >= h.num_pieces) {
    return Bad("piece " + std::to_string(h.piece) +
               " is not below num_pieces " + std::to_string(h.num_pieces));
  }
  uint64_t byte_end = 0;
  if (__builtin_add_overflow(h.byte_offset, h.byte_length, &byte_end)) {
    return Bad("byte_offset + byte_length overflows 64 bits");
  }
  if (h.kind == ItemKind::kTensor) {
    ROCKSDCP_ASSIGN_OR_RETURN(
        const uint64_t chunk_bytes,
        ChunkBytes(h.chunk_offsets, h.chunk_sizes, h.dtype));
    if (byte_end > chunk_bytes) {
      return Bad("bytes [" + std::to_string(h.byte_offset) + ", " +
                 std::to_string(byte_end) + ") lie outside the chunk's " +
                 std::to_string(chunk_bytes) + " bytes");
    }
  }

  const ByteVector* data = p.data();
  if (data == nullptr) return Bad("no data");
  const uint32_t data_size = ReadVectorLength(data);
  if (data_size != h.byte_length) {
    return Bad("data holds " + std::to_string(data_size) +
               " bytes but byte_length is " + std::to_string(h.byte_length));
  }
  out.data = VectorElements(data);
  out.size = data_size;
  out.xxh3 = p.xxh3();
  out.format_version = version;
  const bool bound = version == kPieceFormatVersion;
  const uint64_t actual =
      Xxh3(out.data, static_cast<size_t>(out.size), bound ? Xxh3(key) : 0);
  if (actual != out.xxh3) {
    return Bad("checksum mismatch: stored XXH3 " + Hex64(out.xxh3) +
               ", computed " + Hex64(actual) +
               (bound ? " (the piece's data is damaged, or the piece was "
                        "written for another key)"
                      : ""));
  }
  return out;
}

}  // namespace rocksdcp::format
