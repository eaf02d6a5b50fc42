// AsyncCheckpointer over a real Store: the committed checkpoint is the state
// at Save time although every tensor changes as soon as Save returns, with
// one rank and with several.

#include <cstring>
#include <string>
#include <vector>

#include "rocksdb/store_fixture.h"

namespace rocksdcp::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// What training does once Save returns: every tensor and byte value changes.
void Scribble(ExampleState& s) {
  for (OwnedTensor& t : s.tensors) {
    std::memset(t.bytes.data(), 0xEE, t.bytes.size());
  }
  s.dict["optimizer/state"] = std::string("scribbled");
}

uint64_t TensorBytes(const ExampleState& s) {
  uint64_t n = 0;
  for (const OwnedTensor& t : s.tensors) n += t.view.nbytes();
  return n;
}

class AsyncSaveTest : public StoreTest {
 protected:
  std::unique_ptr<AsyncCheckpointer> Checkpointer(uint64_t budget) {
    auto made = AsyncCheckpointer::Create({.staging_budget = budget});
    EXPECT_OK(made);
    return made.ok() ? std::move(made).value() : nullptr;
  }

  // Saves ExampleStateDict(seed) as `id` (in pieces of 4 KiB), scribbling
  // over it once Save returns; the result of the commit.
  Result<Metadata> SaveAndScribble(AsyncCheckpointer& checkpointer,
                                   const std::string& id, uint64_t seed,
                                   Collective* collective = nullptr) {
    ExampleState state = ExampleStateDict(seed);
    ROCKSDCP_ASSIGN_OR_RETURN(auto writer,
                              store_->NewWriter({.max_piece_bytes = 4096}));
    ROCKSDCP_ASSIGN_OR_RETURN(
        AsyncSaveHandle handle,
        checkpointer.Save(state.dict, *writer,
                          {.checkpoint_id = id, .collective = collective}));
    Scribble(state);
    return handle.committed.get();
  }

  void ExpectCheckpointHolds(const std::string& id, uint64_t seed) {
    ExampleState loaded = EmptyExampleStateDict();
    ASSERT_OK(LoadDict(&loaded.dict, id));
    EXPECT_TRUE(IsExampleState(loaded, seed)) << id;
  }
};

class AsyncSaveBudgetTest : public AsyncSaveTest,
                            public ::testing::WithParamInterface<uint64_t> {};

TEST_P(AsyncSaveBudgetTest, CommitsTheStateAsItWasWhenSaveReturned) {
  auto checkpointer = Checkpointer(GetParam());
  ASSERT_OK(SaveAndScribble(*checkpointer, "c", 5));
  ExpectCheckpointHolds("c", 5);
}

TEST_P(AsyncSaveBudgetTest, QueuedSavesEachCommitTheirOwnState) {
  // Three saves back to back, without waiting for a commit in between.
  auto checkpointer = Checkpointer(GetParam());
  std::vector<ExampleState> states;
  std::vector<std::unique_ptr<RocksDBStorageWriter>> writers;
  std::vector<AsyncSaveHandle> handles;
  for (uint64_t seed : {1, 2, 3}) {
    states.push_back(ExampleStateDict(seed));
    ASSERT_OK_AND_ASSIGN(writers.emplace_back(), store_->NewWriter());
    ASSERT_OK_AND_ASSIGN(
        handles.emplace_back(),
        checkpointer->Save(states.back().dict, *writers.back(),
                           {.checkpoint_id = "c" + std::to_string(seed)}));
    Scribble(states.back());
  }
  for (AsyncSaveHandle& h : handles) ASSERT_OK(h.committed.get());
  for (uint64_t seed : {1, 2, 3}) {
    ExpectCheckpointHolds("c" + std::to_string(seed), seed);
  }
}

// None; less than the largest tensor (9600 bytes of bf16); about half the
// dict's tensors; more than the dict.
INSTANTIATE_TEST_SUITE_P(Budgets, AsyncSaveBudgetTest,
                         ::testing::Values(0, 1024,
                                           TensorBytes(ExampleStateDict(0)) / 2,
                                           1 << 20));

// Incremental saves through AsyncCheckpointer: queued saves, each based on
// the newest committed checkpoint when its commit begins, reference what
// the one before wrote and commit their own state.
TEST_F(AsyncSaveTest, QueuedIncrementalSavesReferenceTheirPredecessors) {
  auto checkpointer = Checkpointer(1 << 20);
  std::vector<ExampleState> states;
  std::vector<std::unique_ptr<RocksDBStorageWriter>> writers;
  std::vector<AsyncSaveHandle> handles;
  for (int step = 0; step < 3; ++step) {
    states.push_back(ExampleStateDict(1));
    ASSERT_OK_AND_ASSIGN(
        writers.emplace_back(),
        store_->NewWriter({.base_on_newest = true, .max_piece_bytes = 4096}));
    ASSERT_OK_AND_ASSIGN(
        handles.emplace_back(),
        checkpointer->Save(states.back().dict, *writers.back(),
                           {.checkpoint_id = "c" + std::to_string(step)}));
    Scribble(states.back());
    // One at a time, so that each has the one before as its base.
    ASSERT_OK(handles.back().committed.get());
  }
  for (int step = 0; step < 3; ++step) {
    ExpectCheckpointHolds("c" + std::to_string(step), 1);
  }
  ASSERT_OK_AND_ASSIGN(CheckpointInfo first, store_->Info("c0"));
  ASSERT_OK_AND_ASSIGN(CheckpointInfo last, store_->Info("c2"));
  EXPECT_EQ(first.referenced_bytes, 0u);
  // Nothing changed: all of it is the first one's.
  EXPECT_EQ(last.referenced_bytes, last.bytes);
  EXPECT_THAT(last.referenced_column_families, ::testing::ElementsAre("c0"));
}

TEST_F(AsyncSaveTest, StoreErrorsComeOutOfCommittedNamingTheStep) {
  ASSERT_OK(SaveDict(ExampleStateDict(1).dict, "c"));
  auto checkpointer = Checkpointer(1 << 20);
  EXPECT_THAT(SaveAndScribble(*checkpointer, "c", 2),
              StatusIs(StatusCode::kAlreadyExists,
                       AllOf(HasSubstr("save of checkpoint 'c' failed on "
                                       "rank 0 at"),
                             HasSubstr("'c'"))));
  // The failed save committed nothing, and the next one works.
  ExpectCheckpointHolds("c", 1);
  ASSERT_OK(SaveAndScribble(*checkpointer, "d", 3));
  ExpectCheckpointHolds("d", 3);
}

TEST_F(AsyncSaveTest, RanksSaveAsynchronouslyIntoOneStore) {
  // Two ranks as threads, each with its own checkpointer and writer: a
  // replicated tensor (written by one rank) and one row shard each.
  constexpr int kRanks = 2;
  constexpr int64_t kRows = 8, kCols = 300;
  for (uint64_t budget : {uint64_t{0}, uint64_t{4096}, uint64_t{1} << 20}) {
    SCOPED_TRACE(budget);
    const std::string id = "ranks-" + std::to_string(budget);
    const OwnedTensor want_global =
        RandomTensor(DType::kFloat32, {kRows, kCols}, budget + 1);
    const OwnedTensor want_bias = RandomTensor(DType::kInt64, {16}, budget + 2);
    std::vector<Status> results(kRanks);
    RunRanks(kRanks, 0, [&](int r, Collective& c) {
      auto checkpointer = Checkpointer(budget);
      const int64_t rows = kRows / kRanks;
      OwnedTensor mine = ZeroTensor(DType::kFloat32, {rows, kCols});
      CopyTensor(want_global.view.Narrow({r * rows, 0}, {rows, kCols}),
                 mine.view);
      OwnedTensor bias = want_bias;
      bias.view.data = bias.bytes.data();
      StateDict sd;
      sd["w"] = ShardedTensor{
          DType::kFloat32, {kRows, kCols}, {{{r * rows, 0}, mine.view}}};
      sd["bias"] = bias.view;
      sd["step"] = std::string("step=9");
      auto writer = store_->NewWriter({.max_piece_bytes = 4096});
      if (!writer.ok()) {
        results[r] = writer.status();
        return;
      }
      auto handle = checkpointer->Save(sd, **writer,
                                       {.checkpoint_id = id, .collective = &c});
      if (!handle.ok()) {
        results[r] = handle.status();
        return;
      }
      std::memset(mine.bytes.data(), 0xEE, mine.bytes.size());
      std::memset(bias.bytes.data(), 0xEE, bias.bytes.size());
      results[r] = handle->committed.get().status();
    });
    for (int r = 0; r < kRanks; ++r) ASSERT_OK(results[r]) << "rank " << r;

    OwnedTensor global = ZeroTensor(DType::kFloat32, {kRows, kCols});
    OwnedTensor bias = ZeroTensor(DType::kInt64, {16});
    StateDict sd{
        {"w", global.view}, {"bias", bias.view}, {"step", std::string()}};
    ASSERT_OK(LoadDict(&sd, id));
    EXPECT_TRUE(SameTensor(global.view, want_global.view));
    EXPECT_TRUE(SameTensor(bias.view, want_bias.view));
    EXPECT_EQ(std::get<std::string>(sd["step"]), "step=9");
  }
}

}  // namespace
}  // namespace rocksdcp::testing
