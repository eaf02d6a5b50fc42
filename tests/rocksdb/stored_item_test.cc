// LookupStoredItem finds a tensor's chunk by its offsets whatever the
// storage index's hint says: right, wrong or absent. (A forged hint once
// made every lookup scan every chunk: N lookups, N^2 comparisons.)

#include "rocksdb/stored_item.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "rocksdb/catalog_codec.h"
#include "test_util.h"

namespace rocksdcp::testing {
namespace {

using ::testing::HasSubstr;

constexpr int kChunks = 1000;

// Tensor "t", float32: chunk i at offsets {i, 0}, of sizes {1, i % 7 + 1},
// each with a storage entry whose hint `hint(i)` gives.
Metadata RowChunks(const std::function<std::optional<int32_t>(int)>& hint) {
  Metadata m;
  TensorStorageMetadata t;
  t.properties.dtype = DType::kFloat32;
  t.size = {kChunks, 7};
  for (int i = 0; i < kChunks; ++i) {
    t.chunks.push_back({{i, 0}, {1, i % 7 + 1}});
    format::StorageInfo info;
    info.length = 4 * (i % 7 + 1);
    info.piece_bytes = info.length;
    m.storage_data.emplace(MetadataIndex("t", {i, 0}, hint(i)),
                           format::EncodeStorageInfo(info));
  }
  m.state_dict_metadata.emplace("t", std::move(t));
  return m;
}

void ExpectEveryChunkFound(const Metadata& m) {
  ChunkFinder chunks;
  for (int i = 0; i < kChunks; ++i) {
    auto it = m.storage_data.find(MetadataIndex("t", {i, 0}));
    ASSERT_NE(it, m.storage_data.end());
    ASSERT_OK_AND_ASSIGN(StoredItem item,
                         LookupStoredItem(m, it->first, true, chunks));
    EXPECT_EQ(item.chunk_sizes, (std::vector<int64_t>{1, i % 7 + 1})) << i;
  }
}

TEST(StoredItemTest, FindsChunksByRightHints) {
  ExpectEveryChunkFound(RowChunks([](int i) { return i; }));
}

TEST(StoredItemTest, FindsChunksByOffsetsWhenHintsAreWrong) {
  ExpectEveryChunkFound(RowChunks([](int i) { return (i + 1) % kChunks; }));
  ExpectEveryChunkFound(RowChunks([](int) { return -5; }));
}

TEST(StoredItemTest, FindsChunksByOffsetsWithoutHints) {
  ExpectEveryChunkFound(RowChunks([](int) { return std::nullopt; }));
}

TEST(StoredItemTest, AnEntryAtNoChunksOffsetsIsCorruption) {
  Metadata m = RowChunks([](int) { return std::nullopt; });
  format::StorageInfo info;
  info.length = 4;
  info.piece_bytes = 4;
  const MetadataIndex stray("t", {kChunks + 3, 0});
  m.storage_data.emplace(stray, format::EncodeStorageInfo(info));
  ChunkFinder chunks;
  EXPECT_THAT(
      LookupStoredItem(m, stray, true, chunks),
      StatusIs(StatusCode::kCorruption, HasSubstr("no chunk at that offset")));
}

}  // namespace
}  // namespace rocksdcp::testing
