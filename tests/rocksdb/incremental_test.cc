// Incremental saves (issue #14): a save against a base stores a reference
// for every piece whose payload did not change; loads follow references;
// a referenced checkpoint's column family outlives its catalog entry while
// it is referenced, and no longer.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "rocksdb/checkpoint_content.h"
#include "rocksdb/store_fixture.h"

namespace rocksdcp::testing {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

constexpr uint64_t kPiece = 4096;

// A view of `t`'s own bytes (a copied OwnedTensor's view points at the
// original's), with its view's dtype and shape.
TensorView View(const OwnedTensor& t) {
  return TensorView::Contiguous(t.view.dtype, t.view.sizes,
                                const_cast<uint8_t*>(t.bytes.data()));
}

// A state dict that owns its contents and can say what each item holds.
struct Model {
  std::map<std::string, OwnedTensor> tensors;
  std::map<std::string, std::string> blobs;

  StateDict Dict() const {
    StateDict sd;
    for (const auto& [fqn, t] : tensors) sd[fqn] = View(t);
    for (const auto& [fqn, b] : blobs) sd[fqn] = b;
    return sd;
  }
  // Same names, shapes and dtypes, zero-filled: what a load fills.
  Model Empty() const {
    Model m;
    for (const auto& [fqn, t] : tensors) {
      m.tensors[fqn] = ZeroTensor(t.view.dtype, t.view.sizes);
    }
    for (const auto& [fqn, b] : blobs) m.blobs[fqn] = "";
    return m;
  }
};

// "w" float32 [16, 1024] (16 pieces of 4 KiB), "b" float32 [8], "e"
// int64 [64, 64] (8 pieces), and byte item "opt" (3 pieces).
Model Example(uint64_t seed) {
  Model m;
  m.tensors["w"] = RandomTensor(DType::kFloat32, {16, 1024}, seed);
  m.tensors["b"] = RandomTensor(DType::kFloat32, {8}, seed + 1);
  m.tensors["e"] = RandomTensor(DType::kInt64, {64, 64}, seed + 2);
  m.blobs["opt"] = RandomBytes(10000, seed + 3);
  return m;
}

class IncrementalTest : public StoreTest {
 protected:
  Status Save(const Model& m, const std::string& id, std::string base = "",
              bool overwrite = false, bool newest = false) {
    RocksDBWriterOptions options;
    options.max_piece_bytes = kPiece;
    options.base = std::move(base);
    options.base_on_newest = newest;
    options.overwrite = overwrite;
    return SaveDict(m.Dict(), id, options).status();
  }

  // Loads `id` into the shapes of `want` and compares every byte.
  ::testing::AssertionResult LoadsAs(const std::string& id, const Model& want) {
    Model got = want.Empty();
    StateDict sd = got.Dict();
    Status s = LoadDict(&sd, id);
    if (!s.ok()) {
      return ::testing::AssertionFailure() << id << ": " << s.ToString();
    }
    for (const auto& [fqn, t] : want.tensors) {
      auto r = SameTensor(View(got.tensors[fqn]), View(t));
      if (!r) return r << " (" << id << ", " << fqn << ")";
    }
    for (const auto& [fqn, b] : want.blobs) {
      const auto* loaded = std::get_if<std::string>(&sd[fqn]);
      if (loaded == nullptr || *loaded != b) {
        return ::testing::AssertionFailure()
               << id << ", " << fqn << ": bytes differ";
      }
    }
    return ::testing::AssertionSuccess();
  }

  CheckpointInfo InfoOf(const std::string& id) {
    auto info = store_->Info(id);
    EXPECT_OK(info);
    return info.ok() ? *info : CheckpointInfo();
  }
};

TEST_F(IncrementalTest, UnchangedPiecesAreReferencesAndLoadBitExact) {
  OpenStore();
  Model m = Example(1);
  ASSERT_OK(Save(m, "a"));
  // One byte of "w"'s piece 3 and one of "opt"'s piece 1 change.
  m.tensors["w"].bytes[3 * kPiece + 5] ^= 1;
  m.blobs["opt"][5000] ^= 1;
  ASSERT_OK(Save(m, "b", "a"));
  ASSERT_OK_AND_ASSIGN(CheckpointDiff diff, DiffCheckpoints(*store_, "a", "b"));
  for (const ItemDiff& d : diff.items) {
    EXPECT_EQ(d.changed_pieces, d.fqn == "w" || d.fqn == "opt" ? 1u : 0u)
        << d.fqn;
  }

  const CheckpointInfo a = InfoOf("a"), b = InfoOf("b");
  EXPECT_THAT(a.referenced_column_families, IsEmpty());
  EXPECT_EQ(a.referenced_bytes, 0u);
  EXPECT_THAT(b.referenced_column_families, ElementsAre("a"));
  // Everything but the two changed pieces (4 KiB each).
  EXPECT_EQ(b.bytes, a.bytes);
  EXPECT_EQ(b.referenced_bytes, b.bytes - 2 * kPiece);
  // Its own column family holds about the changed pieces, not the rest.
  EXPECT_LT(b.stored_bytes, a.stored_bytes / 2);
  // Deleting "a" would free nothing: "b" references it.
  EXPECT_EQ(a.freed_by_delete, 0u);
  EXPECT_EQ(b.freed_by_delete, b.stored_bytes);
  EXPECT_TRUE(LoadsAs("b", m));
  EXPECT_TRUE(LoadsAs("a", Example(1)));
  ExpectVerifies();
}

TEST_F(IncrementalTest, PiecesOfLargeTensorsAreReadInPlaceWhereverTheyLie) {
  OpenStore();
  // 16 pieces of 64 KiB: large enough to be read in place.
  OwnedTensor w = RandomTensor(DType::kFloat32, {16, 16384}, 60);
  const RocksDBWriterOptions full{.max_piece_bytes = 65536};
  ASSERT_OK(SaveDict({{"w", View(w)}}, "a", full));
  w.bytes[3 * 65536 + 9] ^= 1;
  RocksDBWriterOptions incremental = full;
  incremental.base = "a";
  ASSERT_OK(SaveDict({{"w", View(w)}}, "b", incremental));
  w.bytes[7 * 65536 + 9] ^= 1;
  incremental.base = "b";
  ASSERT_OK(SaveDict({{"w", View(w)}}, "c", incremental));
  // "c" holds piece 7; "b" piece 3; "a" the other 14.
  EXPECT_THAT(InfoOf("c").referenced_column_families,
              UnorderedElementsAre("a", "b"));

  OwnedTensor into = ZeroTensor(DType::kFloat32, {16, 16384});
  StateDict sd{{"w", View(into)}};
  ASSERT_OK_AND_ASSIGN(auto reader, store_->NewReader());
  ASSERT_OK(Load(&sd, *reader, {.checkpoint_id = "c"}));
  EXPECT_EQ(into.bytes, w.bytes);
  EXPECT_EQ(reader->stats().pieces_read_in_place, 16u);
  EXPECT_EQ(reader->stats().in_place_misses, 0u);
}

TEST_F(IncrementalTest, ReferencesNameWhereTheBytesAreOneLevelDeep) {
  OpenStore();
  Model m = Example(1);
  ASSERT_OK(Save(m, "a"));
  m.tensors["b"] = RandomTensor(DType::kFloat32, {8}, 50);
  ASSERT_OK(Save(m, "b", "a"));
  m.blobs["opt"] = RandomBytes(10000, 51);
  ASSERT_OK(Save(m, "c", "b"));
  // "c" references "a" for what neither changed, and "b" for its "b".
  EXPECT_THAT(InfoOf("c").referenced_column_families,
              UnorderedElementsAre("a", "b"));
  // Nothing changed: everything is referenced, from where it lies.
  ASSERT_OK(Save(m, "d", "c"));
  const CheckpointInfo d = InfoOf("d");
  EXPECT_THAT(d.referenced_column_families,
              UnorderedElementsAre("a", "b", "c"));
  EXPECT_EQ(d.referenced_bytes, d.bytes);
  EXPECT_TRUE(LoadsAs("d", m));
  ExpectVerifies();
}

TEST_F(IncrementalTest, DeletedBaseStaysWhileReferencedThenGoes) {
  OpenStore();
  Model m = Example(1);
  ASSERT_OK(Save(m, "a"));
  m.tensors["b"] = RandomTensor(DType::kFloat32, {8}, 50);
  ASSERT_OK(Save(m, "b", "a"));
  ASSERT_OK(store_->Delete("a"));
  EXPECT_THAT(store_->Info("a"),
              StatusIs(StatusCode::kNotFound, HasSubstr("not committed")));
  ASSERT_OK_AND_ASSIGN(auto list, store_->List());
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].id, "b");
  // Its column family stays, and GC keeps it: "b" needs it.
  EXPECT_THAT(ColumnFamiliesOnDisk(store_path()),
              UnorderedElementsAre("default", "a", "b"));
  ASSERT_OK_AND_ASSIGN(GcReport gc, store_->CollectGarbage());
  EXPECT_THAT(gc.dropped_column_families, IsEmpty());
  EXPECT_TRUE(LoadsAs("b", m));
  // Deleting "b" frees both: the one it alone kept goes with it.
  const CheckpointInfo b = InfoOf("b");
  EXPECT_GT(b.freed_by_delete, b.stored_bytes);
  ASSERT_OK(store_->Delete("b"));
  EXPECT_THAT(ColumnFamiliesOnDisk(store_path()), ElementsAre("default"));
}

TEST_F(IncrementalTest, OverwritingItselfKeepsWhatTheNewOneReferences) {
  OpenStore();
  Model m = Example(1);
  ASSERT_OK(Save(m, "latest"));
  for (int step = 0; step < 3; ++step) {
    m.tensors["b"] = RandomTensor(DType::kFloat32, {8}, 60 + step);
    ASSERT_OK(Save(m, "latest", "", /*overwrite=*/true, /*newest=*/true));
    EXPECT_TRUE(LoadsAs("latest", m)) << step;
  }
  // The first column family holds all but "b"; the later ones held only
  // "b" and are dropped once superseded.
  const CheckpointInfo latest = InfoOf("latest");
  EXPECT_NE(latest.column_family, "latest");
  EXPECT_THAT(latest.referenced_column_families, ElementsAre("latest"));
  EXPECT_THAT(ColumnFamiliesOnDisk(store_path()),
              UnorderedElementsAre("default", "latest", latest.column_family));
  ASSERT_OK_AND_ASSIGN(GcReport gc, store_->CollectGarbage());
  EXPECT_THAT(gc.dropped_column_families, IsEmpty());
  ExpectVerifies();
}

TEST_F(IncrementalTest, ASaveInProgressPinsItsBase) {
  OpenStore();
  Model m = Example(1);
  ASSERT_OK(Save(m, "a"));
  RocksDBWriterOptions options;
  options.max_piece_bytes = kPiece;
  options.base = "a";
  options.write_threads = 1;
  // The base goes while the save runs: deleted, then collected.
  bool deleted = false;
  options.progress = [&](const Progress&) {
    if (deleted) return;
    deleted = true;
    ASSERT_OK(store_->Delete("a"));
    ASSERT_OK_AND_ASSIGN(GcReport gc, store_->CollectGarbage());
    EXPECT_THAT(gc.dropped_column_families, IsEmpty());
  };
  ASSERT_OK_AND_ASSIGN(auto writer, store_->NewWriter(options));
  SaveOptions so;
  so.checkpoint_id = "b";
  ASSERT_OK(rocksdcp::Save(m.Dict(), *writer, so).status());
  ASSERT_TRUE(deleted);
  EXPECT_EQ(InfoOf("b").referenced_bytes, InfoOf("b").bytes);
  EXPECT_TRUE(LoadsAs("b", m));
  // Committed: the pin is gone, and "b"'s reference keeps "a".
  ASSERT_OK_AND_ASSIGN(GcReport gc, store_->CollectGarbage());
  EXPECT_THAT(gc.dropped_column_families, IsEmpty());
  ASSERT_OK(store_->Delete("b"));
  EXPECT_THAT(ColumnFamiliesOnDisk(store_path()), ElementsAre("default"));
}

TEST_F(IncrementalTest, AnAbandonedSaveReleasesItsPin) {
  OpenStore();
  Model m = Example(1);
  ASSERT_OK(Save(m, "a"));
  {
    RocksDBWriterOptions options;
    options.base = "a";
    ASSERT_OK_AND_ASSIGN(auto writer, store_->NewWriter(options));
    ASSERT_OK(writer->Reset("b"));
    ASSERT_OK(writer->SetUpStorageWriter(true, 0, 1));
    ASSERT_OK(store_->Delete("a"));
    EXPECT_THAT(ColumnFamiliesOnDisk(store_path()),
                UnorderedElementsAre("default", "a"));
  }  // Abandoned.
  ASSERT_OK_AND_ASSIGN(GcReport gc, store_->CollectGarbage());
  EXPECT_THAT(gc.dropped_column_families, ElementsAre("a"));
}

TEST_F(IncrementalTest, BaseOptionsAreChecked) {
  OpenStore();
  Model m = Example(1);
  EXPECT_THAT(Save(m, "b", "nope"),
              StatusIs(StatusCode::kNotFound,
                       AllOf(HasSubstr("base checkpoint 'nope'"),
                             HasSubstr("save of checkpoint 'b'"))));
  RocksDBWriterOptions both;
  both.base = "a";
  both.base_on_newest = true;
  EXPECT_THAT(store_->NewWriter(both),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("set one")));
  // The newest of none: a full save.
  ASSERT_OK(Save(m, "a", "", false, /*newest=*/true));
  EXPECT_THAT(InfoOf("a").referenced_column_families, IsEmpty());
  ASSERT_OK(Save(m, "b", "", false, /*newest=*/true));
  EXPECT_THAT(InfoOf("b").referenced_column_families, ElementsAre("a"));
}

TEST_F(IncrementalTest, ReshapedOrRetypedItemsAreWrittenWhole) {
  OpenStore();
  Model m = Example(1);
  ASSERT_OK(Save(m, "a"));
  Model n = m;
  // Same bytes, another shape; same bytes, another dtype.
  n.tensors["w"].view.sizes = {1024, 16};
  n.tensors["e"].view.dtype = DType::kFloat64;
  ASSERT_OK(Save(n, "b", "a"));
  const CheckpointInfo b = InfoOf("b");
  // Only "b" and "opt" are referenced.
  EXPECT_EQ(b.referenced_bytes, 8 * 4 + 10000u);
  EXPECT_TRUE(LoadsAs("b", n));
}

TEST_F(IncrementalTest, MaterializeCopiesWhatItReferencesAndReleasesIt) {
  OpenStore();
  Model m = Example(1);
  ASSERT_OK(Save(m, "a"));
  m.tensors["b"] = RandomTensor(DType::kFloat32, {8}, 50);
  ASSERT_OK(Save(m, "b", "a"));
  ASSERT_OK(store_->Delete("a"));
  const CheckpointInfo before = InfoOf("b");
  uint64_t progressed = 0;
  ASSERT_OK_AND_ASSIGN(MaterializeReport report,
                       store_->Materialize("b", [&](const Progress& p) {
                         progressed = p.bytes_done;
                         EXPECT_EQ(p.bytes_total, before.bytes);
                       }));
  EXPECT_EQ(report.bytes, before.referenced_bytes);
  EXPECT_EQ(progressed, before.bytes);
  EXPECT_EQ(report.pieces, 16u + 8u + 3u);  // All of "w", "e" and "opt".
  EXPECT_THAT(report.dropped_column_families, ElementsAre("a"));
  const CheckpointInfo after = InfoOf("b");
  EXPECT_THAT(after.referenced_column_families, IsEmpty());
  EXPECT_EQ(after.referenced_bytes, 0u);
  EXPECT_EQ(after.bytes, before.bytes);
  EXPECT_EQ(after.created_unix_micros, before.created_unix_micros);
  EXPECT_NE(after.column_family, before.column_family);
  EXPECT_THAT(ColumnFamiliesOnDisk(store_path()),
              UnorderedElementsAre("default", after.column_family));
  EXPECT_TRUE(LoadsAs("b", m));
  ExpectVerifies();
  // Again: nothing to do. And it survives a reopen.
  ASSERT_OK_AND_ASSIGN(report, store_->Materialize("b"));
  EXPECT_EQ(report.pieces, 0u);
  OpenStore();
  EXPECT_TRUE(LoadsAs("b", m));
}

TEST_F(IncrementalTest, MaterializeKeepsWhatOthersStillReference) {
  OpenStore();
  Model m = Example(1);
  ASSERT_OK(Save(m, "a"));
  ASSERT_OK(Save(m, "b", "a"));
  ASSERT_OK(Save(m, "c", "a"));
  ASSERT_OK_AND_ASSIGN(MaterializeReport report, store_->Materialize("b"));
  EXPECT_THAT(report.dropped_column_families, IsEmpty());  // "a" is held.
  ASSERT_OK(store_->Delete("a"));
  // "c" still needs it; materializing "c" releases it.
  EXPECT_THAT(
      ColumnFamiliesOnDisk(store_path()),
      UnorderedElementsAre("default", "a", InfoOf("b").column_family, "c"));
  ASSERT_OK_AND_ASSIGN(report, store_->Materialize("c"));
  EXPECT_THAT(report.dropped_column_families, ElementsAre("a"));
  EXPECT_TRUE(LoadsAs("b", m));
  EXPECT_TRUE(LoadsAs("c", m));
  EXPECT_THAT(store_->Materialize("a"),
              StatusIs(StatusCode::kNotFound, HasSubstr("'a'")));
}

// The chain: 20 incremental saves with random changes, with
// deletes, overwrites and GC between them; after every step every listed
// checkpoint loads as the model says, and GC leaves exactly the column
// families that are held or referenced.
TEST_F(IncrementalTest, ARandomChainLoadsBitExactAfterEveryStep) {
  OpenStore();
  std::mt19937_64 rng(14);
  Model m = Example(1);
  std::map<std::string, Model> expected;
  ASSERT_OK(Save(m, "c0"));
  expected["c0"] = m;
  for (int step = 1; step <= 20; ++step) {
    // A random change.
    switch (rng() % 6) {
      case 0:  // A whole tensor.
        m.tensors["w"] = RandomTensor(DType::kFloat32, {16, 1024}, rng());
        break;
      case 1: {  // One piece.
        auto& e = m.tensors["e"].bytes;
        const size_t piece = rng() % (e.size() / kPiece);
        for (size_t i = 0; i < kPiece; ++i) e[piece * kPiece + i] ^= 0x11;
        break;
      }
      case 2: {  // One byte.
        auto& w = m.tensors["w"].bytes;
        w[rng() % w.size()] ^= 1;
        break;
      }
      case 3: {  // A dtype-preserving rewrite: same values, scaled by 1.
        auto& b = m.tensors["b"];
        auto* f = reinterpret_cast<float*>(b.bytes.data());
        for (int i = 0; i < 8; ++i) f[i] = f[i] * 1.0f;
        break;
      }
      case 4:  // An item added, or removed.
        if (m.tensors.count("extra")) {
          m.tensors.erase("extra");
        } else {
          m.tensors["extra"] = RandomTensor(DType::kBFloat16, {3, 4096}, rng());
        }
        break;
      case 5:  // A byte item's bytes.
        m.blobs["opt"] = RandomBytes(5000 + rng() % 10000, rng());
        break;
    }
    const std::string id = "c" + std::to_string(step);
    ASSERT_OK(Save(m, id, "", false, /*newest=*/true)) << step;
    expected[id] = m;
    // Then a random store operation.
    switch (rng() % 5) {
      case 3: {  // Materialize a random one.
        auto which = std::next(expected.begin(), rng() % expected.size());
        ASSERT_OK(store_->Materialize(which->first).status());
        break;
      }
      case 0: {  // Delete a random older one (maybe a base).
        auto victim = std::next(expected.begin(), rng() % expected.size());
        if (victim->first != id) {
          ASSERT_OK(store_->Delete(victim->first));
          expected.erase(victim);
        }
        break;
      }
      case 1:  // Overwrite the newest with itself as base.
        ASSERT_OK(Save(m, id, "", /*overwrite=*/true, /*newest=*/true));
        break;
      case 2:
        ASSERT_OK(store_->CollectGarbage().status());
        break;
      default:
        break;
    }
    for (const auto& [cid, want] : expected) {
      ASSERT_TRUE(LoadsAs(cid, want)) << "step " << step;
    }
    // GC drops exactly what nothing holds or references.
    ASSERT_OK_AND_ASSIGN(GcReport gc, store_->CollectGarbage());
    std::set<std::string> needed = {"default"};
    ASSERT_OK_AND_ASSIGN(auto list, store_->List());
    ASSERT_EQ(list.size(), expected.size());
    for (const CheckpointInfo& c : list) {
      needed.insert(c.column_family);
      needed.insert(c.referenced_column_families.begin(),
                    c.referenced_column_families.end());
    }
    EXPECT_EQ(ColumnFamiliesOnDisk(store_path()), needed) << "step " << step;
  }
  ExpectVerifies();
}

}  // namespace
}  // namespace rocksdcp::testing
