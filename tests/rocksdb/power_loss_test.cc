// Power loss: a workload of saves, overwrites, deletes and GC runs on a
// FaultFs that cuts the power after its n-th operation that changes the
// disk, for n swept over the whole workload. After each cut, what was not
// synced is dropped and the store reopened: it must hold every checkpoint
// committed before the cut, bit-exact, and the one in flight either as it
// was or as it would have become, never anything else.
//
// ctest cuts the power at about 150 points spread over the workload, which
// is every operation while the workload makes at most 300 (it makes about
// 200); ROCKSDCP_FULL_FAULT_SWEEP=1 cuts at every operation whatever their
// number.

#include <filesystem>
#include <iostream>
#include <optional>
#include <vector>

#include "rocksdb/fault_fs_fixture.h"
#include "rocksdb/store_impl.h"

namespace rocksdcp::testing {
namespace {

using ::testing::HasSubstr;

struct Step {
  enum Kind { kSave, kOverwrite, kDelete, kGc, kMaterialize } kind;
  std::string id;
  uint64_t seed = 0;
  // Of a save: its writer threads, each writing a staging file.
  int write_threads = 1;
  // Of a save: its base, for an incremental save.
  std::string base = "";
};

// The workload of EveryCutKeepsCommittedAndHidesUncommitted.
const std::vector<Step>& SaveOverwriteDeleteGcSteps() {
  static const auto* kSteps = new std::vector<Step>{
      {Step::kSave, "a", 1},         {Step::kSave, "b", 2},
      {Step::kOverwrite, "a", 3},    {Step::kDelete, "b"},
      {Step::kSave, "c", 4, 2},      {Step::kGc, ""},
      {Step::kOverwrite, "c", 5, 2}, {Step::kDelete, "a"},
  };
  return *kSteps;
}

class PowerLossTest : public FaultFsStoreTest {
 protected:
  // About this many power cuts per sweep (SweepStride), and at least two
  // thirds of them made.
  static constexpr uint64_t kCutPoints = 150;
  std::string MakeLeftovers();
  static uint64_t MinCuts(uint64_t total) {
    const uint64_t points =
        kSanitized ? kCutPoints / kSanitizerSweepDivisor : kCutPoints;
    return std::min<uint64_t>(total, points * 2 / 3);
  }

  // Opens (creating) the store, runs `steps` until one fails, and closes
  // the store. *expected says what may survive a cut: every completed
  // step's effect, and either side of the step that failed. Returns the
  // number of steps completed.
  size_t RunWorkload(const std::vector<Step>& steps, Expected* expected) {
    expected->clear();
    if (!OpenStore().ok()) return 0;
    std::map<std::string, std::optional<uint64_t>> state;
    for (size_t i = 0; i < steps.size(); ++i) {
      const Step& step = steps[i];
      std::optional<uint64_t> after = step.seed;
      Status s;
      switch (step.kind) {
        case Step::kSave:
        case Step::kOverwrite:
          s = SaveSeed(step.id, step.seed, step.kind == Step::kOverwrite,
                       step.write_threads, step.base);
          break;
        case Step::kMaterialize:
          s = store_->Materialize(step.id).status();
          after = state[step.id];  // The same content.
          break;
        case Step::kDelete:
          s = store_->Delete(step.id);
          after.reset();
          break;
        case Step::kGc:
          s = store_->CollectGarbage().status();
          break;
      }
      if (!s.ok()) {
        // Interrupted: the step's effect may or may not be durable.
        for (const auto& [id, seed] : state) (*expected)[id] = {seed};
        if (step.kind != Step::kGc) {
          auto before = state.find(step.id);
          (*expected)[step.id] = {
              before == state.end() ? std::nullopt : before->second, after};
        }
        CloseStore();
        return i;
      }
      if (step.kind != Step::kGc) state[step.id] = after;
    }
    for (const auto& [id, seed] : state) (*expected)[id] = {seed};
    CloseStore();
    return steps.size();
  }

  // Runs `steps` once to count the operations that change the disk (into
  // *total), then again with the power cut after each of about 150 of
  // them, checking the store after each cut. Returns the cuts made; counts
  // in *interrupted the cuts by how many steps had completed. Stops at the
  // first failure.
  uint64_t SweepPowerCuts(const std::vector<Step>& steps,
                          std::vector<uint64_t>* interrupted,
                          uint64_t* total_out) {
    Expected expected;
    fs_->ResetCounts();
    EXPECT_EQ(RunWorkload(steps, &expected), steps.size());
    const uint64_t total = fs_->Count(kOpMutating);
    *total_out = total;
    EXPECT_OK(OpenStore());
    EXPECT_TRUE(CheckStore(expected));
    CloseStore();
    RemoveStore();
    interrupted->assign(steps.size() + 1, 0);
    const uint64_t stride = SweepStride(total, kCutPoints);
    uint64_t cuts = 0;
    for (uint64_t n = 0; n < total; n += stride) {
      SCOPED_TRACE("power cut after operation " + std::to_string(n) + " of " +
                   std::to_string(total));
      fs_->CutPowerAfter(n);
      // Should the run do fewer operations than the counted one (RocksDB's
      // background work varies), the power goes after its clean close.
      const size_t done = RunWorkload(steps, &expected);
      ++(*interrupted)[done];
      ++cuts;
      EXPECT_OK(fs_->SimulatePowerLoss());
      EXPECT_OK(OpenStore());
      EXPECT_TRUE(CheckStore(expected)) << "after " << done << " steps";
      CloseStore();
      RemoveStore();
      if (::testing::Test::HasFailure()) break;
    }
    return cuts;
  }

  // Sweeps power cuts over saves, overwrites, deletes and GC, and prints
  // how many it made.
  void SweepSaveOverwriteDeleteGc() {
    std::vector<uint64_t> interrupted;
    uint64_t total = 0;
    const uint64_t cuts =
        SweepPowerCuts(SaveOverwriteDeleteGcSteps(), &interrupted, &total);
    ASSERT_GT(total, 50u);
    std::cout << "[ FIGURES  ] power cuts simulated: " << cuts << " (of "
              << total << " operations; cuts per step reached:";
    for (uint64_t c : interrupted) std::cout << " " << c;
    std::cout << ")\n";
    RecordProperty("power_cuts", static_cast<int>(cuts));
    EXPECT_GE(cuts, MinCuts(total));
  }

  // Removes the store behind the FaultFs's back, for the next run.
  void RemoveStore() {
    fs_->AssumeDurable();
    std::filesystem::remove_all(store_path());
  }
};

TEST_F(PowerLossTest, EveryCutKeepsCommittedAndHidesUncommitted) {
  SweepSaveOverwriteDeleteGc();
}

// The same with every piece compressed where that saves (issue #17).
class CompressedPowerLossTest : public PowerLossTest {
 protected:
  CompressedPowerLossTest() { compressed_ = true; }
};

TEST_F(CompressedPowerLossTest, EveryCutKeepsCommittedAndHidesUncommitted) {
  SweepSaveOverwriteDeleteGc();
}

// Incremental saves (their pieces references to a base's), a delete of a
// referenced base, Materialize and an overwrite of an incremental
// checkpoint against itself: a cut at any point loses no committed
// checkpoint and leaves no reference dangling (CheckStore loads every
// listed checkpoint and runs GC, which must keep what is referenced).
TEST_F(PowerLossTest, EveryCutDuringIncrementalSavesKeepsReferencesWhole) {
  const std::vector<Step> steps = {
      {Step::kSave, "a", 1},
      {Step::kSave, "b", 1, 1, "a"},
      {Step::kDelete, "a"},
      {Step::kSave, "c", 1, 2, "b"},
      {Step::kMaterialize, "b"},
      {Step::kGc, ""},
      {Step::kOverwrite, "c", 1, 1, "c"},
      {Step::kDelete, "b"},
  };
  std::vector<uint64_t> interrupted;
  uint64_t total = 0;
  const uint64_t cuts = SweepPowerCuts(steps, &interrupted, &total);
  std::cout << "[ FIGURES  ] power cuts simulated: " << cuts << " (of " << total
            << " operations)\n";
  EXPECT_GE(cuts, MinCuts(total));
}

// GC after a failed save, which left an orphan column family and staging
// files: a cut at any point of it loses nothing, and the next GC finishes.
// A store whose save of "b" failed after creating its column family, and
// left it and its staging files: in store_path() and, copied, at the path
// returned.
std::string PowerLossTest::MakeLeftovers() {
  EXPECT_OK(OpenStore());
  EXPECT_OK(SaveSeed("a", 1, false));
  // The save of "b" creates its column family; then its ingestion fails,
  // and so do the writes and deletes that would drop the column family and
  // remove its staging files.
  static_cast<StoreImpl*>(store_.get())
      ->TEST_SetCommitHook([this](std::string_view point) {
        if (point == "after_create_cf") {
          fs_->InjectFault(1, kOpLinkRename | kOpWrite | kOpDelete,
                           FaultType::kIOError, /*sticky=*/true);
        }
      });
  EXPECT_THAT(SaveSeed("b", 2, false),
              StatusIs(StatusCode::kIOError, HasSubstr("'b'")));
  fs_->ClearFault();
  CloseStore();
  fs_->AssumeDurable();
  const std::string leftovers = dir_.Sub("leftovers");
  std::filesystem::copy(store_path(), leftovers,
                        std::filesystem::copy_options::recursive);
  return leftovers;
}

TEST_F(PowerLossTest, CutsDuringGarbageCollection) {
  const std::string leftovers = MakeLeftovers();
  ASSERT_FALSE(HasFailure());
  const Expected expected = {{"a", {1}}, {"b", {std::nullopt}}};
  // The opens leave the garbage to GC (StoreOptions::reclaim_torn_saves).
  const StoreOptions keep = {.reclaim_torn_saves = false};

  // Count GC's operations, and check that there is garbage to collect.
  ASSERT_OK(OpenStore(keep));
  fs_->ResetCounts();
  ASSERT_OK_AND_ASSIGN(GcReport report, store_->CollectGarbage());
  EXPECT_EQ(report.dropped_column_families, std::vector<std::string>{"b"});
  EXPECT_FALSE(report.deleted_staging_files.empty());
  const uint64_t total = fs_->Count(kOpMutating);
  CloseStore();

  uint64_t cuts = 0;
  for (uint64_t n = 0; n < total; n += SweepStride(total, kCutPoints)) {
    SCOPED_TRACE("power cut after GC operation " + std::to_string(n) + " of " +
                 std::to_string(total));
    RemoveStore();
    std::filesystem::copy(leftovers, store_path(),
                          std::filesystem::copy_options::recursive);
    ASSERT_OK(OpenStore(keep));
    fs_->CutPowerAfter(n);
    store_->CollectGarbage().IgnoreError();  // Fails once the power goes.
    CloseStore();
    ASSERT_OK(fs_->SimulatePowerLoss());
    ++cuts;
    ASSERT_OK(OpenStore(keep));
    ASSERT_TRUE(CheckStore(expected));
    CloseStore();
  }
  std::cout << "[ FIGURES  ] power cuts simulated during GC: " << cuts << "\n";
  RecordProperty("power_cuts", static_cast<int>(cuts));
  EXPECT_EQ(cuts, total);
}

// The same garbage, reclaimed by a read-write open (issue #38): the power
// goes after each of the open's writes in turn, and the store that comes
// back holds what it held.
TEST_F(PowerLossTest, CutsDuringTheReclaimOfAReadWriteOpen) {
  const std::string leftovers = MakeLeftovers();
  ASSERT_FALSE(HasFailure());
  const Expected expected = {{"a", {1}}, {"b", {std::nullopt}}};

  fs_->ResetCounts();
  ASSERT_OK(OpenStore());
  const uint64_t total = fs_->Count(kOpMutating);
  EXPECT_EQ(store_->ReclaimedOnOpen().dropped_column_families,
            std::vector<std::string>{"b"});
  EXPECT_FALSE(store_->ReclaimedOnOpen().deleted_staging_files.empty());
  CloseStore();

  uint64_t cuts = 0;
  for (uint64_t n = 0; n < total; n += SweepStride(total, kCutPoints)) {
    SCOPED_TRACE("power cut after open operation " + std::to_string(n) +
                 " of " + std::to_string(total));
    RemoveStore();
    std::filesystem::copy(leftovers, store_path(),
                          std::filesystem::copy_options::recursive);
    fs_->CutPowerAfter(n);
    OpenStore().IgnoreError();  // Fails, or not, once the power goes.
    CloseStore();
    ASSERT_OK(fs_->SimulatePowerLoss());
    ++cuts;
    ASSERT_OK(OpenStore());
    ASSERT_TRUE(CheckStore(expected));
    ASSERT_OK_AND_ASSIGN(GcReport gc, store_->CollectGarbage(/*dry_run=*/true));
    EXPECT_TRUE(gc.dropped_column_families.empty());
    CloseStore();
  }
  std::cout << "[ FIGURES  ] power cuts simulated during reclaiming opens: "
            << cuts << " of " << total << " points\n";
  EXPECT_GE(cuts, MinCuts(total));
}

}  // namespace
}  // namespace rocksdcp::testing
