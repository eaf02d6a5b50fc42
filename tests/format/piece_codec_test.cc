#include "format/piece_codec.h"

#include <flatbuffers/flatbuffers.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <xxhash.h>
#include <zstd.h>

#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "codec/plane_codec.h"
#include "format/checksum.h"
#include "schema/checkpoint_generated.h"
#include "test_util.h"
#include "weights.h"

namespace rocksdcp::format {
namespace {

using ::rocksdcp::testing::StatusIs;
using ::testing::HasSubstr;

// Deterministic, non-repeating-looking payload bytes.
std::string Payload(size_t n) {
  std::string s(n, '\0');
  uint32_t x = 12345;
  for (char& c : s) {
    x = x * 1103515245 + 12345;
    c = static_cast<char>(x >> 16);
  }
  return s;
}

std::string_view DataOf(const DecodedPiece& p) {
  return std::string_view(reinterpret_cast<const char*>(p.data),
                          static_cast<size_t>(p.size));
}

// Piece 1 of 3 of a 2x3 float32 chunk at [4, 0]: bytes [8, 16) of its 24.
PieceHeader TensorHeader() {
  PieceHeader h;
  h.kind = ItemKind::kTensor;
  h.dtype = DType::kFloat32;
  h.chunk_offsets = {4, 0};
  h.chunk_sizes = {2, 3};
  h.piece = 1;
  h.num_pieces = 3;
  h.byte_offset = 8;
  h.byte_length = 8;
  return h;
}

PieceHeader BytesHeader(uint64_t length) {
  PieceHeader h;
  h.kind = ItemKind::kBytes;
  h.byte_length = length;
  return h;
}

// The key every piece of these tests is written for and read under.
constexpr char kKey[] = "w@0#00000000";

// Compressed pieces decode into it.
PieceDecodeBuffer decode_buffer;

Result<DecodedPiece> Decode(std::string_view value) {
  return DecodePiece(value, kKey, &decode_buffer);
}

class PieceCodecTest : public ::testing::Test {
 protected:
  // Encodes `payload` under `header` (whose byte_length must match) and
  // returns a copy of the value.
  std::string Encode(const PieceHeader& header, std::string_view payload) {
    EXPECT_EQ(header.byte_length, payload.size());
    return std::string(encoder_.Encode(header, kKey, [&](uint8_t* out) {
      if (!payload.empty()) std::memcpy(out, payload.data(), payload.size());
    }));
  }

  static void ExpectHeadersEqual(const PieceHeader& got,
                                 const PieceHeader& want) {
    EXPECT_EQ(got.kind, want.kind);
    EXPECT_EQ(got.dtype, want.dtype);
    EXPECT_EQ(got.chunk_offsets, want.chunk_offsets);
    EXPECT_EQ(got.chunk_sizes, want.chunk_sizes);
    EXPECT_EQ(got.piece, want.piece);
    EXPECT_EQ(got.num_pieces, want.num_pieces);
    EXPECT_EQ(got.byte_offset, want.byte_offset);
    EXPECT_EQ(got.byte_length, want.byte_length);
  }

  PieceEncoder encoder_;
};

TEST_F(PieceCodecTest, RoundTripsTensorPiece) {
  const std::string payload = Payload(8);
  const std::string value = Encode(TensorHeader(), payload);
  ASSERT_OK_AND_ASSIGN(DecodedPiece piece, Decode(value));
  ExpectHeadersEqual(piece.header, TensorHeader());
  EXPECT_EQ(DataOf(piece), payload);
  // Seeded with the key's own XXH3 (format version 2).
  EXPECT_EQ(piece.xxh3, Xxh3(payload.data(), payload.size(), Xxh3(kKey)));
}

// A piece moved under another key (as a forged or buggy store could swap two
// items' pieces of one size, each with its checksum intact) fails to verify.
TEST_F(PieceCodecTest, APieceVerifiesOnlyUnderItsOwnKey) {
  const std::string value = Encode(TensorHeader(), Payload(8));
  ASSERT_OK(DecodePiece(value, kKey, &decode_buffer));
  EXPECT_THAT(DecodePiece(value, "b@0#00000000", &decode_buffer),
              StatusIs(StatusCode::kCorruption,
                       HasSubstr("or the piece was written for another key")));
  EXPECT_THAT(
      DecodePiece(value, "w@0#00000001", &decode_buffer),
      StatusIs(StatusCode::kCorruption, HasSubstr("checksum mismatch")));
}

TEST_F(PieceCodecTest, DataPointsIntoTheValue) {
  const std::string value = Encode(TensorHeader(), Payload(8));
  ASSERT_OK_AND_ASSIGN(DecodedPiece piece, Decode(value));
  EXPECT_GE(reinterpret_cast<const char*>(piece.data), value.data());
  EXPECT_LE(reinterpret_cast<const char*>(piece.data) + piece.size,
            value.data() + value.size());
}

TEST_F(PieceCodecTest, RoundTripsBytesPieceWithoutGeometry) {
  PieceHeader header = BytesHeader(13);
  header.piece = 2;
  header.num_pieces = 5;
  header.byte_offset = 26;
  // Ignored for byte items: neither is written.
  header.dtype = DType::kFloat64;
  header.chunk_offsets = {1};
  header.chunk_sizes = {1};
  const std::string payload = Payload(13);
  const std::string value = Encode(header, payload);
  ASSERT_OK_AND_ASSIGN(DecodedPiece piece, Decode(value));
  EXPECT_EQ(piece.header.kind, ItemKind::kBytes);
  EXPECT_EQ(piece.header.dtype, DType::kUInt8);
  EXPECT_TRUE(piece.header.chunk_offsets.empty());
  EXPECT_TRUE(piece.header.chunk_sizes.empty());
  EXPECT_EQ(piece.header.piece, 2u);
  EXPECT_EQ(piece.header.num_pieces, 5u);
  EXPECT_EQ(piece.header.byte_offset, 26u);
  EXPECT_EQ(DataOf(piece), payload);
}

TEST_F(PieceCodecTest, RoundTripsZeroDimTensor) {
  PieceHeader header;
  header.dtype = DType::kFloat64;
  header.byte_length = 8;
  const std::string payload = Payload(8);
  const std::string value = Encode(header, payload);
  ASSERT_OK_AND_ASSIGN(DecodedPiece piece, Decode(value));
  ExpectHeadersEqual(piece.header, header);
  EXPECT_EQ(DataOf(piece), payload);
}

TEST_F(PieceCodecTest, RoundTripsEmptyPieces) {
  PieceHeader empty_tensor;
  empty_tensor.chunk_offsets = {0, 0};
  empty_tensor.chunk_sizes = {0, 5};
  const std::string tensor_value = Encode(empty_tensor, "");
  ASSERT_OK_AND_ASSIGN(DecodedPiece tensor, Decode(tensor_value));
  ExpectHeadersEqual(tensor.header, empty_tensor);
  EXPECT_EQ(tensor.size, 0u);

  const std::string bytes_value = Encode(BytesHeader(0), "");
  ASSERT_OK_AND_ASSIGN(DecodedPiece bytes, Decode(bytes_value));
  EXPECT_EQ(bytes.size, 0u);
  EXPECT_EQ(bytes.xxh3, Xxh3("", 0, Xxh3(kKey)));
}

TEST_F(PieceCodecTest, RoundTripsLargePieceAfterSmallOnes) {
  ASSERT_OK(Decode(Encode(BytesHeader(16), Payload(16))));
  const std::string payload = Payload(8 << 20);
  const std::string value = Encode(BytesHeader(payload.size()), payload);
  ASSERT_OK_AND_ASSIGN(DecodedPiece piece, Decode(value));
  EXPECT_EQ(DataOf(piece), payload);
}

TEST_F(PieceCodecTest, ReusesItsBufferForSmallerPieces) {
  // The builder fills its buffer from the end, so a value built in the
  // same buffer ends at the same address.
  const std::string_view big =
      encoder_.Encode(BytesHeader(1 << 20), kKey,
                      [](uint8_t* p) { std::memset(p, 1, 1 << 20); });
  const char* big_end = big.data() + big.size();
  const std::string_view small = encoder_.Encode(
      BytesHeader(4), kKey, [](uint8_t* p) { std::memset(p, 2, 4); });
  EXPECT_EQ(small.data() + small.size(), big_end);
  ASSERT_OK_AND_ASSIGN(DecodedPiece piece, Decode(small));
  EXPECT_EQ(DataOf(piece), std::string(4, '\2'));
}

TEST_F(PieceCodecTest, ChecksumCoversEveryPayloadByte) {
  const std::string payload = Payload(64);
  const std::string value = Encode(BytesHeader(payload.size()), payload);
  const size_t start = value.find(payload);
  ASSERT_NE(start, std::string::npos);
  for (size_t i = start; i < start + payload.size(); ++i) {
    std::string bad = value;
    bad[i] ^= 0x01;
    EXPECT_THAT(Decode(bad),
                StatusIs(StatusCode::kCorruption, HasSubstr("checksum")))
        << "byte " << i;
  }
}

// A flipped byte may land in padding or in a header field the checksum
// does not cover (those are cross-checked against the key and StorageInfo
// by the reader). Whatever it hits, decoding must not crash, and any
// payload it returns must be the one written.
TEST_F(PieceCodecTest, FlippedBytesNeverYieldWrongData) {
  const std::string payload = Payload(24);
  PieceHeader header = TensorHeader();
  header.byte_offset = 0;
  header.byte_length = payload.size();
  const std::string value = Encode(header, payload);
  int corrupt = 0;
  for (size_t i = 0; i < value.size(); ++i) {
    for (uint8_t mask : {0x01, 0x80, 0xff}) {
      std::string bad = value;
      bad[i] ^= static_cast<char>(mask);
      Result<DecodedPiece> piece = Decode(bad);
      if (piece.ok()) {
        EXPECT_EQ(DataOf(*piece), payload) << "byte " << i;
      } else {
        EXPECT_THAT(piece, StatusIs(StatusCode::kCorruption, ::testing::_));
        ++corrupt;
      }
    }
  }
  EXPECT_GT(corrupt, static_cast<int>(payload.size()));
}

TEST_F(PieceCodecTest, RejectsEveryTruncation) {
  // A tensor piece ends in its chunk_offsets, written first, so its last
  // byte is never padding and every prefix is missing something.
  const std::string value = Encode(TensorHeader(), Payload(8));
  for (size_t n = 0; n < value.size(); ++n) {
    EXPECT_THAT(Decode(value.substr(0, n)),
                StatusIs(StatusCode::kCorruption, ::testing::_))
        << "prefix of " << n << " bytes";
  }
}

TEST_F(PieceCodecTest, RejectsWrongIdentifier) {
  std::string value = Encode(TensorHeader(), Payload(8));
  value.replace(4, 4, "RDCM");
  EXPECT_THAT(Decode(value),
              StatusIs(StatusCode::kCorruption, HasSubstr("identifier")));
}

TEST_F(PieceCodecTest, RejectsGarbage) {
  EXPECT_THAT(Decode(""), StatusIs(StatusCode::kCorruption, ::testing::_));
  EXPECT_THAT(Decode("RDCP"), StatusIs(StatusCode::kCorruption, ::testing::_));
  EXPECT_THAT(Decode(std::string("\xff\xff\xff\x7fRDCP\0\0\0\0", 12)),
              StatusIs(StatusCode::kCorruption, HasSubstr("verification")));
}

// ---- Each semantic check, on a hand-built ChunkPiece. ----

// The fields of a ChunkPiece table, defaulting to a valid tensor piece of
// format version 1: written by earlier rocksdcp, its XXH3 unseeded and bound
// to no key, and still read (under any key).
struct RawPiece {
  uint16_t format_version = 1;
  uint8_t kind = 0;
  uint8_t dtype = static_cast<uint8_t>(DType::kInt16);
  std::optional<std::vector<int64_t>> chunk_offsets = std::vector<int64_t>{0};
  std::optional<std::vector<int64_t>> chunk_sizes = std::vector<int64_t>{4};
  uint32_t piece = 0;
  uint32_t num_pieces = 1;
  uint64_t byte_offset = 0;
  std::optional<uint64_t> byte_length;  // Default: data's size.
  std::optional<uint64_t> xxh3;         // Default: data's XXH3.
  std::optional<std::string> data = std::string("01234567");
  // Compressed pieces (format version 3).
  uint8_t codec = 0;
  std::optional<std::vector<uint32_t>> plane_bytes;
  uint64_t payload_xxh3 = 0;

  std::string Build() const {
    flatbuffers::FlatBufferBuilder fbb;
    auto longs = [&](const std::optional<std::vector<int64_t>>& v) {
      return v ? fbb.CreateVector(*v)
               : flatbuffers::Offset<flatbuffers::Vector<int64_t>>();
    };
    const auto offsets = longs(chunk_offsets);
    const auto sizes = longs(chunk_sizes);
    flatbuffers::Offset<flatbuffers::Vector<uint8_t>> bytes;
    if (data) {
      bytes = fbb.CreateVector(reinterpret_cast<const uint8_t*>(data->data()),
                               data->size());
    }
    const std::string d = data.value_or("");
    flatbuffers::Offset<flatbuffers::Vector<uint32_t>> planes;
    if (plane_bytes) planes = fbb.CreateVector(*plane_bytes);
    fbb.Finish(
        fb::CreateChunkPiece(
            fbb, format_version, static_cast<fb::ItemKind>(kind),
            static_cast<fb::DType>(dtype), offsets, sizes, piece, num_pieces,
            byte_offset, byte_length.value_or(d.size()), xxh3.value_or(Xxh3(d)),
            bytes, static_cast<fb::PieceCodec>(codec), planes, payload_xxh3),
        kPieceIdentifier);
    return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()),
                       fbb.GetSize());
  }
};

struct BadPieceCase {
  const char* name;
  std::function<void(RawPiece&)> mutate;
  const char* message;
};

class PieceCodecRejectTest : public ::testing::TestWithParam<BadPieceCase> {};

TEST_P(PieceCodecRejectTest, ReturnsCorruptionNamingTheCheck) {
  RawPiece raw;
  ASSERT_OK(Decode(raw.Build()));  // The unmutated piece is valid.
  GetParam().mutate(raw);
  EXPECT_THAT(Decode(raw.Build()),
              StatusIs(StatusCode::kCorruption, HasSubstr(GetParam().message)));
}

TEST(PieceCodecCompatTest, VersionOnePiecesStillDecodeUnderAnyKey) {
  RawPiece v1;  // Format version 1, XXH3 with seed 0.
  ASSERT_OK_AND_ASSIGN(DecodedPiece piece,
                       DecodePiece(v1.Build(), "any#00000000", &decode_buffer));
  EXPECT_EQ(piece.xxh3, Xxh3(std::string("01234567")));
  EXPECT_EQ(piece.format_version, kUnboundPieceFormatVersion);
  RawPiece v2 = v1;
  v2.format_version = 2;  // Now bound to a key, and to none of these.
  EXPECT_THAT(
      DecodePiece(v2.Build(), "any#00000000", &decode_buffer),
      StatusIs(StatusCode::kCorruption, HasSubstr("checksum mismatch")));
}

INSTANTIATE_TEST_SUITE_P(
    Checks, PieceCodecRejectTest,
    ::testing::Values(
        BadPieceCase{"NewerFormat", [](RawPiece& p) { p.format_version = 4; },
                     "unsupported piece format_version 4"},
        BadPieceCase{"CodecInAnUncompressedPiece",
                     [](RawPiece& p) { p.codec = 1; },
                     "format_version 1 with codec 1"},
        BadPieceCase{"PlaneSizesInAnUncompressedPiece",
                     [](RawPiece& p) {
                       p.plane_bytes = std::vector<uint32_t>{4, 4};
                     },
                     "format_version 1 with codec 0 and plane sizes"},
        BadPieceCase{"UnknownKind", [](RawPiece& p) { p.kind = 2; },
                     "unknown item kind 2"},
        BadPieceCase{"UnknownDtype", [](RawPiece& p) { p.dtype = 0; },
                     "unknown dtype 0"},
        BadPieceCase{"DtypePastTheEnd",
                     [](RawPiece& p) { p.dtype = kMaxDType + 1; },
                     "unknown dtype"},
        BadPieceCase{"NoChunkOffsets",
                     [](RawPiece& p) { p.chunk_offsets.reset(); },
                     "lacks chunk_offsets"},
        BadPieceCase{"NoChunkSizes", [](RawPiece& p) { p.chunk_sizes.reset(); },
                     "lacks chunk_offsets or chunk_sizes"},
        BadPieceCase{"RankMismatch",
                     [](RawPiece& p) {
                       p.chunk_sizes = std::vector<int64_t>{4, 1};
                     },
                     "rank"},
        BadPieceCase{
            "NegativeOffset",
            [](RawPiece& p) { p.chunk_offsets = std::vector<int64_t>{-1}; },
            "negative"},
        BadPieceCase{
            "NegativeSize",
            [](RawPiece& p) { p.chunk_sizes = std::vector<int64_t>{-4}; },
            "negative"},
        BadPieceCase{"ChunkBytesOverflow",
                     [](RawPiece& p) {
                       p.chunk_offsets = std::vector<int64_t>{0, 0};
                       p.chunk_sizes = std::vector<int64_t>{INT64_MAX, 4};
                     },
                     "overflows"},
        BadPieceCase{"BytesOutsideChunk",
                     [](RawPiece& p) { p.byte_offset = 4; },
                     "outside the chunk"},
        BadPieceCase{"ByteRangeOverflow",
                     [](RawPiece& p) { p.byte_offset = UINT64_MAX; },
                     "overflows"},
        BadPieceCase{"BytesItemWithGeometry", [](RawPiece& p) { p.kind = 1; },
                     "bytes piece has chunk_offsets"},
        BadPieceCase{"PieceNotBelowCount", [](RawPiece& p) { p.piece = 1; },
                     "piece 1 is not below num_pieces 1"},
        BadPieceCase{"ZeroPieces", [](RawPiece& p) { p.num_pieces = 0; },
                     "num_pieces 0"},
        BadPieceCase{"NoData", [](RawPiece& p) { p.data.reset(); }, "no data"},
        BadPieceCase{"LengthMismatch", [](RawPiece& p) { p.byte_length = 6; },
                     "byte_length is 6"},
        BadPieceCase{"ChecksumMismatch", [](RawPiece& p) { p.xxh3 = 42; },
                     "checksum mismatch"}),
    [](const ::testing::TestParamInfo<BadPieceCase>& info) {
      return std::string(info.param.name);
    });

// ---- Compressed pieces (format version 3) ----

// A 64x64 bf16 chunk of trained-looking weights, in one piece.
PieceHeader Bf16Header() {
  PieceHeader h;
  h.kind = ItemKind::kTensor;
  h.dtype = DType::kBFloat16;
  h.chunk_offsets = {0, 0};
  h.chunk_sizes = {64, 64};
  h.byte_length = 64 * 64 * 2;
  return h;
}

std::string Bf16Payload() {
  return testing::WeightBytes(testing::WeightKind::kWeight, DType::kBFloat16,
                              11, 64 * 64);
}

class CompressedPieceTest : public PieceCodecTest {
 protected:
  std::string EncodeCompressed(const PieceHeader& header,
                               std::string_view payload,
                               Hash128* payload_hash = nullptr) {
    return std::string(compressing_.Encode(
        header, kKey,
        [&](uint8_t* out) {
          if (!payload.empty())
            std::memcpy(out, payload.data(), payload.size());
        },
        payload_hash));
  }

  PieceEncoder compressing_{PieceCompression{}};
};

TEST_F(CompressedPieceTest, RoundTripsWeightsSmallerThanTheyAre) {
  const std::string payload = Bf16Payload();
  const std::string plain = Encode(Bf16Header(), payload);
  const std::string value = EncodeCompressed(Bf16Header(), payload);
  EXPECT_LT(value.size(), plain.size() * 8 / 10);
  ASSERT_OK_AND_ASSIGN(DecodedPiece piece, Decode(value));
  EXPECT_EQ(piece.format_version, kCompressedPieceFormatVersion);
  ExpectHeadersEqual(piece.header, Bf16Header());
  EXPECT_EQ(DataOf(piece), payload);
  EXPECT_LT(piece.stored_size, piece.size);
  // Decoded into the buffer, not pointing into the value.
  EXPECT_FALSE(reinterpret_cast<const char*>(piece.data) >= value.data() &&
               reinterpret_cast<const char*>(piece.data) <
                   value.data() + value.size());
}

TEST_F(CompressedPieceTest,
       AClaimOtherThanTheMetadatasIsRefusedBeforeDecoding) {
  const std::string value = EncodeCompressed(Bf16Header(), Bf16Payload());
  const uint64_t length = Bf16Header().byte_length;
  ASSERT_OK(DecodePiece(value, kKey, &decode_buffer, length));
  // The metadata the reader holds says otherwise: the piece is not decoded
  // (its own checks would pass), whichever way the claims differ.
  for (uint64_t expected : {length / 2, length * 2}) {
    EXPECT_THAT(DecodePiece(value, kKey, &decode_buffer, expected),
                StatusIs(StatusCode::kCorruption,
                         HasSubstr("header does not match the metadata "
                                   "(byte_length " +
                                   std::to_string(length) + ", expected " +
                                   std::to_string(expected) + ")")));
  }
}

TEST_F(CompressedPieceTest, IncompressiblePiecesStayUncompressed) {
  PieceHeader header = Bf16Header();
  const std::string payload = Payload(header.byte_length);
  const std::string value = EncodeCompressed(header, payload);
  EXPECT_EQ(value, Encode(header, payload));  // Byte for byte, version 2.
  ASSERT_OK_AND_ASSIGN(DecodedPiece piece, Decode(value));
  EXPECT_EQ(piece.format_version, kPieceFormatVersion);
  // Too small to try: a 16-byte bytes piece.
  const std::string small(16, 'a');
  EXPECT_EQ(EncodeCompressed(BytesHeader(16), small),
            Encode(BytesHeader(16), small));
}

TEST_F(CompressedPieceTest, PayloadHashIsThatOfTheDecodedBytes) {
  Hash128 compressed, plain;
  const std::string payload = Bf16Payload();
  EncodeCompressed(Bf16Header(), payload, &compressed);
  encoder_.Encode(
      Bf16Header(), kKey,
      [&](uint8_t* out) { std::memcpy(out, payload.data(), payload.size()); },
      &plain);
  EXPECT_EQ(compressed, plain);
  EXPECT_EQ(compressed, Xxh3_128(payload.data(), payload.size()));
}

TEST_F(CompressedPieceTest, VerifiesOnlyUnderItsOwnKey) {
  const std::string value = EncodeCompressed(Bf16Header(), Bf16Payload());
  EXPECT_THAT(DecodePiece(value, "b@0#00000000", &decode_buffer),
              StatusIs(StatusCode::kCorruption,
                       HasSubstr("or the piece was written for another key")));
}

TEST_F(CompressedPieceTest, EveryFlippedByteIsCaughtOrHarmless) {
  const std::string payload = Bf16Payload();
  const std::string value = EncodeCompressed(Bf16Header(), payload);
  for (size_t i = 0; i < value.size(); ++i) {
    std::string bad = value;
    bad[i] ^= 0x20;
    Result<DecodedPiece> piece = Decode(bad);
    if (piece.ok()) {
      EXPECT_EQ(DataOf(*piece), payload) << "byte " << i;
    } else {
      EXPECT_THAT(piece, StatusIs(StatusCode::kCorruption, ::testing::_));
    }
  }
}

// A version 3 piece built by hand from the codec's own output, with both
// checksums right: each forgery below keeps them right, so only the check
// it targets can catch it.
RawPiece CompressedRawPiece() {
  const std::string payload = Bf16Payload();
  codec::PlaneEncoder planes(1);
  EXPECT_OK(planes.Encode(reinterpret_cast<const uint8_t*>(payload.data()),
                          payload.size(), 2));
  RawPiece p;
  p.format_version = kCompressedPieceFormatVersion;
  p.dtype = static_cast<uint8_t>(DType::kBFloat16);
  p.chunk_sizes = std::vector<int64_t>{64 * 64};
  p.byte_length = payload.size();
  p.data = std::string(planes.stored());
  p.xxh3 = Xxh3(p.data->data(), p.data->size(), Xxh3(kKey));
  p.codec = 1;
  p.plane_bytes = planes.plane_sizes();
  p.payload_xxh3 = Xxh3(payload.data(), payload.size(), Xxh3(kKey));
  return p;
}

TEST(ForgedCompressedPieceTest, TheUnforgedPieceDecodes) {
  ASSERT_OK_AND_ASSIGN(DecodedPiece piece,
                       Decode(CompressedRawPiece().Build()));
  EXPECT_EQ(DataOf(piece), Bf16Payload());
}

struct ForgedCase {
  const char* name;
  std::function<void(RawPiece&)> forge;
  const char* message;
};

class ForgedCompressedPieceRejectTest
    : public ::testing::TestWithParam<ForgedCase> {};

TEST_P(ForgedCompressedPieceRejectTest, ReturnsCorruptionNamingTheCheck) {
  RawPiece raw = CompressedRawPiece();
  GetParam().forge(raw);
  if (raw.data)
    raw.xxh3 =
        Xxh3(raw.data->data(), raw.data->size(), Xxh3(kKey));  // Still right.
  EXPECT_THAT(Decode(raw.Build()),
              StatusIs(StatusCode::kCorruption, HasSubstr(GetParam().message)));
}

INSTANTIATE_TEST_SUITE_P(
    Forgeries, ForgedCompressedPieceRejectTest,
    ::testing::Values(
        ForgedCase{"NoCodec", [](RawPiece& p) { p.codec = 0; },
                   "format_version 3 with codec 0"},
        ForgedCase{"UnknownCodec", [](RawPiece& p) { p.codec = 9; },
                   "unknown codec 9"},
        ForgedCase{"NoPlaneSizes", [](RawPiece& p) { p.plane_bytes.reset(); },
                   "and no plane sizes"},
        ForgedCase{"PlanesOfAnotherElementSize",
                   [](RawPiece& p) {
                     p.plane_bytes->push_back(0);
                     p.plane_bytes->push_back(0);
                   },
                   "4 planes for 2-byte elements"},
        ForgedCase{"PartElements",
                   [](RawPiece& p) {
                     p.chunk_sizes = std::vector<int64_t>{8193};
                     p.byte_length = 8193;
                   },
                   "byte_length 8193 is not whole 2-byte elements"},
        ForgedCase{"PlaneSizesThatDoNotAddUp",
                   [](RawPiece& p) { (*p.plane_bytes)[0] -= 1; }, "add up to"},
        ForgedCase{"ClaimsMoreThanTheRatioAllows",
                   [](RawPiece& p) {
                     // 10 stored bytes for 1 MiB: a decompression bomb.
                     p.chunk_sizes = std::vector<int64_t>{1 << 19};
                     p.byte_length = 1 << 20;
                     p.data = std::string(10, 'z');
                     p.plane_bytes = std::vector<uint32_t>{5, 5};
                   },
                   "byte_length 1048576 is over 32768 times the 10 bytes"},
        ForgedCase{"DecodedBytesOtherThanWritten",
                   [](RawPiece& p) { p.payload_xxh3 ^= 1; },
                   "decoded payload checksum mismatch"},
        ForgedCase{"AFrameDeclaringAnotherSize",
                   [](RawPiece& p) {
                     // Plane 1's frame, now for a plane twice as long.
                     const std::string twice(8192, '\1');
                     std::string frame(ZSTD_compressBound(twice.size()), '\0');
                     frame.resize(ZSTD_compress(frame.data(), frame.size(),
                                                twice.data(), twice.size(), 1));
                     const uint32_t plane0 = (*p.plane_bytes)[0];
                     p.data = p.data->substr(0, plane0) + frame;
                     (*p.plane_bytes)[1] = static_cast<uint32_t>(frame.size());
                   },
                   "plane 1 is not a zstd frame of 4096 bytes"}),
    [](const ::testing::TestParamInfo<ForgedCase>& info) {
      return std::string(info.param.name);
    });

// ---- Xxh3 ----

TEST(ChecksumTest, AgreesWithReferenceXxh3) {
  // The dispatching entry point must compute plain XXH3-64 with seed 0,
  // whatever SIMD path it picks, or stores would not move between machines.
  EXPECT_EQ(Xxh3("", 0), 0x2D06800538D394C2ull);
  const std::string data = Payload(1 << 16);
  for (size_t n : {1, 3, 16, 17, 128, 129, 240, 241, 1024, 1 << 16}) {
    EXPECT_EQ(Xxh3(data.data(), n), XXH3_64bits(data.data(), n))
        << n << " bytes";
  }
}

}  // namespace
}  // namespace rocksdcp::format
