#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
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

using Box = ChunkStorageMetadata;

// Tests plan loads of int32 tensors whose saved element at global index g
// holds g's row-major position in the global tensor, so every destination
// element says where it came from.
class LoadPlannerTest : public ::testing::Test {
 protected:
  // Records a saved tensor of `size` tiled by `chunks`.
  void Saved(const std::string& fqn, std::vector<int64_t> size,
             std::vector<Box> chunks, DType dtype = DType::kInt32) {
    TensorStorageMetadata md;
    md.properties.dtype = dtype;
    md.size = std::move(size);
    md.chunks = std::move(chunks);
    metadata_.state_dict_metadata[fqn] = std::move(md);
  }
  void SavedBytes(const std::string& fqn) {
    metadata_.state_dict_metadata[fqn] = BytesStorageMetadata{};
  }

  // A destination tensor, filled with -1.
  TensorView Dest(std::vector<int64_t> sizes, DType dtype = DType::kInt32) {
    OwnedTensor& t = dests_.emplace_back(ZeroTensor(dtype, std::move(sizes)));
    std::fill(t.bytes.begin(), t.bytes.end(), 0xff);
    return t.view;
  }
  Shard DestShard(std::vector<int64_t> offsets, std::vector<int64_t> sizes) {
    return Shard{std::move(offsets), Dest(std::move(sizes))};
  }

  Result<LoadPlan> Plan(DefaultLoadPlannerOptions options = {}) {
    planner_ = std::make_unique<DefaultLoadPlanner>(options);
    ROCKSDCP_RETURN_IF_ERROR(planner_->SetUpPlanner(&sd_, &metadata_, true));
    return planner_->CreateLocalPlan();
  }

  // Plays the storage: fills each read item's destination from the saved
  // chunk it names, as a StorageReader would.
  void Execute(const LoadPlan& plan) {
    for (const ReadItem& item : plan.items) {
      ASSERT_EQ(item.type, LoadItemType::kTensor);
      const auto& md = std::get<TensorStorageMetadata>(
          metadata_.state_dict_metadata.at(item.storage_index.fqn));
      ASSERT_TRUE(item.storage_index.index.has_value());
      const Box& chunk = md.chunks.at(*item.storage_index.index);
      ASSERT_EQ(item.storage_index.offset, chunk.offsets);
      std::vector<int32_t> bytes = ChunkData(md.size, chunk);
      TensorView src =
          TensorView::Contiguous(DType::kInt32, chunk.sizes, bytes.data())
              .Narrow(item.storage_offsets, item.lengths);
      ASSERT_OK_AND_ASSIGN(TensorView dest, planner_->ResolveTensor(item));
      ASSERT_EQ(dest.sizes, item.lengths);
      CopyTensor(src, dest);
      ASSERT_OK(planner_->CommitTensor(item, dest));
    }
  }

  // The saved bytes of `chunk`: each element's global row-major position.
  static std::vector<int32_t> ChunkData(const std::vector<int64_t>& size,
                                        const Box& chunk) {
    std::vector<int32_t> out;
    ForEachIndex(chunk.sizes, [&](const std::vector<int64_t>& local) {
      out.push_back(GlobalPosition(size, chunk.offsets, local));
    });
    return out;
  }

  // Expects `dest`, the box at `offsets` of a tensor of `size`, to hold
  // every element's global position.
  static void ExpectFilled(const TensorView& dest,
                           const std::vector<int64_t>& size,
                           const std::vector<int64_t>& offsets) {
    std::vector<int64_t> strides = dest.EffectiveStrides();
    ForEachIndex(dest.sizes, [&](const std::vector<int64_t>& local) {
      int64_t at = 0;
      for (size_t d = 0; d < local.size(); ++d) at += local[d] * strides[d];
      EXPECT_EQ(static_cast<const int32_t*>(dest.data)[at],
                GlobalPosition(size, offsets, local))
          << "at local index " << ::testing::PrintToString(local);
    });
  }

  template <typename F>
  static void ForEachIndex(const std::vector<int64_t>& sizes, F f) {
    for (int64_t s : sizes) {
      if (s == 0) return;
    }
    std::vector<int64_t> index(sizes.size(), 0);
    while (true) {
      f(index);
      size_t d = sizes.size();
      while (d > 0 && ++index[d - 1] == sizes[d - 1]) index[--d] = 0;
      if (d == 0) return;
    }
  }

  static int32_t GlobalPosition(const std::vector<int64_t>& size,
                                const std::vector<int64_t>& offsets,
                                const std::vector<int64_t>& local) {
    int64_t pos = 0;
    for (size_t d = 0; d < size.size(); ++d) {
      pos = pos * size[d] + offsets[d] + local[d];
    }
    return static_cast<int32_t>(pos);
  }

  // Row blocks of `rows` rows each, over a [sum(rows), cols] tensor.
  static std::vector<Box> RowChunks(const std::vector<int64_t>& rows,
                                    int64_t cols) {
    std::vector<Box> out;
    int64_t at = 0;
    for (int64_t r : rows) {
      out.push_back(Box{{at, 0}, {r, cols}});
      at += r;
    }
    return out;
  }

  // Loads a [rows, cols] tensor saved as `saved` into one rank's shard
  // `dest`, and checks every element.
  void LoadShardAndCheck(std::vector<int64_t> size, std::vector<Box> saved,
                         Box dest) {
    SCOPED_TRACE("dest at " + ::testing::PrintToString(dest.offsets));
    metadata_ = Metadata();
    Saved("w", size, std::move(saved));
    ShardedTensor st{
        DType::kInt32, size, {DestShard(dest.offsets, dest.sizes)}};
    sd_ = StateDict{{"w", st}};
    ASSERT_OK_AND_ASSIGN(LoadPlan plan, Plan());
    Execute(plan);
    ExpectFilled(st.local_shards[0].tensor, size, dest.offsets);
  }

  // Loads a tensor of `size` saved as `saved` into a whole destination, and
  // checks every element.
  void LoadWholeAndCheck(std::vector<int64_t> size, std::vector<Box> saved) {
    metadata_ = Metadata();
    Saved("w", size, std::move(saved));
    TensorView dest = Dest(size);
    sd_ = StateDict{{"w", dest}};
    ASSERT_OK_AND_ASSIGN(LoadPlan plan, Plan());
    Execute(plan);
    ExpectFilled(dest, size, std::vector<int64_t>(size.size(), 0));
  }

  // A [rows * r, cols * c] tensor's chunks: a grid of r x c blocks.
  static std::vector<Box> GridChunks(int64_t rows, int64_t cols, int64_t r,
                                     int64_t c) {
    std::vector<Box> out;
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        out.push_back(Box{{i * r, j * c}, {r, c}});
      }
    }
    return out;
  }

  Metadata metadata_;
  StateDict sd_;
  std::unique_ptr<DefaultLoadPlanner> planner_;
  std::deque<OwnedTensor> dests_;
};

TEST_F(LoadPlannerTest, WholeIntoRowShard) {
  Saved("w", {4, 3}, {Box{{0, 0}, {4, 3}}});
  ShardedTensor st{DType::kInt32, {4, 3}, {DestShard({2, 0}, {2, 3})}};
  sd_ = {{"w", st}};
  ASSERT_OK_AND_ASSIGN(LoadPlan plan, Plan());
  ASSERT_EQ(plan.items.size(), 1u);
  const ReadItem& item = plan.items[0];
  EXPECT_EQ(item.type, LoadItemType::kTensor);
  EXPECT_THAT(item.dest_index.offset, Optional(ElementsAre(2, 0)));
  EXPECT_THAT(item.dest_offsets, ElementsAre(0, 0));
  EXPECT_THAT(item.storage_index.offset, Optional(ElementsAre(0, 0)));
  EXPECT_EQ(item.storage_index.index, 0);
  EXPECT_THAT(item.storage_offsets, ElementsAre(2, 0));
  EXPECT_THAT(item.lengths, ElementsAre(2, 3));
  Execute(plan);
  ExpectFilled(st.local_shards[0].tensor, {4, 3}, {2, 0});
}

TEST_F(LoadPlannerTest, RowShardsIntoWhole) {
  Saved("w", {4, 3}, RowChunks({2, 2}, 3));
  TensorView dest = Dest({4, 3});
  sd_ = {{"w", dest}};
  ASSERT_OK_AND_ASSIGN(LoadPlan plan, Plan());
  ASSERT_EQ(plan.items.size(), 2u);
  EXPECT_THAT(plan.items[1].dest_offsets, ElementsAre(2, 0));
  EXPECT_THAT(plan.items[1].storage_offsets, ElementsAre(0, 0));
  EXPECT_EQ(plan.items[1].storage_index.index, 1);
  Execute(plan);
  ExpectFilled(dest, {4, 3}, {0, 0});
}

TEST_F(LoadPlannerTest, ColumnShardsIntoRowShards) {
  std::vector<Box> cols = {Box{{0, 0}, {4, 2}}, Box{{0, 2}, {4, 2}}};
  LoadShardAndCheck({4, 4}, cols, Box{{0, 0}, {2, 4}});
  LoadShardAndCheck({4, 4}, cols, Box{{2, 0}, {2, 4}});
}

TEST_F(LoadPlannerTest, UnevenTenRowsOverThreeRanks) {
  // Saved by 3 ranks as 4 + 4 + 2 rows; loaded by 3 ranks as 3 + 3 + 4.
  std::vector<Box> saved = RowChunks({4, 4, 2}, 5);
  LoadShardAndCheck({10, 5}, saved, Box{{0, 0}, {3, 5}});
  LoadShardAndCheck({10, 5}, saved, Box{{3, 0}, {3, 5}});
  LoadShardAndCheck({10, 5}, saved, Box{{6, 0}, {4, 5}});
}

TEST_F(LoadPlannerTest, BlocksIntoRows) {
  std::vector<Box> blocks = {Box{{0, 0}, {3, 2}}, Box{{0, 2}, {3, 4}},
                             Box{{3, 0}, {3, 2}}, Box{{3, 2}, {3, 4}}};
  for (int64_t row = 0; row < 6; row += 2) {
    LoadShardAndCheck({6, 6}, blocks, Box{{row, 0}, {2, 6}});
  }
  // A box in the middle touches all four blocks.
  Saved("w", {6, 6}, blocks);
  ShardedTensor st{DType::kInt32, {6, 6}, {DestShard({2, 1}, {2, 3})}};
  sd_ = {{"w", st}};
  ASSERT_OK_AND_ASSIGN(LoadPlan plan, Plan());
  EXPECT_EQ(plan.items.size(), 4u);
  Execute(plan);
  ExpectFilled(st.local_shards[0].tensor, {6, 6}, {2, 1});
}

TEST_F(LoadPlannerTest, SeveralLocalShardsEachGetTheirReads) {
  Saved("w", {6, 2}, RowChunks({3, 3}, 2));
  ShardedTensor st{DType::kInt32,
                   {6, 2},
                   {DestShard({0, 0}, {2, 2}), DestShard({4, 0}, {2, 2})}};
  sd_ = {{"w", st}};
  ASSERT_OK_AND_ASSIGN(LoadPlan plan, Plan());
  ASSERT_EQ(plan.items.size(), 2u);
  EXPECT_EQ(plan.items[0].dest_index.index, 0);
  EXPECT_EQ(plan.items[1].dest_index.index, 1);
  Execute(plan);
  ExpectFilled(st.local_shards[0].tensor, {6, 2}, {0, 0});
  ExpectFilled(st.local_shards[1].tensor, {6, 2}, {4, 0});
}

TEST_F(LoadPlannerTest, StridedDestinationIsFilledThroughItsStrides) {
  Saved("w", {3, 2}, RowChunks({1, 2}, 2));
  TensorView storage = Dest({2, 3});
  TensorView transposed = storage;  // A [3, 2] view of [2, 3] memory.
  transposed.sizes = {3, 2};
  transposed.strides = {1, 3};
  sd_ = {{"w", transposed}};
  ASSERT_OK_AND_ASSIGN(LoadPlan plan, Plan());
  Execute(plan);
  ExpectFilled(transposed, {3, 2}, {0, 0});
}

TEST_F(LoadPlannerTest, RankWithNoShardReadsNothing) {
  Saved("w", {4}, {Box{{0}, {4}}});
  sd_ = {{"w", ShardedTensor{DType::kInt32, {4}, {}}}};
  ASSERT_OK_AND_ASSIGN(LoadPlan plan, Plan());
  EXPECT_THAT(plan.items, IsEmpty());
}

TEST_F(LoadPlannerTest, ZeroDTensorIsOneItemWithEmptyVectors) {
  Saved("s", {}, {Box{{}, {}}});
  TensorView dest = Dest({});
  sd_ = {{"s", dest}};
  ASSERT_OK_AND_ASSIGN(LoadPlan plan, Plan());
  ASSERT_EQ(plan.items.size(), 1u);
  EXPECT_THAT(plan.items[0].dest_index.offset, Optional(IsEmpty()));
  EXPECT_THAT(plan.items[0].storage_offsets, IsEmpty());
  EXPECT_THAT(plan.items[0].lengths, IsEmpty());
  Execute(plan);
  EXPECT_EQ(*static_cast<int32_t*>(dest.data), 0);
}

TEST_F(LoadPlannerTest, ZeroSizeTensorNeedsNoReads) {
  Saved("e", {0, 4}, {Box{{0, 0}, {0, 4}}});
  sd_ = {{"e", Dest({0, 4})}};
  ASSERT_OK_AND_ASSIGN(LoadPlan plan, Plan());
  EXPECT_THAT(plan.items, IsEmpty());
}

TEST_F(LoadPlannerTest, CoverageGapIsCorruption) {
  Saved("w", {4, 3}, {Box{{0, 0}, {1, 3}}, Box{{3, 0}, {1, 3}}});
  sd_ = {{"w", Dest({4, 3})}};
  EXPECT_THAT(Plan(), StatusIs(StatusCode::kCorruption,
                               AllOf(HasSubstr("'w'"),
                                     HasSubstr("cover 6 of 12 elements"))));
  // A shard lying in the gap alone: the whole tensor is checked.
  sd_ = {
      {"w", ShardedTensor{DType::kInt32, {4, 3}, {DestShard({1, 0}, {2, 3})}}}};
  EXPECT_THAT(Plan(), StatusIs(StatusCode::kCorruption,
                               HasSubstr("cover 6 of 12 elements")));
}

TEST_F(LoadPlannerTest, OverlappingSavedChunksAreCorruption) {
  Saved("w", {4}, {Box{{0}, {3}}, Box{{2}, {2}}});
  sd_ = {{"w", Dest({4})}};
  EXPECT_THAT(Plan(), StatusIs(StatusCode::kCorruption, HasSubstr("'w'")));
}

TEST_F(LoadPlannerTest, OverlapWithHoleOfEqualSizeIsCorruption) {
  // Chunk 1 covers column 2 again and nobody column 3: the sizes still add
  // up to the tensor's 8 elements.
  Saved("w", {2, 4}, {Box{{0, 0}, {2, 3}}, Box{{0, 2}, {2, 1}}});
  metadata_.storage_meta = StorageMeta{.checkpoint_id = "step-7"};
  sd_ = {{"w", Dest({2, 4})}};
  EXPECT_THAT(Plan(),
              StatusIs(StatusCode::kCorruption,
                       AllOf(HasSubstr("checkpoint 'step-7'"), HasSubstr("'w'"),
                             HasSubstr("chunks 0 at [0, 0] and 1 at [0, 2] "
                                       "overlap"))));
  // A shard that only sees well-formed chunks is refused too.
  sd_ = {
      {"w", ShardedTensor{DType::kInt32, {2, 4}, {DestShard({0, 0}, {2, 2})}}}};
  EXPECT_THAT(Plan(), StatusIs(StatusCode::kCorruption, HasSubstr("overlap")));
}

TEST_F(LoadPlannerTest, OverlapAmongManyChunksIsCorruption) {
  // 50 column blocks over rows 0-1 and 50 over rows 1-2: row 1 twice, row 3
  // never, and the sizes add up to the tensor's 400 elements.
  std::vector<Box> chunks = GridChunks(1, 50, 2, 2);
  std::vector<Box> lower = GridChunks(1, 50, 2, 2);
  for (Box& b : lower) b.offsets[0] = 1;
  chunks.insert(chunks.end(), lower.begin(), lower.end());
  Saved("w", {4, 100}, chunks);
  sd_ = {{"w", Dest({4, 100})}};
  EXPECT_THAT(Plan(), StatusIs(StatusCode::kCorruption,
                               AllOf(HasSubstr("'w'"), HasSubstr("chunks 0 at "
                                                                 "[0, 0] and "
                                                                 "50 at [1, 0] "
                                                                 "overlap"))));
}

TEST_F(LoadPlannerTest, TwoCopiesOfZeroDTensorAreCorruption) {
  Saved("s", {}, {Box{{}, {}}, Box{{}, {}}});
  sd_ = {{"s", Dest({})}};
  EXPECT_THAT(Plan(), StatusIs(StatusCode::kCorruption,
                               AllOf(HasSubstr("'s'"), HasSubstr("overlap"))));
}

TEST_F(LoadPlannerTest, ExactTilingsWithManyChunksLoad) {
  LoadWholeAndCheck({1, 3000}, GridChunks(1, 1000, 1, 3));
  LoadWholeAndCheck({3000, 1}, GridChunks(1000, 1, 3, 1));
  LoadWholeAndCheck({60, 80}, GridChunks(30, 40, 2, 2));
  // A pinwheel: no dimension cuts it into slabs.
  LoadWholeAndCheck(
      {4, 4}, {Box{{0, 0}, {1, 3}}, Box{{0, 3}, {3, 1}}, Box{{3, 1}, {1, 3}},
               Box{{1, 0}, {3, 1}}, Box{{1, 1}, {2, 2}}});
}

TEST_F(LoadPlannerTest, TilingSplitInTwentyDimensionsIsChecked) {
  // Chunk d holds the elements whose first 1 is at index d, the last one
  // the all-zero element: so many corners that the check falls back to
  // comparing chunks pairwise.
  const std::vector<int64_t> size(20, 2);
  std::vector<Box> chunks;
  for (size_t d = 0; d <= size.size(); ++d) {
    Box b{std::vector<int64_t>(size.size(), 0), size};
    for (size_t e = 0; e < d && e < size.size(); ++e) b.sizes[e] = 1;
    if (d < size.size()) {
      b.offsets[d] = 1;
      b.sizes[d] = 1;
    }
    chunks.push_back(b);
  }
  LoadWholeAndCheck(size, chunks);
  // Moving the last chunk to the all-ones element overlaps chunk 0 and
  // leaves the all-zero element out.
  chunks.back().offsets = std::vector<int64_t>(size.size(), 1);
  metadata_ = Metadata();
  Saved("w", size, chunks);
  sd_ = {{"w", Dest(size)}};
  EXPECT_THAT(Plan(), StatusIs(StatusCode::kCorruption,
                               HasSubstr("chunks 0 at [1, 0, 0, 0, 0, 0, 0, "
                                         "0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, "
                                         "0] and 20 at")));
}

TEST_F(LoadPlannerTest, ZeroSizeChunksOverlapNothing) {
  LoadWholeAndCheck({4}, {Box{{0}, {4}}, Box{{2}, {0}}, Box{{4}, {0}}});
  LoadWholeAndCheck(
      {2, 3}, {Box{{0, 0}, {2, 3}}, Box{{1, 1}, {0, 2}}, Box{{0, 0}, {2, 0}}});
}

TEST_F(LoadPlannerTest, ChunkOutsideTensorIsCorruption) {
  Saved("w", {4, 4}, {Box{{0, 0}, {4, 3}}, Box{{2, 3}, {1, 2}}});
  sd_ = {{"w", Dest({4, 4})}};
  EXPECT_THAT(Plan(), StatusIs(StatusCode::kCorruption,
                               AllOf(HasSubstr("'w'"),
                                     HasSubstr("chunk 1 at [2, 3] of size "
                                               "[1, 2] lies outside"))));
  Saved("w", {4}, {Box{{-1}, {2}}, Box{{1}, {3}}});
  sd_ = {{"w", Dest({4})}};
  EXPECT_THAT(Plan(), StatusIs(StatusCode::kCorruption,
                               AllOf(HasSubstr("'w'"), HasSubstr("outside"))));
}

TEST_F(LoadPlannerTest, ChunkOfWrongRankIsCorruption) {
  Saved("w", {4, 2}, {Box{{0}, {4}}});
  sd_ = {{"w", Dest({4, 2})}};
  EXPECT_THAT(Plan(), StatusIs(StatusCode::kCorruption,
                               AllOf(HasSubstr("'w'"), HasSubstr("outside"))));
}

TEST_F(LoadPlannerTest, ForgedChunkOffsetIsCorruption) {
  // An offset near INT64_MAX must be refused, not overflow.
  Saved("w", {4}, {Box{{0}, {2}}, Box{{INT64_MAX - 1}, {2}}});
  sd_ = {{"w", Dest({4})}};
  EXPECT_THAT(Plan(), StatusIs(StatusCode::kCorruption,
                               AllOf(HasSubstr("'w'"), HasSubstr("chunk 1"))));
}

TEST_F(LoadPlannerTest, DTypeMismatchNamesBoth) {
  Saved("w", {4}, {Box{{0}, {4}}}, DType::kBFloat16);
  sd_ = {{"w", Dest({4}, DType::kFloat32)}};
  EXPECT_THAT(Plan(), StatusIs(StatusCode::kInvalidArgument,
                               HasSubstr("item 'w': dtype mismatch: checkpoint "
                                         "has bfloat16, state dict has "
                                         "float32")));
}

TEST_F(LoadPlannerTest, ShapeMismatchNamesBoth) {
  Saved("w", {4, 8}, {Box{{0, 0}, {4, 8}}});
  sd_ = {{"w", Dest({8, 4})}};
  EXPECT_THAT(Plan(), StatusIs(StatusCode::kInvalidArgument,
                               HasSubstr("item 'w': shape mismatch: checkpoint "
                                         "has [4, 8], state dict has [8, 4]")));
  sd_ = {{"w", ShardedTensor{DType::kInt32, {4, 9}, {}}}};
  EXPECT_THAT(Plan(), StatusIs(StatusCode::kInvalidArgument,
                               HasSubstr("state dict has [4, 9]")));
}

TEST_F(LoadPlannerTest, MissingItemsAreAllNamed) {
  Saved("present", {1}, {Box{{0}, {1}}});
  sd_ = {{"a", Dest({1})}, {"present", Dest({1})}, {"b", std::string()}};
  EXPECT_THAT(Plan(),
              StatusIs(StatusCode::kNotFound,
                       HasSubstr("checkpoint has no item(s) 'a', 'b'")));
}

TEST_F(LoadPlannerTest, PartialLoadSkipsMissingItems) {
  Saved("present", {2}, {Box{{0}, {2}}});
  TensorView present = Dest({2});
  TensorView absent = Dest({2});
  sd_ = {{"absent", absent}, {"present", present}};
  ASSERT_OK_AND_ASSIGN(LoadPlan plan, Plan({.allow_partial_load = true}));
  ASSERT_EQ(plan.items.size(), 1u);
  EXPECT_EQ(plan.items[0].dest_index.fqn, "present");
  Execute(plan);
  ExpectFilled(present, {2}, {0});
  EXPECT_EQ(static_cast<int32_t*>(absent.data)[0], -1);
}

TEST_F(LoadPlannerTest, KindMismatchIsInvalidArgument) {
  SavedBytes("x");
  sd_ = {{"x", Dest({1})}};
  EXPECT_THAT(Plan(), StatusIs(StatusCode::kInvalidArgument,
                               AllOf(HasSubstr("'x'"),
                                     HasSubstr("checkpoint has bytes"))));
  metadata_ = Metadata();
  Saved("x", {1}, {Box{{0}, {1}}});
  sd_ = {{"x", std::string()}};
  EXPECT_THAT(Plan(), StatusIs(StatusCode::kInvalidArgument,
                               AllOf(HasSubstr("'x'"),
                                     HasSubstr("checkpoint has a tensor"))));
}

TEST_F(LoadPlannerTest, BytesAreReplacedByLoadBytes) {
  SavedBytes("rng");
  sd_ = {{"rng", std::string("old")}};
  ASSERT_OK_AND_ASSIGN(LoadPlan plan, Plan());
  ASSERT_EQ(plan.items.size(), 1u);
  const ReadItem& item = plan.items[0];
  EXPECT_EQ(item.type, LoadItemType::kByteIO);
  EXPECT_EQ(item.dest_index, MetadataIndex("rng"));
  EXPECT_EQ(item.storage_index, MetadataIndex("rng"));
  ASSERT_OK(planner_->LoadBytes(item, std::string_view("new\0state", 9)));
  EXPECT_EQ(std::get<std::string>(sd_["rng"]), std::string("new\0state", 9));
}

TEST_F(LoadPlannerTest, ResolveTensorRefusesBoxOutsideDestination) {
  Saved("w", {4}, {Box{{0}, {4}}});
  sd_ = {{"w", Dest({4})}};
  ASSERT_OK_AND_ASSIGN(LoadPlan plan, Plan());
  ReadItem item = plan.items[0];
  item.dest_offsets = {2};
  EXPECT_THAT(planner_->ResolveTensor(item),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("outside")));
  item = plan.items[0];
  item.dest_index.fqn = "nope";
  EXPECT_THAT(planner_->ResolveTensor(item),
              StatusIs(StatusCode::kNotFound, HasSubstr("'nope'")));
}

TEST_F(LoadPlannerTest, ResolveTensorFindsShardWithoutHint) {
  Saved("w", {4}, {Box{{0}, {4}}});
  ShardedTensor st{
      DType::kInt32, {4}, {DestShard({0}, {2}), DestShard({2}, {2})}};
  sd_ = {{"w", st}};
  ASSERT_OK_AND_ASSIGN(LoadPlan plan, Plan());
  ASSERT_EQ(plan.items.size(), 2u);
  ReadItem item = plan.items[1];
  item.dest_index.index.reset();
  ASSERT_OK_AND_ASSIGN(TensorView view, planner_->ResolveTensor(item));
  EXPECT_EQ(view.data, st.local_shards[1].tensor.data);
  item.dest_index.offset = std::vector<int64_t>{1};
  EXPECT_THAT(planner_->ResolveTensor(item),
              StatusIs(StatusCode::kNotFound, HasSubstr("'w@[1]'")));
}

TEST_F(LoadPlannerTest, GlobalAndFinishPlanPassThrough) {
  Saved("w", {2}, {Box{{0}, {2}}});
  sd_ = {{"w", Dest({2})}};
  ASSERT_OK_AND_ASSIGN(LoadPlan plan, Plan());
  ASSERT_OK_AND_ASSIGN(std::vector<LoadPlan> global,
                       planner_->CreateGlobalPlan({plan, plan}));
  EXPECT_EQ(global.size(), 2u);
  ASSERT_OK_AND_ASSIGN(LoadPlan finished, planner_->FinishPlan(plan));
  EXPECT_EQ(finished.items.size(), plan.items.size());
}

TEST_F(LoadPlannerTest, CreateLocalPlanNeedsSetUp) {
  DefaultLoadPlanner planner;
  EXPECT_THAT(
      planner.CreateLocalPlan(),
      StatusIs(StatusCode::kFailedPrecondition, HasSubstr("SetUpPlanner")));
}

TEST_F(LoadPlannerTest, CheckLoadDestinationsNamesEveryMismatch) {
  Saved("a", {4, 8}, {Box{{0, 0}, {4, 8}}}, DType::kBFloat16);
  Saved("b", {3}, {Box{{0}, {3}}}, DType::kFloat32);
  Saved("ok", {2}, {Box{{0}, {2}}}, DType::kFloat32);
  SavedBytes("step");
  EXPECT_OK(
      CheckLoadDestinations(metadata_, {{"ok", false, DType::kFloat32, {2}},
                                        {"step", true},
                                        {"absent", false, DType::kInt8, {1}}}));
  EXPECT_THAT(
      CheckLoadDestinations(metadata_, {{"a", false, DType::kBFloat16, {8, 4}},
                                        {"b", false, DType::kFloat64, {3}},
                                        {"ok", false, DType::kFloat32, {2}},
                                        {"step", false, DType::kUInt8, {5}}}),
      StatusIs(StatusCode::kInvalidArgument,
               "item 'a': shape mismatch: checkpoint has [4, 8], state dict "
               "has [8, 4]; item 'b': dtype mismatch: checkpoint has float32, "
               "state dict has float64; item 'step': kind mismatch: "
               "checkpoint has bytes, state dict has a tensor"));
}

// A destination that converts what it reads (the Python binding's) takes
// any dtype; its shape and kind are still checked.
TEST_F(LoadPlannerTest, CheckLoadDestinationsSkipsTheDtypeOfConvertingOnes) {
  Saved("a", {4, 8}, {Box{{0, 0}, {4, 8}}}, DType::kBFloat16);
  Saved("b", {3}, {Box{{0}, {3}}}, DType::kFloat32);
  EXPECT_OK(CheckLoadDestinations(
      metadata_, {{"a", false, DType::kFloat64, {4, 8}, false}}));
  EXPECT_THAT(CheckLoadDestinations(
                  metadata_, {{"a", false, DType::kFloat64, {4, 8}, false},
                              {"b", false, DType::kInt8, {2}, false}}),
              StatusIs(StatusCode::kInvalidArgument,
                       "item 'b': shape mismatch: checkpoint has [3], state "
                       "dict has [2]"));
}

}  // namespace
}  // namespace rocksdcp
