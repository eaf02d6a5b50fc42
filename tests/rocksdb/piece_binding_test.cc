// Each piece is bound to its key (issue #13, item 5; piece format version
// 2): two items' pieces of one size swapped in a real store, each with its
// checksum intact, fail a load and Verify instead of loading silently
// wrong, and so do swapped pieces rewritten in the old, unbound format,
// since the item's storage info (version 2) says its pieces are bound.
// Stores written before the binding (version 1 throughout) still load.

#include <flatbuffers/flatbuffers.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "format/checksum.h"
#include "format/piece_codec.h"
#include "keys/keys.h"
#include "rocksdb/catalog_codec.h"
#include "rocksdb/raw_store.h"
#include "rocksdb/store_fixture.h"
#include "schema/checkpoint_generated.h"

namespace rocksdcp::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

constexpr char kId[] = "twins";
constexpr uint64_t kPiece = 4096;
constexpr uint32_t kPieces = 4;

// Two items of one dtype and shape: their pieces' headers are identical
// but for the data and its checksum.
struct Twins {
  OwnedTensor a = RandomTensor(DType::kFloat32, {kPieces, 1024}, 1);
  OwnedTensor b = RandomTensor(DType::kFloat32, {kPieces, 1024}, 2);
  StateDict Dict() const { return {{"a", a.view}, {"b", b.view}}; }
};

// Twins of zeros, to load into.
Twins ZeroTwins() {
  Twins t;
  t.a = ZeroTensor(DType::kFloat32, {kPieces, 1024});
  t.b = ZeroTensor(DType::kFloat32, {kPieces, 1024});
  return t;
}

std::string KeyOf(const std::string& fqn, uint32_t piece) {
  return keys::PieceKey(MetadataIndex(fqn, {0, 0}), piece);
}

// `piece` re-encoded as format version 1 writes it: XXH3 with seed 0.
std::string AsVersionOne(const format::DecodedPiece& piece) {
  const format::PieceHeader& h = piece.header;
  flatbuffers::FlatBufferBuilder fbb;
  const auto offsets = fbb.CreateVector(h.chunk_offsets);
  const auto sizes = fbb.CreateVector(h.chunk_sizes);
  const auto data = fbb.CreateVector(piece.data, piece.size);
  fbb.Finish(
      fb::CreateChunkPiece(fbb, format::kUnboundPieceFormatVersion,
                           static_cast<fb::ItemKind>(h.kind),
                           static_cast<fb::DType>(h.dtype), offsets, sizes,
                           h.piece, h.num_pieces, h.byte_offset, h.byte_length,
                           format::Xxh3(piece.data, piece.size), data),
      format::kPieceIdentifier);
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()),
                     fbb.GetSize());
}

// `info` encoded as format version 1 wrote it, before pieces were bound.
std::string StorageInfoVersionOne(const format::StorageInfo& info) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(
      fb::CreateStorageInfo(fbb, 1, static_cast<fb::ItemKind>(info.kind),
                            info.length, info.num_pieces, info.piece_bytes),
      format::kStorageInfoIdentifier);
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()),
                     fbb.GetSize());
}

// Rewrites every piece of the checkpoint as version 1 writes it.
void RewritePiecesAsVersionOne(RawStore& raw) {
  for (const char* fqn : {"a", "b"}) {
    for (uint32_t p = 0; p < kPieces; ++p) {
      const std::string key = KeyOf(fqn, p);
      const std::string value = raw.Get(kId, key);
      format::PieceDecodeBuffer buffer;  // Unused: no piece is compressed.
      auto piece = format::DecodePiece(value, key, &buffer);
      ASSERT_OK(piece);
      raw.Put(kId, key, AsVersionOne(*piece));
    }
  }
}

class PieceBindingTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    ASSERT_OK(SaveDict(twins_.Dict(), kId, {.max_piece_bytes = kPiece}));
    CloseStore();
  }

  // Swaps piece 1 of `a` and of `b`, as a forged or buggy store could.
  void SwapPieceOne(RawStore& raw) {
    const std::string a = raw.Get(kId, KeyOf("a", 1));
    const std::string b = raw.Get(kId, KeyOf("b", 1));
    raw.Put(kId, KeyOf("a", 1), b);
    raw.Put(kId, KeyOf("b", 1), a);
  }

  const Twins twins_{};
};

TEST_F(PieceBindingTest, SwappedPiecesOfTwoSameSizeItemsFailLoadAndVerify) {
  {
    RawStore raw(store_path());
    // Everything a piece records but its checksum agrees under either key,
    // so only the binding can tell the swap.
    const std::string a = raw.Get(kId, KeyOf("a", 1));
    const std::string b = raw.Get(kId, KeyOf("b", 1));
    format::PieceDecodeBuffer buffer, buffer_b;
    ASSERT_OK_AND_ASSIGN(format::DecodedPiece pa,
                         format::DecodePiece(a, KeyOf("a", 1), &buffer));
    ASSERT_OK_AND_ASSIGN(format::DecodedPiece pb,
                         format::DecodePiece(b, KeyOf("b", 1), &buffer_b));
    EXPECT_EQ(pa.header.chunk_offsets, pb.header.chunk_offsets);
    EXPECT_EQ(pa.header.chunk_sizes, pb.header.chunk_sizes);
    EXPECT_EQ(pa.header.byte_offset, pb.header.byte_offset);
    EXPECT_EQ(pa.header.byte_length, pb.header.byte_length);
    SwapPieceOne(raw);
  }
  OpenStore();

  // A load that reads pieces in place reads them where the save put them
  // and checks them against the metadata's hashes: the swap, written over
  // their keys later, is not there, and it loads the saved bytes.
  {
    Twins into = ZeroTwins();
    StateDict dict = into.Dict();
    ASSERT_OK(LoadDict(&dict, kId));
    EXPECT_EQ(into.a.bytes, twins_.a.bytes);
    EXPECT_EQ(into.b.bytes, twins_.b.bytes);
  }
  // Through RocksDB, the binding tells the swap.
  load_options_.read_in_place = false;
  Twins into = ZeroTwins();
  StateDict dict = into.Dict();
  EXPECT_THAT(LoadDict(&dict, kId),
              StatusIs(StatusCode::kCorruption,
                       AllOf(HasSubstr("'twins'"), HasSubstr("piece 1 of 4"),
                             HasSubstr("written for another key"))));
  // Whatever landed is the saved bytes: piece 1 of either item never did.
  for (const auto& [got, want] :
       {std::pair{&into.a, &twins_.a}, std::pair{&into.b, &twins_.b}}) {
    for (size_t i = 0; i < got->bytes.size(); ++i) {
      ASSERT_TRUE(got->bytes[i] == 0 || got->bytes[i] == want->bytes[i])
          << "wrong byte " << i;
    }
  }

  ASSERT_OK_AND_ASSIGN(VerifyReport report,
                       store_->Verify({.checkpoint_ids = {kId}}));
  ASSERT_EQ(report.checkpoints.size(), 1u);
  std::vector<std::string> damaged;
  for (const DamagedItem& d : report.checkpoints[0].damaged_items) {
    damaged.push_back(d.fqn);
    EXPECT_THAT(d.first_problem,
                StatusIs(StatusCode::kCorruption, HasSubstr("another key")));
  }
  EXPECT_THAT(damaged, UnorderedElementsAre("a", "b"));
}

// A forger who swaps two pieces and rewrites them unbound, with valid
// unseeded checksums: the items' storage info says their pieces are bound.
TEST_F(PieceBindingTest, UnboundPiecesInACheckpointOfBoundOnesAreRefused) {
  {
    RawStore raw(store_path());
    RewritePiecesAsVersionOne(raw);
    SwapPieceOne(raw);
  }
  OpenStore();
  Twins into = ZeroTwins();
  StateDict dict = into.Dict();
  EXPECT_THAT(
      LoadDict(&dict, kId),
      StatusIs(StatusCode::kCorruption,
               AllOf(HasSubstr("'twins'"),
                     HasSubstr("format version 1, not bound to its key"))));
  ASSERT_OK_AND_ASSIGN(VerifyReport report,
                       store_->Verify({.checkpoint_ids = {kId}}));
  ASSERT_EQ(report.checkpoints.size(), 1u);
  EXPECT_EQ(report.checkpoints[0].damaged_items.size(), 2u);
}

TEST_F(PieceBindingTest, StoresWrittenBeforeTheBindingStillLoad) {
  {
    RawStore raw(store_path());
    RewritePiecesAsVersionOne(raw);
  }
  // And their storage info as version 1 wrote it.
  RewriteMetadata(store_path(), kId, [](Metadata& md) {
    for (auto& [index, value] : md.storage_data) {
      auto info = format::DecodeStorageInfo(value);
      ASSERT_OK(info);
      value = StorageInfoVersionOne(*info);
    }
  });
  OpenStore();
  Twins into = ZeroTwins();
  StateDict dict = into.Dict();
  ASSERT_OK(LoadDict(&dict, kId));
  EXPECT_EQ(into.a.bytes, twins_.a.bytes);
  EXPECT_EQ(into.b.bytes, twins_.b.bytes);
  ASSERT_OK_AND_ASSIGN(VerifyReport report,
                       store_->Verify({.checkpoint_ids = {kId}}));
  ASSERT_EQ(report.checkpoints.size(), 1u);
  EXPECT_TRUE(report.checkpoints[0].ok());
  EXPECT_EQ(report.checkpoints[0].pieces_checked, 2 * kPieces);
}

}  // namespace
}  // namespace rocksdcp::testing
