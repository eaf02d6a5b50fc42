// A store of many checkpoints: what an open costs must not grow with them
// where it need not (benchmarks/store_scale_bench.cc measures it). Table
// files open as loads read them, within StoreOptions::max_open_files, a
// read-write open merges a catalog that saves in separate processes left
// in pieces, and no open replays a large metadata value from the WAL.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "format/metadata_codec.h"
#include "rocksdb/raw_store.h"
#include "rocksdb/store_fixture.h"
#include "rocksdb/store_impl.h"

namespace rocksdcp::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

uint64_t TableFilesIn(const std::string& dir) {
  uint64_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".sst") ++n;
  }
  return n;
}

// The bytes of the store's write-ahead logs.
uint64_t WalBytesIn(const std::string& dir) {
  uint64_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".log") n += e.file_size();
  }
  return n;
}

std::string Id(int i) { return "step-" + std::to_string(i); }

TEST_F(StoreTest, MaxOpenFilesUnderTwentyIsRefused) {
  CloseStore();
  for (int bad : {0, 5, 19, -2}) {
    StoreOptions options;
    options.max_open_files = bad;
    EXPECT_THAT(Store::Open(store_path(), options),
                StatusIs(StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("max_open_files"),
                               HasSubstr(std::to_string(bad)))));
  }
  StoreOptions every;
  every.max_open_files = -1;
  EXPECT_OK(Store::Open(store_path(), every));
}

// 80 checkpoints, loaded one after another by a store that may keep 20
// files open (table files: 10, or one per shard of the table cache, 16):
// each loads whole, and the process never holds a descriptor per table
// file of the store.
TEST_F(StoreTest, CheckpointsLoadThroughABoundedSetOfOpenTableFiles) {
  constexpr int kCheckpoints = 80;
  for (int i = 0; i < kCheckpoints; ++i) {
    ExampleState state = ExampleStateDict(100 + i);
    ASSERT_OK(SaveDict(state.dict, Id(i)));
  }
  CloseStore();
  const uint64_t tables = TableFilesIn(store_path());
  ASSERT_GE(tables, static_cast<uint64_t>(kCheckpoints));

  for (bool read_only : {true, false}) {
    SCOPED_TRACE(read_only ? "read-only" : "read-write");
    const uint64_t before = OpenFileDescriptors();
    StoreOptions options;
    options.read_only = read_only;
    options.max_open_files = 20;
    OpenStore(options);
    uint64_t most = OpenFileDescriptors() - before;
    for (int i = kCheckpoints - 1; i >= 0; --i) {
      ExampleState into = EmptyExampleStateDict();
      ASSERT_OK(LoadDict(&into.dict, Id(i)));
      EXPECT_TRUE(IsExampleState(into, 100 + i)) << Id(i);
      most = std::max(most, OpenFileDescriptors() - before);
    }
    ExpectVerifies();
    most = std::max(most, OpenFileDescriptors() - before);
    // The table files RocksDB keeps (at most 16), the WAL, LOG, MANIFEST,
    // LOCK and directories: far fewer than the store's table files.
    EXPECT_LT(most, tables / 2) << "of " << tables << " table files";
    CloseStore();
  }
}

// Table files open when a load first reads them: a checkpoint another
// Store deleted after this read-only one opened is gone with its files,
// and the load says so, whether the files went before it read the
// checkpoint's metadata or between that and its pieces. The others load.
TEST_F(StoreTest, AReadOnlyStoreSaysACheckpointDeletedSinceItOpenedIsGone) {
  ExampleState a = ExampleStateDict(31);
  ASSERT_OK(SaveDict(a.dict, "a"));
  for (const char* id : {"d", "e"}) {
    ExampleState state = ExampleStateDict(32);
    ASSERT_OK(SaveDict(state.dict, id));
  }
  CloseStore();
  // RocksDB opens a few table files as the store opens (a quarter of the
  // table cache, at most 16): 20 leaves it two, the catalog's first.
  StoreOptions read_only;
  read_only.read_only = true;
  read_only.max_open_files = 20;
  ASSERT_OK_AND_ASSIGN(auto reader_store, Store::Open(store_path(), read_only));
  auto delete_elsewhere = [&](const std::string& id) {
    ASSERT_OK_AND_ASSIGN(auto writer_store, Store::Open(store_path()));
    ASSERT_OK(writer_store->Delete(id));
  };
  auto deleted_since = [](const std::string& id) {
    return StatusIs(
        StatusCode::kNotFound,
        AllOf(HasSubstr("'" + id + "'"),
              HasSubstr("was deleted after this read-only store opened")));
  };

  delete_elsewhere("d");
  {
    ExampleState into = EmptyExampleStateDict();
    ASSERT_OK_AND_ASSIGN(auto reader, reader_store->NewReader());
    EXPECT_THAT(Load(&into.dict, *reader, {.checkpoint_id = "d"}),
                deleted_since("d"));
  }
  {
    ASSERT_OK_AND_ASSIGN(auto reader, reader_store->NewReader());
    ASSERT_OK(reader->Reset("e"));
    ASSERT_OK_AND_ASSIGN(Metadata md, reader->ReadMetadata());
    delete_elsewhere("e");
    ExampleState into = EmptyExampleStateDict();
    DefaultLoadPlanner planner;
    ASSERT_OK(planner.SetUpPlanner(&into.dict, &md, true));
    ASSERT_OK(reader->SetUpStorageReader(md, true, 0, 1));
    ASSERT_OK_AND_ASSIGN(LoadPlan plan, planner.CreateLocalPlan());
    EXPECT_THAT(reader->ReadData(plan, planner).get(), deleted_since("e"));
  }
  ExampleState into = EmptyExampleStateDict();
  ASSERT_OK_AND_ASSIGN(auto reader, reader_store->NewReader());
  ASSERT_OK(Load(&into.dict, *reader, {.checkpoint_id = "a"}));
  EXPECT_TRUE(IsExampleState(into, 31));
}

// Each save in a process of its own (as torch's save through rocksdcp's
// Python writer does): every close flushes the catalog into one small
// file, and RocksDB moves such files down whole. A read-write open merges
// them once there are more than kCatalogFilesBeforeCompaction, so the
// catalog every open scans stays a few files.
TEST_F(StoreTest, AReadWriteOpenMergesACatalogLeftInPieces) {
  constexpr int kSaves = 3 * static_cast<int>(kCatalogFilesBeforeCompaction);
  size_t most = 0;
  for (int i = 0; i < kSaves; ++i) {
    OpenStore();
    ExampleState state = ExampleStateDict(200 + i);
    ASSERT_OK(SaveDict(state.dict, Id(i)));
    CloseStore();
    most = std::max(most, CatalogTableFiles(store_path()));
  }
  EXPECT_LE(most, kCatalogFilesBeforeCompaction + 1);
  OpenStore({.read_only = true});
  ASSERT_OK_AND_ASSIGN(auto list, store_->List());
  EXPECT_EQ(list.size(), static_cast<size_t>(kSaves));
  for (int i = 0; i < kSaves; ++i) {
    ExampleState into = EmptyExampleStateDict();
    ASSERT_OK(LoadDict(&into.dict, Id(i)));
    EXPECT_TRUE(IsExampleState(into, 200 + i)) << Id(i);
  }
}

// A checkpoint of 6,000 items: the commit flushes its metadata (some
// 1.7 MB) out of the memtable and the WAL, which every read-only open
// replayed into memory before (a second of it for a million items). A
// small checkpoint's metadata stays in the WAL, costing no table file.
TEST_F(StoreTest, ALargeMetadataLeavesTheWriteAheadLog) {
  constexpr int kItems = 6'000;
  std::vector<float> values(4 * kItems);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.25f * i;
  StateDict many;
  for (int i = 0; i < kItems; ++i) {
    many.emplace("layers." + std::to_string(i) + ".weight",
                 TensorView::Contiguous(DType::kFloat32, {4}, &values[4 * i]));
  }
  ASSERT_OK_AND_ASSIGN(const Metadata saved, SaveDict(many, "many"));
  ASSERT_GE(format::EncodeMetadata(saved).size(), kFlushMetadataBytes);
  CloseStore();
  EXPECT_LT(WalBytesIn(store_path()), kFlushMetadataBytes / 4);

  OpenStore();
  ExampleState small = ExampleStateDict(7);
  ASSERT_OK(SaveDict(small.dict, "small"));
  CloseStore();
  EXPECT_GT(WalBytesIn(store_path()), 0u);

  OpenStore({.read_only = true});
  std::vector<float> loaded(values.size(), -1.0f);
  StateDict into;
  for (int i = 0; i < kItems; ++i) {
    into.emplace("layers." + std::to_string(i) + ".weight",
                 TensorView::Contiguous(DType::kFloat32, {4}, &loaded[4 * i]));
  }
  ASSERT_OK(LoadDict(&into, "many"));
  EXPECT_EQ(loaded, values);
  ExampleState small_into = EmptyExampleStateDict();
  ASSERT_OK(LoadDict(&small_into.dict, "small"));
  EXPECT_TRUE(IsExampleState(small_into, 7));
}

}  // namespace
}  // namespace rocksdcp::testing
