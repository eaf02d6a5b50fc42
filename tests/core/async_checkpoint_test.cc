// AsyncCheckpointer over MemoryStorage: what a save commits is the state at
// Save time, whatever the caller does to its tensors afterwards, under every
// staging budget and whether or not the storage releases data early.

#include "rocksdcp/async_checkpoint.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "memory_storage.h"
#include "test_util.h"
#include "util/ready_future.h"

namespace rocksdcp {
namespace {

using ::rocksdcp::testing::MemoryStorage;
using ::rocksdcp::testing::OwnedTensor;
using ::rocksdcp::testing::RandomBytes;
using ::rocksdcp::testing::RandomTensor;
using ::rocksdcp::testing::StatusIs;
using ::rocksdcp::testing::ZeroTensor;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::Eq;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// A trainer's state: views of buffers the test owns, so that it can
// scribble over them once Save returns.
struct TrainingState {
  std::deque<OwnedTensor> buffers;
  StateDict dict;
  uint64_t tensor_bytes = 0;
  uint64_t value_bytes = 0;  // Of the byte values.
};

// One of each kind of value, every byte a function of `seed` (all zero
// with seed 0: a load's destination): dense tensors of several sizes, a
// sharded tensor of two shards, a transposed view, a column slice (gaps
// between its rows), a 0-d and an empty tensor, and bytes.
TrainingState MakeState(uint64_t seed) {
  TrainingState s;
  auto buffer = [&](DType dtype, const std::vector<int64_t>& sizes) {
    OwnedTensor& t = s.buffers.emplace_back(
        seed == 0 ? ZeroTensor(dtype, sizes)
                  : RandomTensor(dtype, sizes, seed * 100 + s.buffers.size()));
    return t.bytes.data();
  };
  auto add = [&](const std::string& fqn, TensorView view) {
    s.tensor_bytes += view.nbytes();
    s.dict[fqn] = std::move(view);
  };
  auto dense = [&](const std::string& fqn, DType dtype,
                   std::vector<int64_t> sizes) {
    void* data = buffer(dtype, sizes);
    add(fqn, TensorView::Contiguous(dtype, std::move(sizes), data));
  };
  dense("layer0.w", DType::kFloat32, {64, 32});
  dense("layer0.b", DType::kFloat32, {1000});
  dense("layer1.w", DType::kBFloat16, {48, 100});
  dense("step_count", DType::kInt64, {});
  ShardedTensor emb{DType::kFloat32, {8, 64}, {}};
  for (int64_t row : {0, 4}) {
    emb.local_shards.push_back(
        {{row, 0},
         TensorView::Contiguous(DType::kFloat32, {4, 64},
                                buffer(DType::kFloat32, {4, 64}))});
    s.tensor_bytes += 4 * 64 * 4;
  }
  s.dict["emb"] = emb;
  TensorView t = TensorView::Contiguous(DType::kFloat32, {8, 16},
                                        buffer(DType::kFloat32, {16, 8}));
  t.strides = {1, 8};
  add("proj.t", t);
  // Columns 2..5 of a [16, 8] buffer. The other columns are zero in every
  // state, since loading leaves them alone.
  uint8_t* cols = buffer(DType::kFloat32, {16, 8});
  for (int64_t r = 0; r < 16; ++r) {
    for (int64_t c : {0, 1, 6, 7}) std::memset(cols + (r * 8 + c) * 4, 0, 4);
  }
  TensorView slice =
      TensorView::Contiguous(DType::kFloat32, {16, 4}, cols + 2 * 4);
  slice.strides = {8, 1};
  add("cols", slice);
  static float no_data;
  s.dict["empty"] = TensorView::Contiguous(DType::kFloat32, {0, 4}, &no_data);
  std::string rng_state =
      seed == 0 ? std::string(100, '\0') : RandomBytes(100, seed * 100 + 99);
  s.value_bytes = rng_state.size();
  s.dict["rng"] = std::move(rng_state);
  return s;
}

// What training does once Save returns: every tensor and byte value
// changes.
void Scribble(TrainingState& s) {
  for (auto& t : s.buffers) std::memset(t.bytes.data(), 0xEE, t.bytes.size());
  s.dict["rng"] = std::string("scribbled");
}

::testing::AssertionResult SameState(const TrainingState& a,
                                     const TrainingState& b) {
  for (size_t i = 0; i < a.buffers.size(); ++i) {
    if (a.buffers[i].bytes != b.buffers[i].bytes) {
      return ::testing::AssertionFailure()
             << "tensor buffer " << i << " differs";
    }
  }
  if (std::get<std::string>(a.dict.at("rng")) !=
      std::get<std::string>(b.dict.at("rng"))) {
    return ::testing::AssertionFailure() << "bytes 'rng' differ";
  }
  return ::testing::AssertionSuccess();
}

// A std::promise<void> that a test opens once it has seen what it wanted.
class Gate {
 public:
  Gate() : opened_(promise_.get_future().share()) {}
  void Open() { promise_.set_value(); }
  void Wait() const { opened_.wait(); }

 private:
  std::promise<void> promise_;
  std::shared_future<void> opened_;
};

// Forwards every planner call, except that ReleaseData goes nowhere: what
// a storage that never calls ReleaseData looks like to the planner.
class NoReleasePlanner : public SavePlannerWrapper {
 public:
  using SavePlannerWrapper::SavePlannerWrapper;
  void ReleaseData(const WriteItem& /*item*/) override {}
};

// Wraps a writer to fail a call, hold WriteData or Finish until a gate
// opens, or hide the planner's ReleaseData from the storage.
class TestWriter : public StorageWriterWrapper {
 public:
  struct Options {
    std::string fail_at;  // "Reset", "WriteData" or "Finish".
    bool release = true;
    const Gate* write_gate = nullptr;
    const Gate* finish_gate = nullptr;
  };
  TestWriter(StorageWriter* inner, Options options)
      : StorageWriterWrapper(inner), options_(options) {}

  Status Reset(std::string_view id) override {
    if (options_.fail_at == "Reset") return Status::IOError("disk full");
    return target()->Reset(id);
  }
  std::future<Result<std::vector<WriteResult>>> WriteData(
      const SavePlan& plan, SavePlanner& planner) override {
    if (options_.write_gate) options_.write_gate->Wait();
    if (options_.fail_at == "WriteData") {
      return util::ReadyFuture(
          Result<std::vector<WriteResult>>(Status::IOError("disk full")));
    }
    if (options_.release) return target()->WriteData(plan, planner);
    no_release_ = std::make_unique<NoReleasePlanner>(&planner);
    return target()->WriteData(plan, *no_release_);
  }
  Status Finish(Metadata* metadata,
                const std::vector<std::vector<WriteResult>>& results) override {
    if (options_.finish_gate) options_.finish_gate->Wait();
    if (options_.fail_at == "Finish") return Status::IOError("disk full");
    return target()->Finish(metadata, results);
  }

 private:
  Options options_;
  std::unique_ptr<NoReleasePlanner> no_release_;
};

// A DefaultSavePlanner that can fail ResolveData, counts ReleaseData, and
// can save each 2-D tensor as two column halves: items that are strided
// parts of one dict tensor.
class TestPlanner : public SavePlannerWrapper {
 public:
  struct Options {
    bool split_columns = false;
    // Fqns not to split.
    std::set<std::string> keep_whole;
    // Write the items last to first.
    bool reverse = false;
    Status resolve_error;
  };
  explicit TestPlanner(Options options)
      : SavePlannerWrapper(&inner_), options_(std::move(options)) {}

  Status SetUpPlanner(const StateDict* sd, const std::optional<StorageMeta>& m,
                      bool is_coordinator) override {
    dict_ = sd;
    return SavePlannerWrapper::SetUpPlanner(sd, m, is_coordinator);
  }
  Result<SavePlan> CreateLocalPlan() override {
    ROCKSDCP_ASSIGN_OR_RETURN(SavePlan plan,
                              SavePlannerWrapper::CreateLocalPlan());
    if (!options_.split_columns) return plan;
    std::vector<WriteItem> items;
    for (WriteItem& item : plan.items) {
      const TensorView* view = DenseView(item.index.fqn);
      if (item.type != WriteItemType::kTensor || view == nullptr ||
          view->dim() != 2 || view->numel() == 0 || view->sizes[1] < 2 ||
          options_.keep_whole.count(item.index.fqn)) {
        items.push_back(std::move(item));
        continue;
      }
      const int64_t rows = view->sizes[0], cols = view->sizes[1];
      for (int64_t c0 : {int64_t{0}, cols / 2}) {
        WriteItem half = item;
        const int64_t width = c0 == 0 ? cols / 2 : cols - cols / 2;
        half.type = WriteItemType::kShard;
        half.index = MetadataIndex(item.index.fqn, {0, c0});
        half.tensor_data->chunk = {{0, c0}, {rows, width}};
        items.push_back(std::move(half));
      }
    }
    plan.items = std::move(items);
    return plan;
  }
  Result<SavePlan> FinishPlan(SavePlan plan) override {
    ROCKSDCP_ASSIGN_OR_RETURN(SavePlan final_plan,
                              SavePlannerWrapper::FinishPlan(std::move(plan)));
    if (options_.reverse) {
      std::reverse(final_plan.items.begin(), final_plan.items.end());
    }
    return final_plan;
  }
  Result<ResolvedData> ResolveData(const WriteItem& item) override {
    if (!options_.resolve_error.ok()) return options_.resolve_error;
    const TensorView* view = DenseView(item.index.fqn);
    if (item.type == WriteItemType::kShard && view != nullptr) {
      return ResolvedData(view->Narrow(item.tensor_data->chunk.offsets,
                                       item.tensor_data->chunk.sizes));
    }
    return SavePlannerWrapper::ResolveData(item);
  }
  void ReleaseData(const WriteItem& item) override { ++releases_; }

  int releases() const { return releases_; }

 private:
  const TensorView* DenseView(const std::string& fqn) const {
    auto it = dict_->find(fqn);
    return it == dict_->end() ? nullptr : std::get_if<TensorView>(&it->second);
  }

  Options options_;
  DefaultSavePlanner inner_;
  const StateDict* dict_ = nullptr;
  std::atomic<int> releases_{0};
};

class AsyncCheckpointTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kLarge = 1 << 20;

  std::unique_ptr<AsyncCheckpointer> Checkpointer(uint64_t budget,
                                                  bool prefault = true) {
    auto made = AsyncCheckpointer::Create(
        {.staging_budget = budget, .prefault = prefault});
    EXPECT_OK(made);
    return made.ok() ? std::move(made).value() : nullptr;
  }

  // Saves MakeState(seed) as `id` through `writer_options`, scribbles over
  // the state as soon as Save returns, and expects the commit to succeed.
  AsyncSaveHandle SaveAndScribble(AsyncCheckpointer& checkpointer,
                                  const std::string& id, uint64_t seed,
                                  TestWriter::Options writer_options = {}) {
    TrainingState state = MakeState(seed);
    auto memory = storage_.NewWriter();
    TestWriter writer(memory.get(), writer_options);
    auto handle = checkpointer.Save(state.dict, writer, {.checkpoint_id = id});
    EXPECT_OK(handle);
    if (!handle.ok()) return {};
    Scribble(state);
    EXPECT_OK(handle->committed.get());
    return std::move(handle).value();
  }

  void ExpectCheckpointHolds(const std::string& id, uint64_t seed) {
    TrainingState loaded = MakeState(0);
    auto reader = storage_.NewReader();
    ASSERT_OK(Load(&loaded.dict, *reader, {.checkpoint_id = id}));
    EXPECT_TRUE(SameState(loaded, MakeState(seed))) << id;
  }

  MemoryStorage storage_;
  const TrainingState sample_ = MakeState(1);
};

// Budgets: none; less than one tensor (1 KiB: the shards fit, the large
// tensors don't); half the dict; more than the dict. Each with a storage
// that releases data as it writes, and one that never does.
enum class Budget { kZero, kBelowOneTensor, kHalfTheDict, kAboveTheDict };

class AsyncBudgetTest
    : public AsyncCheckpointTest,
      public ::testing::WithParamInterface<std::tuple<Budget, bool>> {
 protected:
  uint64_t budget() const {
    switch (std::get<0>(GetParam())) {
      case Budget::kZero:
        return 0;
      case Budget::kBelowOneTensor:
        return 1024;
      case Budget::kHalfTheDict:
        return sample_.tensor_bytes / 2;
      case Budget::kAboveTheDict:
        return kLarge;
    }
    return 0;
  }
  bool storage_releases() const { return std::get<1>(GetParam()); }
};

TEST_P(AsyncBudgetTest, CommitsTheStateAsItWasWhenSaveReturned) {
  auto checkpointer = Checkpointer(budget());
  AsyncSaveHandle handle =
      SaveAndScribble(*checkpointer, "c", 1, {.release = storage_releases()});
  // Every tensor byte was either copied or read in place before Save
  // returned.
  EXPECT_EQ(handle.staged_bytes + handle.live_bytes,
            sample_.tensor_bytes + sample_.value_bytes);
  if (budget() == 0) {
    EXPECT_EQ(handle.live_bytes, sample_.tensor_bytes);
  }
  ExpectCheckpointHolds("c", 1);
}

TEST_P(AsyncBudgetTest, ConsecutiveSavesEachCommitTheirOwnState) {
  auto checkpointer = Checkpointer(budget());
  for (uint64_t seed : {11, 12, 13}) {
    SaveAndScribble(*checkpointer, "c" + std::to_string(seed), seed,
                    {.release = storage_releases()});
  }
  for (uint64_t seed : {11, 12, 13}) {
    ExpectCheckpointHolds("c" + std::to_string(seed), seed);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Budgets, AsyncBudgetTest,
    ::testing::Combine(::testing::Values(Budget::kZero, Budget::kBelowOneTensor,
                                         Budget::kHalfTheDict,
                                         Budget::kAboveTheDict),
                       ::testing::Bool()));

TEST_F(AsyncCheckpointTest, WithRoomForTheDictSaveDoesNotWaitForTheStorage) {
  // The storage can't write a byte until the gate opens, after Save has
  // returned: everything must have been staged.
  auto checkpointer = Checkpointer(kLarge);
  TrainingState state = MakeState(1);
  Gate gate;
  auto memory = storage_.NewWriter();
  TestWriter writer(memory.get(), {.write_gate = &gate});
  ASSERT_OK_AND_ASSIGN(
      AsyncSaveHandle handle,
      checkpointer->Save(state.dict, writer, {.checkpoint_id = "c"}));
  EXPECT_EQ(handle.live_bytes, 0u);
  EXPECT_EQ(handle.staged_bytes, state.tensor_bytes + state.value_bytes);
  Scribble(state);
  gate.Open();
  ASSERT_OK(handle.committed.get());
  ExpectCheckpointHolds("c", 1);
}

TEST_F(AsyncCheckpointTest, SaveNeverWaitsForTheCommit) {
  // Nothing staged, and a storage that never releases: Save still returns
  // once the data is written, while Finish is held.
  auto checkpointer = Checkpointer(0);
  TrainingState state = MakeState(1);
  Gate finish;
  auto memory = storage_.NewWriter();
  TestWriter writer(memory.get(), {.release = false, .finish_gate = &finish});
  ASSERT_OK_AND_ASSIGN(
      AsyncSaveHandle handle,
      checkpointer->Save(state.dict, writer, {.checkpoint_id = "c"}));
  EXPECT_THAT(storage_.List(), IsEmpty());
  Scribble(state);
  finish.Open();
  ASSERT_OK(handle.committed.get());
  ExpectCheckpointHolds("c", 1);
}

TEST_F(AsyncCheckpointTest, TheDictMayBeDestroyedOnceSaveReturns) {
  auto checkpointer = Checkpointer(kLarge);
  auto state = std::make_unique<TrainingState>(MakeState(1));
  auto writer = storage_.NewWriter();
  ASSERT_OK_AND_ASSIGN(
      AsyncSaveHandle handle,
      checkpointer->Save(state->dict, *writer, {.checkpoint_id = "c"}));
  Scribble(*state);
  state.reset();
  ASSERT_OK(handle.committed.get());
  ExpectCheckpointHolds("c", 1);
}

TEST_F(AsyncCheckpointTest, ErrorsComeOutOfCommittedNamingTheStep) {
  const std::map<std::string, std::string> step_of = {
      {"Reset", "reset"}, {"WriteData", "write_data"}, {"Finish", "finish"}};
  for (uint64_t budget : {uint64_t{0}, kLarge}) {
    auto checkpointer = Checkpointer(budget);
    for (const auto& [call, step] : step_of) {
      SCOPED_TRACE(call + " with budget " + std::to_string(budget));
      TrainingState state = MakeState(1);
      auto memory = storage_.NewWriter();
      TestWriter writer(memory.get(), {.fail_at = call});
      ASSERT_OK_AND_ASSIGN(
          AsyncSaveHandle handle,
          checkpointer->Save(state.dict, writer, {.checkpoint_id = "c"}));
      EXPECT_THAT(handle.committed.get(),
                  StatusIs(StatusCode::kIOError,
                           Eq("save of checkpoint 'c' failed on rank 0 at " +
                              step + ": disk full")));
      EXPECT_THAT(storage_.List(), Not(Contains("c")));
    }
    // The failures left the checkpointer able to save.
    SaveAndScribble(*checkpointer, "after-" + std::to_string(budget), 2);
    ExpectCheckpointHolds("after-" + std::to_string(budget), 2);
  }
}

TEST_F(AsyncCheckpointTest, PlannerErrorsComeOutOfCommitted) {
  auto checkpointer = Checkpointer(kLarge);
  TrainingState state = MakeState(1);
  TestPlanner planner({.resolve_error = Status::Corruption("bad tensor")});
  auto writer = storage_.NewWriter();
  ASSERT_OK_AND_ASSIGN(
      AsyncSaveHandle handle,
      checkpointer->Save(state.dict, *writer,
                         {.checkpoint_id = "c", .planner = &planner}));
  EXPECT_THAT(handle.committed.get(),
              StatusIs(StatusCode::kCorruption,
                       Eq("save of checkpoint 'c' failed on rank 0 at "
                          "write_data: bad tensor")));
}

TEST_F(AsyncCheckpointTest, EmptyCheckpointIdFailsAtOnce) {
  auto checkpointer = Checkpointer(kLarge);
  TrainingState state = MakeState(1);
  auto writer = storage_.NewWriter();
  EXPECT_THAT(
      checkpointer->Save(state.dict, *writer, {}),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("checkpoint_id")));
}

TEST_F(AsyncCheckpointTest, TheCallersPlannerIsUsedAndSeesEveryRelease) {
  // Column halves are strided parts of their tensors (contiguous or
  // transposed): the staged copy must serve them at the same offsets.
  for (uint64_t budget : {uint64_t{0}, kLarge}) {
    SCOPED_TRACE(budget);
    auto checkpointer = Checkpointer(budget);
    TrainingState state = MakeState(1);
    TestPlanner planner({.split_columns = true, .keep_whole = {"cols"}});
    Gate gate;
    auto memory = storage_.NewWriter();
    TestWriter writer(memory.get(), {.write_gate = &gate});
    const std::string id = "c" + std::to_string(budget);
    // With no budget, Save waits for the storage, so the gate starts open.
    if (budget == 0) gate.Open();
    ASSERT_OK_AND_ASSIGN(
        AsyncSaveHandle handle,
        checkpointer->Save(state.dict, writer,
                           {.checkpoint_id = id, .planner = &planner}));
    Scribble(state);
    if (budget != 0) gate.Open();
    ASSERT_OK_AND_ASSIGN(Metadata md, handle.committed.get());
    // Three 2-D tensors of two halves each, two shards, and layer0.b,
    // step_count, cols, empty and rng.
    EXPECT_EQ(planner.releases(), 3 * 2 + 2 + 5);
    EXPECT_EQ(md.storage_data.size(), 3u * 2 + 2 + 5);
    ExpectCheckpointHolds(id, 1);
  }
}

TEST_F(AsyncCheckpointTest, PartOfAStagedSliceIsNotSupported) {
  // cols has gaps between its rows, so it is staged packed; a planner
  // splitting it can't be served from the copy, and says so instead of
  // writing garbage.
  auto checkpointer = Checkpointer(kLarge);
  TrainingState state = MakeState(1);
  TestPlanner planner({.split_columns = true});
  Gate gate;
  auto memory = storage_.NewWriter();
  TestWriter writer(memory.get(), {.write_gate = &gate});
  ASSERT_OK_AND_ASSIGN(
      AsyncSaveHandle handle,
      checkpointer->Save(state.dict, writer,
                         {.checkpoint_id = "c", .planner = &planner}));
  gate.Open();
  EXPECT_THAT(handle.committed.get(),
              StatusIs(StatusCode::kNotSupported,
                       AllOf(HasSubstr("at write_data"), HasSubstr("cols"),
                             HasSubstr("staged packed"))));
}

TEST_F(AsyncCheckpointTest, TheStorageStagesWhatItReachesFirst) {
  // The storage writes last to first and never releases. The caller stages
  // cols and emb's first shard, then waits for room for the second shard,
  // until the storage claims it, which it does only after step_count: so
  // the storage reaches step_count first, finds room, and copies it; the
  // larger tensors it reads in place.
  auto checkpointer = Checkpointer(256 + 2 * 1024 - 512);
  TrainingState state = MakeState(1);
  TestPlanner planner({.reverse = true});
  auto memory = storage_.NewWriter();
  TestWriter writer(memory.get(), {.release = false});
  ASSERT_OK_AND_ASSIGN(
      AsyncSaveHandle handle,
      checkpointer->Save(state.dict, writer,
                         {.checkpoint_id = "c", .planner = &planner}));
  Scribble(state);
  ASSERT_OK(handle.committed.get());
  EXPECT_EQ(handle.staged_bytes + handle.live_bytes,
            state.tensor_bytes + state.value_bytes);
  EXPECT_GT(handle.live_bytes, 0u);
  ExpectCheckpointHolds("c", 1);
}

TEST_F(AsyncCheckpointTest, SavesReuseThePool) {
  // Without prefault, the first save touches fresh memory and the second,
  // identical one reuses it. The gate keeps both from freeing anything
  // while staging, so both lay out their blocks the same way.
  auto checkpointer = Checkpointer(kLarge, /*prefault=*/false);
  EXPECT_EQ(checkpointer->staging_capacity(), kLarge);
  std::vector<uint64_t> first_touch;
  for (const std::string id : {"a", "b"}) {
    TrainingState state = MakeState(1);
    Gate gate;
    auto memory = storage_.NewWriter();
    TestWriter writer(memory.get(), {.write_gate = &gate});
    ASSERT_OK_AND_ASSIGN(
        AsyncSaveHandle handle,
        checkpointer->Save(state.dict, writer, {.checkpoint_id = id}));
    first_touch.push_back(handle.first_touch_bytes);
    gate.Open();
    ASSERT_OK(handle.committed.get());
  }
  EXPECT_GE(first_touch[0], sample_.tensor_bytes);
  EXPECT_EQ(first_touch[1], 0u);

  auto prefaulted = Checkpointer(kLarge, /*prefault=*/true);
  EXPECT_EQ(SaveAndScribble(*prefaulted, "c", 1).first_touch_bytes, 0u);
}

TEST_F(AsyncCheckpointTest, ASecondSaveWaitsForTheFirst) {
  // No waiting on the first future before the second Save: saves queue.
  auto checkpointer = Checkpointer(sample_.tensor_bytes / 2);
  TrainingState first = MakeState(1);
  TrainingState second = MakeState(2);
  auto w1 = storage_.NewWriter();
  auto w2 = storage_.NewWriter();
  ASSERT_OK_AND_ASSIGN(
      AsyncSaveHandle h1,
      checkpointer->Save(first.dict, *w1, {.checkpoint_id = "first"}));
  Scribble(first);
  ASSERT_OK_AND_ASSIGN(
      AsyncSaveHandle h2,
      checkpointer->Save(second.dict, *w2, {.checkpoint_id = "second"}));
  Scribble(second);
  ASSERT_OK(h2.committed.get());
  ASSERT_OK(h1.committed.get());
  ExpectCheckpointHolds("first", 1);
  ExpectCheckpointHolds("second", 2);
}

TEST_F(AsyncCheckpointTest, DestroyingTheCheckpointerWaitsForTheCommit) {
  auto checkpointer = Checkpointer(kLarge);
  TrainingState state = MakeState(1);
  auto writer = storage_.NewWriter();
  ASSERT_OK_AND_ASSIGN(
      AsyncSaveHandle handle,
      checkpointer->Save(state.dict, *writer, {.checkpoint_id = "c"}));
  checkpointer.reset();
  ASSERT_EQ(handle.committed.wait_for(std::chrono::seconds(0)),
            std::future_status::ready);
  ASSERT_OK(handle.committed.get());
  ExpectCheckpointHolds("c", 1);
}

// Two ranks as threads, each with its own checkpointer: a replicated tensor
// (written once, by one rank) and one row shard each of a sharded tensor.
TEST_F(AsyncCheckpointTest, RanksSaveAsynchronouslyTogether) {
  constexpr int kRanks = 2;
  constexpr int64_t kRows = 8, kCols = 64;
  for (uint64_t budget : {uint64_t{0}, uint64_t{1024}, kLarge}) {
    SCOPED_TRACE(budget);
    const std::string id = "ranks-" + std::to_string(budget);
    const std::vector<uint8_t> shared =
        RandomTensor(DType::kFloat32, {32, 32}, budget + 1).bytes;
    std::vector<uint8_t> global =
        RandomTensor(DType::kFloat32, {kRows, kCols}, budget + 2).bytes;
    const std::vector<uint8_t> want_shared = shared, want_global = global;

    std::vector<Status> results(kRanks);
    std::vector<std::vector<uint8_t>> replicas(kRanks, shared);
    testing::RunRanks(kRanks, 0, [&](int r, Collective& c) {
      auto checkpointer = Checkpointer(budget);
      auto writer = storage_.NewWriter();
      const int64_t rows = kRows / kRanks;
      uint8_t* mine = global.data() + r * rows * kCols * 4;
      StateDict sd;
      sd["shared"] =
          TensorView::Contiguous(DType::kFloat32, {32, 32}, replicas[r].data());
      sd["sharded"] = ShardedTensor{
          DType::kFloat32,
          {kRows, kCols},
          {{{r * rows, 0},
            TensorView::Contiguous(DType::kFloat32, {rows, kCols}, mine)}}};
      sd["step"] = std::string("step=7");
      auto handle = checkpointer->Save(sd, *writer,
                                       {.checkpoint_id = id, .collective = &c});
      if (!handle.ok()) {
        results[r] = handle.status();
        return;
      }
      std::memset(mine, 0xEE, rows * kCols * 4);
      std::memset(replicas[r].data(), 0xEE, replicas[r].size());
      results[r] = handle->committed.get().status();
    });
    for (int r = 0; r < kRanks; ++r) ASSERT_OK(results[r]) << "rank " << r;

    std::vector<uint8_t> got_shared(want_shared.size()),
        got_global(want_global.size());
    StateDict sd{
        {"shared",
         TensorView::Contiguous(DType::kFloat32, {32, 32}, got_shared.data())},
        {"sharded", TensorView::Contiguous(DType::kFloat32, {kRows, kCols},
                                           got_global.data())},
        {"step", std::string()}};
    auto reader = storage_.NewReader();
    ASSERT_OK(Load(&sd, *reader, {.checkpoint_id = id}));
    EXPECT_EQ(got_shared, want_shared);
    EXPECT_EQ(got_global, want_global);
    EXPECT_EQ(std::get<std::string>(sd["step"]), "step=7");
  }
}

}  // namespace
}  // namespace rocksdcp
