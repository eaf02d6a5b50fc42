// DecodeMetadata's limits (issue #13, item 3): what a Metadata value may
// make a decoder build is counted before anything is built, against the
// bytes its checkpoint really holds and against the value's own size.

#include <flatbuffers/flatbuffers.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "format/metadata_codec.h"
#include "schema/checkpoint_generated.h"
#include "test_util.h"

namespace rocksdcp::format {
namespace {

using ::rocksdcp::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

// A 1-d tensor of `n` one-element chunks, each with its storage entry.
Metadata ManyChunks(int64_t n) {
  Metadata m;
  TensorStorageMetadata t;
  t.properties.dtype = DType::kFloat32;
  t.size = {n};
  for (int64_t i = 0; i < n; ++i) {
    t.chunks.push_back({{i}, {1}});
    m.storage_data[MetadataIndex("w", {i})] = "info";
  }
  m.state_dict_metadata["w"] = std::move(t);
  return m;
}

TEST(MetadataLimitsTest, ChunksMustFitInTheBytesTheCheckpointHolds) {
  constexpr int64_t kChunks = 1000;
  const std::string value = EncodeMetadata(ManyChunks(kChunks));
  // Each chunk has a piece of at least 32 bytes, plus 16 for its one
  // dimension's offset and size.
  const uint64_t needed =
      kChunks * (kMinStoredPieceBytes + kStoredBytesPerChunkDim);
  ASSERT_OK(DecodeMetadata(value, {.stored_bytes = needed}));
  EXPECT_THAT(
      DecodeMetadata(value, {.stored_bytes = needed - 1}),
      StatusIs(StatusCode::kCorruption,
               AllOf(HasSubstr("lists 1000 chunks and byte items and 1000 "
                               "storage entries"),
                     HasSubstr("at least " + std::to_string(needed) + " bytes"),
                     HasSubstr("holds only " + std::to_string(needed - 1)),
                     HasSubstr("forged or damaged"))));
}

TEST(MetadataLimitsTest, StorageEntriesMustFitToo) {
  Metadata m;
  for (int i = 0; i < 100; ++i) {
    m.storage_data[MetadataIndex("b" + std::to_string(i))] = "info";
  }
  const std::string value = EncodeMetadata(m);
  ASSERT_OK(
      DecodeMetadata(value, {.stored_bytes = 100 * kMinStoredPieceBytes}));
  EXPECT_THAT(
      DecodeMetadata(value, {.stored_bytes = 100 * kMinStoredPieceBytes - 1}),
      StatusIs(StatusCode::kCorruption, HasSubstr("100 storage entries")));
}

// One chunk table referenced `refs` times from the tensor's chunk vector:
// a few bytes a reference, each decoding to a chunk of its own.
std::string SharedChunks(uint32_t refs) {
  flatbuffers::FlatBufferBuilder fbb;
  const auto chunk = fb::CreateChunkStorageMetadata(
      fbb, fbb.CreateVector(std::vector<int64_t>{0}),
      fbb.CreateVector(std::vector<int64_t>{1}));
  const std::vector<flatbuffers::Offset<fb::ChunkStorageMetadata>> chunks(
      refs, chunk);
  const auto properties = fb::CreateTensorProperties(fbb, fb::DType::Float32);
  const auto tensor = fb::CreateTensorStorageMetadata(
      fbb, properties, fbb.CreateVector(std::vector<int64_t>{1}),
      fbb.CreateVector(chunks));
  const auto entry = fb::CreateStateDictEntry(
      fbb, fbb.CreateString("w"), fb::StorageMetadata::TensorStorageMetadata,
      tensor.Union());
  const auto entries = fbb.CreateVector(
      std::vector<flatbuffers::Offset<fb::StateDictEntry>>{entry});
  fbb.Finish(fb::CreateMetadata(fbb, 0, entries), kMetadataIdentifier);
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()),
                     fbb.GetSize());
}

// No writer shares tables; a forged value that does would decode to many
// times its size. It is refused before any chunk is built, whatever the
// store holds.
TEST(MetadataLimitsTest, SharedTablesAreRefusedBeforeDecoding) {
  const std::string value = SharedChunks(1 << 20);  // About 4 MiB.
  EXPECT_THAT(DecodeMetadata(value),
              StatusIs(StatusCode::kCorruption,
                       AllOf(HasSubstr("would decode to about"),
                             HasSubstr("its tables are shared"))));
  // A few references are within the slack: then the usual checks apply
  // (here, chunks that overlap are the loader's to refuse, not the codec's).
  ASSERT_OK(DecodeMetadata(SharedChunks(4)));
}

// With a store behind it, the Verifier itself stops at the tables the
// stored bytes could back, before the walk that counts them.
TEST(MetadataLimitsTest, TheVerifierStopsAtTheTablesTheStoreCanBack) {
  const std::string value = SharedChunks(1 << 20);
  EXPECT_THAT(
      DecodeMetadata(value, {.stored_bytes = 4096}),
      StatusIs(StatusCode::kCorruption,
               HasSubstr(
                   "as many as the 4096 bytes the checkpoint holds can back")));
}

// A value that is not metadata at all says so, limit or no limit.
TEST(MetadataLimitsTest, AWrongIdentifierIsReportedAsSuch) {
  std::string value = SharedChunks(4);
  value[4] ^= 1;  // The file identifier follows the root offset.
  EXPECT_THAT(DecodeMetadata(value, {.stored_bytes = 4096}),
              StatusIs(StatusCode::kCorruption,
                       AllOf(HasSubstr("wrong file identifier"),
                             Not(HasSubstr("tables")))));
}

// The densest real metadata, many 0-d tensors with short names, each with
// its storage entry, stays well under the decoded-size bound.
TEST(MetadataLimitsTest, DenseRealMetadataDecodes) {
  Metadata m;
  for (int i = 0; i < 50000; ++i) {
    const std::string fqn = "s" + std::to_string(i);
    TensorStorageMetadata t;
    t.properties.dtype = DType::kInt64;
    t.chunks = {{{}, {}}};
    m.state_dict_metadata[fqn] = t;
    m.storage_data[MetadataIndex(fqn, {})] = "info";
  }
  ASSERT_OK_AND_ASSIGN(Metadata back, DecodeMetadata(EncodeMetadata(m)));
  EXPECT_EQ(back.state_dict_metadata.size(), 50000u);
}

}  // namespace
}  // namespace rocksdcp::format
