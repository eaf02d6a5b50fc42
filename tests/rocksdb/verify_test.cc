// Store::Verify on sound stores: what it checks and counts, which
// checkpoints it picks, its progress, and its error statuses. What it finds
// in damaged stores is in corruption_test.cc.

#include <vector>

#include "rocksdb/store_fixture.h"

namespace rocksdcp::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// ExampleStateDict at 4 KiB pieces: a bf16 matrix of 9600 bytes (3
// pieces), a float tensor (1), a 0-d int64 (1) and 5000 bytes (2).
constexpr uint64_t kPieceBytes = 4096;
constexpr uint64_t kItems = 4;
constexpr uint64_t kPieces = 7;
constexpr uint64_t kBytes = 9600 + 400 + 8 + 5000;

class VerifyTest : public StoreTest {
 protected:
  void SaveExamples(const std::vector<std::string>& ids) {
    uint64_t seed = 0;
    for (const std::string& id : ids) {
      ASSERT_OK(SaveDict(ExampleStateDict(++seed).dict, id,
                         {.max_piece_bytes = kPieceBytes}));
    }
  }

  static std::vector<std::string> Ids(const VerifyReport& report) {
    std::vector<std::string> ids;
    for (const auto& c : report.checkpoints) ids.push_back(c.checkpoint_id);
    return ids;
  }
};

TEST_F(VerifyTest, ChecksEveryPieceOfEveryCommittedCheckpoint) {
  SaveExamples({"b", "a", "c"});
  ASSERT_OK_AND_ASSIGN(VerifyReport report, store_->Verify());
  EXPECT_TRUE(report.ok());
  EXPECT_THAT(Ids(report), ElementsAre("a", "b", "c"));
  for (const CheckpointVerifyReport& c : report.checkpoints) {
    EXPECT_THAT(c.problems, IsEmpty()) << c.checkpoint_id;
    EXPECT_EQ(c.items_checked, kItems);
    EXPECT_EQ(c.pieces_checked, kPieces);
    EXPECT_EQ(c.bytes_checked, kBytes);
    ASSERT_OK_AND_ASSIGN(CheckpointInfo info, store_->Info(c.checkpoint_id));
    EXPECT_EQ(c.bytes_checked, info.bytes);
  }
}

TEST_F(VerifyTest, ChecksOnlyTheNamedCheckpointsInTheOrderGiven) {
  SaveExamples({"a", "b", "c"});
  ASSERT_OK_AND_ASSIGN(VerifyReport report,
                       store_->Verify({.checkpoint_ids = {"c", "a"}}));
  EXPECT_THAT(Ids(report), ElementsAre("c", "a"));
  EXPECT_TRUE(report.ok());
}

TEST_F(VerifyTest, EmptyAndZeroDimItemsHaveOnePieceEach) {
  OwnedTensor scalar = RandomTensor(DType::kFloat64, {}, 1);
  OwnedTensor empty = ZeroTensor(DType::kInt8, {0, 5});
  ASSERT_OK(SaveDict({{"scalar", scalar.view},
                      {"empty", empty.view},
                      {"nothing", std::string()}},
                     "odd"));
  ASSERT_OK_AND_ASSIGN(VerifyReport report, store_->Verify());
  ASSERT_EQ(report.checkpoints.size(), 1u);
  const CheckpointVerifyReport& c = report.checkpoints[0];
  EXPECT_TRUE(c.ok());
  EXPECT_EQ(c.items_checked, 3u);
  EXPECT_EQ(c.pieces_checked, 3u);
  EXPECT_EQ(c.bytes_checked, 8u);
}

TEST_F(VerifyTest, ChecksTheLiveColumnFamilyOfAnOverwrittenCheckpoint) {
  SaveExamples({"a"});
  ASSERT_OK(SaveDict(ExampleStateDict(9).dict, "a",
                     {.overwrite = true, .max_piece_bytes = 1024}));
  ASSERT_OK_AND_ASSIGN(VerifyReport report, store_->Verify());
  ASSERT_EQ(report.checkpoints.size(), 1u);
  EXPECT_TRUE(report.ok());
  // 10 + 1 + 1 + 5 pieces of at most 1 KiB.
  EXPECT_EQ(report.checkpoints[0].pieces_checked, 17u);
}

TEST_F(VerifyTest, ProgressIsMonotonicAndReachesTheTotals) {
  SaveExamples({"a", "b"});
  std::vector<Progress> calls;
  ASSERT_OK_AND_ASSIGN(VerifyReport report,
                       store_->Verify({.progress = [&](const Progress& p) {
                         calls.push_back(p);
                       }}));
  ASSERT_FALSE(calls.empty());
  for (size_t i = 1; i < calls.size(); ++i) {
    EXPECT_GE(calls[i].bytes_done, calls[i - 1].bytes_done);
    EXPECT_GE(calls[i].items_done, calls[i - 1].items_done);
  }
  EXPECT_EQ(calls.size(), 2 * kPieces);
  EXPECT_EQ(calls.back().bytes_done, 2 * kBytes);
  EXPECT_EQ(calls.back().bytes_total, 2 * kBytes);
  EXPECT_EQ(calls.back().items_done, 2 * kItems);
  EXPECT_EQ(calls.back().items_total, 2 * kItems);
}

TEST_F(VerifyTest, EmptyStoreHasNothingToCheck) {
  ASSERT_OK_AND_ASSIGN(VerifyReport report, store_->Verify());
  EXPECT_THAT(report.checkpoints, IsEmpty());
  EXPECT_TRUE(report.ok());
}

TEST_F(VerifyTest, NamedCheckpointThatIsNotCommittedIsNotFound) {
  SaveExamples({"a"});
  ASSERT_OK(store_->Delete("a"));
  bool called = false;
  EXPECT_THAT(
      store_->Verify({.checkpoint_ids = {"a"},
                      .progress = [&](const Progress&) { called = true; }}),
      StatusIs(StatusCode::kNotFound, HasSubstr("'a'")));
  EXPECT_THAT(store_->Verify({.checkpoint_ids = {"no-such"}}),
              StatusIs(StatusCode::kNotFound, HasSubstr("'no-such'")));
  EXPECT_FALSE(called) << "progress before the ids were all resolved";
}

TEST_F(VerifyTest, InvalidIdIsInvalidArgument) {
  EXPECT_THAT(store_->Verify({.checkpoint_ids = {"default"}}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("default")));
}

TEST_F(VerifyTest, ReadOnlyStoreVerifies) {
  SaveExamples({"a"});
  CloseStore();
  OpenStore({.read_only = true});
  ASSERT_OK_AND_ASSIGN(VerifyReport report, store_->Verify());
  ASSERT_EQ(report.checkpoints.size(), 1u);
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(report.checkpoints[0].pieces_checked, kPieces);
}

TEST_F(VerifyTest, FollowerStoreCannotVerify) {
  ASSERT_OK_AND_ASSIGN(auto follower,
                       Store::Open(store_path(), {.follower = true}));
  EXPECT_THAT(follower->Verify(),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("follower")));
}

}  // namespace
}  // namespace rocksdcp::testing
