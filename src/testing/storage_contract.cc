// The storage contract suite (rocksdcp/testing/storage_contract.h): its
// fixture, its cases, and their registration with GoogleTest. Each case is
// a member function of StorageContractTest, listed in kCases with the
// feature it needs, if any.
//
// This file sees only rocksdcp's public headers: it is what a backend
// written outside rocksdcp can run.

#include "rocksdcp/testing/storage_contract.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "rocksdcp/checkpoint.h"
#include "rocksdcp/collective.h"
#include "rocksdcp/planner.h"
#include "rocksdcp/testing/ranks.h"
#include "rocksdcp/testing/status_matchers.h"
#include "rocksdcp/testing/tensors.h"

namespace rocksdcp::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Records the final plan's items and how often the storage released each.
class RecordingPlanner final : public DefaultSavePlanner {
 public:
  Result<SavePlan> FinishPlan(SavePlan central_plan) override {
    ROCKSDCP_ASSIGN_OR_RETURN(
        SavePlan plan, DefaultSavePlanner::FinishPlan(std::move(central_plan)));
    final_items_ = plan.items;
    return plan;
  }
  void ReleaseData(const WriteItem& item) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++released_[item.index];
  }

  const std::vector<WriteItem>& final_items() const { return final_items_; }
  int released(const MetadataIndex& index) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = released_.find(index);
    return it == released_.end() ? 0 : it->second;
  }
  size_t released_items() const {
    std::lock_guard<std::mutex> lock(mu_);
    return released_.size();
  }

 private:
  std::vector<WriteItem> final_items_;
  mutable std::mutex mu_;
  std::unordered_map<MetadataIndex, int, MetadataIndexHash> released_;
};

// Fails to resolve the item of one fqn, as a planner whose tensor cannot be
// staged would.
class FailingPlanner final : public DefaultSavePlanner {
 public:
  explicit FailingPlanner(std::string fqn) : fqn_(std::move(fqn)) {}
  Result<ResolvedData> ResolveData(const WriteItem& item) override {
    if (item.index.fqn == fqn_) {
      return Status::Internal("injected failure resolving '" + fqn_ + "'");
    }
    return DefaultSavePlanner::ResolveData(item);
  }

 private:
  std::string fqn_;
};

class StorageContractTest : public ::testing::Test {
 public:
  using Body = void (StorageContractTest::*)();

  StorageContractTest(std::shared_ptr<const StorageContractBackend> backend,
                      Body body)
      : spec_(std::move(backend)), body_(body) {}

  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "rocksdcp_contract_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr) << "cannot make " << pattern;
    dir_ = pattern;
    ASSERT_OK_AND_ASSIGN(backend_, spec_->open((dir_ / "store").string()));
  }

  void TearDown() override {
    backend_.reset();
    if (!dir_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
    }
  }

  void TestBody() override { (this->*body_)(); }

  // The cases: kCases lists them.
  void RoundTripsEveryDType();
  void RoundTripsZeroDTensor();
  void RoundTripsTensorsWithAZeroSizeDim();
  void RoundTripsStridedViews();
  void ShardedSaveLoadsWhole();
  void WholeSaveLoadsIntoShards();
  void ReshardsRowsIntoBlocks();
  void RoundTripsEmptyAndLargeByteItems();
  void RoundTripsUnusualFqns();
  void ReleasesEveryWrittenItemOnce();
  void ReadMetadataReturnsWhatSaveCommitted();
  void UnknownCheckpointIsNotFound();
  void InvalidIdsAreInvalidArgument();
  void SavingAnExistingIdIsAlreadyExists();
  void OverwriteReplacesTheCheckpoint();
  void SecondSaveOfAnIdBeingSavedIsBusy();
  void OneWriterSavesCheckpointsInTurn();
  void WrongDTypeAtLoadNamesFqnAndBoth();
  void WrongShapeAtLoadNamesFqnAndBoth();
  void MissingFqnIsNotFoundNamingIt();
  void PartialLoadLoadsWhatIsPresent();
  void PartialLoadWithAPlannerIsInvalidArgument();
  void SaveWithoutFinishIsInvisible();
  void RanksSaveShardsThatLoadOnAnotherWorldSize();
  void AFailingRankCommitsNothing();

 protected:
  bool has(bool StorageContractFeatures::*feature) const {
    return spec_->features.*feature;
  }

  // Writes through a fresh writer. DCP makes one per save, too.
  Result<Metadata> SaveDict(const StateDict& sd, const std::string& id,
                            bool overwrite = false) {
    ROCKSDCP_ASSIGN_OR_RETURN(auto writer, backend_->NewWriter(overwrite));
    return Save(sd, *writer, {.checkpoint_id = id});
  }

  Status LoadDict(StateDict* sd, const std::string& id,
                  bool allow_partial_load = false) {
    ROCKSDCP_ASSIGN_OR_RETURN(auto reader, backend_->NewReader());
    return Load(
        sd, *reader,
        {.checkpoint_id = id, .allow_partial_load = allow_partial_load});
  }

  // A tensor whose bytes follow from `seed`, so a load can be checked
  // byte for byte. Owned by the fixture.
  TensorView Filled(DType dtype, std::vector<int64_t> sizes, int seed) {
    TensorView v = Zeros(dtype, std::move(sizes));
    auto* p = static_cast<uint8_t*>(v.data);
    for (uint64_t i = 0; i < v.nbytes(); ++i) {
      p[i] = static_cast<uint8_t>(i * 131 + seed * 17 + 7);
    }
    return v;
  }

  TensorView Zeros(DType dtype, std::vector<int64_t> sizes) {
    TensorView v = TensorView::Contiguous(dtype, std::move(sizes), nullptr);
    buffers_.emplace_back(std::max<uint64_t>(v.nbytes(), 1), 0);
    v.data = buffers_.back().data();
    return v;
  }

  static const TensorView& View(const StateDict& sd, const std::string& fqn) {
    return std::get<TensorView>(sd.at(fqn));
  }

  // Rows [begin, end) of a contiguous 2-D view.
  static TensorView Rows(const TensorView& v, int64_t begin, int64_t end) {
    return v.Narrow({begin, 0}, {end - begin, v.sizes[1]});
  }

  // Whether checkpoint `id` is committed, as a fresh reader sees it.
  ::testing::AssertionResult Committed(const std::string& id) {
    Status s = [&]() -> Status {
      ROCKSDCP_ASSIGN_OR_RETURN(auto reader, backend_->NewReader());
      ROCKSDCP_RETURN_IF_ERROR(reader->Reset(id));
      return reader->ReadMetadata().status();
    }();
    if (s.ok()) return ::testing::AssertionSuccess() << id << " is committed";
    return ::testing::AssertionFailure() << s.ToString();
  }

 private:
  std::shared_ptr<const StorageContractBackend> spec_;
  Body body_;
  std::filesystem::path dir_;

 protected:
  std::unique_ptr<StorageBackend> backend_;
  std::deque<std::vector<uint8_t>> buffers_;
};

void StorageContractTest::RoundTripsEveryDType() {
  StateDict saved, loaded;
  for (uint8_t v = 1; v <= kMaxDType; ++v) {
    const auto dtype = static_cast<DType>(v);
    const std::string fqn = "t." + std::string(DTypeName(dtype));
    saved[fqn] = Filled(dtype, {3, 5}, v);
    loaded[fqn] = Zeros(dtype, {3, 5});
  }
  ASSERT_OK(SaveDict(saved, "dtypes").status());
  ASSERT_OK(LoadDict(&loaded, "dtypes"));
  for (const auto& [fqn, value] : saved) {
    SCOPED_TRACE(fqn);
    EXPECT_EQ(TensorBytes(View(loaded, fqn)),
              TensorBytes(std::get<TensorView>(value)));
  }
}

void StorageContractTest::RoundTripsZeroDTensor() {
  StateDict saved{{"scale", Filled(DType::kFloat64, {}, 1)}};
  StateDict loaded{{"scale", Zeros(DType::kFloat64, {})}};
  ASSERT_OK(SaveDict(saved, "c").status());
  ASSERT_OK(LoadDict(&loaded, "c"));
  EXPECT_EQ(TensorBytes(View(loaded, "scale")),
            TensorBytes(View(saved, "scale")));
}

void StorageContractTest::RoundTripsTensorsWithAZeroSizeDim() {
  StateDict saved{{"a", Filled(DType::kFloat32, {0, 7}, 1)},
                  {"b", Filled(DType::kInt64, {3, 0}, 2)},
                  {"c", Filled(DType::kInt8, {2}, 3)}};
  StateDict loaded{{"a", Zeros(DType::kFloat32, {0, 7})},
                   {"b", Zeros(DType::kInt64, {3, 0})},
                   {"c", Zeros(DType::kInt8, {2})}};
  ASSERT_OK_AND_ASSIGN(Metadata md, SaveDict(saved, "c"));
  EXPECT_EQ(md.state_dict_metadata.size(), 3u);
  ASSERT_OK(LoadDict(&loaded, "c"));
  EXPECT_EQ(TensorBytes(View(loaded, "c")), TensorBytes(View(saved, "c")));
}

void StorageContractTest::RoundTripsStridedViews() {
  TensorView base = Filled(DType::kFloat32, {4, 6}, 9);
  TensorView transposed = base;
  transposed.sizes = {6, 4};
  transposed.strides = {1, 6};
  StateDict saved{{"t", transposed}};
  // Load once into contiguous memory and once into a transposed view.
  StateDict contiguous{{"t", Zeros(DType::kFloat32, {6, 4})}};
  TensorView strided_dest = Zeros(DType::kFloat32, {4, 6});
  strided_dest.sizes = {6, 4};
  strided_dest.strides = {1, 6};
  StateDict strided{{"t", strided_dest}};

  ASSERT_OK(SaveDict(saved, "c").status());
  ASSERT_OK(LoadDict(&contiguous, "c"));
  ASSERT_OK(LoadDict(&strided, "c"));
  EXPECT_EQ(TensorBytes(View(contiguous, "t")), TensorBytes(transposed));
  EXPECT_EQ(TensorBytes(strided_dest), TensorBytes(transposed));
  // A transposed view of a transposed copy is the original memory.
  EXPECT_EQ(std::string(static_cast<char*>(strided_dest.data), 4 * 6 * 4),
            std::string(static_cast<char*>(base.data), 4 * 6 * 4));
}

void StorageContractTest::ShardedSaveLoadsWhole() {
  TensorView whole = Filled(DType::kBFloat16, {10, 3}, 4);
  // Uneven rows: 4 + 4 + 2.
  ShardedTensor st{
      DType::kBFloat16,
      {10, 3},
      {Shard{{0, 0}, Rows(whole, 0, 4)}, Shard{{4, 0}, Rows(whole, 4, 8)},
       Shard{{8, 0}, Rows(whole, 8, 10)}}};
  StateDict saved{{"w", st}};
  StateDict loaded{{"w", Zeros(DType::kBFloat16, {10, 3})}};
  ASSERT_OK_AND_ASSIGN(Metadata md, SaveDict(saved, "c"));
  EXPECT_EQ(std::get<TensorStorageMetadata>(md.state_dict_metadata.at("w"))
                .chunks.size(),
            3u);
  ASSERT_OK(LoadDict(&loaded, "c"));
  EXPECT_EQ(TensorBytes(View(loaded, "w")), TensorBytes(whole));
}

void StorageContractTest::WholeSaveLoadsIntoShards() {
  TensorView whole = Filled(DType::kInt32, {6, 4}, 5);
  StateDict saved{{"w", whole}};
  ASSERT_OK(SaveDict(saved, "c").status());

  // Columns [0, 1) and [1, 4): each shard gets its box of the saved rows.
  ShardedTensor cols{DType::kInt32,
                     {6, 4},
                     {Shard{{0, 0}, Zeros(DType::kInt32, {6, 1})},
                      Shard{{0, 1}, Zeros(DType::kInt32, {6, 3})}}};
  StateDict loaded{{"w", cols}};
  ASSERT_OK(LoadDict(&loaded, "c"));
  EXPECT_EQ(TensorBytes(cols.local_shards[0].tensor),
            TensorBytes(whole.Narrow({0, 0}, {6, 1})));
  EXPECT_EQ(TensorBytes(cols.local_shards[1].tensor),
            TensorBytes(whole.Narrow({0, 1}, {6, 3})));
}

void StorageContractTest::ReshardsRowsIntoBlocks() {
  TensorView whole = Filled(DType::kFloat16, {8, 8}, 6);
  ShardedTensor rows{
      DType::kFloat16,
      {8, 8},
      {Shard{{0, 0}, Rows(whole, 0, 3)}, Shard{{3, 0}, Rows(whole, 3, 8)}}};
  StateDict saved{{"w", rows}};
  ASSERT_OK(SaveDict(saved, "c").status());
  ShardedTensor block{
      DType::kFloat16, {8, 8}, {Shard{{2, 5}, Zeros(DType::kFloat16, {4, 3})}}};
  StateDict loaded{{"w", block}};
  ASSERT_OK(LoadDict(&loaded, "c"));
  EXPECT_EQ(TensorBytes(block.local_shards[0].tensor),
            TensorBytes(whole.Narrow({2, 5}, {4, 3})));
}

void StorageContractTest::RoundTripsEmptyAndLargeByteItems() {
  std::string large(3 << 20, '\0');
  for (size_t i = 0; i < large.size(); ++i) {
    large[i] = static_cast<char>((i * 2654435761u) >> 13);
  }
  StateDict saved{{"empty", std::string()}, {"large", large}};
  StateDict loaded{{"empty", std::string("junk")}, {"large", std::string()}};
  ASSERT_OK(SaveDict(saved, "c").status());
  ASSERT_OK(LoadDict(&loaded, "c"));
  EXPECT_EQ(std::get<std::string>(loaded["empty"]), "");
  EXPECT_TRUE(std::get<std::string>(loaded["large"]) == large);
}

void StorageContractTest::RoundTripsUnusualFqns() {
  const std::vector<std::string> fqns = {"a@b",
                                         "c#d",
                                         "e%f",
                                         "g/h/i",
                                         "with space",
                                         "@#%",
                                         "trailing@",
                                         "100%",
                                         "ünïcødé.权重",
                                         "__metadata__",
                                         "model.layers.0.attn.q_proj.weight"};
  StateDict saved, loaded;
  int seed = 0;
  for (const std::string& fqn : fqns) {
    saved[fqn] = Filled(DType::kUInt8, {2, 3}, ++seed);
    loaded[fqn] = Zeros(DType::kUInt8, {2, 3});
    saved[fqn + "/bytes"] = fqn;
    loaded[fqn + "/bytes"] = std::string();
  }
  ASSERT_OK_AND_ASSIGN(Metadata md, SaveDict(saved, "c"));
  EXPECT_EQ(md.state_dict_metadata.size(), 2 * fqns.size());
  ASSERT_OK(LoadDict(&loaded, "c"));
  for (const std::string& fqn : fqns) {
    SCOPED_TRACE(fqn);
    EXPECT_EQ(TensorBytes(View(loaded, fqn)), TensorBytes(View(saved, fqn)));
    EXPECT_EQ(std::get<std::string>(loaded[fqn + "/bytes"]), fqn);
  }
}

void StorageContractTest::ReadMetadataReturnsWhatSaveCommitted() {
  TensorView whole = Filled(DType::kFloat32, {4, 2}, 1);
  StateDict saved{
      {"dense", Filled(DType::kInt16, {3}, 2)},
      {"sharded", ShardedTensor{DType::kFloat32,
                                {4, 2},
                                {Shard{{0, 0}, Rows(whole, 0, 1)},
                                 Shard{{1, 0}, Rows(whole, 1, 4)}}}},
      {"step", std::string("12")}};
  ASSERT_OK_AND_ASSIGN(Metadata committed, SaveDict(saved, "ckpt"));
  ASSERT_TRUE(committed.storage_meta.has_value());
  EXPECT_EQ(committed.storage_meta->checkpoint_id, "ckpt");
  EXPECT_TRUE(committed.storage_meta->save_id.has_value());
  EXPECT_EQ(committed.storage_meta->load_id, std::nullopt);
  EXPECT_EQ(committed.storage_data.size(), 4u);

  ASSERT_OK_AND_ASSIGN(auto reader, backend_->NewReader());
  ASSERT_OK(reader->Reset("ckpt"));
  ASSERT_OK_AND_ASSIGN(Metadata read, reader->ReadMetadata());
  ASSERT_TRUE(read.storage_meta.has_value());
  ASSERT_TRUE(read.storage_meta->load_id.has_value());
  std::string first_load_id = *read.storage_meta->load_id;
  read.storage_meta->load_id.reset();
  EXPECT_TRUE(read == committed);

  // Each read is a new load.
  ASSERT_OK(reader->Reset("ckpt"));
  ASSERT_OK_AND_ASSIGN(Metadata again, reader->ReadMetadata());
  EXPECT_NE(again.storage_meta->load_id, first_load_id);
}

void StorageContractTest::UnknownCheckpointIsNotFound() {
  ASSERT_OK_AND_ASSIGN(auto reader, backend_->NewReader());
  ASSERT_OK(reader->Reset("never-saved"));
  EXPECT_THAT(reader->ReadMetadata(),
              StatusIs(StatusCode::kNotFound, HasSubstr("never-saved")));
  StateDict sd{{"x", std::string()}};
  EXPECT_THAT(LoadDict(&sd, "never-saved"),
              StatusIs(StatusCode::kNotFound, HasSubstr("never-saved")));
}

void StorageContractTest::InvalidIdsAreInvalidArgument() {
  const std::vector<std::string> bad = {
      "",      std::string(129, 'a'), std::string("\x01", 1),
      "a\x7f", "tab\there",           "default"};
  for (const std::string& id : bad) {
    SCOPED_TRACE(::testing::PrintToString(id));
    ASSERT_OK_AND_ASSIGN(auto writer, backend_->NewWriter(false));
    EXPECT_THAT(writer->Reset(id),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("id")));
    ASSERT_OK_AND_ASSIGN(auto reader, backend_->NewReader());
    EXPECT_THAT(reader->Reset(id),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("id")));
  }
  // The longest allowed id, and printable punctuation, are fine.
  StateDict sd{{"x", std::string("1")}};
  EXPECT_OK(SaveDict(sd, std::string(128, 'z')).status());
  EXPECT_OK(SaveDict(sd, "run/42@step#7 ünï").status());
  EXPECT_OK(LoadDict(&sd, "run/42@step#7 ünï"));
}

void StorageContractTest::SavingAnExistingIdIsAlreadyExists() {
  StateDict first{{"v", Filled(DType::kInt32, {4}, 1)}};
  ASSERT_OK(SaveDict(first, "c").status());
  StateDict second{{"v", Filled(DType::kInt32, {4}, 2)}};
  EXPECT_THAT(SaveDict(second, "c"),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("c")));
  // The first checkpoint is untouched.
  StateDict loaded{{"v", Zeros(DType::kInt32, {4})}};
  ASSERT_OK(LoadDict(&loaded, "c"));
  EXPECT_EQ(TensorBytes(View(loaded, "v")), TensorBytes(View(first, "v")));
}

void StorageContractTest::OverwriteReplacesTheCheckpoint() {
  StateDict first{{"v", Filled(DType::kInt32, {4}, 1)},
                  {"gone", std::string("old")}};
  ASSERT_OK(SaveDict(first, "c").status());
  StateDict second{{"v", Filled(DType::kInt32, {2, 2}, 2)}};
  ASSERT_OK_AND_ASSIGN(Metadata md, SaveDict(second, "c", /*overwrite=*/true));
  EXPECT_EQ(md.state_dict_metadata.count("gone"), 0u);

  StateDict loaded{{"v", Zeros(DType::kInt32, {2, 2})}};
  ASSERT_OK(LoadDict(&loaded, "c"));
  EXPECT_EQ(TensorBytes(View(loaded, "v")), TensorBytes(View(second, "v")));
  StateDict old{{"gone", std::string()}};
  EXPECT_THAT(LoadDict(&old, "c"),
              StatusIs(StatusCode::kNotFound, HasSubstr("'gone'")));
  // Overwrite also creates.
  EXPECT_OK(SaveDict(second, "fresh", /*overwrite=*/true).status());
}

void StorageContractTest::OneWriterSavesCheckpointsInTurn() {
  ASSERT_OK_AND_ASSIGN(auto writer, backend_->NewWriter(false));
  StateDict a{{"v", Filled(DType::kInt8, {3}, 1)}};
  StateDict b{{"v", Filled(DType::kInt8, {3}, 2)}};
  ASSERT_OK_AND_ASSIGN(Metadata ma, Save(a, *writer, {.checkpoint_id = "a"}));
  ASSERT_OK_AND_ASSIGN(Metadata mb, Save(b, *writer, {.checkpoint_id = "b"}));
  if (has(&StorageContractFeatures::storage_meta)) {
    EXPECT_NE(ma.storage_meta->save_id, mb.storage_meta->save_id);
  }
  ASSERT_OK_AND_ASSIGN(auto reader, backend_->NewReader());
  StateDict loaded{{"v", Zeros(DType::kInt8, {3})}};
  ASSERT_OK(Load(&loaded, *reader, {.checkpoint_id = "a"}));
  EXPECT_EQ(TensorBytes(View(loaded, "v")), TensorBytes(View(a, "v")));
  ASSERT_OK(Load(&loaded, *reader, {.checkpoint_id = "b"}));
  EXPECT_EQ(TensorBytes(View(loaded, "v")), TensorBytes(View(b, "v")));
}

void StorageContractTest::WrongDTypeAtLoadNamesFqnAndBoth() {
  StateDict saved{{"layer.w", Filled(DType::kBFloat16, {4}, 1)}};
  ASSERT_OK(SaveDict(saved, "c").status());
  StateDict loaded{{"layer.w", Zeros(DType::kFloat32, {4})}};
  EXPECT_THAT(LoadDict(&loaded, "c"),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'layer.w'"), HasSubstr("bfloat16"),
                             HasSubstr("float32"))));
}

void StorageContractTest::WrongShapeAtLoadNamesFqnAndBoth() {
  StateDict saved{{"layer.w", Filled(DType::kFloat32, {4, 8}, 1)}};
  ASSERT_OK(SaveDict(saved, "c").status());
  StateDict loaded{{"layer.w", Zeros(DType::kFloat32, {8, 4})}};
  EXPECT_THAT(LoadDict(&loaded, "c"),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'layer.w'"), HasSubstr("[4, 8]"),
                             HasSubstr("[8, 4]"))));
}

void StorageContractTest::MissingFqnIsNotFoundNamingIt() {
  StateDict saved{{"present", std::string("p")}};
  ASSERT_OK(SaveDict(saved, "c").status());
  StateDict loaded{{"present", std::string()},
                   {"absent", Zeros(DType::kInt8, {1})}};
  EXPECT_THAT(LoadDict(&loaded, "c"),
              StatusIs(StatusCode::kNotFound, HasSubstr("'absent'")));
}

void StorageContractTest::PartialLoadLoadsWhatIsPresent() {
  StateDict saved{{"present", Filled(DType::kInt16, {5}, 3)}};
  ASSERT_OK(SaveDict(saved, "c").status());
  StateDict loaded{{"present", Zeros(DType::kInt16, {5})},
                   {"absent", Zeros(DType::kInt16, {5})}};
  ASSERT_OK(LoadDict(&loaded, "c", /*allow_partial_load=*/true));
  EXPECT_EQ(TensorBytes(View(loaded, "present")),
            TensorBytes(View(saved, "present")));
  EXPECT_EQ(TensorBytes(View(loaded, "absent")), std::string(10, '\0'));
}

// The default planner reads allow_partial_load; a planner passed in
// decides for itself, so setting both is refused before anything is read.
void StorageContractTest::PartialLoadWithAPlannerIsInvalidArgument() {
  StateDict saved{{"present", Filled(DType::kInt16, {5}, 3)}};
  ASSERT_OK(SaveDict(saved, "c").status());
  StateDict loaded{{"present", Zeros(DType::kInt16, {5})},
                   {"absent", Zeros(DType::kInt16, {5})}};
  ASSERT_OK_AND_ASSIGN(auto reader, backend_->NewReader());
  DefaultLoadPlanner planner({.allow_partial_load = true});
  EXPECT_THAT(
      Load(&loaded, *reader,
           {.checkpoint_id = "c",
            .planner = &planner,
            .allow_partial_load = true}),
      StatusIs(StatusCode::kInvalidArgument,
               AllOf(HasSubstr("'c'"), HasSubstr("allow_partial_load"))));
  EXPECT_EQ(TensorBytes(View(loaded, "present")), std::string(10, '\0'));
  // The planner's own option is how a planner loads partially.
  ASSERT_OK(
      Load(&loaded, *reader, {.checkpoint_id = "c", .planner = &planner}));
  EXPECT_EQ(TensorBytes(View(loaded, "present")),
            TensorBytes(View(saved, "present")));
}

void StorageContractTest::SaveWithoutFinishIsInvisible() {
  StateDict sd{{"w", Filled(DType::kFloat32, {2, 2}, 1)},
               {"step", std::string("3")}};
  {
    // Every writer step of a save but the last.
    ASSERT_OK_AND_ASSIGN(auto writer, backend_->NewWriter(false));
    DefaultSavePlanner planner;
    ASSERT_OK(writer->Reset("unfinished"));
    ASSERT_OK(planner.SetUpPlanner(&sd, writer->GetStorageMeta(), true));
    ASSERT_OK(writer->SetUpStorageWriter(true, 0, 1));
    ASSERT_OK_AND_ASSIGN(SavePlan local, planner.CreateLocalPlan());
    ASSERT_OK_AND_ASSIGN(local, writer->PrepareLocalPlan(std::move(local)));
    ASSERT_OK_AND_ASSIGN(GlobalSavePlan global,
                         planner.CreateGlobalPlan({std::move(local)}));
    ASSERT_OK_AND_ASSIGN(std::vector<SavePlan> plans,
                         writer->PrepareGlobalPlan(std::move(global.plans)));
    ASSERT_OK_AND_ASSIGN(SavePlan final_plan,
                         planner.FinishPlan(std::move(plans[0])));
    ASSERT_OK_AND_ASSIGN(std::vector<WriteResult> results,
                         writer->WriteData(final_plan, planner).get());
    EXPECT_EQ(results.size(), 2u);

    ASSERT_OK_AND_ASSIGN(auto reader, backend_->NewReader());
    ASSERT_OK(reader->Reset("unfinished"));
    EXPECT_THAT(reader->ReadMetadata(),
                StatusIs(StatusCode::kNotFound, HasSubstr("unfinished")));
  }
  // Once that writer is gone, the id can be saved for real.
  ASSERT_OK(SaveDict(sd, "unfinished").status());
  StateDict loaded{{"w", Zeros(DType::kFloat32, {2, 2})},
                   {"step", std::string()}};
  ASSERT_OK(LoadDict(&loaded, "unfinished"));
  EXPECT_EQ(TensorBytes(View(loaded, "w")), TensorBytes(View(sd, "w")));
}

// The storage calls planner.ReleaseData once for each item it wrote, after
// writing it (storage.h), so a planner may free the item's memory.
void StorageContractTest::ReleasesEveryWrittenItemOnce() {
  TensorView whole = Filled(DType::kFloat32, {6, 4}, 3);
  StateDict sd{{"large", Filled(DType::kFloat32, {256, 1024}, 1)},
               {"small", Filled(DType::kInt8, {3}, 2)},
               {"sharded", ShardedTensor{DType::kFloat32,
                                         {6, 4},
                                         {Shard{{0, 0}, Rows(whole, 0, 2)},
                                          Shard{{2, 0}, Rows(whole, 2, 6)}}}},
               {"step", std::string("12")},
               {"empty", std::string()}};
  RecordingPlanner planner;
  ASSERT_OK_AND_ASSIGN(auto writer, backend_->NewWriter(false));
  ASSERT_OK(
      Save(sd, *writer, {.checkpoint_id = "c", .planner = &planner}).status());
  ASSERT_EQ(planner.final_items().size(), 6u);
  for (const WriteItem& item : planner.final_items()) {
    SCOPED_TRACE(item.index.fqn);
    EXPECT_EQ(planner.released(item.index), 1);
  }
  EXPECT_EQ(planner.released_items(), planner.final_items().size());
}

void StorageContractTest::SecondSaveOfAnIdBeingSavedIsBusy() {
  StateDict sd{{"v", Filled(DType::kInt32, {4}, 1)}};
  ASSERT_OK_AND_ASSIGN(auto first, backend_->NewWriter(false));
  ASSERT_OK(first->Reset("busy-id"));
  ASSERT_OK(first->SetUpStorageWriter(/*is_coordinator=*/true, 0, 1));

  ASSERT_OK_AND_ASSIGN(auto second, backend_->NewWriter(false));
  EXPECT_THAT(Save(sd, *second, {.checkpoint_id = "busy-id"}),
              StatusIs(StatusCode::kBusy, HasSubstr("busy-id")));
  EXPECT_FALSE(Committed("busy-id"));
  // Other ids save meanwhile, with the same writer.
  EXPECT_OK(Save(sd, *second, {.checkpoint_id = "other"}).status());

  // Once the first writer is gone, its save abandoned, the id saves.
  first.reset();
  ASSERT_OK(Save(sd, *second, {.checkpoint_id = "busy-id"}).status());
  StateDict loaded{{"v", Zeros(DType::kInt32, {4})}};
  ASSERT_OK(LoadDict(&loaded, "busy-id"));
  EXPECT_EQ(TensorBytes(View(loaded, "v")), TensorBytes(View(sd, "v")));
}

// Three ranks save rows of "w" and the same "bias" and "step"; two ranks
// load "w" as column blocks, and one rank loads it whole.
void StorageContractTest::RanksSaveShardsThatLoadOnAnotherWorldSize() {
  TensorView whole = Filled(DType::kFloat32, {6, 4}, 1);
  TensorView bias = Filled(DType::kInt64, {4}, 2);
  std::vector<std::unique_ptr<StorageWriter>> writers(3);
  for (auto& writer : writers) {
    ASSERT_OK_AND_ASSIGN(writer, backend_->NewWriter(false));
  }
  std::vector<Status> saved(3);
  std::vector<Metadata> committed(3);
  RunRanks(3, /*coordinator=*/0, [&](int rank, Collective& collective) {
    StateDict sd{
        {"w", ShardedTensor{DType::kFloat32,
                            {6, 4},
                            {Shard{{2 * rank, 0},
                                   Rows(whole, 2 * rank, 2 * rank + 2)}}}},
        {"bias", bias},
        {"step", std::string("7")}};
    Result<Metadata> md =
        Save(sd, *writers[rank],
             {.checkpoint_id = "ranks", .collective = &collective});
    saved[rank] = md.status();
    if (md.ok()) committed[rank] = *std::move(md);
  });
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_OK(saved[rank]) << "rank " << rank;
  }
  ASSERT_TRUE(committed[0] == committed[1] && committed[1] == committed[2])
      << "every rank returns the committed metadata";
  EXPECT_EQ(
      std::get<TensorStorageMetadata>(committed[0].state_dict_metadata.at("w"))
          .chunks.size(),
      3u);
  writers.clear();

  std::vector<std::unique_ptr<StorageReader>> readers(2);
  std::vector<StateDict> dests(2);
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_OK_AND_ASSIGN(readers[rank], backend_->NewReader());
    dests[rank] = StateDict{
        {"w",
         ShardedTensor{DType::kFloat32,
                       {6, 4},
                       {Shard{{0, 2 * rank}, Zeros(DType::kFloat32, {6, 2})}}}},
        {"bias", Zeros(DType::kInt64, {4})},
        {"step", std::string()}};
  }
  std::vector<Status> loaded(2);
  RunRanks(2, /*coordinator=*/0, [&](int rank, Collective& collective) {
    loaded[rank] = Load(&dests[rank], *readers[rank],
                        {.checkpoint_id = "ranks", .collective = &collective});
  });
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    ASSERT_OK(loaded[rank]);
    const auto& shard = std::get<ShardedTensor>(dests[rank].at("w"));
    EXPECT_EQ(TensorBytes(shard.local_shards[0].tensor),
              TensorBytes(whole.Narrow({0, 2 * rank}, {6, 2})));
    EXPECT_EQ(TensorBytes(View(dests[rank], "bias")), TensorBytes(bias));
    EXPECT_EQ(std::get<std::string>(dests[rank].at("step")), "7");
  }
  readers.clear();

  StateDict one{{"w", Zeros(DType::kFloat32, {6, 4})}};
  ASSERT_OK(LoadDict(&one, "ranks"));
  EXPECT_EQ(TensorBytes(View(one, "w")), TensorBytes(whole));
}

// One rank of two fails to write its items: no rank's save succeeds,
// nothing is committed, and the id saves afterwards.
void StorageContractTest::AFailingRankCommitsNothing() {
  TensorView whole = Filled(DType::kFloat32, {4, 4}, 1);
  auto rank_dict = [&](int rank) {
    return StateDict{
        {"w", ShardedTensor{DType::kFloat32,
                            {4, 4},
                            {Shard{{2 * rank, 0},
                                   Rows(whole, 2 * rank, 2 * rank + 2)}}}},
        {"rank" + std::to_string(rank), std::string("own")}};
  };
  auto save_on_two_ranks = [&](bool fail_rank_1) {
    std::vector<std::unique_ptr<StorageWriter>> writers(2);
    for (auto& writer : writers) {
      auto made = backend_->NewWriter(false);
      if (!made.ok()) return std::vector<Status>(2, made.status());
      writer = *std::move(made);
    }
    std::vector<Status> saved(2);
    RunRanks(2, /*coordinator=*/0, [&](int rank, Collective& collective) {
      StateDict sd = rank_dict(rank);
      FailingPlanner failing("rank1");
      DefaultSavePlanner plain;
      SavePlanner* planner = rank == 1 && fail_rank_1
                                 ? static_cast<SavePlanner*>(&failing)
                                 : &plain;
      saved[rank] = Save(sd, *writers[rank],
                         {.checkpoint_id = "c",
                          .planner = planner,
                          .collective = &collective})
                        .status();
    });
    return saved;
  };

  std::vector<Status> failed = save_on_two_ranks(/*fail_rank_1=*/true);
  EXPECT_THAT(failed[1],
              StatusIs(StatusCode::kInternal, HasSubstr("injected failure")));
  EXPECT_FALSE(failed[0].ok()) << "rank 0 committed without rank 1's items";
  EXPECT_FALSE(Committed("c"));

  std::vector<Status> saved = save_on_two_ranks(/*fail_rank_1=*/false);
  EXPECT_OK(saved[0]);
  EXPECT_OK(saved[1]);
  StateDict loaded{{"w", Zeros(DType::kFloat32, {4, 4})},
                   {"rank1", std::string()}};
  ASSERT_OK(LoadDict(&loaded, "c"));
  EXPECT_EQ(TensorBytes(View(loaded, "w")), TensorBytes(whole));
  EXPECT_EQ(std::get<std::string>(loaded.at("rank1")), "own");
}

struct Case {
  const char* name;
  StorageContractTest::Body body;
  // The feature the case needs; nullptr if every backend runs it.
  bool StorageContractFeatures::*feature = nullptr;
};

#define ROCKSDCP_CASE(name, ...) \
  Case { #name, &StorageContractTest::name, __VA_ARGS__ }

using F = StorageContractFeatures;
const Case kCases[] = {
    ROCKSDCP_CASE(RoundTripsEveryDType),
    ROCKSDCP_CASE(RoundTripsZeroDTensor),
    ROCKSDCP_CASE(RoundTripsTensorsWithAZeroSizeDim),
    ROCKSDCP_CASE(RoundTripsStridedViews),
    ROCKSDCP_CASE(ShardedSaveLoadsWhole),
    ROCKSDCP_CASE(WholeSaveLoadsIntoShards),
    ROCKSDCP_CASE(ReshardsRowsIntoBlocks),
    ROCKSDCP_CASE(RoundTripsEmptyAndLargeByteItems),
    ROCKSDCP_CASE(RoundTripsUnusualFqns),
    ROCKSDCP_CASE(ReleasesEveryWrittenItemOnce),
    ROCKSDCP_CASE(ReadMetadataReturnsWhatSaveCommitted, &F::storage_meta),
    ROCKSDCP_CASE(UnknownCheckpointIsNotFound),
    ROCKSDCP_CASE(InvalidIdsAreInvalidArgument, &F::checkpoint_id_rules),
    ROCKSDCP_CASE(SavingAnExistingIdIsAlreadyExists, &F::overwrite_protection),
    ROCKSDCP_CASE(OverwriteReplacesTheCheckpoint, &F::overwrite_protection),
    ROCKSDCP_CASE(SecondSaveOfAnIdBeingSavedIsBusy,
                  &F::busy_on_concurrent_saves),
    ROCKSDCP_CASE(OneWriterSavesCheckpointsInTurn),
    ROCKSDCP_CASE(WrongDTypeAtLoadNamesFqnAndBoth),
    ROCKSDCP_CASE(WrongShapeAtLoadNamesFqnAndBoth),
    ROCKSDCP_CASE(MissingFqnIsNotFoundNamingIt),
    ROCKSDCP_CASE(PartialLoadLoadsWhatIsPresent),
    ROCKSDCP_CASE(PartialLoadWithAPlannerIsInvalidArgument),
    ROCKSDCP_CASE(SaveWithoutFinishIsInvisible),
    ROCKSDCP_CASE(RanksSaveShardsThatLoadOnAnotherWorldSize, &F::multi_rank),
    ROCKSDCP_CASE(AFailingRankCommitsNothing, &F::multi_rank),
};
#undef ROCKSDCP_CASE

}  // namespace

int RegisterStorageContractTests(const StorageContractBackend& backend) {
  auto shared = std::make_shared<const StorageContractBackend>(backend);
  const std::string suite = "StorageContract/" + backend.name;
  int registered = 0;
  for (const Case& c : kCases) {
    if (c.feature != nullptr && !(backend.features.*c.feature)) continue;
    ::testing::RegisterTest(suite.c_str(), c.name, nullptr, nullptr, __FILE__,
                            __LINE__,
                            [shared, body = c.body]() -> StorageContractTest* {
                              return new StorageContractTest(shared, body);
                            });
    ++registered;
  }
  return registered;
}

}  // namespace rocksdcp::testing
