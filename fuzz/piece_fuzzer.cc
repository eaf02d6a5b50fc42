// Fuzzes chunk-piece decoding (src/format/piece_codec): every item key of a
// checkpoint column family holds one ChunkPiece, read in place from
// RocksDB's block.
//
// Decodes each input where libFuzzer puts it and at a misaligned address;
// the two must agree. For an accepted piece it then does what a reader
// does (reads every header field and data byte and checks the XXH3 and
// byte range), and re-encodes it: the encoding must decode to the same
// piece and be a fixed point. A compressed piece is also compressed again,
// and decoded with the length a reader's metadata would give, and with
// another, which must be refused.

#include <cstring>
#include <string>
#include <vector>

#include "format/checksum.h"
#include "format/piece_codec.h"
#include "fuzz_util.h"

namespace rocksdcp::fuzz {
namespace {

bool SameHeader(const format::PieceHeader& a, const format::PieceHeader& b) {
  return a.kind == b.kind && a.dtype == b.dtype &&
         a.chunk_offsets == b.chunk_offsets && a.chunk_sizes == b.chunk_sizes &&
         a.piece == b.piece && a.num_pieces == b.num_pieces &&
         a.byte_offset == b.byte_offset && a.byte_length == b.byte_length;
}

std::string_view DataOf(const format::DecodedPiece& p) {
  return std::string_view(reinterpret_cast<const char*>(p.data),
                          static_cast<size_t>(p.size));
}

// The stored XXH3 is left out: an input of format version 1 (seed 0) comes
// back as version 2 (seeded with the key), a compressed one (version 3)
// as version 2, and each decode verified its own.
bool SamePiece(const format::DecodedPiece& a, const format::DecodedPiece& b) {
  return SameHeader(a.header, b.header) && DataOf(a) == DataOf(b);
}

// Every input is read as the piece of this key (make_seeds.cc writes its
// seeds for it).
constexpr char kKey[] = "fuzz#00000000";

// What a reader relies on once DecodePiece accepted a piece.
void CheckAccepted(const format::DecodedPiece& p) {
  const format::PieceHeader& h = p.header;
  FUZZ_CHECK(h.piece < h.num_pieces);
  FUZZ_CHECK(p.size == h.byte_length);
  // A reader copies the data out: every byte must be readable (ASan).
  std::vector<uint8_t> copy(p.size);
  if (!copy.empty()) std::memcpy(copy.data(), p.data, copy.size());
  // The XXH3 covers the stored bytes: for an uncompressed piece, the data.
  if (p.format_version != format::kCompressedPieceFormatVersion) {
    const uint64_t seed = p.format_version == format::kPieceFormatVersion
                              ? format::Xxh3(std::string_view(kKey))
                              : 0;
    FUZZ_CHECK(p.stored_size == p.size);
    FUZZ_CHECK(format::Xxh3(copy.data(), copy.size(), seed) == p.xxh3);
  }
  if (h.kind == format::ItemKind::kTensor) {
    FUZZ_CHECK(h.chunk_offsets.size() == h.chunk_sizes.size());
    // The piece lies within its chunk, without overflow.
    unsigned __int128 chunk_bytes = DTypeSize(h.dtype);
    for (size_t d = 0; d < h.chunk_sizes.size(); ++d) {
      FUZZ_CHECK(h.chunk_offsets[d] >= 0 && h.chunk_sizes[d] >= 0);
      chunk_bytes *= static_cast<uint64_t>(h.chunk_sizes[d]);
      if (chunk_bytes > UINT64_MAX) chunk_bytes = UINT64_MAX;  // Saturate.
    }
    FUZZ_CHECK(static_cast<unsigned __int128>(h.byte_offset) + h.byte_length <=
               chunk_bytes);
  } else {
    FUZZ_CHECK(h.chunk_offsets.empty() && h.chunk_sizes.empty());
  }
}

// Compressed pieces decode into a buffer; the round trip holds three
// decoded pieces at once (the input aligned, misaligned, re-encoded), so
// each decode takes the next of three buffers.
Result<format::DecodedPiece> Decode(std::string_view value) {
  static format::PieceDecodeBuffer buffers[3];
  static size_t next = 0;
  format::PieceDecodeBuffer& buffer = buffers[next];
  next = (next + 1) % 3;
  return format::DecodePiece(value, kKey, &buffer);
}

std::string Reencode(const format::DecodedPiece& p) {
  format::PieceEncoder encoder;
  return std::string(encoder.Encode(p.header, kKey, [&p](uint8_t* out) {
    if (p.size != 0) std::memcpy(out, p.data, p.size);
  }));
}

// A compressed piece compressed again decodes to the same piece, also with
// the length a reader's metadata gives, and is refused with another.
void CheckCompressedRoundTrip(const format::DecodedPiece& p) {
  if (p.format_version != format::kCompressedPieceFormatVersion) return;
  format::PieceEncoder encoder{format::PieceCompression{}};
  const std::string value(encoder.Encode(p.header, kKey, [&p](uint8_t* out) {
    if (p.size != 0) std::memcpy(out, p.data, p.size);
  }));
  static format::PieceDecodeBuffer buffer;
  auto again = format::DecodePiece(value, kKey, &buffer, p.header.byte_length);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(SamePiece(*again, p));
  FUZZ_CHECK(
      !format::DecodePiece(value, kKey, &buffer, p.header.byte_length + 1)
           .ok());
}

}  // namespace
}  // namespace rocksdcp::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rocksdcp;
  fuzz::CheckRoundTrip<format::DecodedPiece>(
      fuzz::AsChars(data, size), fuzz::Decode, fuzz::Reencode, fuzz::SamePiece,
      [](const format::DecodedPiece& p) {
        fuzz::CheckAccepted(p);
        fuzz::CheckCompressedRoundTrip(p);
      });
  return 0;
}
