#include "rocksdcp/checkpoint.h"

#include <cstdint>
#include <deque>
#include <future>
#include <map>
#include <string>
#include <vector>

#include "memory_storage.h"
#include "test_util.h"
#include "util/ready_future.h"

namespace rocksdcp {
namespace {

using ::rocksdcp::testing::MemoryStorage;
using ::rocksdcp::testing::StatusIs;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::Eq;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// The calls of one save or load, in order, and a fault to inject: the call
// named `fail_at` (e.g. "writer.WriteData") fails with `fail_with`.
struct CallLog {
  std::vector<std::string> calls;
  std::string fail_at;
  Status fail_with = Status::IOError("injected");

  Status Record(const std::string& call) {
    calls.push_back(call);
    return call == fail_at ? fail_with : Status::OK();
  }
};

// Wraps a writer, logging each call before passing it on.
class RecordingWriter : public StorageWriter {
 public:
  RecordingWriter(StorageWriter* inner, CallLog* log)
      : inner_(inner), log_(log) {}
  Status Reset(std::string_view id) override {
    ROCKSDCP_RETURN_IF_ERROR(log_->Record("writer.Reset"));
    return inner_->Reset(id);
  }
  Status SetUpStorageWriter(bool is_coordinator, int rank,
                            int world_size) override {
    ROCKSDCP_RETURN_IF_ERROR(log_->Record("writer.SetUpStorageWriter"));
    args_ = {is_coordinator ? 1 : 0, rank, world_size};
    return inner_->SetUpStorageWriter(is_coordinator, rank, world_size);
  }
  Result<SavePlan> PrepareLocalPlan(SavePlan plan) override {
    ROCKSDCP_RETURN_IF_ERROR(log_->Record("writer.PrepareLocalPlan"));
    return inner_->PrepareLocalPlan(std::move(plan));
  }
  Result<std::vector<SavePlan>> PrepareGlobalPlan(
      std::vector<SavePlan> plans) override {
    ROCKSDCP_RETURN_IF_ERROR(log_->Record("writer.PrepareGlobalPlan"));
    return inner_->PrepareGlobalPlan(std::move(plans));
  }
  std::future<Result<std::vector<WriteResult>>> WriteData(
      const SavePlan& plan, SavePlanner& planner) override {
    Status s = log_->Record("writer.WriteData");
    if (!s.ok()) return util::ReadyFuture(Result<std::vector<WriteResult>>(s));
    return inner_->WriteData(plan, planner);
  }
  Status Finish(Metadata* metadata,
                const std::vector<std::vector<WriteResult>>& results) override {
    ROCKSDCP_RETURN_IF_ERROR(log_->Record("writer.Finish"));
    return inner_->Finish(metadata, results);
  }
  std::optional<StorageMeta> GetStorageMeta() override {
    log_->Record("writer.GetStorageMeta").IgnoreError();
    return inner_->GetStorageMeta();
  }

  // is_coordinator, rank and world size given to SetUpStorageWriter.
  std::vector<int> args_;

 private:
  StorageWriter* inner_;
  CallLog* log_;
};

class RecordingReader : public StorageReader {
 public:
  RecordingReader(StorageReader* inner, CallLog* log)
      : inner_(inner), log_(log) {}
  Status Reset(std::string_view id) override {
    ROCKSDCP_RETURN_IF_ERROR(log_->Record("reader.Reset"));
    return inner_->Reset(id);
  }
  Result<Metadata> ReadMetadata() override {
    ROCKSDCP_RETURN_IF_ERROR(log_->Record("reader.ReadMetadata"));
    return inner_->ReadMetadata();
  }
  Status SetUpStorageReader(const Metadata& metadata, bool is_coordinator,
                            int rank, int world_size) override {
    ROCKSDCP_RETURN_IF_ERROR(log_->Record("reader.SetUpStorageReader"));
    args_ = {is_coordinator ? 1 : 0, rank, world_size};
    return inner_->SetUpStorageReader(metadata, is_coordinator, rank,
                                      world_size);
  }
  Result<LoadPlan> PrepareLocalPlan(LoadPlan plan) override {
    ROCKSDCP_RETURN_IF_ERROR(log_->Record("reader.PrepareLocalPlan"));
    return inner_->PrepareLocalPlan(std::move(plan));
  }
  Result<std::vector<LoadPlan>> PrepareGlobalPlan(
      std::vector<LoadPlan> plans) override {
    ROCKSDCP_RETURN_IF_ERROR(log_->Record("reader.PrepareGlobalPlan"));
    return inner_->PrepareGlobalPlan(std::move(plans));
  }
  std::future<Status> ReadData(const LoadPlan& plan,
                               LoadPlanner& planner) override {
    Status s = log_->Record("reader.ReadData");
    if (!s.ok()) return util::ReadyFuture(s);
    return inner_->ReadData(plan, planner);
  }

  std::vector<int> args_;

 private:
  StorageReader* inner_;
  CallLog* log_;
};

class RecordingSavePlanner : public SavePlannerWrapper {
 public:
  explicit RecordingSavePlanner(CallLog* log)
      : SavePlannerWrapper(&inner_), log_(log) {}
  Status SetUpPlanner(const StateDict* state_dict,
                      const std::optional<StorageMeta>& storage_meta,
                      bool is_coordinator) override {
    ROCKSDCP_RETURN_IF_ERROR(log_->Record("planner.SetUpPlanner"));
    storage_meta_ = storage_meta;
    return SavePlannerWrapper::SetUpPlanner(state_dict, storage_meta,
                                            is_coordinator);
  }
  Result<SavePlan> CreateLocalPlan() override {
    ROCKSDCP_RETURN_IF_ERROR(log_->Record("planner.CreateLocalPlan"));
    return SavePlannerWrapper::CreateLocalPlan();
  }
  Result<GlobalSavePlan> CreateGlobalPlan(
      std::vector<SavePlan> plans) override {
    ROCKSDCP_RETURN_IF_ERROR(log_->Record("planner.CreateGlobalPlan"));
    return SavePlannerWrapper::CreateGlobalPlan(std::move(plans));
  }
  Result<SavePlan> FinishPlan(SavePlan plan) override {
    ROCKSDCP_RETURN_IF_ERROR(log_->Record("planner.FinishPlan"));
    return SavePlannerWrapper::FinishPlan(std::move(plan));
  }
  Result<ResolvedData> ResolveData(const WriteItem& item) override {
    ROCKSDCP_RETURN_IF_ERROR(log_->Record("planner.ResolveData"));
    return SavePlannerWrapper::ResolveData(item);
  }

  std::optional<StorageMeta> storage_meta_;

 private:
  DefaultSavePlanner inner_;
  CallLog* log_;
};

class RecordingLoadPlanner : public LoadPlannerWrapper {
 public:
  explicit RecordingLoadPlanner(CallLog* log)
      : LoadPlannerWrapper(&inner_), log_(log) {}
  Status SetUpPlanner(StateDict* state_dict, const Metadata* metadata,
                      bool is_coordinator) override {
    ROCKSDCP_RETURN_IF_ERROR(log_->Record("planner.SetUpPlanner"));
    return LoadPlannerWrapper::SetUpPlanner(state_dict, metadata,
                                            is_coordinator);
  }
  Result<LoadPlan> CreateLocalPlan() override {
    ROCKSDCP_RETURN_IF_ERROR(log_->Record("planner.CreateLocalPlan"));
    return LoadPlannerWrapper::CreateLocalPlan();
  }
  Result<std::vector<LoadPlan>> CreateGlobalPlan(
      std::vector<LoadPlan> plans) override {
    ROCKSDCP_RETURN_IF_ERROR(log_->Record("planner.CreateGlobalPlan"));
    return LoadPlannerWrapper::CreateGlobalPlan(std::move(plans));
  }
  Result<LoadPlan> FinishPlan(LoadPlan plan) override {
    ROCKSDCP_RETURN_IF_ERROR(log_->Record("planner.FinishPlan"));
    return LoadPlannerWrapper::FinishPlan(std::move(plan));
  }
  Status LoadBytes(const ReadItem& item, std::string_view data) override {
    ROCKSDCP_RETURN_IF_ERROR(log_->Record("planner.LoadBytes"));
    return LoadPlannerWrapper::LoadBytes(item, data);
  }
  Result<TensorView> ResolveTensor(const ReadItem& item) override {
    ROCKSDCP_RETURN_IF_ERROR(log_->Record("planner.ResolveTensor"));
    return LoadPlannerWrapper::ResolveTensor(item);
  }
  Status CommitTensor(const ReadItem& item, const TensorView& t) override {
    ROCKSDCP_RETURN_IF_ERROR(log_->Record("planner.CommitTensor"));
    return LoadPlannerWrapper::CommitTensor(item, t);
  }

 private:
  DefaultLoadPlanner inner_;
  CallLog* log_;
};

// A collective of two ranks, which this release refuses.
class TwoRankCollective : public Collective {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  int coordinator_rank() const override { return 0; }
  Result<std::vector<std::string>> Gather(std::string) override {
    return Status::Internal("unreachable peer");
  }
  Result<std::string> Scatter(std::vector<std::string>) override {
    return Status::Internal("unused");
  }
  Result<std::string> Broadcast(std::string) override {
    return Status::Internal("unused");
  }
  Result<std::vector<std::string>> AllGather(std::string) override {
    return Status::Internal("unused");
  }
  Status Barrier() override { return Status::Internal("unused"); }
};

class CheckpointTest : public ::testing::Test {
 protected:
  // A float32 tensor holding `values`, owned by the fixture.
  TensorView Floats(std::vector<int64_t> sizes, std::vector<float> values) {
    buffers_.push_back(std::move(values));
    return TensorView::Contiguous(DType::kFloat32, std::move(sizes),
                                  buffers_.back().data());
  }
  static std::vector<float> Values(const TensorView& v) {
    const auto* p = static_cast<const float*>(v.data);
    return std::vector<float>(p, p + v.numel());
  }

  // A state dict of one of each kind of value.
  StateDict Sample(float base) {
    StateDict sd;
    sd["w"] = Floats({2, 2}, {base, base + 1, base + 2, base + 3});
    sd["emb"] = ShardedTensor{DType::kFloat32,
                              {4},
                              {Shard{{0}, Floats({2}, {base, base + 1})},
                               Shard{{2}, Floats({2}, {base + 2, base + 3})}}};
    sd["step"] = std::string("step ") + std::to_string(static_cast<int>(base));
    return sd;
  }

  Result<Metadata> SaveSample(const std::string& id, float base) {
    saved_ = Sample(base);
    auto writer = storage_.NewWriter();
    return Save(saved_, *writer, {.checkpoint_id = id});
  }

  MemoryStorage storage_;
  CallLog log_;
  StateDict saved_;
  std::deque<std::vector<float>> buffers_;
};

TEST_F(CheckpointTest, SaveThenLoadRoundTrips) {
  ASSERT_OK(SaveSample("step-1", 10).status());
  StateDict loaded = Sample(0);
  auto reader = storage_.NewReader();
  ASSERT_OK(Load(&loaded, *reader, {.checkpoint_id = "step-1"}));
  EXPECT_THAT(Values(std::get<TensorView>(loaded["w"])),
              ElementsAre(10, 11, 12, 13));
  const auto& emb = std::get<ShardedTensor>(loaded["emb"]);
  EXPECT_THAT(Values(emb.local_shards[1].tensor), ElementsAre(12, 13));
  EXPECT_EQ(std::get<std::string>(loaded["step"]), "step 10");
}

TEST_F(CheckpointTest, SaveReturnsTheCommittedMetadata) {
  ASSERT_OK_AND_ASSIGN(Metadata saved, SaveSample("step-1", 1));
  ASSERT_TRUE(saved.storage_meta.has_value());
  EXPECT_EQ(saved.storage_meta->checkpoint_id, "step-1");
  EXPECT_TRUE(saved.storage_meta->save_id.has_value());
  // One storage entry per item written: w, emb's two shards, step.
  EXPECT_EQ(saved.storage_data.size(), 4u);
  EXPECT_EQ(saved.state_dict_metadata.size(), 3u);

  auto reader = storage_.NewReader();
  ASSERT_OK(reader->Reset("step-1"));
  ASSERT_OK_AND_ASSIGN(Metadata read, reader->ReadMetadata());
  EXPECT_TRUE(read.storage_meta->load_id.has_value());
  read.storage_meta->load_id.reset();
  EXPECT_EQ(read, saved);
}

TEST_F(CheckpointTest, SaveCallsFollowDcpOrder) {
  StateDict sd = Sample(0);
  auto memory = storage_.NewWriter();
  RecordingWriter writer(memory.get(), &log_);
  RecordingSavePlanner planner(&log_);
  ASSERT_OK(
      Save(sd, writer, {.checkpoint_id = "c", .planner = &planner}).status());
  EXPECT_THAT(log_.calls,
              ElementsAre("writer.Reset", "writer.GetStorageMeta",
                          "planner.SetUpPlanner", "writer.SetUpStorageWriter",
                          "planner.CreateLocalPlan", "writer.PrepareLocalPlan",
                          "planner.CreateGlobalPlan",
                          "writer.PrepareGlobalPlan", "planner.FinishPlan",
                          "writer.WriteData", "planner.ResolveData",
                          "planner.ResolveData", "planner.ResolveData",
                          "planner.ResolveData", "writer.Finish"));
  EXPECT_THAT(writer.args_, ElementsAre(1, 0, 1));
  // The planner sees the storage's meta of this save.
  ASSERT_TRUE(planner.storage_meta_.has_value());
  EXPECT_EQ(planner.storage_meta_->checkpoint_id, "c");
}

TEST_F(CheckpointTest, LoadCallsFollowDcpOrder) {
  ASSERT_OK(SaveSample("c", 0).status());
  StateDict sd = Sample(5);
  auto memory = storage_.NewReader();
  RecordingReader reader(memory.get(), &log_);
  RecordingLoadPlanner planner(&log_);
  ASSERT_OK(Load(&sd, reader, {.checkpoint_id = "c", .planner = &planner}));
  // Items load in fqn order: emb (two shards), step, w.
  EXPECT_THAT(
      log_.calls,
      ElementsAre("reader.Reset", "reader.ReadMetadata", "planner.SetUpPlanner",
                  "reader.SetUpStorageReader", "planner.CreateLocalPlan",
                  "reader.PrepareLocalPlan", "planner.CreateGlobalPlan",
                  "reader.PrepareGlobalPlan", "planner.FinishPlan",
                  "reader.ReadData", "planner.ResolveTensor",
                  "planner.CommitTensor", "planner.ResolveTensor",
                  "planner.CommitTensor", "planner.LoadBytes",
                  "planner.ResolveTensor", "planner.CommitTensor"));
  EXPECT_THAT(reader.args_, ElementsAre(1, 0, 1));
}

TEST_F(CheckpointTest, SaveErrorNamesCheckpointRankAndStepAndKeepsCode) {
  const std::map<std::string, std::string> step_of = {
      {"writer.Reset", "reset"},
      {"planner.SetUpPlanner", "set_up_planner"},
      {"writer.SetUpStorageWriter", "set_up_storage_writer"},
      {"planner.CreateLocalPlan", "create_local_plan"},
      {"writer.PrepareLocalPlan", "prepare_local_plan"},
      {"planner.CreateGlobalPlan", "create_global_plan"},
      {"writer.PrepareGlobalPlan", "prepare_global_plan"},
      {"planner.FinishPlan", "finish_plan"},
      {"writer.WriteData", "write_data"},
      {"planner.ResolveData", "write_data"},
      {"writer.Finish", "finish"},
  };
  for (const auto& [call, step] : step_of) {
    SCOPED_TRACE(call);
    CallLog log{.fail_at = call, .fail_with = Status::IOError("disk full")};
    StateDict sd = Sample(0);
    auto memory = storage_.NewWriter();
    RecordingWriter writer(memory.get(), &log);
    RecordingSavePlanner planner(&log);
    EXPECT_THAT(
        Save(sd, writer, {.checkpoint_id = "step-1", .planner = &planner}),
        StatusIs(StatusCode::kIOError,
                 Eq("save of checkpoint 'step-1' failed on rank 0 at " + step +
                    ": disk full")));
    EXPECT_THAT(storage_.List(), IsEmpty());
  }
}

TEST_F(CheckpointTest, LoadErrorNamesCheckpointRankAndStepAndKeepsCode) {
  ASSERT_OK(SaveSample("step-1", 0).status());
  const std::map<std::string, std::string> step_of = {
      {"reader.Reset", "reset"},
      {"reader.ReadMetadata", "read_metadata"},
      {"planner.SetUpPlanner", "set_up_planner"},
      {"reader.SetUpStorageReader", "set_up_storage_reader"},
      {"planner.CreateLocalPlan", "create_local_plan"},
      {"reader.PrepareLocalPlan", "prepare_local_plan"},
      {"planner.CreateGlobalPlan", "create_global_plan"},
      {"reader.PrepareGlobalPlan", "prepare_global_plan"},
      {"planner.FinishPlan", "finish_plan"},
      {"reader.ReadData", "read_data"},
      {"planner.ResolveTensor", "read_data"},
      {"planner.LoadBytes", "read_data"},
  };
  for (const auto& [call, step] : step_of) {
    SCOPED_TRACE(call);
    CallLog log{.fail_at = call, .fail_with = Status::Corruption("bad")};
    StateDict sd = Sample(0);
    auto memory = storage_.NewReader();
    RecordingReader reader(memory.get(), &log);
    RecordingLoadPlanner planner(&log);
    EXPECT_THAT(
        Load(&sd, reader, {.checkpoint_id = "step-1", .planner = &planner}),
        StatusIs(StatusCode::kCorruption,
                 Eq("load of checkpoint 'step-1' failed on rank 0 at " + step +
                    ": bad")));
  }
}

TEST_F(CheckpointTest, PlannerErrorsReachTheCaller) {
  StateDict sd{
      {"broken", TensorView::Contiguous(DType::kFloat32, {2}, nullptr)}};
  auto writer = storage_.NewWriter();
  EXPECT_THAT(Save(sd, *writer, {.checkpoint_id = "c"}),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("at create_local_plan"),
                             HasSubstr("'broken'"))));
}

TEST_F(CheckpointTest, MissingCheckpointIsNotFound) {
  StateDict sd = Sample(0);
  auto reader = storage_.NewReader();
  EXPECT_THAT(Load(&sd, *reader, {.checkpoint_id = "nope"}),
              StatusIs(StatusCode::kNotFound,
                       AllOf(HasSubstr("at read_metadata"),
                             HasSubstr("checkpoint 'nope' not found"))));
}

TEST_F(CheckpointTest, ExistingCheckpointIsAlreadyExists) {
  ASSERT_OK(SaveSample("c", 0).status());
  EXPECT_THAT(SaveSample("c", 1),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("'c'")));
}

TEST_F(CheckpointTest, EmptyCheckpointIdIsInvalidArgument) {
  StateDict sd = Sample(0);
  auto writer = storage_.NewWriter();
  EXPECT_THAT(Save(sd, *writer, {}), StatusIs(StatusCode::kInvalidArgument,
                                              HasSubstr("checkpoint_id")));
  auto reader = storage_.NewReader();
  EXPECT_THAT(Load(&sd, *reader, {}), StatusIs(StatusCode::kInvalidArgument,
                                               HasSubstr("checkpoint_id")));
}

TEST_F(CheckpointTest, BrokenCollectiveIsAbortedAndCommitsNothing) {
  // A two-rank world whose collectives all fail: no rank can agree, so the
  // save stops at its first collective step and nothing is committed.
  TwoRankCollective two;
  StateDict sd = Sample(0);
  auto writer = storage_.NewWriter();
  EXPECT_THAT(Save(sd, *writer, {.checkpoint_id = "c", .collective = &two}),
              StatusIs(StatusCode::kAborted,
                       AllOf(HasSubstr("collective of step plan failed"),
                             HasSubstr("'c'"))));
  auto reader = storage_.NewReader();
  EXPECT_THAT(Load(&sd, *reader, {.checkpoint_id = "c", .collective = &two}),
              StatusIs(StatusCode::kAborted, HasSubstr("collective")));
  EXPECT_THAT(storage_.List(), IsEmpty());
}

TEST_F(CheckpointTest, DefaultPlannerHonoursAllowPartialLoad) {
  ASSERT_OK(SaveSample("c", 3).status());
  StateDict sd = Sample(0);
  sd["new_head"] = Floats({1}, {-1});
  auto reader = storage_.NewReader();
  EXPECT_THAT(Load(&sd, *reader, {.checkpoint_id = "c"}),
              StatusIs(StatusCode::kNotFound, HasSubstr("'new_head'")));
  ASSERT_OK(
      Load(&sd, *reader, {.checkpoint_id = "c", .allow_partial_load = true}));
  EXPECT_THAT(Values(std::get<TensorView>(sd["w"])), ElementsAre(3, 4, 5, 6));
  EXPECT_THAT(Values(std::get<TensorView>(sd["new_head"])), ElementsAre(-1));
}

TEST_F(CheckpointTest, ExplicitLocalCollectiveWorks) {
  LocalCollective local;
  StateDict sd = Sample(2);
  auto writer = storage_.NewWriter();
  ASSERT_OK(
      Save(sd, *writer, {.checkpoint_id = "c", .collective = &local}).status());
  EXPECT_THAT(storage_.List(), Contains("c"));
}

}  // namespace
}  // namespace rocksdcp
