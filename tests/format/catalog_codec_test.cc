#include "rocksdb/catalog_codec.h"

#include <flatbuffers/flatbuffers.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "format/metadata_codec.h"
#include "schema/checkpoint_generated.h"
#include "test_util.h"

namespace rocksdcp::format {
namespace {

using ::rocksdcp::testing::StatusIs;
using ::testing::HasSubstr;

std::string Bytes(const flatbuffers::FlatBufferBuilder& fbb) {
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()),
                     fbb.GetSize());
}

// Every field away from its default. The id is written first, so it ends
// the value; at 7 bytes plus its terminator it needs no padding, and every
// truncation cuts into it.
CheckpointInfo FullInfo() {
  CheckpointInfo info;
  info.id = "step-10";
  info.column_family = "step-10~3";
  info.state = CheckpointState::kCommitted;
  info.created_unix_micros = 1'700'000'000'123'456;
  info.bytes = uint64_t{1} << 40;
  info.items = 123'456'789'012;
  info.world_size = 4096;
  info.metadata_checksum = 0xfedcba9876543210;
  return info;
}

void ExpectInfoEqual(const CheckpointInfo& got, const CheckpointInfo& want) {
  EXPECT_EQ(got.id, want.id);
  EXPECT_EQ(got.column_family, want.column_family);
  EXPECT_EQ(got.state, want.state);
  EXPECT_EQ(got.created_unix_micros, want.created_unix_micros);
  EXPECT_EQ(got.bytes, want.bytes);
  EXPECT_EQ(got.items, want.items);
  EXPECT_EQ(got.world_size, want.world_size);
  EXPECT_EQ(got.metadata_checksum, want.metadata_checksum);
}

// A CatalogEntry with any field set or left out, for values the encoder
// would never write.
struct RawEntry {
  uint16_t format_version = 1;
  const char* id = "a";
  const char* column_family = "a";
  uint8_t state = static_cast<uint8_t>(fb::CheckpointState::Committed);

  std::string Build() const {
    flatbuffers::FlatBufferBuilder fbb;
    const auto id_offset = id ? fbb.CreateString(id) : 0;
    const auto cf_offset = column_family ? fbb.CreateString(column_family) : 0;
    fbb.Finish(fb::CreateCatalogEntry(fbb, format_version, id_offset, cf_offset,
                                      static_cast<fb::CheckpointState>(state)),
               kCatalogIdentifier);
    return Bytes(fbb);
  }
};

std::string RawStorageInfo(uint16_t format_version, uint8_t kind,
                           uint64_t length, uint32_t num_pieces,
                           uint64_t piece_bytes) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fb::CreateStorageInfo(fbb, format_version,
                                   static_cast<fb::ItemKind>(kind), length,
                                   num_pieces, piece_bytes),
             kStorageInfoIdentifier);
  return Bytes(fbb);
}

StorageInfo Info(ItemKind kind, uint64_t length, uint32_t num_pieces,
                 uint64_t piece_bytes) {
  StorageInfo info;
  info.kind = kind;
  info.length = length;
  info.num_pieces = num_pieces;
  info.piece_bytes = piece_bytes;
  return info;
}

// ---- CatalogEntry ----

TEST(CatalogCodecTest, RoundTripsEveryField) {
  ASSERT_OK_AND_ASSIGN(CheckpointInfo back,
                       DecodeCatalogEntry(EncodeCatalogEntry(FullInfo())));
  ExpectInfoEqual(back, FullInfo());
}

TEST(CatalogCodecTest, RoundTripsExtremeValues) {
  CheckpointInfo info = FullInfo();
  info.created_unix_micros = INT64_MIN;
  info.bytes = UINT64_MAX;
  info.items = 0;
  info.world_size = -1;
  info.metadata_checksum = UINT64_MAX;
  ASSERT_OK_AND_ASSIGN(CheckpointInfo back,
                       DecodeCatalogEntry(EncodeCatalogEntry(info)));
  ExpectInfoEqual(back, info);
}

TEST(CatalogCodecTest, RejectsEveryTruncation) {
  const std::string value = EncodeCatalogEntry(FullInfo());
  for (size_t n = 0; n < value.size(); ++n) {
    EXPECT_THAT(DecodeCatalogEntry(value.substr(0, n)),
                StatusIs(StatusCode::kCorruption, ::testing::_))
        << "prefix of " << n << " bytes";
  }
}

TEST(CatalogCodecTest, RejectsWrongIdentifier) {
  EXPECT_THAT(DecodeCatalogEntry(EncodeMetadata(Metadata{})),
              StatusIs(StatusCode::kCorruption, HasSubstr("identifier")));
  EXPECT_THAT(DecodeCatalogEntry(EncodeStorageInfo(StorageInfo{})),
              StatusIs(StatusCode::kCorruption, HasSubstr("identifier")));
}

TEST(CatalogCodecTest, AcceptsTheRawDefaults) {
  // Guards the cases below: each breaks exactly one thing.
  ASSERT_OK(DecodeCatalogEntry(RawEntry{}.Build()));
}

TEST(CatalogCodecTest, RejectsUnknownState) {
  for (uint8_t state : {0, 2, 255}) {
    RawEntry raw;
    raw.state = state;
    EXPECT_THAT(DecodeCatalogEntry(raw.Build()),
                StatusIs(StatusCode::kCorruption,
                         HasSubstr("unknown state " + std::to_string(state))));
  }
}

TEST(CatalogCodecTest, RejectsMissingIdOrColumnFamily) {
  for (const char* missing : {static_cast<const char*>(nullptr), ""}) {
    RawEntry no_id;
    no_id.id = missing;
    EXPECT_THAT(
        DecodeCatalogEntry(no_id.Build()),
        StatusIs(StatusCode::kCorruption, HasSubstr("no checkpoint id")));
    RawEntry no_cf;
    no_cf.column_family = missing;
    EXPECT_THAT(
        DecodeCatalogEntry(no_cf.Build()),
        StatusIs(StatusCode::kCorruption, HasSubstr("no column family")));
  }
}

TEST(CatalogCodecTest, RejectsOtherFormatVersions) {
  for (uint16_t version : {0, 3}) {
    RawEntry raw;
    raw.format_version = version;
    EXPECT_THAT(DecodeCatalogEntry(raw.Build()),
                StatusIs(StatusCode::kCorruption,
                         HasSubstr("unsupported format_version " +
                                   std::to_string(version))));
  }
}

// ---- StorageInfo ----

TEST(StorageInfoCodecTest, RoundTripsConsistentValues) {
  for (const StorageInfo& info : {
           Info(ItemKind::kTensor, 0, 1, 64),   // empty: still one piece
           Info(ItemKind::kTensor, 64, 1, 64),  // exactly one piece
           Info(ItemKind::kTensor, 65, 2, 64),  // a short last piece
           Info(ItemKind::kBytes, 10, 3, 4),
           Info(ItemKind::kBytes, uint64_t{1} << 40, 1 << 14, 64 << 20),
       }) {
    SCOPED_TRACE("length " + std::to_string(info.length));
    ASSERT_OK_AND_ASSIGN(StorageInfo back,
                         DecodeStorageInfo(EncodeStorageInfo(info)));
    EXPECT_EQ(back.kind, info.kind);
    EXPECT_EQ(back.length, info.length);
    EXPECT_EQ(back.num_pieces, info.num_pieces);
    EXPECT_EQ(back.piece_bytes, info.piece_bytes);
  }
}

// `value` with the vector of uint64 that field `field` of its root points
// to moved to the end, its elements 4 bytes off their 8-byte alignment in
// the value: FlatBuffers' verifier checks only the length field's 4-byte
// alignment, so a forged value may do this, and reading the elements in
// place is undefined behaviour (UBSan: "load of misaligned address"; found
// by catalog_fuzzer).
std::string MisalignU64Vector(std::string value, flatbuffers::voffset_t field) {
  const auto* table = flatbuffers::GetRoot<flatbuffers::Table>(value.data());
  const flatbuffers::voffset_t at = table->GetOptionalFieldOffset(field);
  EXPECT_NE(at, 0) << "field " << field << " is not set";
  const size_t field_pos =
      reinterpret_cast<const char*>(table) - value.data() + at;
  uint32_t old_offset;
  std::memcpy(&old_offset, value.data() + field_pos, 4);
  const size_t old_pos = field_pos + old_offset;
  uint32_t n;
  std::memcpy(&n, value.data() + old_pos, 4);
  const std::string vector = value.substr(old_pos, 4 + size_t{8} * n);
  value.resize((value.size() + 7) / 8 * 8, '\0');  // Elements at 4 mod 8.
  const uint32_t new_offset = static_cast<uint32_t>(value.size() - field_pos);
  value += vector;
  std::memcpy(value.data() + field_pos, &new_offset, 4);
  return value;
}

TEST(StorageInfoCodecTest, ReadsOffsetsAndSourceFilesOffTheirAlignment) {
  StorageInfo info = Info(ItemKind::kTensor, 16, 2, 8);
  info.format_version = kReferencingStorageInfoFormatVersion;
  info.piece_hashes = {{1, 2}, {3, 4}};
  info.sources = {"base"};
  info.piece_sources = {1, 0};
  info.piece_offsets = {0x1122334455667788, 0x99aabbccddeeff00};
  info.file_first_key_xxh3 = 5;
  info.source_file_first_key_xxh3 = {0x0123456789abcdef};
  std::string value = EncodeStorageInfo(info);
  value = MisalignU64Vector(value, fb::StorageInfo::VT_PIECE_OFFSETS);
  value =
      MisalignU64Vector(value, fb::StorageInfo::VT_SOURCE_FILE_FIRST_KEY_XXH3);
  ASSERT_OK_AND_ASSIGN(StorageInfo back, DecodeStorageInfo(value));
  EXPECT_EQ(back.piece_offsets, info.piece_offsets);
  EXPECT_EQ(back.source_file_first_key_xxh3, info.source_file_first_key_xxh3);
  EXPECT_EQ(back.piece_sources, info.piece_sources);
}

// Issue #38: a forged item of 2 GiB pieces made verify decode 2 GiB per
// piece, and a load take 4 GB.
TEST(StorageInfoCodecTest, RejectsPiecesLargerThanAnyWriterWrites) {
  ASSERT_OK(DecodeStorageInfo(EncodeStorageInfo(
      Info(ItemKind::kTensor, 3 * kMaxPieceBytes, 3, kMaxPieceBytes))));
  EXPECT_THAT(
      DecodeStorageInfo(EncodeStorageInfo(
          Info(ItemKind::kTensor, 4 * kMaxPieceBytes, 2, 2 * kMaxPieceBytes))),
      StatusIs(StatusCode::kCorruption,
               "storage info: piece_bytes is 2147483648, more than "
               "any writer writes (1073741824): it is forged or "
               "damaged"));
}

TEST(StorageInfoCodecTest, RoundTripsStagingFile) {
  StorageInfo info = Info(ItemKind::kTensor, 65, 2, 64);
  info.file = "staging/rank-3/000001.sst";
  ASSERT_OK_AND_ASSIGN(StorageInfo back,
                       DecodeStorageInfo(EncodeStorageInfo(info)));
  EXPECT_EQ(back.file, info.file);
  EXPECT_EQ(back.num_pieces, 2u);
}

TEST(StorageInfoCodecTest, LeavesOutAnEmptyFile) {
  // Committed metadata holds one StorageInfo per item; none carries a file.
  StorageInfo with_file = Info(ItemKind::kTensor, 65, 2, 64);
  with_file.file = "f";
  const StorageInfo without_file = Info(ItemKind::kTensor, 65, 2, 64);
  EXPECT_LT(EncodeStorageInfo(without_file).size(),
            EncodeStorageInfo(with_file).size());
  ASSERT_OK_AND_ASSIGN(StorageInfo back,
                       DecodeStorageInfo(EncodeStorageInfo(without_file)));
  EXPECT_EQ(back.file, "");
}

TEST(StorageInfoCodecTest, RejectsInconsistentPieceCount) {
  for (const StorageInfo& info : {
           Info(ItemKind::kTensor, 0, 0, 64),
           Info(ItemKind::kTensor, 65, 1, 64),
           Info(ItemKind::kTensor, 64, 2, 64),
           // 2^64 - 1 one-byte pieces: the count can't fit in 32 bits.
           Info(ItemKind::kBytes, UINT64_MAX, UINT32_MAX, 1),
       }) {
    SCOPED_TRACE("length " + std::to_string(info.length));
    EXPECT_THAT(DecodeStorageInfo(EncodeStorageInfo(info)),
                StatusIs(StatusCode::kCorruption, HasSubstr("num_pieces")));
  }
}

TEST(StorageInfoCodecTest, RejectsZeroPieceBytes) {
  EXPECT_THAT(
      DecodeStorageInfo(EncodeStorageInfo(Info(ItemKind::kTensor, 0, 1, 0))),
      StatusIs(StatusCode::kCorruption, HasSubstr("piece_bytes is 0")));
}

TEST(StorageInfoCodecTest, RejectsUnknownKindAndFormatVersion) {
  ASSERT_OK(DecodeStorageInfo(RawStorageInfo(1, 1, 8, 2, 4)));
  EXPECT_THAT(
      DecodeStorageInfo(RawStorageInfo(1, 2, 8, 2, 4)),
      StatusIs(StatusCode::kCorruption, HasSubstr("unknown item kind 2")));
  EXPECT_THAT(DecodeStorageInfo(RawStorageInfo(4, 1, 8, 2, 4)),
              StatusIs(StatusCode::kCorruption,
                       HasSubstr("unsupported format_version 4")));
  // Version 3 is an item with references, which needs their sources.
  EXPECT_THAT(DecodeStorageInfo(RawStorageInfo(3, 1, 8, 2, 4)),
              StatusIs(StatusCode::kCorruption,
                       HasSubstr("version 3 needs piece sources and hashes")));
}

// Version 1 (before pieces were bound to their keys) is still read, and
// says so; encoding writes version 2.
TEST(StorageInfoCodecTest, ReadsVersionOneAndWritesVersionTwo) {
  ASSERT_OK_AND_ASSIGN(StorageInfo old,
                       DecodeStorageInfo(RawStorageInfo(1, 1, 8, 2, 4)));
  EXPECT_EQ(old.format_version, 1);
  ASSERT_OK_AND_ASSIGN(StorageInfo now,
                       DecodeStorageInfo(EncodeStorageInfo(old)));
  EXPECT_EQ(now.format_version, kBoundStorageInfoFormatVersion);
  EXPECT_EQ(now.length, 8u);
}

TEST(StorageInfoCodecTest, RejectsEveryTruncation) {
  const std::string value = EncodeStorageInfo(Info(ItemKind::kBytes, 10, 3, 4));
  for (size_t n = 0; n < value.size(); ++n) {
    EXPECT_THAT(DecodeStorageInfo(value.substr(0, n)),
                StatusIs(StatusCode::kCorruption, ::testing::_))
        << "prefix of " << n << " bytes";
  }
}

TEST(StorageInfoCodecTest, RejectsWrongIdentifier) {
  EXPECT_THAT(DecodeStorageInfo(EncodeCatalogEntry(FullInfo())),
              StatusIs(StatusCode::kCorruption, HasSubstr("identifier")));
}

}  // namespace
}  // namespace rocksdcp::format
