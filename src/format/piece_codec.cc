#include "format/piece_codec.h"

#include <flatbuffers/flatbuffers.h>

#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "codec/plane_codec.h"
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

// Pieces smaller than this are not compressed: a zstd frame's header
// alone takes most of what it could save.
constexpr uint64_t kMinCompressedBytes = 64;

// The size of the elements a piece's planes are cut by: its dtype's, or 1
// for bytes.
size_t PlaneElement(ItemKind kind, DType dtype) {
  return kind == ItemKind::kTensor ? DTypeSize(dtype) : 1;
}

}  // namespace

struct PieceEncoder::Rep {
  // Allocates nothing until first used; the first Encode replaces it.
  flatbuffers::FlatBufferBuilder builder;
  // The initial size `builder` was made with: it holds a piece of up to
  // this size (header included) without reallocating.
  size_t reserved = 0;
  // Set for a compressing encoder.
  std::optional<PieceCompression> compression;
  std::unique_ptr<codec::PlaneEncoder> planes;
  std::vector<uint8_t> payload;  // What `fill` wrote, to compress.
  bool last_compressed = false;
  size_t last_payload_offset = 0;

  // Builds the piece around `data` (filled and hashed by `fill_data`
  // before the table is built), as version `version`.
  std::string_view Build(const PieceHeader& header, size_t data_size,
                         const std::function<uint64_t(uint8_t*)>& fill_data,
                         uint16_t version,
                         const std::vector<uint32_t>* plane_bytes,
                         uint64_t payload_xxh3);
};

PieceEncoder::PieceEncoder() : rep_(std::make_unique<Rep>()) {}
PieceEncoder::PieceEncoder(const PieceCompression& compression)
    : rep_(std::make_unique<Rep>()) {
  rep_->compression = compression;
  rep_->planes = std::make_unique<codec::PlaneEncoder>(compression.level);
}
PieceEncoder::~PieceEncoder() = default;

std::string_view PieceEncoder::Rep::Build(
    const PieceHeader& header, size_t data_size,
    const std::function<uint64_t(uint8_t*)>& fill_data, uint16_t version,
    const std::vector<uint32_t>* plane_bytes, uint64_t payload_xxh3) {
  const bool is_tensor = header.kind == ItemKind::kTensor;
  const size_t needed = data_size + kHeaderSlack +
                        sizeof(int64_t) * (header.chunk_offsets.size() +
                                           header.chunk_sizes.size());
  // FlatBufferBuilder grows by reallocating to 1.5x and copying, which for a
  // 64 MiB piece means several large copies. A fresh builder sized for the
  // piece allocates exactly once, on first use; smaller pieces that follow
  // reuse its buffer through Clear().
  if (needed > reserved) {
    builder = flatbuffers::FlatBufferBuilder(needed);
    reserved = needed;
  }
  flatbuffers::FlatBufferBuilder& fbb = builder;
  fbb.Clear();

  flatbuffers::Offset<flatbuffers::Vector<int64_t>> offsets;
  flatbuffers::Offset<flatbuffers::Vector<int64_t>> sizes;
  if (is_tensor) {
    offsets = fbb.CreateVector(header.chunk_offsets);
    sizes = fbb.CreateVector(header.chunk_sizes);
  }
  flatbuffers::Offset<flatbuffers::Vector<uint32_t>> planes_vector;
  if (plane_bytes != nullptr) planes_vector = fbb.CreateVector(*plane_bytes);
  uint8_t* data = nullptr;
  const auto data_vector =
      fbb.CreateUninitializedVector<uint8_t>(data_size, &data);
  // `data` stays valid only until the builder next grows: fill and hash it
  // before the table is built.
  const uint64_t xxh3 = fill_data(data);

  const auto piece = fb::CreateChunkPiece(
      fbb, version, static_cast<fb::ItemKind>(header.kind),
      is_tensor ? static_cast<fb::DType>(header.dtype) : fb::DType::Unknown,
      offsets, sizes, header.piece, header.num_pieces, header.byte_offset,
      header.byte_length, xxh3, data_vector,
      plane_bytes != nullptr ? fb::PieceCodec::BytePlaneZstd
                             : fb::PieceCodec::None,
      planes_vector, payload_xxh3);
  fbb.Finish(piece, kPieceIdentifier);
  const uint8_t* value = fbb.GetBufferPointer();
  last_payload_offset = static_cast<size_t>(
      flatbuffers::GetRoot<fb::ChunkPiece>(value)->data()->Data() - value);
  return std::string_view(reinterpret_cast<const char*>(value), fbb.GetSize());
}

std::string_view PieceEncoder::Encode(const PieceHeader& header,
                                      std::string_view key,
                                      const std::function<void(uint8_t*)>& fill,
                                      Hash128* payload_hash, bool compress) {
  const size_t length = static_cast<size_t>(header.byte_length);
  const uint64_t seed = Xxh3(key);
  rep_->last_compressed = false;
  if (!rep_->compression || !compress || length < kMinCompressedBytes) {
    return rep_->Build(
        header, length,
        [&](uint8_t* data) {
          fill(data);
          if (payload_hash != nullptr) *payload_hash = Xxh3_128(data, length);
          return Xxh3(data, length, seed);
        },
        kPieceFormatVersion, nullptr, 0);
  }
  Rep& r = *rep_;
  if (r.payload.size() < length) r.payload.resize(length);
  const uint8_t* payload = r.payload.data();
  fill(r.payload.data());
  if (payload_hash != nullptr) *payload_hash = Xxh3_128(payload, length);
  const size_t elem = PlaneElement(header.kind, header.dtype);
  const double keep =
      static_cast<double>(length) * (1.0 - r.compression->min_saving);
  if (length % elem == 0 && r.planes->Encode(payload, length, elem).ok() &&
      static_cast<double>(r.planes->stored().size()) <= keep &&
      r.planes->stored().size() * kMaxCompressionRatio >= length) {
    const std::string_view stored = r.planes->stored();
    r.last_compressed = true;
    return r.Build(
        header, stored.size(),
        [&](uint8_t* data) {
          std::memcpy(data, stored.data(), stored.size());
          return Xxh3(data, stored.size(), seed);
        },
        kCompressedPieceFormatVersion, &r.planes->plane_sizes(),
        Xxh3(payload, length, seed));
  }
  return r.Build(
      header, length,
      [&](uint8_t* data) {
        std::memcpy(data, payload, length);
        return Xxh3(data, length, seed);
      },
      kPieceFormatVersion, nullptr, 0);
}

bool PieceEncoder::last_compressed() const { return rep_->last_compressed; }

size_t PieceEncoder::last_payload_offset() const {
  return rep_->last_payload_offset;
}

struct PieceDecodeBuffer::Rep {
  std::vector<uint8_t> bytes;
  codec::PlaneDecoder decoder;
};

PieceDecodeBuffer::PieceDecodeBuffer() : rep_(std::make_unique<Rep>()) {}
PieceDecodeBuffer::~PieceDecodeBuffer() = default;

namespace {

// The piece's kind, dtype and chunk, checked against each other.
Status DecodeKind(const fb::ChunkPiece& p, PieceHeader* h) {
  const auto kind = static_cast<uint8_t>(p.kind());
  if (kind == static_cast<uint8_t>(ItemKind::kTensor)) {
    h->kind = ItemKind::kTensor;
    const auto dtype = static_cast<uint8_t>(p.dtype());
    if (!IsValidDType(dtype)) {
      return Bad("unknown dtype " + std::to_string(dtype));
    }
    h->dtype = static_cast<DType>(dtype);
    if (p.chunk_offsets() == nullptr || p.chunk_sizes() == nullptr) {
      return Bad("tensor piece lacks chunk_offsets or chunk_sizes");
    }
    h->chunk_offsets = ReadLongs(p.chunk_offsets());
    h->chunk_sizes = ReadLongs(p.chunk_sizes());
    if (h->chunk_offsets.size() != h->chunk_sizes.size()) {
      return Bad(
          "chunk_offsets has rank " + std::to_string(h->chunk_offsets.size()) +
          " but chunk_sizes has rank " + std::to_string(h->chunk_sizes.size()));
    }
  } else if (kind == static_cast<uint8_t>(ItemKind::kBytes)) {
    h->kind = ItemKind::kBytes;
    h->dtype = DType::kUInt8;
    if (p.chunk_offsets() != nullptr || p.chunk_sizes() != nullptr) {
      return Bad("bytes piece has chunk_offsets or chunk_sizes");
    }
  } else {
    return Bad("unknown item kind " + std::to_string(kind));
  }
  return Status::OK();
}

// Checks that piece h.piece of h.num_pieces, bytes [byte_offset,
// +byte_length), is of the length the metadata expects and lies in its
// chunk.
Status CheckPieceRange(const PieceHeader& h,
                       std::optional<uint64_t> expected_length) {
  if (expected_length && h.byte_length != *expected_length) {
    return Bad("the piece's header does not match the metadata (byte_length " +
               std::to_string(h.byte_length) + ", expected " +
               std::to_string(*expected_length) + ")");
  }
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
  return Status::OK();
}

// Checks that a piece of format `version` names the codec it needs, if
// any, and its plane sizes.
Status CheckCodec(const fb::ChunkPiece& p, uint16_t version) {
  const bool compressed = version == kCompressedPieceFormatVersion;
  if (compressed != (p.codec() != fb::PieceCodec::None) ||
      compressed != (p.plane_bytes() != nullptr)) {
    return Bad("format_version " + std::to_string(version) + " with codec " +
               std::to_string(static_cast<int>(p.codec())) +
               (p.plane_bytes() != nullptr ? " and" : " and no") +
               " plane sizes");
  }
  if (compressed && p.codec() != fb::PieceCodec::BytePlaneZstd) {
    return Bad("unknown codec " + std::to_string(static_cast<int>(p.codec())));
  }
  return Status::OK();
}

// Decodes the stored bytes of compressed piece `p` (out->data, verified)
// into `bytes` and points `out` at them, once they match the payload's
// XXH3 (seeded with `seed`).
Status DecodePlanes(const fb::ChunkPiece& p, uint64_t seed,
                    std::vector<uint8_t>& bytes, codec::PlaneDecoder& decoder,
                    DecodedPiece* out) {
  const PieceHeader& h = out->header;
  const size_t elem = PlaneElement(h.kind, h.dtype);
  const auto* sizes = p.plane_bytes();
  const uint32_t planes = ReadVectorLength(sizes);
  if (planes != elem) {
    return Bad(std::to_string(planes) + " planes for " + std::to_string(elem) +
               "-byte elements");
  }
  if (h.byte_length % elem != 0) {
    return Bad("byte_length " + std::to_string(h.byte_length) +
               " is not whole " + std::to_string(elem) + "-byte elements");
  }
  // Within what a writer compresses, so a forged byte_length can't make
  // the decoding take time or memory out of proportion to the piece.
  if (h.byte_length > FLATBUFFERS_MAX_BUFFER_SIZE ||
      h.byte_length > out->stored_size * kMaxCompressionRatio) {
    return Bad("byte_length " + std::to_string(h.byte_length) + " is over " +
               std::to_string(kMaxCompressionRatio) + " times the " +
               std::to_string(out->stored_size) + " bytes stored for it");
  }
  uint32_t plane_sizes[codec::kMaxPlanes];
  std::memcpy(plane_sizes, VectorElements(sizes), planes * sizeof(uint32_t));
  for (uint32_t k = 0; k < planes; ++k) {
    plane_sizes[k] = flatbuffers::EndianScalar(plane_sizes[k]);
  }
  const size_t length = static_cast<size_t>(h.byte_length);
  if (bytes.size() < length) bytes.resize(length);
  Status decoded = decoder.Decode(
      std::string_view(reinterpret_cast<const char*>(out->data), out->size),
      plane_sizes, planes, bytes.data(), length);
  if (!decoded.ok()) {
    return decoded.IsCorruption() ? Bad(decoded.message()) : decoded;
  }
  const uint64_t payload = Xxh3(bytes.data(), length, seed);
  if (payload != p.payload_xxh3()) {
    return Bad("decoded payload checksum mismatch: stored XXH3 " +
               Hex64(p.payload_xxh3()) + ", computed " + Hex64(payload));
  }
  out->data = bytes.data();
  out->size = length;
  return Status::OK();
}

}  // namespace

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
Result<DecodedPiece> DecodePiece(std::string_view value, std::string_view key,
                                 PieceDecodeBuffer* buffer,
                                 std::optional<uint64_t> expected_length) {
  ROCKSDCP_ASSIGN_OR_RETURN(const fb::ChunkPiece* root,
                            VerifiedRootInPlace<fb::ChunkPiece>(
                                value, kPieceIdentifier, "chunk piece"));
  const fb::ChunkPiece& p = *root;

  const uint16_t version = p.format_version();
  if (version != kPieceFormatVersion && version != kUnboundPieceFormatVersion &&
      version != kCompressedPieceFormatVersion) {
    return Bad("unsupported piece format_version " + std::to_string(version));
  }

  DecodedPiece out;
  PieceHeader& h = out.header;
  ROCKSDCP_RETURN_IF_ERROR(DecodeKind(p, &h));
  h.piece = p.piece();
  h.num_pieces = p.num_pieces();
  h.byte_offset = p.byte_offset();
  h.byte_length = p.byte_length();
  ROCKSDCP_RETURN_IF_ERROR(CheckPieceRange(h, expected_length));
  ROCKSDCP_RETURN_IF_ERROR(CheckCodec(p, version));

  const ByteVector* data = p.data();
  if (data == nullptr) return Bad("no data");
  const uint32_t data_size = ReadVectorLength(data);
  const bool compressed = version == kCompressedPieceFormatVersion;
  if (!compressed && data_size != h.byte_length) {
    return Bad("data holds " + std::to_string(data_size) +
               " bytes but byte_length is " + std::to_string(h.byte_length));
  }
  out.data = VectorElements(data);
  out.size = data_size;
  out.stored_size = data_size;
  out.xxh3 = p.xxh3();
  out.format_version = version;
  const bool bound = version != kUnboundPieceFormatVersion;
  const uint64_t seed = bound ? Xxh3(key) : 0;
  const uint64_t actual = Xxh3(out.data, static_cast<size_t>(out.size), seed);
  if (actual != out.xxh3) {
    return Bad("checksum mismatch: stored XXH3 " + Hex64(out.xxh3) +
               ", computed " + Hex64(actual) +
               (bound ? " (the piece's data is damaged, or the piece was "
                        "written for another key)"
                      : ""));
  }
  if (!compressed) return out;

  // The stored bytes are the writer's; now what they decode to.
  PieceDecodeBuffer::Rep& r = *buffer->rep_;
  ROCKSDCP_RETURN_IF_ERROR(DecodePlanes(p, seed, r.bytes, r.decoder, &out));
  return out;
}

}  // namespace rocksdcp::format
