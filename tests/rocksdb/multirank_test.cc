// Multi-rank save and load over ThreadCollective and one shared Store: DCP's
// protocol with sharded state, dedup of replicated items, resharding into
// other world sizes and layouts, and errors on any rank reaching every rank.

#include <functional>
#include <thread>

#include "keys/keys.h"
#include "rocksdb/store_fixture.h"
#include "rocksdb/store_impl.h"

namespace rocksdcp::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A box [offsets, offsets + sizes) of a 2-D tensor.
struct Box {
  std::vector<int64_t> offsets;
  std::vector<int64_t> sizes;
};

// Splits `n` into `parts` contiguous ranges, the first ones one larger.
std::vector<std::pair<int64_t, int64_t>> Split(int64_t n, int parts) {
  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t at = 0;
  for (int i = 0; i < parts; ++i) {
    const int64_t len = n / parts + (i < n % parts ? 1 : 0);
    out.emplace_back(at, len);
    at += len;
  }
  return out;
}

// Layouts of a [rows, cols] tensor over `ranks` ranks: one box per rank
// (none for ranks beyond the split).
std::vector<std::vector<Box>> Rows(int64_t rows, int64_t cols, int ranks) {
  std::vector<std::vector<Box>> out(ranks);
  auto parts = Split(rows, ranks);
  for (int r = 0; r < ranks; ++r) {
    if (parts[r].second > 0) {
      out[r].push_back({{parts[r].first, 0}, {parts[r].second, cols}});
    }
  }
  return out;
}
std::vector<std::vector<Box>> Cols(int64_t rows, int64_t cols, int ranks) {
  std::vector<std::vector<Box>> out(ranks);
  auto parts = Split(cols, ranks);
  for (int r = 0; r < ranks; ++r) {
    out[r].push_back({{0, parts[r].first}, {rows, parts[r].second}});
  }
  return out;
}
// A 2x2 grid of blocks over 4 ranks.
std::vector<std::vector<Box>> Blocks(int64_t rows, int64_t cols) {
  auto rp = Split(rows, 2), cp = Split(cols, 2);
  std::vector<std::vector<Box>> out(4);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      out[i * 2 + j].push_back(
          {{rp[i].first, cp[j].first}, {rp[i].second, cp[j].second}});
    }
  }
  return out;
}
// The whole tensor on every rank.
std::vector<std::vector<Box>> Whole(int64_t rows, int64_t cols, int ranks) {
  return std::vector<std::vector<Box>>(ranks, {Box{{0, 0}, {rows, cols}}});
}

class MultiRankTest : public StoreTest {
 protected:
  static constexpr int64_t kRows = 10;
  static constexpr int64_t kCols = 6;

  MultiRankTest()
      : global_(RandomTensor(DType::kFloat32, {kRows, kCols}, 42)),
        replicated_(RandomTensor(DType::kInt64, {3}, 43)) {}

  // Rank r's state dict: its boxes of "w" (views into global_; a dense
  // whole tensor when the box is the whole), the replicated "bias" and the
  // byte item "step".
  StateDict SaveDictFor(const std::vector<Box>& boxes) {
    StateDict sd;
    if (boxes.size() == 1 && boxes[0].sizes == global_.view.sizes) {
      sd["w"] = global_.view;
    } else {
      ShardedTensor st;
      st.dtype = DType::kFloat32;
      st.global_size = {kRows, kCols};
      for (const Box& b : boxes) {
        st.local_shards.push_back(
            {b.offsets, global_.view.Narrow(b.offsets, b.sizes)});
      }
      sd["w"] = st;
    }
    sd["bias"] = replicated_.view;
    sd["step"] = std::string("step=300");
    return sd;
  }

  // Saves "w" laid out as `layout` (one entry per rank) with a world of
  // layout.size() ranks, coordinator `coordinator`.
  void SaveLayout(const std::string& id,
                  const std::vector<std::vector<Box>>& layout,
                  int coordinator = 0, uint64_t max_piece_bytes = 16) {
    const int n = static_cast<int>(layout.size());
    std::vector<Status> results(n);
    RunRanks(n, coordinator, [&](int r, Collective& c) {
      auto writer = store_->NewWriter({.max_piece_bytes = max_piece_bytes});
      if (!writer.ok()) {
        results[r] = writer.status();
        return;
      }
      StateDict sd = SaveDictFor(layout[r]);
      results[r] =
          Save(sd, **writer, {.checkpoint_id = id, .collective = &c}).status();
    });
    for (int r = 0; r < n; ++r) ASSERT_OK(results[r]) << "rank " << r;
  }

  // Loads `id` into `layout` and checks every rank's boxes bit for bit.
  void ExpectLoadsAs(const std::string& id,
                     const std::vector<std::vector<Box>>& layout,
                     int coordinator = 0) {
    const int n = static_cast<int>(layout.size());
    std::vector<Status> results(n);
    std::vector<std::vector<OwnedTensor>> dest(n);
    std::vector<OwnedTensor> bias(n);
    std::vector<std::string> step(n);
    RunRanks(n, coordinator, [&](int r, Collective& c) {
      auto reader = store_->NewReader();
      if (!reader.ok()) {
        results[r] = reader.status();
        return;
      }
      ShardedTensor st;
      st.dtype = DType::kFloat32;
      st.global_size = {kRows, kCols};
      for (const Box& b : layout[r]) {
        dest[r].push_back(ZeroTensor(DType::kFloat32, b.sizes));
      }
      for (size_t i = 0; i < layout[r].size(); ++i) {
        st.local_shards.push_back({layout[r][i].offsets, dest[r][i].view});
      }
      bias[r] = ZeroTensor(DType::kInt64, {3});
      StateDict sd{{"w", st}, {"bias", bias[r].view}, {"step", std::string()}};
      results[r] = Load(&sd, **reader, {.checkpoint_id = id, .collective = &c});
      step[r] = std::get<std::string>(sd["step"]);
    });
    for (int r = 0; r < n; ++r) {
      ASSERT_OK(results[r]) << "rank " << r;
      for (size_t i = 0; i < layout[r].size(); ++i) {
        EXPECT_TRUE(SameTensor(
            dest[r][i].view,
            global_.view.Narrow(layout[r][i].offsets, layout[r][i].sizes)))
            << "rank " << r << " box " << i;
      }
      EXPECT_TRUE(SameTensor(bias[r].view, replicated_.view)) << "rank " << r;
      EXPECT_EQ(step[r], "step=300") << "rank " << r;
    }
  }

  // Keys of checkpoint `id` whose fqn is `fqn`.
  int CountPieces(const std::string& id, const std::string& fqn) {
    auto* impl = static_cast<StoreImpl*>(store_.get());
    auto c = impl->LookupCommitted(id);
    EXPECT_OK(c);
    if (!c.ok()) return -1;
    std::unique_ptr<rocksdb::Iterator> it(
        impl->db()->NewIterator(rocksdb::ReadOptions(), c->cf.get()));
    int n = 0;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      auto parsed = keys::ParsePieceKey(it->key().ToString());
      if (parsed.ok() && parsed->index.fqn == fqn) ++n;
    }
    return n;
  }

  // Saves "w" laid out as `layout` as checkpoint `id`, each rank but the
  // coordinator in a follower store of its own, as MPI ranks in other
  // processes do (no DB; only the coordinator's store is read-write). The
  // coordinator's writer gets `coordinator_options`, the others
  // max_piece_bytes = 16.
  void SaveWithFollowers(const std::string& id,
                         const std::vector<std::vector<Box>>& layout,
                         int coordinator,
                         const RocksDBWriterOptions& coordinator_options) {
    const int n = static_cast<int>(layout.size());
    std::vector<Status> results(n);
    RunRanks(n, coordinator, [&](int r, Collective& c) {
      std::unique_ptr<Store> own;
      Store* store = store_.get();
      if (r != coordinator) {
        StoreOptions fo;
        fo.follower = true;
        auto opened = Store::Open(store_path(), fo);
        ASSERT_OK(opened);
        own = std::move(opened).value();
        store = own.get();
      }
      auto writer = store->NewWriter(
          r == coordinator ? coordinator_options
                           : RocksDBWriterOptions{.max_piece_bytes = 16});
      ASSERT_OK(writer);
      StateDict sd = SaveDictFor(layout[r]);
      results[r] =
          Save(sd, **writer, {.checkpoint_id = id, .collective = &c}).status();
    });
    for (int r = 0; r < n; ++r) ASSERT_OK(results[r]) << "rank " << r;
  }

  OwnedTensor global_;
  OwnedTensor replicated_;
};

TEST_F(MultiRankTest, RowWiseSaveStoresReplicatedItemsOnce) {
  SaveLayout("c", Rows(kRows, kCols, 4), /*coordinator=*/0,
             /*max_piece_bytes=*/1 << 20);
  ASSERT_OK_AND_ASSIGN(CheckpointInfo info, store_->Info("c"));
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.items, 4u + 1 + 1);  // 4 shards, bias once, step once.
  EXPECT_EQ(CountPieces("c", "bias"), 1);
  EXPECT_EQ(CountPieces("c", "step"), 1);
  EXPECT_EQ(CountPieces("c", "w"), 4);
  ExpectLoadsAs("c", Whole(kRows, kCols, 2));
}

TEST_F(MultiRankTest, RowsOnFourRanksLoadAsColumnsOnTwo) {
  SaveLayout("c", Rows(kRows, kCols, 4));
  ExpectLoadsAs("c", Cols(kRows, kCols, 2));
}

TEST_F(MultiRankTest, UnevenThreeLoadAsUnevenFive) {
  SaveLayout("c", Rows(kRows, kCols, 3));  // 4, 3, 3 rows.
  ExpectLoadsAs("c", Rows(kRows, kCols, 5));
}

TEST_F(MultiRankTest, ShardedLoadsWholeOnEveryRank) {
  SaveLayout("c", Cols(kRows, kCols, 3), /*coordinator=*/2);
  ExpectLoadsAs("c", Whole(kRows, kCols, 3), /*coordinator=*/1);
}

TEST_F(MultiRankTest, WholeLoadsSharded) {
  SaveLayout("c", Whole(kRows, kCols, 1));
  ExpectLoadsAs("c", Rows(kRows, kCols, 3));
}

TEST_F(MultiRankTest, BlocksLoadAsRows) {
  SaveLayout("c", Blocks(kRows, kCols), /*coordinator=*/3);
  ExpectLoadsAs("c", Rows(kRows, kCols, 3));
}

TEST_F(MultiRankTest, RanksHoldingNoShard) {
  // 10 rows over 12 ranks: ranks 10 and 11 hold none of "w".
  SaveLayout("c", Rows(kRows, kCols, 12));
  ExpectLoadsAs("c", Rows(kRows, kCols, 12));
}

TEST_F(MultiRankTest, FollowerStoresWriteForTheCoordinator) {
  SaveWithFollowers("f", Rows(kRows, kCols, 3), 0, {.max_piece_bytes = 16});
  ExpectLoadsAs("f", Cols(kRows, kCols, 2));
  ASSERT_OK_AND_ASSIGN(GcReport gc, store_->CollectGarbage(/*dry_run=*/true));
  EXPECT_THAT(gc.deleted_staging_files, IsEmpty());
}

// An incremental save over ranks in their own (follower) stores: only the
// coordinator names the base; each follower learns the base's piece
// hashes of its items from its plan, and references what did not change.
TEST_F(MultiRankTest, FollowersSaveIncrementallyFromTheirPlans) {
  const auto layout = Rows(kRows, kCols, 3);
  auto save = [&](const std::string& id, const std::string& base) {
    SaveWithFollowers(id, layout, 1, {.base = base, .max_piece_bytes = 16});
  };
  save("a", "");
  // The last byte of the last rank's rows (3 rows of 24 bytes, in pieces
  // of 16): its last piece, of 8 bytes, changes.
  global_.bytes[kRows * kCols * sizeof(float) - 1] ^= 1;
  save("b", "a");
  ASSERT_OK_AND_ASSIGN(CheckpointInfo b, store_->Info("b"));
  EXPECT_THAT(b.referenced_column_families, ::testing::ElementsAre("a"));
  EXPECT_EQ(b.referenced_bytes, b.bytes - 8);
  ExpectLoadsAs("b", Cols(kRows, kCols, 2));
  ASSERT_OK(store_->Delete("a"));
  ExpectLoadsAs("b", Whole(kRows, kCols, 1));
}

TEST_F(MultiRankTest, EveryRankGetsTheSameCommittedMetadata) {
  const int n = 3;
  std::vector<Result<Metadata>> results(n, Status::Internal("not run"));
  RunRanks(n, 1, [&](int r, Collective& c) {
    auto writer = store_->NewWriter();
    ASSERT_OK(writer);
    StateDict sd = SaveDictFor(Rows(kRows, kCols, n)[r]);
    results[r] = Save(sd, **writer, {.checkpoint_id = "m", .collective = &c});
  });
  for (int r = 0; r < n; ++r) ASSERT_OK(results[r]) << r;
  EXPECT_TRUE(*results[0] == *results[1]);
  EXPECT_TRUE(*results[1] == *results[2]);
  ASSERT_TRUE(results[0]->storage_meta.has_value());
  EXPECT_EQ(results[0]->storage_meta->checkpoint_id, "m");
  EXPECT_TRUE(results[0]->storage_meta->save_id.has_value());
}

// DCP compares the save id a writer reports with the one the checkpoint
// records. Every rank's writer reports the committed one after its save,
// a rank that wrote nothing too, until its next save of the same id.
TEST_F(MultiRankTest, EveryRanksWriterReportsTheCommittedSaveId) {
  const int n = 3;
  std::vector<std::unique_ptr<RocksDBStorageWriter>> writers(n);
  for (auto& w : writers) {
    ASSERT_OK_AND_ASSIGN(w, store_->NewWriter({.overwrite = true}));
  }
  std::string previous;
  for (int save = 0; save < 2; ++save) {
    std::vector<std::optional<StorageMeta>> after(n);
    std::vector<Status> results(n);
    RunRanks(n, 1, [&](int r, Collective& c) {
      // Rank 2 holds nothing.
      StateDict sd =
          r == 2 ? StateDict{} : SaveDictFor(Rows(kRows, kCols, 2)[r]);
      results[r] =
          Save(sd, *writers[r], {.checkpoint_id = "s", .collective = &c})
              .status();
      after[r] = writers[r]->GetStorageMeta();
    });
    for (int r = 0; r < n; ++r) ASSERT_OK(results[r]) << r;
    ASSERT_OK_AND_ASSIGN(auto reader, store_->NewReader());
    ASSERT_OK(reader->Reset("s"));
    ASSERT_OK_AND_ASSIGN(Metadata committed, reader->ReadMetadata());
    ASSERT_TRUE(committed.storage_meta.has_value());
    const std::optional<std::string> save_id = committed.storage_meta->save_id;
    ASSERT_TRUE(save_id.has_value());
    EXPECT_NE(*save_id, previous);
    previous = *save_id;
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(after[r].has_value()) << r;
      EXPECT_EQ(after[r]->checkpoint_id, "s") << r;
      EXPECT_EQ(after[r]->save_id, save_id) << "rank " << r;
    }
    // A Reset starts another save, with a save id of its own.
    ASSERT_OK(writers[0]->Reset("s"));
    ASSERT_TRUE(writers[0]->GetStorageMeta().has_value());
    EXPECT_NE(writers[0]->GetStorageMeta()->save_id, save_id);
  }
}

TEST_F(MultiRankTest, EachRankReadsOnlyThePiecesItNeeds) {
  // 64 rows of 16 floats (64 bytes); pieces of 4 rows.
  OwnedTensor big = RandomTensor(DType::kFloat32, {64, 16}, 9);
  ASSERT_OK(SaveDict({{"big", big.view}}, "p", {.max_piece_bytes = 256}));
  const int n = 4;
  std::vector<uint64_t> pieces(n);
  std::vector<OwnedTensor> dest(n);
  RunRanks(n, 0, [&](int r, Collective& c) {
    auto reader = store_->NewReader();
    ASSERT_OK(reader);
    dest[r] = ZeroTensor(DType::kFloat32, {16, 16});
    ShardedTensor st;
    st.dtype = DType::kFloat32;
    st.global_size = {64, 16};
    st.local_shards.push_back({{16 * r, 0}, dest[r].view});
    StateDict sd{{"big", st}};
    ASSERT_OK(Load(&sd, **reader, {.checkpoint_id = "p", .collective = &c}));
    pieces[r] = (*reader)->stats().pieces_read;
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(pieces[r], 4u) << "rank " << r;  // 16 rows / 4 rows a piece.
    EXPECT_TRUE(
        SameTensor(dest[r].view, big.view.Narrow({16 * r, 0}, {16, 16})));
  }
}

TEST_F(MultiRankTest, PiecesInRanksInterleavedFilesAreReadInPlace) {
  // Two ranks save the row halves of three tensors: each rank's file holds
  // a@[0, 0], b@[0, 0], c@[0, 0] or a@[32, 0], ..., so the two files' key
  // ranges interleave. Each half is 8 pieces of 64 KiB.
  std::vector<OwnedTensor> saved;
  for (uint64_t i = 0; i < 3; ++i) {
    saved.push_back(RandomTensor(DType::kFloat32, {64, 4096}, 50 + i));
  }
  const std::vector<std::string> names = {"a", "b", "c"};
  std::vector<Status> results(2);
  RunRanks(2, 0, [&](int r, Collective& c) {
    auto writer = store_->NewWriter({.max_piece_bytes = 65536});
    ASSERT_OK(writer);
    StateDict sd;
    for (size_t i = 0; i < names.size(); ++i) {
      ShardedTensor st;
      st.dtype = DType::kFloat32;
      st.global_size = {64, 4096};
      st.local_shards.push_back(
          {{32 * r, 0}, saved[i].view.Narrow({32 * r, 0}, {32, 4096})});
      sd[names[i]] = st;
    }
    results[r] =
        Save(sd, **writer, {.checkpoint_id = "i", .collective = &c}).status();
  });
  for (const Status& s : results) ASSERT_OK(s);

  std::vector<OwnedTensor> into;
  StateDict sd;
  for (size_t i = 0; i < names.size(); ++i) {
    into.push_back(ZeroTensor(DType::kFloat32, {64, 4096}));
    sd[names[i]] = into.back().view;
  }
  ASSERT_OK_AND_ASSIGN(auto reader, store_->NewReader());
  ASSERT_OK(Load(&sd, *reader, {.checkpoint_id = "i"}));
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_TRUE(SameTensor(into[i].view, saved[i].view)) << names[i];
  }
  EXPECT_EQ(reader->stats().pieces_read, 48u);
  EXPECT_EQ(reader->stats().pieces_read_in_place, 48u);
  EXPECT_EQ(reader->stats().in_place_misses, 0u);
}

TEST_F(MultiRankTest, StrictLoadNamesEveryMissingFqnOnEveryRank) {
  SaveLayout("c", Rows(kRows, kCols, 2));
  const int n = 2;
  std::vector<Status> results(n);
  std::vector<OwnedTensor> extra(n);
  RunRanks(n, 0, [&](int r, Collective& c) {
    auto reader = store_->NewReader();
    ASSERT_OK(reader);
    extra[r] = ZeroTensor(DType::kFloat32, {2});
    StateDict sd{{"not.saved", extra[r].view}, {"also.missing", std::string()}};
    results[r] = Load(&sd, **reader, {.checkpoint_id = "c", .collective = &c});
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_THAT(results[r], StatusIs(StatusCode::kNotFound,
                                     AllOf(HasSubstr("not.saved"),
                                           HasSubstr("also.missing"))));
  }
}

}  // namespace
}  // namespace rocksdcp::testing
