// The StorageWriter / StorageReader contract, written once and run on every
// backend (STYLE.md rule 9; model: tensorstore kvstore/test_util). Each
// backend registers a StorageFactory below; every test gets a fresh backend
// in a fresh temp dir and drives it through Save and Load, as a trainer
// would, or through the raw storage calls where the contract is about them.

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "memory_storage.h"
#include "rocksdcp/checkpoint.h"
#include "rocksdcp/rocksdb_store.h"
#include "test_util.h"

namespace rocksdcp {
namespace {

using ::rocksdcp::testing::ScopedTempDir;
using ::rocksdcp::testing::StatusIs;
using ::rocksdcp::testing::TensorBytes;
using ::testing::AllOf;
using ::testing::HasSubstr;

// One open backend: writers and readers over one store.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual Result<std::unique_ptr<StorageWriter>> NewWriter(bool overwrite) = 0;
  virtual Result<std::unique_ptr<StorageReader>> NewReader() = 0;
};

struct StorageFactory {
  std::string name;
  // Opens a fresh backend keeping its files (if any) under `dir`.
  std::function<Result<std::unique_ptr<Backend>>(const std::string& dir)> open;
};

// Names the backend in test output instead of dumping the struct's bytes.
void PrintTo(const StorageFactory& factory, std::ostream* os) {
  *os << factory.name;
}

class MemoryBackend : public Backend {
 public:
  Result<std::unique_ptr<StorageWriter>> NewWriter(bool overwrite) override {
    return std::unique_ptr<StorageWriter>(
        storage_.NewWriter({.overwrite = overwrite}));
  }
  Result<std::unique_ptr<StorageReader>> NewReader() override {
    return std::unique_ptr<StorageReader>(storage_.NewReader());
  }

 private:
  testing::MemoryStorage storage_;
};

class RocksDBBackend : public Backend {
 public:
  explicit RocksDBBackend(std::unique_ptr<Store> store)
      : store_(std::move(store)) {}
  Result<std::unique_ptr<StorageWriter>> NewWriter(bool overwrite) override {
    RocksDBWriterOptions options;
    options.overwrite = overwrite;
    ROCKSDCP_ASSIGN_OR_RETURN(auto writer, store_->NewWriter(options));
    return std::unique_ptr<StorageWriter>(std::move(writer));
  }
  Result<std::unique_ptr<StorageReader>> NewReader() override {
    ROCKSDCP_ASSIGN_OR_RETURN(auto reader, store_->NewReader());
    return std::unique_ptr<StorageReader>(std::move(reader));
  }

 private:
  // Outlives every writer and reader: tests destroy those first.
  std::unique_ptr<Store> store_;
};

StorageFactory MemoryFactory() {
  return {"Memory", [](const std::string&) -> Result<std::unique_ptr<Backend>> {
            return std::unique_ptr<Backend>(std::make_unique<MemoryBackend>());
          }};
}

StorageFactory RocksDBFactory() {
  return {"RocksDB",
          [](const std::string& dir) -> Result<std::unique_ptr<Backend>> {
            ROCKSDCP_ASSIGN_OR_RETURN(std::unique_ptr<Store> store,
                                      Store::Open(dir));
            return std::unique_ptr<Backend>(
                std::make_unique<RocksDBBackend>(std::move(store)));
          }};
}

class StorageContractTest : public ::testing::TestWithParam<StorageFactory> {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(backend_, GetParam().open(dir_.Sub("store")));
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

  ScopedTempDir dir_;
  std::unique_ptr<Backend> backend_;
  std::deque<std::vector<uint8_t>> buffers_;
};

TEST_P(StorageContractTest, RoundTripsEveryDType) {
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
    EXPECT_EQ(TensorBytes(View(loaded, fqn)), TensorBytes(std::get<TensorView>(value)));
  }
}

TEST_P(StorageContractTest, RoundTripsZeroDTensor) {
  StateDict saved{{"scale", Filled(DType::kFloat64, {}, 1)}};
  StateDict loaded{{"scale", Zeros(DType::kFloat64, {})}};
  ASSERT_OK(SaveDict(saved, "c").status());
  ASSERT_OK(LoadDict(&loaded, "c"));
  EXPECT_EQ(TensorBytes(View(loaded, "scale")), TensorBytes(View(saved, "scale")));
}

TEST_P(StorageContractTest, RoundTripsTensorsWithAZeroSizeDim) {
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

TEST_P(StorageContractTest, RoundTripsStridedViews) {
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

TEST_P(StorageContractTest, ShardedSaveLoadsWhole) {
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

TEST_P(StorageContractTest, WholeSaveLoadsIntoShards) {
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

TEST_P(StorageContractTest, ReshardsRowsIntoBlocks) {
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

TEST_P(StorageContractTest, RoundTripsEmptyAndLargeByteItems) {
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

TEST_P(StorageContractTest, RoundTripsUnusualFqns) {
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

TEST_P(StorageContractTest, ReadMetadataReturnsWhatSaveCommitted) {
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

TEST_P(StorageContractTest, UnknownCheckpointIsNotFound) {
  ASSERT_OK_AND_ASSIGN(auto reader, backend_->NewReader());
  ASSERT_OK(reader->Reset("never-saved"));
  EXPECT_THAT(reader->ReadMetadata(),
              StatusIs(StatusCode::kNotFound, HasSubstr("never-saved")));
  StateDict sd{{"x", std::string()}};
  EXPECT_THAT(LoadDict(&sd, "never-saved"),
              StatusIs(StatusCode::kNotFound, HasSubstr("never-saved")));
}

TEST_P(StorageContractTest, InvalidIdsAreInvalidArgument) {
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

TEST_P(StorageContractTest, SavingAnExistingIdIsAlreadyExists) {
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

TEST_P(StorageContractTest, OverwriteReplacesTheCheckpoint) {
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

TEST_P(StorageContractTest, OneWriterSavesCheckpointsInTurn) {
  ASSERT_OK_AND_ASSIGN(auto writer, backend_->NewWriter(false));
  StateDict a{{"v", Filled(DType::kInt8, {3}, 1)}};
  StateDict b{{"v", Filled(DType::kInt8, {3}, 2)}};
  ASSERT_OK_AND_ASSIGN(Metadata ma, Save(a, *writer, {.checkpoint_id = "a"}));
  ASSERT_OK_AND_ASSIGN(Metadata mb, Save(b, *writer, {.checkpoint_id = "b"}));
  EXPECT_NE(ma.storage_meta->save_id, mb.storage_meta->save_id);
  ASSERT_OK_AND_ASSIGN(auto reader, backend_->NewReader());
  StateDict loaded{{"v", Zeros(DType::kInt8, {3})}};
  ASSERT_OK(Load(&loaded, *reader, {.checkpoint_id = "a"}));
  EXPECT_EQ(TensorBytes(View(loaded, "v")), TensorBytes(View(a, "v")));
  ASSERT_OK(Load(&loaded, *reader, {.checkpoint_id = "b"}));
  EXPECT_EQ(TensorBytes(View(loaded, "v")), TensorBytes(View(b, "v")));
}

TEST_P(StorageContractTest, WrongDTypeAtLoadNamesFqnAndBoth) {
  StateDict saved{{"layer.w", Filled(DType::kBFloat16, {4}, 1)}};
  ASSERT_OK(SaveDict(saved, "c").status());
  StateDict loaded{{"layer.w", Zeros(DType::kFloat32, {4})}};
  EXPECT_THAT(LoadDict(&loaded, "c"),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'layer.w'"), HasSubstr("bfloat16"),
                             HasSubstr("float32"))));
}

TEST_P(StorageContractTest, WrongShapeAtLoadNamesFqnAndBoth) {
  StateDict saved{{"layer.w", Filled(DType::kFloat32, {4, 8}, 1)}};
  ASSERT_OK(SaveDict(saved, "c").status());
  StateDict loaded{{"layer.w", Zeros(DType::kFloat32, {8, 4})}};
  EXPECT_THAT(LoadDict(&loaded, "c"),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'layer.w'"), HasSubstr("[4, 8]"),
                             HasSubstr("[8, 4]"))));
}

TEST_P(StorageContractTest, MissingFqnIsNotFoundNamingIt) {
  StateDict saved{{"present", std::string("p")}};
  ASSERT_OK(SaveDict(saved, "c").status());
  StateDict loaded{{"present", std::string()},
                   {"absent", Zeros(DType::kInt8, {1})}};
  EXPECT_THAT(LoadDict(&loaded, "c"),
              StatusIs(StatusCode::kNotFound, HasSubstr("'absent'")));
}

TEST_P(StorageContractTest, PartialLoadLoadsWhatIsPresent) {
  StateDict saved{{"present", Filled(DType::kInt16, {5}, 3)}};
  ASSERT_OK(SaveDict(saved, "c").status());
  StateDict loaded{{"present", Zeros(DType::kInt16, {5})},
                   {"absent", Zeros(DType::kInt16, {5})}};
  ASSERT_OK(LoadDict(&loaded, "c", /*allow_partial_load=*/true));
  EXPECT_EQ(TensorBytes(View(loaded, "present")), TensorBytes(View(saved, "present")));
  EXPECT_EQ(TensorBytes(View(loaded, "absent")), std::string(10, '\0'));
}

// The default planner reads allow_partial_load; a planner passed in
// decides for itself, so setting both is refused before anything is read.
TEST_P(StorageContractTest, PartialLoadWithAPlannerIsInvalidArgument) {
  StateDict saved{{"present", Filled(DType::kInt16, {5}, 3)}};
  ASSERT_OK(SaveDict(saved, "c").status());
  StateDict loaded{{"present", Zeros(DType::kInt16, {5})},
                   {"absent", Zeros(DType::kInt16, {5})}};
  ASSERT_OK_AND_ASSIGN(auto reader, backend_->NewReader());
  DefaultLoadPlanner planner({.allow_partial_load = true});
  EXPECT_THAT(Load(&loaded, *reader,
                   {.checkpoint_id = "c",
                    .planner = &planner,
                    .allow_partial_load = true}),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'c'"),
                             HasSubstr("allow_partial_load"))));
  EXPECT_EQ(TensorBytes(View(loaded, "present")), std::string(10, '\0'));
  // The planner's own option is how a planner loads partially.
  ASSERT_OK(Load(&loaded, *reader, {.checkpoint_id = "c", .planner = &planner}));
  EXPECT_EQ(TensorBytes(View(loaded, "present")), TensorBytes(View(saved, "present")));
}

TEST_P(StorageContractTest, SaveWithoutFinishIsInvisible) {
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

INSTANTIATE_TEST_SUITE_P(Memory, StorageContractTest,
                         ::testing::Values(MemoryFactory()),
                         [](const auto& info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(RocksDB, StorageContractTest,
                         ::testing::Values(RocksDBFactory()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace rocksdcp
