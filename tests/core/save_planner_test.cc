#include <cstdint>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "rocksdcp/planner.h"
#include "test_util.h"

namespace rocksdcp {
namespace {

using ::rocksdcp::testing::OwnedTensor;
using ::rocksdcp::testing::StatusIs;
using ::rocksdcp::testing::ZeroTensor;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Optional;

class SavePlannerTest : public ::testing::Test {
 protected:
  // A tensor whose bytes the fixture owns.
  TensorView Tensor(std::vector<int64_t> sizes, DType dtype = DType::kFloat32) {
    return tensors_.emplace_back(ZeroTensor(dtype, std::move(sizes))).view;
  }

  Shard MakeShard(std::vector<int64_t> offsets, std::vector<int64_t> sizes,
                  DType dtype = DType::kFloat32) {
    return Shard{std::move(offsets), Tensor(std::move(sizes), dtype)};
  }

  static ShardedTensor Sharded(std::vector<int64_t> global_size,
                               std::vector<Shard> shards,
                               DType dtype = DType::kFloat32) {
    return ShardedTensor{dtype, std::move(global_size), std::move(shards)};
  }

  // One rank's local plan, made by the fixture's planner.
  Result<SavePlan> LocalPlan(const StateDict& state_dict) {
    ROCKSDCP_RETURN_IF_ERROR(
        planner_.SetUpPlanner(&state_dict, std::nullopt, true));
    return planner_.CreateLocalPlan();
  }

  // Every rank's local plan, then the coordinator's global plan.
  Result<GlobalSavePlan> GlobalPlan(const std::vector<StateDict>& ranks,
                                    DefaultSavePlannerOptions options = {}) {
    std::vector<SavePlan> plans;
    for (const StateDict& state_dict : ranks) {
      DefaultSavePlanner rank_planner(options);
      ROCKSDCP_RETURN_IF_ERROR(
          rank_planner.SetUpPlanner(&state_dict, std::nullopt, false));
      ROCKSDCP_ASSIGN_OR_RETURN(SavePlan plan, rank_planner.CreateLocalPlan());
      plans.push_back(std::move(plan));
    }
    DefaultSavePlanner coordinator(options);
    return coordinator.CreateGlobalPlan(std::move(plans));
  }

  static const TensorStorageMetadata& TensorMd(const Metadata& md,
                                               const std::string& fqn) {
    return std::get<TensorStorageMetadata>(md.state_dict_metadata.at(fqn));
  }

  // The fqns of a plan's items, in order.
  static std::vector<std::string> Fqns(const SavePlan& plan) {
    std::vector<std::string> out;
    for (const WriteItem& item : plan.items) out.push_back(item.index.fqn);
    return out;
  }

  DefaultSavePlanner planner_;
  std::deque<OwnedTensor> tensors_;
};

TEST_F(SavePlannerTest, DenseTensorBecomesOneTensorItem) {
  StateDict sd{{"w", Tensor({4, 3}, DType::kBFloat16)}};
  ASSERT_OK_AND_ASSIGN(SavePlan plan, LocalPlan(sd));
  ASSERT_EQ(plan.items.size(), 1u);
  const WriteItem& item = plan.items[0];
  EXPECT_EQ(item.type, WriteItemType::kTensor);
  EXPECT_EQ(item.index.fqn, "w");
  EXPECT_THAT(item.index.offset, Optional(ElementsAre(0, 0)));
  ASSERT_TRUE(item.tensor_data.has_value());
  EXPECT_THAT(item.tensor_data->chunk.offsets, ElementsAre(0, 0));
  EXPECT_THAT(item.tensor_data->chunk.sizes, ElementsAre(4, 3));
  EXPECT_THAT(item.tensor_data->size, ElementsAre(4, 3));
  EXPECT_EQ(item.tensor_data->properties.dtype, DType::kBFloat16);
  EXPECT_EQ(item.TensorStorageSize(), 24u);
}

TEST_F(SavePlannerTest, ZeroDTensorHasEmptyOffset) {
  StateDict sd{{"scale", Tensor({}, DType::kFloat64)}};
  ASSERT_OK_AND_ASSIGN(SavePlan plan, LocalPlan(sd));
  ASSERT_EQ(plan.items.size(), 1u);
  EXPECT_THAT(plan.items[0].index.offset, Optional(IsEmpty()));
  EXPECT_THAT(plan.items[0].tensor_data->chunk.sizes, IsEmpty());
}

TEST_F(SavePlannerTest, EachLocalShardBecomesAShardItem) {
  StateDict sd{{"emb", Sharded({8, 4}, {MakeShard({2, 0}, {2, 4}),
                                        MakeShard({6, 0}, {2, 4})})}};
  ASSERT_OK_AND_ASSIGN(SavePlan plan, LocalPlan(sd));
  ASSERT_EQ(plan.items.size(), 2u);
  for (const WriteItem& item : plan.items) {
    EXPECT_EQ(item.type, WriteItemType::kShard);
    EXPECT_THAT(item.tensor_data->size, ElementsAre(8, 4));
    EXPECT_THAT(item.tensor_data->chunk.sizes, ElementsAre(2, 4));
    EXPECT_EQ(item.index.offset, item.tensor_data->chunk.offsets);
  }
  EXPECT_THAT(plan.items[0].index.offset, Optional(ElementsAre(2, 0)));
  EXPECT_THAT(plan.items[1].index.offset, Optional(ElementsAre(6, 0)));
}

TEST_F(SavePlannerTest, BytesBecomeByteIOItemWithoutOffset) {
  StateDict sd{{"step", std::string("42")}};
  ASSERT_OK_AND_ASSIGN(SavePlan plan, LocalPlan(sd));
  ASSERT_EQ(plan.items.size(), 1u);
  EXPECT_EQ(plan.items[0].type, WriteItemType::kByteIO);
  EXPECT_EQ(plan.items[0].index.offset, std::nullopt);
  EXPECT_FALSE(plan.items[0].tensor_data.has_value());
}

TEST_F(SavePlannerTest, ItemsFollowFqnOrder) {
  StateDict sd{{"z", std::string()}, {"a", Tensor({1})}, {"m", Tensor({2})}};
  ASSERT_OK_AND_ASSIGN(SavePlan plan, LocalPlan(sd));
  EXPECT_THAT(Fqns(plan), ElementsAre("a", "m", "z"));
}

TEST_F(SavePlannerTest, MalformedTensorIsRejectedNamingFqn) {
  TensorView bad = TensorView::Contiguous(DType::kFloat32, {3}, nullptr);
  StateDict sd{{"layer.0.weight", bad}};
  EXPECT_THAT(LocalPlan(sd), StatusIs(StatusCode::kInvalidArgument,
                                      HasSubstr("'layer.0.weight'")));
}

TEST_F(SavePlannerTest, ShardOutsideGlobalSizeIsRejected) {
  StateDict sd{{"w", Sharded({4, 4}, {MakeShard({3, 0}, {2, 4})})}};
  EXPECT_THAT(LocalPlan(sd),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'w'"), HasSubstr("outside"),
                             HasSubstr("[4, 4]"))));
  StateDict negative{{"w", Sharded({4}, {MakeShard({-1}, {2})})}};
  EXPECT_THAT(LocalPlan(negative),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("outside")));
}

TEST_F(SavePlannerTest, GlobalSizeThatOverflowsIsRejected) {
  StateDict sd{{"w", Sharded({int64_t{1} << 40, int64_t{1} << 40}, {})}};
  EXPECT_THAT(LocalPlan(sd),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'w'"), HasSubstr("2^63"))));
}

TEST_F(SavePlannerTest, GlobalPlanFromCustomPlannerIsValidatedToo) {
  // A plan no DefaultSavePlanner would make: a size whose volume overflows,
  // and a chunk outside its size.
  WriteItem item;
  item.index = MetadataIndex("w", {0, 0});
  item.type = WriteItemType::kShard;
  item.tensor_data = TensorWriteData{};
  item.tensor_data->chunk = {{0, 0}, {1, 1}};
  item.tensor_data->size = {int64_t{1} << 40, int64_t{1} << 40};
  SavePlan plan;
  plan.items.push_back(item);
  EXPECT_THAT(planner_.CreateGlobalPlan({plan}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("2^63")));
  plan.items[0].tensor_data->size = {1, 1};
  plan.items[0].tensor_data->chunk = {{0, 0}, {2, 1}};
  EXPECT_THAT(planner_.CreateGlobalPlan({plan}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("outside")));
}

TEST_F(SavePlannerTest, ShardOfOtherDTypeOrRankIsRejected) {
  StateDict dtype{{"w", Sharded({4}, {MakeShard({0}, {4}, DType::kInt8)})}};
  EXPECT_THAT(LocalPlan(dtype),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'w'"), HasSubstr("int8"),
                             HasSubstr("float32"))));
  StateDict rank{{"w", Sharded({4, 4}, {MakeShard({0, 0}, {4})})}};
  EXPECT_THAT(LocalPlan(rank),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("dimensions")));
  StateDict twice{
      {"w", Sharded({4}, {MakeShard({0}, {2}), MakeShard({0}, {2})})}};
  EXPECT_THAT(LocalPlan(twice), StatusIs(StatusCode::kInvalidArgument,
                                         HasSubstr("two local shards")));
}

TEST_F(SavePlannerTest, CreateLocalPlanNeedsSetUp) {
  EXPECT_THAT(
      planner_.CreateLocalPlan(),
      StatusIs(StatusCode::kFailedPrecondition, HasSubstr("SetUpPlanner")));
}

TEST_F(SavePlannerTest, GlobalPlanListsChunksInRankOrderWithHints) {
  std::vector<StateDict> ranks = {
      {{"w", Sharded({4, 2}, {MakeShard({0, 0}, {2, 2})})},
       {"step", std::string("1")}},
      {{"w", Sharded({4, 2}, {MakeShard({2, 0}, {2, 2})})}},
  };
  ASSERT_OK_AND_ASSIGN(GlobalSavePlan global, GlobalPlan(ranks));
  ASSERT_EQ(global.plans.size(), 2u);
  const TensorStorageMetadata& w = TensorMd(global.metadata, "w");
  EXPECT_EQ(w.properties.dtype, DType::kFloat32);
  EXPECT_THAT(w.size, ElementsAre(4, 2));
  ASSERT_EQ(w.chunks.size(), 2u);
  EXPECT_THAT(w.chunks[0].offsets, ElementsAre(0, 0));
  EXPECT_THAT(w.chunks[1].offsets, ElementsAre(2, 0));
  EXPECT_TRUE(std::holds_alternative<BytesStorageMetadata>(
      global.metadata.state_dict_metadata.at("step")));
  // Hints point at the chunk's position in the metadata.
  EXPECT_EQ(global.plans[0].items[0].index.index, std::nullopt);  // step
  EXPECT_EQ(global.plans[0].items[1].index.index, 0);
  EXPECT_EQ(global.plans[1].items[0].index.index, 1);
}

TEST_F(SavePlannerTest, OverlappingChunksAreRejected) {
  std::vector<StateDict> ranks = {
      {{"w", Sharded({4, 4}, {MakeShard({0, 0}, {3, 4})})}},
      {{"w", Sharded({4, 4}, {MakeShard({2, 0}, {2, 4})})}},
  };
  EXPECT_THAT(GlobalPlan(ranks),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'w'"), HasSubstr("overlap"))));
}

TEST_F(SavePlannerTest, OverlapInSecondDimensionIsRejected) {
  std::vector<StateDict> ranks = {
      {{"w", Sharded({4, 4},
                     {MakeShard({0, 0}, {4, 2}), MakeShard({0, 2}, {2, 2})})}},
      {{"w", Sharded({4, 4}, {MakeShard({1, 1}, {3, 3})})}},
  };
  EXPECT_THAT(GlobalPlan(ranks),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("overlap")));
}

TEST_F(SavePlannerTest, GapsInCoverageAreRejected) {
  std::vector<StateDict> ranks = {
      {{"w", Sharded({4, 3}, {MakeShard({0, 0}, {1, 3})})}},
      {{"w", Sharded({4, 3}, {MakeShard({3, 0}, {1, 3})})}},
  };
  EXPECT_THAT(
      GlobalPlan(ranks),
      StatusIs(StatusCode::kInvalidArgument,
               AllOf(HasSubstr("'w'"), HasSubstr("cover 6 of 12 elements"))));
}

TEST_F(SavePlannerTest, RankWithNoShardPlansNothing) {
  std::vector<StateDict> ranks = {
      {{"w", Sharded({6}, {MakeShard({0}, {3})})}},
      {{"w", Sharded({6}, {})}},
      {{"w", Sharded({6}, {MakeShard({3}, {3})})}},
  };
  ASSERT_OK_AND_ASSIGN(GlobalSavePlan global, GlobalPlan(ranks));
  EXPECT_THAT(global.plans[1].items, IsEmpty());
  EXPECT_EQ(TensorMd(global.metadata, "w").chunks.size(), 2u);
}

TEST_F(SavePlannerTest, ZeroSizeTensorNeedsNoCoverage) {
  std::vector<StateDict> ranks = {{{"e", Tensor({0, 5})}}};
  ASSERT_OK_AND_ASSIGN(GlobalSavePlan global, GlobalPlan(ranks));
  EXPECT_THAT(TensorMd(global.metadata, "e").size, ElementsAre(0, 5));
}

TEST_F(SavePlannerTest, DedupWritesReplicatedItemOnceOnLeastLoadedRank) {
  // Rank 0 alone holds "a" (400 bytes), so the replicated "b" goes to rank
  // 1, which has planned nothing yet.
  std::vector<StateDict> ranks = {
      {{"a", Tensor({100})}, {"b", Tensor({10})}},
      {{"b", Tensor({10})}},
  };
  ASSERT_OK_AND_ASSIGN(GlobalSavePlan global, GlobalPlan(ranks));
  EXPECT_THAT(Fqns(global.plans[0]), ElementsAre("a"));
  EXPECT_THAT(Fqns(global.plans[1]), ElementsAre("b"));
  EXPECT_EQ(TensorMd(global.metadata, "b").chunks.size(), 1u);
}

TEST_F(SavePlannerTest, DedupTiesGoToLowestRank) {
  std::vector<StateDict> ranks = {
      {{"step", std::string("7")}, {"w", Tensor({4})}},
      {{"step", std::string("7")}, {"w", Tensor({4})}},
      {{"step", std::string("7")}, {"w", Tensor({4})}},
  };
  ASSERT_OK_AND_ASSIGN(GlobalSavePlan global, GlobalPlan(ranks));
  // "step" ties at 0 bytes: rank 0. Then rank 0 has 1, so "w" goes to rank
  // 1, the lowest of the least loaded.
  EXPECT_THAT(Fqns(global.plans[0]), ElementsAre("step"));
  EXPECT_THAT(Fqns(global.plans[1]), ElementsAre("w"));
  EXPECT_THAT(global.plans[2].items, IsEmpty());
}

TEST_F(SavePlannerTest, WithoutDedupReplicatedItemIsRejected) {
  std::vector<StateDict> ranks = {{{"w", Tensor({4})}}, {{"w", Tensor({4})}}};
  EXPECT_THAT(GlobalPlan(ranks, {.dedup_replicated = false}),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'w@[0]'"), HasSubstr("ranks 0 and 1"),
                             HasSubstr("dedup_replicated"))));
}

TEST_F(SavePlannerTest, RanksDisagreeingOnKindAreRejected) {
  std::vector<StateDict> ranks = {{{"x", Tensor({4})}},
                                  {{"x", std::string("b")}}};
  EXPECT_THAT(GlobalPlan(ranks),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'x'"), HasSubstr("a tensor on rank 0"),
                             HasSubstr("bytes on rank 1"))));
}

TEST_F(SavePlannerTest, RanksDisagreeingOnDTypeOrSizeAreRejected) {
  std::vector<StateDict> dtype = {{{"x", Tensor({4}, DType::kFloat16)}},
                                  {{"x", Tensor({4}, DType::kFloat32)}}};
  EXPECT_THAT(GlobalPlan(dtype),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'x'"), HasSubstr("float16"),
                             HasSubstr("float32"))));
  std::vector<StateDict> size = {{{"x", Tensor({4})}}, {{"x", Tensor({8})}}};
  EXPECT_THAT(
      GlobalPlan(size),
      StatusIs(StatusCode::kInvalidArgument,
               AllOf(HasSubstr("'x'"), HasSubstr("[4]"), HasSubstr("[8]"))));
}

TEST_F(SavePlannerTest, ReplicatedShardWithOtherSizesIsRejected) {
  std::vector<StateDict> ranks = {
      {{"w", Sharded({4}, {MakeShard({0}, {2}), MakeShard({2}, {2})})}},
      {{"w", Sharded({4}, {MakeShard({0}, {4})})}},
  };
  EXPECT_THAT(GlobalPlan(ranks), StatusIs(StatusCode::kInvalidArgument,
                                          HasSubstr("different chunk sizes")));
}

TEST_F(SavePlannerTest, FinishPlanReturnsThePlan) {
  StateDict sd{{"w", Tensor({2})}};
  ASSERT_OK_AND_ASSIGN(SavePlan plan, LocalPlan(sd));
  plan.storage_data = "s";
  ASSERT_OK_AND_ASSIGN(SavePlan finished, planner_.FinishPlan(plan));
  EXPECT_EQ(finished.items.size(), 1u);
  EXPECT_EQ(finished.storage_data, "s");
}

TEST_F(SavePlannerTest, ResolveDataHandsOutTheStateDictsData) {
  TensorView dense = Tensor({2, 2});
  ShardedTensor st = Sharded({4}, {MakeShard({0}, {2}), MakeShard({2}, {2})});
  StateDict sd{{"d", dense}, {"s", st}, {"b", std::string("bytes!")}};
  ASSERT_OK_AND_ASSIGN(SavePlan plan, LocalPlan(sd));
  ASSERT_EQ(plan.items.size(), 4u);  // b, d, s@0, s@2

  ASSERT_OK_AND_ASSIGN(ResolvedData b, planner_.ResolveData(plan.items[0]));
  EXPECT_EQ(std::get<std::string_view>(b), "bytes!");
  ASSERT_OK_AND_ASSIGN(ResolvedData d, planner_.ResolveData(plan.items[1]));
  EXPECT_EQ(std::get<TensorView>(d).data, dense.data);
  ASSERT_OK_AND_ASSIGN(ResolvedData s2, planner_.ResolveData(plan.items[3]));
  EXPECT_EQ(std::get<TensorView>(s2).data, st.local_shards[1].tensor.data);
}

TEST_F(SavePlannerTest, ResolveDataOfUnknownItemIsNotFound) {
  StateDict sd{{"s", Sharded({4}, {MakeShard({0}, {4})})}};
  ASSERT_OK_AND_ASSIGN(SavePlan plan, LocalPlan(sd));
  WriteItem missing = plan.items[0];
  missing.index.fqn = "gone";
  EXPECT_THAT(planner_.ResolveData(missing),
              StatusIs(StatusCode::kNotFound, HasSubstr("'gone'")));
  WriteItem other_shard = plan.items[0];
  other_shard.index.offset = std::vector<int64_t>{2};
  EXPECT_THAT(planner_.ResolveData(other_shard),
              StatusIs(StatusCode::kNotFound, HasSubstr("'s@[2]'")));
  WriteItem wrong_kind = plan.items[0];
  wrong_kind.type = WriteItemType::kByteIO;
  EXPECT_THAT(planner_.ResolveData(wrong_kind),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'s'")));
}

TEST_F(SavePlannerTest, ResolveDataIsSafeFromManyThreads) {
  StateDict sd;
  for (int i = 0; i < 64; ++i) sd["t" + std::to_string(i)] = Tensor({i + 1});
  ASSERT_OK_AND_ASSIGN(SavePlan plan, LocalPlan(sd));
  std::vector<int> failures(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 50; ++round) {
        for (const WriteItem& item : plan.items) {
          Result<ResolvedData> r = planner_.ResolveData(item);
          if (!r.ok() ||
              std::get<TensorView>(*r).sizes != item.tensor_data->chunk.sizes) {
            ++failures[t];
          }
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_THAT(failures, ElementsAre(0, 0, 0, 0));
}

}  // namespace
}  // namespace rocksdcp
