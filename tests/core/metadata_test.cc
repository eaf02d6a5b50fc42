#include "rocksdcp/metadata.h"

#include <set>
#include <unordered_set>

#include "test_util.h"

namespace rocksdcp {
namespace {

TEST(MetadataIndexTest, EqualityAndHashIgnoreIndexHint) {
  MetadataIndex a("w", {0, 4}, 0);
  MetadataIndex b("w", {0, 4}, 7);
  MetadataIndex c("w", {0, 4});
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
  MetadataIndexHash hash;
  EXPECT_EQ(hash(a), hash(b));
  EXPECT_EQ(hash(a), hash(c));
  std::unordered_set<MetadataIndex, MetadataIndexHash> set{a};
  EXPECT_EQ(set.count(b), 1u);
}

TEST(MetadataIndexTest, FqnAndOffsetDistinguish) {
  EXPECT_NE(MetadataIndex("w", {0, 4}), MetadataIndex("w", {4, 0}));
  EXPECT_NE(MetadataIndex("w", {0}), MetadataIndex("v", {0}));
  // A byte item (no offset) is not a 0-d tensor (empty offset).
  EXPECT_NE(MetadataIndex("step"), MetadataIndex("step", {}));
  MetadataIndexHash hash;
  EXPECT_NE(hash(MetadataIndex("step")), hash(MetadataIndex("step", {})));
}

TEST(MetadataIndexTest, OrdersByFqnThenOffsetAbsentFirst) {
  std::set<MetadataIndex> sorted{MetadataIndex("b"), MetadataIndex("a", {2}),
                                 MetadataIndex("a", {10}), MetadataIndex("a"),
                                 MetadataIndex("a", {2}, 5)};
  ASSERT_EQ(sorted.size(), 4u);  // ("a", {2}) twice: hints don't count.
  auto it = sorted.begin();
  EXPECT_EQ(*it++, MetadataIndex("a"));
  EXPECT_EQ(*it++, MetadataIndex("a", {2}));
  EXPECT_EQ(*it++, MetadataIndex("a", {10}));
  EXPECT_EQ(*it++, MetadataIndex("b"));
}

TEST(MetadataIndexTest, ToStringForMessages) {
  EXPECT_EQ(MetadataIndex("opt.step").ToString(), "opt.step");
  EXPECT_EQ(MetadataIndex("w", {0, 16}).ToString(), "w@[0, 16]");
  EXPECT_EQ(MetadataIndex("s", {}).ToString(), "s@[]");
}

TEST(WriteItemTest, TensorStorageSizeIsChunkBytes) {
  WriteItem item;
  item.type = WriteItemType::kShard;
  item.tensor_data = TensorWriteData{};
  item.tensor_data->chunk = {{2, 0}, {3, 5}};
  item.tensor_data->properties.dtype = DType::kBFloat16;
  item.tensor_data->size = {8, 5};
  EXPECT_EQ(item.TensorStorageSize(), 3u * 5u * 2u);
  WriteItem bytes;
  bytes.type = WriteItemType::kByteIO;
  EXPECT_EQ(bytes.TensorStorageSize(), 0u);
}

class MetadataTest : public ::testing::Test {
 protected:
  static Metadata Sample() {
    Metadata m;
    TensorStorageMetadata t;
    t.properties.dtype = DType::kFloat16;
    t.size = {4, 2};
    t.chunks = {{{0, 0}, {2, 2}}, {{2, 0}, {2, 2}}};
    m.state_dict_metadata["w"] = t;
    m.state_dict_metadata["step"] = BytesStorageMetadata{};
    m.storage_data[MetadataIndex("w", {0, 0}, 0)] = "file-a";
    m.storage_data[MetadataIndex("step")] = "file-b";
    m.storage_meta = StorageMeta{"ckpt", "save-1", std::nullopt, {}};
    m.planner_data = "p";
    return m;
  }
};

TEST_F(MetadataTest, EqualWhenEveryFieldIs) {
  EXPECT_EQ(Sample(), Sample());
  EXPECT_EQ(Sample().version, std::string(kMetadataVersion));
}

TEST_F(MetadataTest, EachFieldTakesPart) {
  Metadata base = Sample();
  Metadata m = base;
  std::get<TensorStorageMetadata>(m.state_dict_metadata["w"]).chunks[1].sizes =
      {2, 1};
  EXPECT_FALSE(m == base);

  m = base;
  std::get<TensorStorageMetadata>(m.state_dict_metadata["w"])
      .properties.requires_grad = true;
  EXPECT_FALSE(m == base);

  m = base;
  m.storage_data[MetadataIndex("step")] = "file-c";
  EXPECT_FALSE(m == base);

  m = base;
  m.storage_meta->load_id = "load-1";
  EXPECT_FALSE(m == base);

  m = base;
  m.planner_data.clear();
  EXPECT_FALSE(m == base);

  m = base;
  m.version = "0.9";
  EXPECT_FALSE(m == base);

  m = base;
  m.state_dict_metadata.erase("step");
  EXPECT_FALSE(m == base);
}

TEST_F(MetadataTest, StorageDataKeysCompareIndexHints) {
  // Metadata equality is a round-trip check, so the stored hints count
  // even though MetadataIndex equality ignores them.
  Metadata base = Sample();
  Metadata m = base;
  m.storage_data.erase(MetadataIndex("w", {0, 0}));
  m.storage_data[MetadataIndex("w", {0, 0}, 3)] = "file-a";
  EXPECT_FALSE(m == base);
}

}  // namespace
}  // namespace rocksdcp
