// Round trips through the RocksDB store: every dtype and shape the format
// must carry, pieces, resharded reads, progress and metadata fidelity.

#include "rocksdb/store_fixture.h"

namespace rocksdcp::testing {
namespace {

using ::testing::HasSubstr;

class RoundTripTest : public StoreTest {
 protected:
  // Saves `sd` as `id`, loads it into zeroed tensors of the same shapes and
  // empty strings, and expects every value back bit for bit.
  void ExpectRoundTrip(const StateDict& sd,
                       const RocksDBWriterOptions& wo = {}) {
    const std::string id = "rt-" + std::to_string(++counter_);
    ASSERT_OK(SaveDict(sd, id, wo));
    std::vector<OwnedTensor> storage;
    storage.reserve(sd.size());
    StateDict into;
    for (const auto& [fqn, value] : sd) {
      if (const auto* t = std::get_if<TensorView>(&value)) {
        storage.push_back(ZeroTensor(t->dtype, t->sizes));
        into[fqn] = storage.back().view;
      } else {
        into[fqn] = std::string("stale");
      }
    }
    ASSERT_OK(LoadDict(&into, id));
    for (const auto& [fqn, value] : sd) {
      if (const auto* t = std::get_if<TensorView>(&value)) {
        EXPECT_TRUE(SameTensor(std::get<TensorView>(into[fqn]), *t)) << fqn;
      } else {
        EXPECT_EQ(std::get<std::string>(into[fqn]),
                  std::get<std::string>(value))
            << fqn;
      }
    }
  }

  int counter_ = 0;
};

TEST_F(RoundTripTest, EveryDType) {
  std::vector<OwnedTensor> ts;
  StateDict sd;
  for (uint8_t v = 1; v <= kMaxDType; ++v) {
    const auto dtype = static_cast<DType>(v);
    ts.push_back(RandomTensor(dtype, {3, 5}, v));
    sd[std::string(DTypeName(dtype))] = ts.back().view;
  }
  ExpectRoundTrip(sd);
}

TEST_F(RoundTripTest, ZeroDimAndZeroSizeTensors) {
  OwnedTensor scalar = RandomTensor(DType::kFloat64, {}, 1);
  OwnedTensor empty = RandomTensor(DType::kFloat32, {4, 0, 3}, 2);
  OwnedTensor empty1d = RandomTensor(DType::kInt8, {0}, 3);
  ExpectRoundTrip({{"scalar", scalar.view},
                   {"empty", empty.view},
                   {"empty1d", empty1d.view}});
}

TEST_F(RoundTripTest, TransposedAndStridedViewsSaveTheirProjection) {
  OwnedTensor base = RandomTensor(DType::kFloat32, {6, 8}, 4);
  TensorView transposed = base.view;
  transposed.sizes = {8, 6};
  transposed.strides = {1, 8};
  TensorView every_other_column = base.view;
  every_other_column.sizes = {6, 4};
  every_other_column.strides = {8, 2};
  ExpectRoundTrip({{"t", transposed}, {"cols", every_other_column}});
  // Also split into pieces mid-row.
  ExpectRoundTrip({{"t", transposed}, {"cols", every_other_column}},
                  {.max_piece_bytes = 20});
}

TEST_F(RoundTripTest, TensorsLargerThanAPieceAreSplit) {
  OwnedTensor big = RandomTensor(DType::kBFloat16, {37, 41}, 5);
  OwnedTensor odd = RandomTensor(DType::kComplex128, {29}, 6);
  // 1001 is not a multiple of either element size: pieces round down to
  // whole elements.
  ExpectRoundTrip({{"big", big.view}, {"odd", odd.view}},
                  {.max_piece_bytes = 1001});
  ASSERT_OK_AND_ASSIGN(auto reader, store_->NewReader());
  OwnedTensor into = ZeroTensor(DType::kBFloat16, {37, 41});
  StateDict sd{{"big", into.view}};
  ASSERT_OK(Load(&sd, *reader,
                 {.checkpoint_id = "rt-1", .allow_partial_load = true}));
  // 37 * 41 * 2 = 3034 bytes in pieces of 1000 bytes.
  EXPECT_EQ(reader->stats().pieces_read, 4u);
}

TEST_F(RoundTripTest, ByteItemsEmptySmallAndLarge) {
  ExpectRoundTrip({{"empty", std::string()},
                   {"small", std::string("step=1200")},
                   {"large", RandomBytes(3 << 20, 9)}},
                  {.max_piece_bytes = 1 << 20});
}

TEST_F(RoundTripTest, FqnsWithSpecialCharacters) {
  std::vector<OwnedTensor> ts;
  StateDict sd;
  const char* names[] = {"a@b",        "c#d",      "e%f",       "g/h/i",
                         "with space", "ünï/çødé", "tab\there", "@#%"};
  uint64_t seed = 0;
  for (const char* n : names) {
    ts.push_back(RandomTensor(DType::kInt32, {2, 2}, ++seed));
    sd[n] = ts.back().view;
    sd[std::string(n) + ".bytes"] = RandomBytes(17, seed);
  }
  ExpectRoundTrip(sd);
}

TEST_F(RoundTripTest, MetadataReadsBackEqual) {
  ExampleState s = ExampleStateDict(1);
  ASSERT_OK_AND_ASSIGN(Metadata saved, SaveDict(s.dict, "md"));
  ASSERT_TRUE(saved.storage_meta.has_value());
  EXPECT_EQ(saved.storage_meta->checkpoint_id, "md");
  EXPECT_TRUE(saved.storage_meta->save_id.has_value());
  EXPECT_EQ(saved.storage_data.size(), 4u);

  ASSERT_OK_AND_ASSIGN(auto reader, store_->NewReader());
  ASSERT_OK(reader->Reset("md"));
  ASSERT_OK_AND_ASSIGN(Metadata read, reader->ReadMetadata());
  ASSERT_TRUE(read.storage_meta.has_value());
  EXPECT_TRUE(read.storage_meta->load_id.has_value());
  read.storage_meta->load_id.reset();
  EXPECT_TRUE(read == saved);
}

TEST_F(RoundTripTest, WholeTensorLoadsIntoAShardReadingOnlyItsPieces) {
  OwnedTensor whole = RandomTensor(DType::kFloat32, {64, 16}, 3);
  // 64 rows of 64 bytes, in pieces of 4 rows.
  ASSERT_OK(SaveDict({{"w", whole.view}}, "whole", {.max_piece_bytes = 256}));

  OwnedTensor shard = ZeroTensor(DType::kFloat32, {8, 16});
  ShardedTensor st;
  st.dtype = DType::kFloat32;
  st.global_size = {64, 16};
  st.local_shards.push_back({{40, 0}, shard.view});
  StateDict sd{{"w", st}};
  ASSERT_OK_AND_ASSIGN(auto reader, store_->NewReader());
  ASSERT_OK(Load(&sd, *reader, {.checkpoint_id = "whole"}));
  EXPECT_TRUE(SameTensor(shard.view, whole.view.Narrow({40, 0}, {8, 16})));
  EXPECT_EQ(reader->stats().pieces_read, 2u);
}

TEST_F(RoundTripTest, ShardsLoadIntoAWholeTensorAndAColumnBlock) {
  OwnedTensor whole = RandomTensor(DType::kInt16, {10, 6}, 8);
  // Saved as three uneven row shards.
  ShardedTensor st;
  st.dtype = DType::kInt16;
  st.global_size = {10, 6};
  st.local_shards.push_back({{0, 0}, whole.view.Narrow({0, 0}, {4, 6})});
  st.local_shards.push_back({{4, 0}, whole.view.Narrow({4, 0}, {3, 6})});
  st.local_shards.push_back({{7, 0}, whole.view.Narrow({7, 0}, {3, 6})});
  ASSERT_OK(SaveDict({{"m", st}}, "rows", {.max_piece_bytes = 8}));

  OwnedTensor into = ZeroTensor(DType::kInt16, {10, 6});
  StateDict sd{{"m", into.view}};
  ASSERT_OK(LoadDict(&sd, "rows"));
  EXPECT_TRUE(SameTensor(into.view, whole.view));

  OwnedTensor block = ZeroTensor(DType::kInt16, {10, 2});
  ShardedTensor cols;
  cols.dtype = DType::kInt16;
  cols.global_size = {10, 6};
  cols.local_shards.push_back({{0, 3}, block.view});
  StateDict sd2{{"m", cols}};
  ASSERT_OK(LoadDict(&sd2, "rows"));
  EXPECT_TRUE(SameTensor(block.view, whole.view.Narrow({0, 3}, {10, 2})));
}

TEST_F(RoundTripTest, ProgressReachesTotal) {
  ExampleState s = ExampleStateDict(2);
  std::vector<Progress> seen;
  RocksDBWriterOptions wo;
  wo.max_piece_bytes = 4096;
  wo.progress = [&](const Progress& p) { seen.push_back(p); };
  ASSERT_OK(SaveDict(s.dict, "p", wo));
  ASSERT_GT(seen.size(), 4u);
  EXPECT_EQ(seen.back().bytes_done, seen.back().bytes_total);
  EXPECT_EQ(seen.back().bytes_done, 48u * 100 * 2 + 100 * 4 + 8 + 5000);
  EXPECT_EQ(seen.back().items_done, 4u);
  for (size_t i = 1; i < seen.size(); ++i) {
    EXPECT_GE(seen[i].bytes_done, seen[i - 1].bytes_done);
  }

  std::vector<Progress> loaded;
  RocksDBReaderOptions ro;
  ro.progress = [&](const Progress& p) { loaded.push_back(p); };
  ASSERT_OK_AND_ASSIGN(auto reader, store_->NewReader(ro));
  ExampleState into = EmptyExampleStateDict();
  ASSERT_OK(Load(&into.dict, *reader, {.checkpoint_id = "p"}));
  ASSERT_FALSE(loaded.empty());
  EXPECT_EQ(loaded.back().bytes_done, loaded.back().bytes_total);
  EXPECT_EQ(loaded.back().items_done, 4u);
}

}  // namespace
}  // namespace rocksdcp::testing
