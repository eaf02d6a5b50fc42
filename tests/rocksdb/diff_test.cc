// DiffCheckpoints and the piece hashes behind it (issue #14's first step):
// every piece's storage info records the XXH3-128 of its payload, a diff
// compares them without reading a piece, and Verify checks each against
// its piece.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "rocksdb/catalog_codec.h"
#include "rocksdb/raw_store.h"
#include "rocksdb/store_fixture.h"

namespace rocksdcp::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr uint64_t kPiece = 4096;

// A state dict of its own tensors: "w" float32 [16, 1024] (16 pieces of
// 4 KiB), "b" float32 [8], "gone" int64 [3], "grow" float32 [4], and byte
// item "opt".
struct Model {
  OwnedTensor w = RandomTensor(DType::kFloat32, {16, 1024}, 1);
  OwnedTensor b = RandomTensor(DType::kFloat32, {8}, 2);
  OwnedTensor gone = RandomTensor(DType::kInt64, {3}, 3);
  OwnedTensor grow = RandomTensor(DType::kFloat32, {4}, 4);
  std::string opt = RandomBytes(10000, 5);
  StateDict Dict() const {
    return {{"w", w.view},
            {"b", b.view},
            {"gone", gone.view},
            {"grow", grow.view},
            {"opt", opt}};
  }
};

class DiffTest : public StoreTest {
 protected:
  void Save(const StateDict& sd, const std::string& id,
            uint64_t piece_bytes = kPiece) {
    RocksDBWriterOptions options;
    options.max_piece_bytes = piece_bytes;
    ASSERT_OK(SaveDict(sd, id, options).status());
  }

  std::map<std::string, ItemDiff> Diff(const std::string& from,
                                       const std::string& to) {
    auto diff = DiffCheckpoints(*store_, from, to);
    EXPECT_OK(diff);
    std::map<std::string, ItemDiff> by_fqn;
    if (!diff.ok()) return by_fqn;
    EXPECT_EQ(diff->from, from);
    EXPECT_EQ(diff->to, to);
    for (const ItemDiff& d : diff->items) by_fqn[d.fqn] = d;
    return by_fqn;
  }
};

TEST_F(DiffTest, NamesWhatChangedPieceByPiece) {
  Model m;
  Save(m.Dict(), "a");
  // One byte of w's piece 3 and one of piece 9; all of opt's second piece.
  m.w.bytes[3 * kPiece + 17] ^= 1;
  m.w.bytes[9 * kPiece] ^= 0x80;
  for (size_t i = kPiece; i < 2 * kPiece; ++i) m.opt[i] = 'x';
  OwnedTensor grown = RandomTensor(DType::kFloat32, {5}, 4);
  OwnedTensor added = RandomTensor(DType::kBFloat16, {2, 3}, 6);
  StateDict next = m.Dict();
  next.erase("gone");
  next["grow"] = grown.view;
  next["new"] = added.view;
  Save(next, "b");

  std::map<std::string, ItemDiff> d = Diff("a", "b");
  ASSERT_EQ(d.size(), 6u);
  EXPECT_EQ(d["w"].change, ItemChange::kChanged);
  EXPECT_EQ(d["w"].pieces, 16u);
  EXPECT_EQ(d["w"].changed_pieces, 2u);
  EXPECT_EQ(d["w"].bytes, 16 * kPiece);
  EXPECT_EQ(d["w"].changed_bytes, 2 * kPiece);
  EXPECT_EQ(d["b"].change, ItemChange::kUnchanged);
  EXPECT_EQ(d["b"].changed_pieces, 0u);
  EXPECT_EQ(d["opt"].change, ItemChange::kChanged);
  EXPECT_EQ(d["opt"].pieces, 3u);
  EXPECT_EQ(d["opt"].changed_pieces, 1u);
  EXPECT_EQ(d["gone"].change, ItemChange::kRemoved);
  EXPECT_EQ(d["gone"].bytes, 24u);
  EXPECT_EQ(d["grow"].change, ItemChange::kReshaped);
  EXPECT_EQ(d["grow"].changed_bytes, 20u);
  EXPECT_EQ(d["new"].change, ItemChange::kAdded);
  EXPECT_EQ(d["new"].changed_pieces, d["new"].pieces);

  // The other way round, added and removed swap.
  std::map<std::string, ItemDiff> back = Diff("b", "a");
  EXPECT_EQ(back["gone"].change, ItemChange::kAdded);
  EXPECT_EQ(back["new"].change, ItemChange::kRemoved);
  EXPECT_EQ(back["w"].changed_pieces, 2u);
}

TEST_F(DiffTest, ACheckpointDiffersFromItselfInNothing) {
  Model m;
  Save(m.Dict(), "a");
  Save(m.Dict(), "again");
  for (const auto& [fqn, d] : Diff("a", "again")) {
    EXPECT_EQ(d.change, ItemChange::kUnchanged) << fqn;
  }
}

TEST_F(DiffTest, PiecesOfAnotherSizeAreIncomparable) {
  Model m;
  Save(m.Dict(), "a");
  Save(m.Dict(), "b", 2 * kPiece);
  std::map<std::string, ItemDiff> d = Diff("a", "b");
  EXPECT_EQ(d["w"].change, ItemChange::kIncomparable);
  EXPECT_EQ(d["w"].changed_pieces, 0u);
  EXPECT_EQ(d["b"].change, ItemChange::kUnchanged);  // One piece either way.
}

TEST_F(DiffTest, ItemsSavedWithoutHashesAreIncomparable) {
  Model m;
  Save(m.Dict(), "a");
  Save(m.Dict(), "b");
  CloseStore();
  // As rocksdcp before piece hashes wrote it.
  RewriteMetadata(store_path(), "a", [](Metadata& md) {
    for (auto& [index, value] : md.storage_data) {
      auto info = format::DecodeStorageInfo(value);
      ASSERT_OK(info);
      // Without its hashes, and so without the offsets that need them.
      info->piece_hashes.clear();
      info->piece_offsets.clear();
      info->file_first_key_xxh3 = 0;
      value = format::EncodeStorageInfo(*info);
    }
  });
  OpenStore();
  std::map<std::string, ItemDiff> d = Diff("a", "b");
  for (const char* fqn : {"w", "b", "opt", "gone", "grow"}) {
    EXPECT_EQ(d[fqn].change, ItemChange::kIncomparable) << fqn;
  }
  // And such a checkpoint still verifies.
  ASSERT_OK_AND_ASSIGN(VerifyReport report, store_->Verify());
  EXPECT_TRUE(report.ok());
}

// A byte item that grew (a pickled dict, say): changed, every piece of it,
// even though its pieces no longer line up.
TEST_F(DiffTest, AByteItemOfAnotherSizeChangedWhole) {
  Model m;
  Save(m.Dict(), "a");
  m.opt += "one more";
  Save(m.Dict(), "b");
  std::map<std::string, ItemDiff> d = Diff("a", "b");
  EXPECT_EQ(d["opt"].change, ItemChange::kChanged);
  EXPECT_EQ(d["opt"].pieces, 3u);
  EXPECT_EQ(d["opt"].changed_pieces, 3u);
  EXPECT_EQ(d["opt"].changed_bytes, 10008u);
  EXPECT_EQ(d["w"].change, ItemChange::kUnchanged);
}

// Damage in either checkpoint's storage infos is named with its checkpoint.
TEST_F(DiffTest, DamagedHashesNameTheirCheckpoint) {
  Model m;
  Save(m.Dict(), "a");
  Save(m.Dict(), "b");
  CloseStore();
  RewriteMetadata(store_path(), "b", [](Metadata& md) {
    auto it = md.storage_data.find(MetadataIndex("w", {0, 0}));
    ASSERT_NE(it, md.storage_data.end());
    auto info =
        format::DecodeStorageInfo(it->second, format::PieceHashes::kRead);
    ASSERT_OK(info);
    info->piece_hashes.pop_back();
    it->second = format::EncodeStorageInfo(*info);
  });
  OpenStore();
  EXPECT_THAT(DiffCheckpoints(*store_, "a", "b"),
              StatusIs(StatusCode::kCorruption,
                       AllOf(HasSubstr("checkpoint 'b', item 'w@[0, 0]'"),
                             HasSubstr("15 piece hashes for 16 pieces"))));
}

TEST_F(DiffTest, MissingCheckpointIsNotFoundNamingIt) {
  Model m;
  Save(m.Dict(), "a");
  EXPECT_THAT(DiffCheckpoints(*store_, "a", "nope"),
              StatusIs(StatusCode::kNotFound,
                       HasSubstr("diff of checkpoints 'a' and 'nope'")));
}

TEST_F(DiffTest, VerifyFindsAHashThatIsNotItsPieces) {
  Model m;
  Save(m.Dict(), "a");
  CloseStore();
  RewriteMetadata(store_path(), "a", [](Metadata& md) {
    auto it = md.storage_data.find(MetadataIndex("w", {0, 0}));
    ASSERT_NE(it, md.storage_data.end());
    auto info =
        format::DecodeStorageInfo(it->second, format::PieceHashes::kRead);
    ASSERT_OK(info);
    ASSERT_EQ(info->piece_hashes.size(), 16u);
    info->piece_hashes[5].low ^= 1;
    it->second = format::EncodeStorageInfo(*info);
  });
  OpenStore();
  ASSERT_OK_AND_ASSIGN(VerifyReport report, store_->Verify());
  ASSERT_EQ(report.checkpoints.size(), 1u);
  ASSERT_EQ(report.checkpoints[0].damaged_items.size(), 1u);
  EXPECT_EQ(report.checkpoints[0].damaged_items[0].fqn, "w");
  EXPECT_THAT(report.checkpoints[0].damaged_items[0].first_problem,
              StatusIs(StatusCode::kCorruption,
                       AllOf(HasSubstr("piece 5 of 16"),
                             HasSubstr("does not hash to the XXH3-128"))));
}

}  // namespace
}  // namespace rocksdcp::testing
