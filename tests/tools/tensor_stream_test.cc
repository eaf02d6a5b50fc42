// tools/tensor_stream.h against real stores: every streamed byte is compared
// with the C-order bytes of what was saved, and Loads are counted through a
// reader that counts its Resets (Load calls Reset once).

#include "tensor_stream.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "rocksdb/store_fixture.h"

namespace rocksdcp::tools {
namespace {

using ::rocksdcp::testing::OwnedTensor;
using ::rocksdcp::testing::RandomTensor;
using ::rocksdcp::testing::StatusIs;
using ::rocksdcp::testing::TensorBytes;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * kKiB;

StreamItem ItemOf(const std::string& fqn, const TensorView& t) {
  return {fqn, t.dtype, t.sizes};
}

// Counts Loads: each one starts with exactly one Reset.
class CountingReader : public StorageReaderWrapper {
 public:
  using StorageReaderWrapper::StorageReaderWrapper;
  Status Reset(std::string_view checkpoint_id) override {
    ++resets;
    return target()->Reset(checkpoint_id);
  }
  int resets = 0;
};

class TensorStreamTest : public ::rocksdcp::testing::StoreTest {
 protected:
  // Saves `dict` as checkpoint "ck".
  void Save(const StateDict& dict, const RocksDBWriterOptions& options = {}) {
    ASSERT_OK(SaveDict(dict, "ck", options));
  }

  // Streams `items` of "ck" through a fresh reader; fills got_ (each
  // item's bytes), calls_, loads_, and checks each piece fits `budget`.
  Status Stream(const std::vector<StreamItem>& items, size_t budget,
                const StreamSink& also = {}) {
    auto reader = store_->NewReader();
    if (!reader.ok()) return reader.status();
    CountingReader counting(reader->get());
    got_.assign(items.size(), "");
    calls_.clear();
    const Status s =
        StreamTensors(counting, "ck", items, budget,
                      [&](size_t item, std::string_view bytes) -> Status {
                        EXPECT_LE(bytes.size(), budget);
                        EXPECT_LT(item, items.size());
                        calls_.push_back(item);
                        if (item < got_.size()) got_[item].append(bytes);
                        return also ? also(item, bytes) : Status::OK();
                      });
    loads_ = counting.resets;
    return s;
  }

  std::vector<std::string> got_;
  std::vector<size_t> calls_;  // The item of each sink call, in order.
  int loads_ = 0;
};

TEST_F(TensorStreamTest, StreamsShapesAndDTypesInOneLoad) {
  OwnedTensor scalar = RandomTensor(DType::kInt64, {}, 1);
  OwnedTensor vec = RandomTensor(DType::kUInt8, {7}, 2);
  OwnedTensor mat = RandomTensor(DType::kBFloat16, {3, 5}, 3);
  OwnedTensor four = RandomTensor(DType::kFloat32, {2, 3, 4, 5}, 4);
  OwnedTensor cplx = RandomTensor(DType::kComplex128, {2, 3}, 5);
  Save({{"s", scalar.view},
        {"v", vec.view},
        {"m", mat.view},
        {"f", four.view},
        {"c", cplx.view}});
  ASSERT_OK(Stream(
      {ItemOf("f", four.view), ItemOf("s", scalar.view), ItemOf("v", vec.view),
       ItemOf("m", mat.view), ItemOf("c", cplx.view)},
      kMiB));
  EXPECT_THAT(got_, ElementsAre(TensorBytes(four.view),
                                TensorBytes(scalar.view), TensorBytes(vec.view),
                                TensorBytes(mat.view), TensorBytes(cplx.view)));
  EXPECT_THAT(calls_, ElementsAre(0, 1, 2, 3, 4));
  EXPECT_EQ(loads_, 1);
}

TEST_F(TensorStreamTest, BufferIsSizedByTheItemsNotTheBudget) {
  // A buffer of the budget could not be allocated.
  OwnedTensor a = RandomTensor(DType::kFloat32, {3, 4}, 1);
  OwnedTensor b = RandomTensor(DType::kInt8, {5}, 2);
  Save({{"a", a.view}, {"b", b.view}});
  ASSERT_OK(Stream({ItemOf("a", a.view), ItemOf("b", b.view)},
                   std::numeric_limits<size_t>::max()));
  EXPECT_THAT(got_, ElementsAre(TensorBytes(a.view), TensorBytes(b.view)));
  EXPECT_EQ(loads_, 1);
}

TEST_F(TensorStreamTest, ZeroSizeTensorsGetNoSinkCall) {
  OwnedTensor a = RandomTensor(DType::kFloat32, {4}, 1);
  OwnedTensor empty = RandomTensor(DType::kFloat32, {3, 0, 2}, 2);
  OwnedTensor none = RandomTensor(DType::kInt16, {0}, 3);
  Save({{"a", a.view}, {"empty", empty.view}, {"none", none.view}});
  ASSERT_OK(Stream({ItemOf("empty", empty.view), ItemOf("a", a.view),
                    ItemOf("none", none.view)},
                   16));
  EXPECT_THAT(got_, ElementsAre("", TensorBytes(a.view), ""));
  EXPECT_THAT(calls_, ElementsAre(1));

  // Nothing to read, yet the items are still checked, by one Load.
  ASSERT_OK(
      Stream({ItemOf("empty", empty.view), ItemOf("none", none.view)}, kMiB));
  EXPECT_TRUE(calls_.empty());
  EXPECT_EQ(loads_, 1);
  EXPECT_THAT(Stream({ItemOf("gone", empty.view)}, kMiB),
              StatusIs(StatusCode::kNotFound, HasSubstr("'gone'")));
}

TEST_F(TensorStreamTest, NoItemsNoLoads) {
  OwnedTensor a = RandomTensor(DType::kFloat32, {4}, 1);
  Save({{"a", a.view}});
  ASSERT_OK(Stream({}, kMiB));
  EXPECT_EQ(loads_, 0);
  EXPECT_TRUE(calls_.empty());
}

TEST_F(TensorStreamTest, ReassemblesShardsAndPieces) {
  // Two shards split by columns, and a tensor of many 256-byte pieces:
  // slabs cut across both.
  OwnedTensor whole = RandomTensor(DType::kFloat32, {8, 300}, 1);
  ShardedTensor st{DType::kFloat32, {8, 300}, {}};
  st.local_shards.push_back({{0, 0}, whole.view.Narrow({0, 0}, {8, 100})});
  st.local_shards.push_back({{0, 100}, whole.view.Narrow({0, 100}, {8, 200})});
  OwnedTensor pieces = RandomTensor(DType::kFloat64, {6, 10, 7}, 2);
  Save({{"w", st}, {"p", pieces.view}}, {.max_piece_bytes = 256});
  const std::vector<StreamItem> items = {{"w", DType::kFloat32, {8, 300}},
                                         ItemOf("p", pieces.view)};
  for (size_t budget : {size_t{16}, size_t{100}, size_t{500}, 3 * kKiB,
                        5000 * sizeof(float), kMiB}) {
    SCOPED_TRACE(budget);
    ASSERT_OK(Stream(items, budget));
    EXPECT_EQ(got_[0], TensorBytes(whole.view));
    EXPECT_EQ(got_[1], TensorBytes(pieces.view));
  }
}

TEST_F(TensorStreamTest, BatchesSmallTensorsIntoOneLoad) {
  std::vector<OwnedTensor> tensors;
  StateDict dict;
  std::vector<StreamItem> items;
  for (int i = 0; i < 100; ++i) {
    tensors.push_back(RandomTensor(DType::kFloat32, {256}, i));
    const std::string fqn = "layer." + std::to_string(i);
    dict[fqn] = tensors.back().view;
    items.push_back(ItemOf(fqn, tensors.back().view));
  }
  Save(dict);
  ASSERT_OK(Stream(items, kMiB));
  EXPECT_EQ(loads_, 1);
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(got_[i], TensorBytes(tensors[i].view));

  // Ten tensors fill 10 KiB exactly.
  ASSERT_OK(Stream(items, 10 * kKiB));
  EXPECT_EQ(loads_, 10);
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(got_[i], TensorBytes(tensors[i].view));
}

TEST_F(TensorStreamTest, ReadsTensorLargerThanBudgetInSlabsOfRows) {
  // Rows of 4 KiB: 16 of them fill a 64 KiB budget.
  OwnedTensor big = RandomTensor(DType::kFloat32, {256, 1024}, 1);
  Save({{"big", big.view}});
  ASSERT_OK(Stream({ItemOf("big", big.view)}, 64 * kKiB));
  EXPECT_EQ(loads_, 16);
  EXPECT_EQ(calls_.size(), 16u);
  EXPECT_EQ(got_[0], TensorBytes(big.view));

  // 5 rows fit in 5 rows and a bit: 51 slabs of 5 rows and one of 1.
  ASSERT_OK(Stream({ItemOf("big", big.view)}, 5 * 4 * kKiB + 100));
  EXPECT_EQ(loads_, 52);
  EXPECT_EQ(got_[0], TensorBytes(big.view));
}

TEST_F(TensorStreamTest, SlabsAlongAnInnerDimWhenARowExceedsTheBudget) {
  // A row of dim 0 is 3*4*50*2 = 1200 bytes and of dim 1 400: a 500-byte
  // budget reads one (i0, i1) row of 400 bytes per Load.
  OwnedTensor t = RandomTensor(DType::kInt16, {5, 3, 4, 50}, 1);
  Save({{"t", t.view}}, {.max_piece_bytes = 1000});
  ASSERT_OK(Stream({ItemOf("t", t.view)}, 500));
  EXPECT_EQ(loads_, 15);
  EXPECT_EQ(got_[0], TensorBytes(t.view));

  // 150 bytes hold one run of 1 row of dim 2 (100 bytes): 60 Loads.
  ASSERT_OK(Stream({ItemOf("t", t.view)}, 150));
  EXPECT_EQ(loads_, 60);
  EXPECT_EQ(got_[0], TensorBytes(t.view));
}

TEST_F(TensorStreamTest, BudgetOfOneElement) {
  OwnedTensor c = RandomTensor(DType::kComplex128, {3, 5}, 1);
  OwnedTensor b = RandomTensor(DType::kBool, {2, 9}, 2);
  Save({{"c", c.view}, {"b", b.view}});
  ASSERT_OK(Stream({ItemOf("c", c.view), ItemOf("b", b.view)}, 16));
  EXPECT_EQ(got_[0], TensorBytes(c.view));
  EXPECT_EQ(got_[1], TensorBytes(b.view));
  // One complex element per Load; then one row of 9 bools per Load.
  EXPECT_EQ(loads_, 15 + 2);
}

TEST_F(TensorStreamTest, MixesBatchesAndSlabsInOrder) {
  OwnedTensor s1 = RandomTensor(DType::kInt32, {10}, 1);
  OwnedTensor big = RandomTensor(DType::kFloat64, {20, 10}, 2);
  OwnedTensor s2 = RandomTensor(DType::kUInt8, {30}, 3);
  OwnedTensor s3 = RandomTensor(DType::kFloat16, {2, 5}, 4);
  Save({{"s1", s1.view}, {"big", big.view}, {"s2", s2.view}, {"s3", s3.view}});
  // 400 bytes: s1 alone, big in 4 slabs of 5 rows, s2 and s3 together.
  ASSERT_OK(Stream({ItemOf("s1", s1.view), ItemOf("big", big.view),
                    ItemOf("s2", s2.view), ItemOf("s3", s3.view)},
                   400));
  EXPECT_THAT(got_, ElementsAre(TensorBytes(s1.view), TensorBytes(big.view),
                                TensorBytes(s2.view), TensorBytes(s3.view)));
  EXPECT_THAT(calls_, ElementsAre(0, 1, 1, 1, 1, 2, 3));
  EXPECT_EQ(loads_, 1 + 4 + 1);
}

TEST_F(TensorStreamTest, RepeatedItemIsStreamedEachTime) {
  OwnedTensor a = RandomTensor(DType::kFloat32, {8}, 1);
  Save({{"a", a.view}});
  ASSERT_OK(Stream({ItemOf("a", a.view), ItemOf("a", a.view)}, kMiB));
  EXPECT_THAT(got_, ElementsAre(TensorBytes(a.view), TensorBytes(a.view)));
}

TEST_F(TensorStreamTest, SinkErrorStopsTheStream) {
  OwnedTensor big = RandomTensor(DType::kFloat32, {64, 16}, 1);
  OwnedTensor small = RandomTensor(DType::kFloat32, {4}, 2);
  Save({{"big", big.view}, {"small", small.view}});
  int calls = 0;
  EXPECT_THAT(
      Stream({ItemOf("big", big.view), ItemOf("small", small.view)}, 256,
             [&](size_t, std::string_view) {
               return ++calls == 2 ? Status::IOError("disk full")
                                   : Status::OK();
             }),
      StatusIs(StatusCode::kIOError, HasSubstr("disk full")));
  EXPECT_EQ(calls_.size(), 2u);
  EXPECT_EQ(loads_, 2);
}

TEST_F(TensorStreamTest, BudgetBelowLargestElementIsInvalid) {
  OwnedTensor a = RandomTensor(DType::kUInt8, {4}, 1);
  Save({{"a", a.view}});
  for (size_t budget : {size_t{0}, size_t{1}, size_t{15}}) {
    EXPECT_THAT(Stream({ItemOf("a", a.view)}, budget),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("budget")));
    EXPECT_EQ(loads_, 0);
  }
}

TEST_F(TensorStreamTest, MissingItemIsNotFoundBeforeAnyBytes) {
  OwnedTensor a = RandomTensor(DType::kFloat32, {4}, 1);
  Save({{"a", a.view}, {"blob", std::string("bytes")}});
  for (const std::string fqn : {"nope", "blob"}) {
    EXPECT_THAT(Stream({ItemOf("a", a.view), {fqn, DType::kFloat32, {4}}}, 16),
                StatusIs(StatusCode::kNotFound,
                         AllOf(HasSubstr("'ck'"), HasSubstr("'" + fqn + "'"))));
    EXPECT_TRUE(calls_.empty());
  }
}

TEST_F(TensorStreamTest, ItemDisagreeingWithMetadataFails) {
  OwnedTensor a = RandomTensor(DType::kFloat32, {2, 3}, 1);
  OwnedTensor b = RandomTensor(DType::kFloat32, {2}, 2);
  Save({{"a", a.view}, {"b", b.view}});
  const std::vector<StreamItem> wrong = {
      {"a", DType::kFloat32, {3, 2}},  // Same bytes, other shape.
      {"a", DType::kFloat32, {6}},
      {"a", DType::kFloat32, {0, 3}},  // No bytes to read, still checked.
      {"a", DType::kInt32, {2, 3}},
  };
  for (const StreamItem& item : wrong) {
    for (size_t budget : {size_t{16}, kMiB}) {
      EXPECT_THAT(Stream({ItemOf("b", b.view), item}, budget),
                  StatusIs(StatusCode::kInvalidArgument,
                           AllOf(HasSubstr("'ck'"), HasSubstr("'a'"),
                                 HasSubstr("mismatch"))));
      EXPECT_TRUE(calls_.empty());
    }
  }
}

TEST_F(TensorStreamTest, NegativeOrOverflowingSizeIsCorruption) {
  OwnedTensor a = RandomTensor(DType::kFloat32, {4}, 1);
  Save({{"a", a.view}});
  const std::vector<std::vector<int64_t>> bad = {
      {-1}, {4, -2}, {int64_t{1} << 40, int64_t{1} << 40}, {int64_t{1} << 62}};
  for (const auto& size : bad) {
    EXPECT_THAT(
        Stream({ItemOf("a", a.view), {"x", DType::kFloat32, size}}, kMiB),
        StatusIs(StatusCode::kCorruption,
                 AllOf(HasSubstr("'ck'"), HasSubstr("'x'"))));
    EXPECT_EQ(loads_, 0);
  }
}

}  // namespace
}  // namespace rocksdcp::tools
