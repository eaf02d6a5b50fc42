// SavePlannerWrapper and LoadPlannerWrapper hand every call, its arguments
// and its result through to their target unchanged.

#include <cstdint>
#include <string>
#include <vector>

#include "rocksdcp/planner.h"
#include "test_util.h"

namespace rocksdcp {
namespace {

using ::testing::ElementsAre;

// Answers each call with what it was given, marked with its name, and
// logs the call.
class EchoSavePlanner : public SavePlanner {
 public:
  Status SetUpPlanner(const StateDict* state_dict,
                      const std::optional<StorageMeta>& storage_meta,
                      bool is_coordinator) override {
    calls.push_back("SetUpPlanner");
    state_dict_ = state_dict;
    storage_meta_ = storage_meta;
    is_coordinator_ = is_coordinator;
    return Status::NotFound("set up");
  }
  Result<SavePlan> CreateLocalPlan() override {
    calls.push_back("CreateLocalPlan");
    return SavePlan{.planner_data = "local"};
  }
  Result<GlobalSavePlan> CreateGlobalPlan(
      std::vector<SavePlan> plans) override {
    calls.push_back("CreateGlobalPlan");
    GlobalSavePlan global{.plans = std::move(plans)};
    global.metadata.planner_data = "global";
    return global;
  }
  Result<SavePlan> FinishPlan(SavePlan central_plan) override {
    calls.push_back("FinishPlan");
    central_plan.storage_data = "finished";
    return central_plan;
  }
  Result<ResolvedData> ResolveData(const WriteItem& item) override {
    calls.push_back("ResolveData " + item.index.fqn);
    return ResolvedData(std::string_view("bytes"));
  }
  void ReleaseData(const WriteItem& item) override {
    calls.push_back("ReleaseData " + item.index.fqn);
  }

  std::vector<std::string> calls;
  const StateDict* state_dict_ = nullptr;
  std::optional<StorageMeta> storage_meta_;
  bool is_coordinator_ = false;
};

class EchoLoadPlanner : public LoadPlanner {
 public:
  Status SetUpPlanner(StateDict* state_dict, const Metadata* metadata,
                      bool is_coordinator) override {
    calls.push_back("SetUpPlanner");
    state_dict_ = state_dict;
    metadata_ = metadata;
    is_coordinator_ = is_coordinator;
    return Status::NotFound("set up");
  }
  Result<LoadPlan> CreateLocalPlan() override {
    calls.push_back("CreateLocalPlan");
    return LoadPlan{.planner_data = "local"};
  }
  Result<std::vector<LoadPlan>> CreateGlobalPlan(
      std::vector<LoadPlan> plans) override {
    calls.push_back("CreateGlobalPlan");
    plans.push_back(LoadPlan{.planner_data = "global"});
    return plans;
  }
  Result<LoadPlan> FinishPlan(LoadPlan central_plan) override {
    calls.push_back("FinishPlan");
    central_plan.storage_data = "finished";
    return central_plan;
  }
  Status LoadBytes(const ReadItem& item, std::string_view data) override {
    calls.push_back("LoadBytes " + item.dest_index.fqn + " " +
                    std::string(data));
    return Status::OK();
  }
  Result<TensorView> ResolveTensor(const ReadItem& item) override {
    calls.push_back("ResolveTensor " + item.dest_index.fqn);
    return TensorView::Contiguous(DType::kUInt8, {1}, &byte_);
  }
  Status CommitTensor(const ReadItem& item, const TensorView& tensor) override {
    calls.push_back("CommitTensor " + item.dest_index.fqn);
    committed_ = tensor.data;
    return Status::Aborted("committed");
  }

  std::vector<std::string> calls;
  StateDict* state_dict_ = nullptr;
  const Metadata* metadata_ = nullptr;
  bool is_coordinator_ = false;
  uint8_t byte_ = 0;
  void* committed_ = nullptr;
};

TEST(PlannerWrapperTest, SaveWrapperForwardsEveryCall) {
  EchoSavePlanner target;
  SavePlannerWrapper wrapper(&target);
  const StateDict dict;
  const StorageMeta meta{.checkpoint_id = "c"};
  const WriteItem item{.index = MetadataIndex("w")};

  EXPECT_THAT(wrapper.SetUpPlanner(&dict, meta, true),
              testing::StatusIs(StatusCode::kNotFound, "set up"));
  EXPECT_EQ(target.state_dict_, &dict);
  ASSERT_TRUE(target.storage_meta_.has_value());
  EXPECT_EQ(target.storage_meta_->checkpoint_id, "c");
  EXPECT_TRUE(target.is_coordinator_);
  ASSERT_OK_AND_ASSIGN(SavePlan local, wrapper.CreateLocalPlan());
  EXPECT_EQ(local.planner_data, "local");
  ASSERT_OK_AND_ASSIGN(GlobalSavePlan global,
                       wrapper.CreateGlobalPlan({local, local}));
  EXPECT_EQ(global.plans.size(), 2u);
  EXPECT_EQ(global.metadata.planner_data, "global");
  ASSERT_OK_AND_ASSIGN(SavePlan finished, wrapper.FinishPlan(local));
  EXPECT_EQ(finished.planner_data, "local");
  EXPECT_EQ(finished.storage_data, "finished");
  ASSERT_OK_AND_ASSIGN(ResolvedData resolved, wrapper.ResolveData(item));
  EXPECT_EQ(std::get<std::string_view>(resolved), "bytes");
  wrapper.ReleaseData(item);

  EXPECT_THAT(target.calls,
              ElementsAre("SetUpPlanner", "CreateLocalPlan", "CreateGlobalPlan",
                          "FinishPlan", "ResolveData w", "ReleaseData w"));
}

TEST(PlannerWrapperTest, LoadWrapperForwardsEveryCall) {
  EchoLoadPlanner target;
  LoadPlannerWrapper wrapper(&target);
  StateDict dict;
  const Metadata metadata;
  const ReadItem item{.dest_index = MetadataIndex("w")};

  EXPECT_THAT(wrapper.SetUpPlanner(&dict, &metadata, true),
              testing::StatusIs(StatusCode::kNotFound, "set up"));
  EXPECT_EQ(target.state_dict_, &dict);
  EXPECT_EQ(target.metadata_, &metadata);
  EXPECT_TRUE(target.is_coordinator_);
  ASSERT_OK_AND_ASSIGN(LoadPlan local, wrapper.CreateLocalPlan());
  EXPECT_EQ(local.planner_data, "local");
  ASSERT_OK_AND_ASSIGN(std::vector<LoadPlan> global,
                       wrapper.CreateGlobalPlan({local}));
  ASSERT_EQ(global.size(), 2u);
  EXPECT_EQ(global[1].planner_data, "global");
  ASSERT_OK_AND_ASSIGN(LoadPlan finished, wrapper.FinishPlan(local));
  EXPECT_EQ(finished.planner_data, "local");
  EXPECT_EQ(finished.storage_data, "finished");
  EXPECT_OK(wrapper.LoadBytes(item, "abc"));
  ASSERT_OK_AND_ASSIGN(TensorView view, wrapper.ResolveTensor(item));
  EXPECT_EQ(view.data, &target.byte_);
  EXPECT_THAT(wrapper.CommitTensor(item, view),
              testing::StatusIs(StatusCode::kAborted, "committed"));
  EXPECT_EQ(target.committed_, &target.byte_);

  EXPECT_THAT(target.calls,
              ElementsAre("SetUpPlanner", "CreateLocalPlan", "CreateGlobalPlan",
                          "FinishPlan", "LoadBytes w abc", "ResolveTensor w",
                          "CommitTensor w"));
}

}  // namespace
}  // namespace rocksdcp
