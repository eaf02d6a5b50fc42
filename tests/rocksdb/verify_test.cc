// Store::Verify: what it checks and counts, which checkpoints it picks,
// its progress, its error statuses, and how it sums up the items it finds
// damaged whatever max_problems is. Which damage it finds is in
// corruption_test.cc.

#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "rocksdb/store_fixture.h"

namespace rocksdcp::testing {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// ExampleStateDict at 4 KiB pieces: a bf16 matrix of 9600 bytes (3
// pieces), a float tensor (1), a 0-d int64 (1) and 5000 bytes (2).
constexpr uint64_t kPieceBytes = 4096;
constexpr uint64_t kItems = 4;
constexpr uint64_t kPieces = 7;
constexpr uint64_t kBytes = 9600 + 400 + 8 + 5000;

// Byte items to damage are whole pieces of 32 KiB: each piece is a block of
// its own in its SST file (blocks are cut at 16 KiB) and random, so 64 of
// its bytes find it there and a byte flipped in it damages it and no other.
constexpr uint64_t kBigPiece = 32 << 10;

// A damaged item as the test expects it: fqn, bad pieces, problems.
using Damage = std::tuple<std::string, uint64_t, uint64_t>;

std::vector<Damage> Damaged(const CheckpointVerifyReport& report) {
  std::vector<Damage> out;
  for (const DamagedItem& d : report.damaged_items) {
    out.emplace_back(d.fqn, d.bad_pieces, d.problems);
  }
  return out;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

class VerifyTest : public StoreTest {
 protected:
  void SaveExamples(const std::vector<std::string>& ids) {
    uint64_t seed = 0;
    for (const std::string& id : ids) {
      ASSERT_OK(SaveDict(ExampleStateDict(++seed).dict, id,
                         {.max_piece_bytes = kPieceBytes}));
    }
  }

  // Saves checkpoint `id` of byte items of `pieces[fqn]` whole kBigPiece
  // pieces each, keeping their bytes to find them on disk.
  void SaveByteItems(const std::string& id,
                     const std::map<std::string, uint32_t>& pieces) {
    StateDict sd;
    for (const auto& [fqn, n] : pieces) {
      std::string& bytes = saved_[{id, fqn}];
      bytes = RandomBytes(n * kBigPiece, ++seed_);
      sd.emplace(fqn, bytes);
    }
    ASSERT_OK(SaveDict(sd, id, {.max_piece_bytes = kBigPiece}));
  }

  // Closes the store, flips a byte in the middle of each piece that
  // `pieces[fqn]` lists of items SaveByteItems saved in `id`, and reopens
  // the store.
  void DamagePieces(
      const std::string& id,
      const std::map<std::string, std::vector<uint32_t>>& pieces) {
    CloseStore();
    for (const auto& [fqn, numbers] : pieces) {
      const std::string_view all = saved_.at({id, fqn});
      for (uint32_t p : numbers) {
        const std::string_view needle = all.substr(p * kBigPiece, 64);
        bool found = false;
        for (const std::string& file : SstFiles()) {
          const size_t at = ReadFile(file).find(needle);
          if (at == std::string::npos) continue;
          FlipByte(file, static_cast<int64_t>(at + kBigPiece / 2));
          found = true;
          break;
        }
        EXPECT_TRUE(found) << fqn << " piece " << p << " is in no SST file";
      }
    }
    OpenStore();
  }

  static std::vector<std::string> Ids(const VerifyReport& report) {
    std::vector<std::string> ids;
    for (const auto& c : report.checkpoints) ids.push_back(c.checkpoint_id);
    return ids;
  }

 private:
  uint64_t seed_ = 100;
  // Bytes of the items SaveByteItems saved, by checkpoint id and fqn.
  std::map<std::pair<std::string, std::string>, std::string> saved_;
};

TEST_F(VerifyTest, ChecksEveryPieceOfEveryCommittedCheckpoint) {
  SaveExamples({"b", "a", "c"});
  ASSERT_OK_AND_ASSIGN(VerifyReport report, store_->Verify());
  EXPECT_TRUE(report.ok());
  EXPECT_THAT(Ids(report), ElementsAre("a", "b", "c"));
  for (const CheckpointVerifyReport& c : report.checkpoints) {
    EXPECT_THAT(c.problems, IsEmpty()) << c.checkpoint_id;
    EXPECT_THAT(c.damaged_items, IsEmpty()) << c.checkpoint_id;
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

// The CLI names every damaged item from damaged_items: past max_problems,
// later items' problems are only counted, but each item is still there.
TEST_F(VerifyTest, DamagedItemsNameEveryDamagedItemPastMaxProblems) {
  SaveByteItems("a", {{"w1", 3}, {"w2", 3}, {"w3", 3}, {"w4", 3}});
  DamagePieces("a", {{"w1", {1}}, {"w2", {0, 2}}, {"w4", {0, 1, 2}}});
  ASSERT_OK_AND_ASSIGN(VerifyReport report,
                       store_->Verify({.max_problems = 1}));
  ASSERT_EQ(report.checkpoints.size(), 1u);
  const CheckpointVerifyReport& c = report.checkpoints[0];
  EXPECT_FALSE(c.ok());
  ASSERT_EQ(c.problems.size(), 1u);
  ASSERT_TRUE(c.problems[0].item && c.problems[0].piece);
  EXPECT_EQ(c.problems[0].item->fqn, "w1");
  EXPECT_EQ(*c.problems[0].piece, 1u);
  EXPECT_EQ(c.unlisted_problems, 5u);
  EXPECT_THAT(Damaged(c), ElementsAre(Damage{"w1", 1, 1}, Damage{"w2", 2, 2},
                                      Damage{"w4", 3, 3}));
  // As a load would say it: the first bad piece of each.
  EXPECT_THAT(
      c.damaged_items[1].first_problem,
      StatusIs(StatusCode::kCorruption,
               AllOf(HasSubstr("checkpoint 'a'"), HasSubstr("item 'w2'"),
                     HasSubstr("piece 0 of 3"))));
  EXPECT_THAT(c.damaged_items[2].first_problem,
              StatusIs(StatusCode::kCorruption, HasSubstr("item 'w4'")));
  EXPECT_EQ(c.items_checked, 4u);
  EXPECT_EQ(c.pieces_checked, 12u);
}

TEST_F(VerifyTest, DamagedItemsAreCompleteWithMaxProblemsZero) {
  SaveByteItems("a", {{"w1", 2}, {"w2", 2}, {"w3", 2}});
  DamagePieces("a", {{"w1", {0}}, {"w2", {1}}, {"w3", {0, 1}}});
  ASSERT_OK_AND_ASSIGN(VerifyReport report,
                       store_->Verify({.max_problems = 0}));
  const CheckpointVerifyReport& c = report.checkpoints.at(0);
  EXPECT_FALSE(report.ok());
  EXPECT_THAT(c.problems, IsEmpty());
  EXPECT_EQ(c.unlisted_problems, 4u);
  EXPECT_THAT(Damaged(c), ElementsAre(Damage{"w1", 1, 1}, Damage{"w2", 1, 1},
                                      Damage{"w3", 2, 2}));
}

// Each listed problem's item is among damaged_items, and a sound
// checkpoint verified after a damaged one has none.
TEST_F(VerifyTest, DamagedItemsAgreeWithTheProblemsAndArePerCheckpoint) {
  SaveByteItems("a", {{"x", 2}, {"y", 2}});
  SaveByteItems("b", {{"x", 2}, {"y", 2}});
  DamagePieces("a", {{"x", {1}}, {"y", {0}}});
  ASSERT_OK_AND_ASSIGN(VerifyReport report, store_->Verify());
  ASSERT_THAT(Ids(report), ElementsAre("a", "b"));
  const CheckpointVerifyReport& a = report.checkpoints[0];
  ASSERT_EQ(a.problems.size(), 2u);
  EXPECT_EQ(a.unlisted_problems, 0u);
  EXPECT_THAT(Damaged(a), ElementsAre(Damage{"x", 1, 1}, Damage{"y", 1, 1}));
  for (size_t i = 0; i < a.problems.size(); ++i) {
    EXPECT_EQ(a.damaged_items[i].first_problem, a.problems[i].status);
  }
  const CheckpointVerifyReport& b = report.checkpoints[1];
  EXPECT_TRUE(b.ok());
  EXPECT_THAT(b.damaged_items, IsEmpty());
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
