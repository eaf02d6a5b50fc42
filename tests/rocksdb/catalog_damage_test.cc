// A damaged or forged catalog (issue #13): entries that name another id, an
// id no save could write, a column family the store does not have, or one
// column family under many ids. Each is found and named; none hides the
// other checkpoints, none makes rocksdcp load the wrong checkpoint, and
// deleting a damaged entry never drops a column family another one uses.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "keys/keys.h"
#include "rocksdb/catalog_codec.h"
#include "rocksdb/raw_store.h"
#include "rocksdb/store_fixture.h"

namespace rocksdcp::testing {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kDefault[] = "default";  // RocksDB's name for the catalog's CF.

class CatalogDamageTest : public StoreTest {
 protected:
  // Three checkpoints, seeds 1, 2, 3, oldest first; the store is closed.
  void SetUp() override {
    StoreTest::SetUp();
    for (const auto& [id, seed] : kCheckpoints) {
      ASSERT_OK(SaveDict(ExampleStateDict(seed).dict, id));
    }
    CloseStore();
  }

  std::string Entry(RawStore& raw, const std::string& id) {
    return raw.Get(kDefault, keys::CatalogKey(id));
  }
  // Writes `id`'s entry, changed by `change`, under `key_id`'s key.
  void PutEntry(RawStore& raw, const std::string& id, const std::string& key_id,
                const std::function<void(CheckpointInfo&)>& change) {
    auto entry = format::DecodeCatalogEntry(Entry(raw, id));
    ASSERT_OK(entry);
    change(*entry);
    raw.Put(kDefault, keys::CatalogKey(key_id),
            format::EncodeCatalogEntry(*entry));
  }

  // Opens the store read-only, then deletes "victim" through a writer
  // beside it (and collects its files when `collect`): its load through
  // the read-only store is NotFound, or, where that store still holds the
  // deleted files open (RocksDB may keep them from its open on) and reads
  // every piece from them, the saved state; and "after" still loads.
  void ExpectDeletedSinceAReadOnlyOpenIsNotFound(bool collect) {
    OpenStore({.read_only = true});
    {
      ASSERT_OK_AND_ASSIGN(auto writer, Store::Open(store_path()));
      ASSERT_OK(writer->Delete("victim"));
      if (collect) {
        ASSERT_OK(writer->CollectGarbage());
      }
    }
    ExampleState into = EmptyExampleStateDict();
    const Status loaded = LoadDict(&into.dict, "victim");
    if (loaded.ok()) {
      EXPECT_TRUE(IsExampleState(into, 2));
    } else {
      EXPECT_THAT(loaded, StatusIs(StatusCode::kNotFound,
                                   AllOf(HasSubstr("'victim'"),
                                         HasSubstr("was deleted after this "
                                                   "read-only store opened"))));
    }
    ExpectLoads("after", 3);
  }

  void ExpectLoads(const std::string& id, uint64_t seed) {
    ExampleState into = EmptyExampleStateDict();
    ASSERT_OK(LoadDict(&into.dict, id));
    EXPECT_TRUE(IsExampleState(into, seed)) << id;
  }

  static constexpr std::pair<const char*, uint64_t> kCheckpoints[] = {
      {"before", 1}, {"victim", 2}, {"after", 3}};
};

// 'victim''s key holds 'after''s entry: loading 'victim' must not hand back
// 'after'. Deleting 'victim' removes only that entry: 'after' is intact,
// and GC then drops the column family 'victim' left behind.
TEST_F(CatalogDamageTest, AnEntryNamingAnotherCheckpointIsNotLoadedAsIt) {
  {
    RawStore raw(store_path());
    raw.Put(kDefault, keys::CatalogKey("victim"), Entry(raw, "after"));
  }
  for (bool read_only : {true, false}) {
    OpenStore({.read_only = read_only});
    ExampleState into = EmptyExampleStateDict();
    EXPECT_THAT(LoadDict(&into.dict, "victim"),
                StatusIs(StatusCode::kCorruption,
                         AllOf(HasSubstr("'victim'"),
                               HasSubstr("names checkpoint 'after'"))));
    EXPECT_THAT(store_->Info("victim"),
                StatusIs(StatusCode::kCorruption, HasSubstr("'after'")));
    ASSERT_OK_AND_ASSIGN(VerifyReport report, store_->Verify());
    for (const CheckpointVerifyReport& c : report.checkpoints) {
      EXPECT_EQ(c.ok(), c.checkpoint_id != "victim") << c.checkpoint_id;
    }
  }
  ASSERT_OK(store_->Delete("victim"));
  ExpectLoads("after", 3);
  ExpectLoads("before", 1);
  ASSERT_OK_AND_ASSIGN(GcReport gc, store_->CollectGarbage());
  EXPECT_THAT(gc.dropped_column_families, ElementsAre("victim"));
  ExpectLoads("after", 3);
}

// A key whose id no save accepts ("default" is RocksDB's own column
// family): listed as damaged, skipped by KeepLast, reported by Verify.
TEST_F(CatalogDamageTest, AnEntryUnderAnInvalidIdIsListedDamagedAndLeftAlone) {
  {
    RawStore raw(store_path());
    PutEntry(raw, "before", "default", [](CheckpointInfo& e) {
      e.id = "default";
      e.created_unix_micros = 0;
    });
  }
  OpenStore();
  ASSERT_OK_AND_ASSIGN(auto list, store_->List());
  ASSERT_EQ(list.size(), 4u);
  EXPECT_EQ(list[0].id, "default");
  EXPECT_THAT(list[0].damage, HasSubstr("names an invalid id"));
  ASSERT_OK_AND_ASSIGN(RetentionReport kept, store_->KeepLast(1));
  EXPECT_THAT(kept.kept, ElementsAre("after"));
  EXPECT_THAT(kept.deleted, ElementsAre("before", "victim"));
  ASSERT_OK_AND_ASSIGN(list, store_->List());
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].id, "default");
  ExpectLoads("after", 3);
  // GC refuses while it is there; Delete removes the entry alone (not
  // RocksDB's default column family, which it names), and GC runs.
  EXPECT_THAT(store_->CollectGarbage(),
              StatusIs(StatusCode::kCorruption,
                       HasSubstr("delete the entry, or verify the store")));
  ASSERT_OK(store_->Delete("default"));
  ASSERT_OK_AND_ASSIGN(list, store_->List());
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].id, "after");
  ASSERT_OK(store_->CollectGarbage().status());
  ExpectLoads("after", 3);
  // An invalid id that keys nothing is still refused as invalid.
  EXPECT_THAT(store_->Delete("default"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("default")));
}

// The empty id's key, "checkpoint/": listed as damaged (as '' in the CLI),
// and deletable.
TEST_F(CatalogDamageTest, AnEntryUnderTheEmptyIdIsListedAndDeletable) {
  {
    RawStore raw(store_path());
    raw.Put(kDefault, keys::CatalogKey(""), "garbage");
  }
  OpenStore();
  ASSERT_OK_AND_ASSIGN(auto list, store_->List());
  ASSERT_EQ(list.size(), 4u);
  EXPECT_EQ(list[0].id, "");
  EXPECT_THAT(list[0].damage, HasSubstr("checkpoint id is empty"));
  ASSERT_OK(store_->Delete(""));
  ASSERT_OK_AND_ASSIGN(list, store_->List());
  EXPECT_EQ(list.size(), 3u);
  ASSERT_OK(store_->CollectGarbage().status());
  for (const auto& [id, seed] : kCheckpoints) ExpectLoads(id, seed);
}

// An entry naming a column family the store does not have is damage, for
// a read-only store too (which could take it for a writer's race).
TEST_F(CatalogDamageTest, AMissingColumnFamilyIsDamageForAReadOnlyStoreToo) {
  {
    RawStore raw(store_path());
    PutEntry(raw, "victim", "victim",
             [](CheckpointInfo& e) { e.column_family = "gone"; });
  }
  OpenStore({.read_only = true});
  ExampleState into = EmptyExampleStateDict();
  EXPECT_THAT(LoadDict(&into.dict, "victim"),
              StatusIs(StatusCode::kCorruption,
                       AllOf(HasSubstr("'victim'"),
                             HasSubstr("column family 'gone', which the store "
                                       "does not have"))));
  ASSERT_OK_AND_ASSIGN(VerifyReport report, store_->Verify());
  ASSERT_EQ(report.checkpoints.size(), 3u);
  for (const CheckpointVerifyReport& c : report.checkpoints) {
    EXPECT_EQ(c.ok(), c.checkpoint_id != "victim") << c.checkpoint_id;
  }
  ExpectLoads("before", 1);
  ExpectLoads("after", 3);
}

// The same entry, deleted by a writer after the read-only store opened:
// the store as it is now says so, and the load is NotFound, not damage.
TEST_F(CatalogDamageTest, AnEntryDeletedSinceAReadOnlyOpenIsNotFound) {
  {
    RawStore raw(store_path());
    PutEntry(raw, "victim", "victim",
             [](CheckpointInfo& e) { e.column_family = "gone"; });
  }
  ExpectDeletedSinceAReadOnlyOpenIsNotFound(/*collect=*/false);
}

// A sound checkpoint deleted by a writer, and its files collected, after
// the read-only store opened: the read-only store still lists it and reads
// its metadata, but its files are gone from the directory. NotFound, not
// damage (CI's -j3 run of ReadOnlyReadersSurviveAWriterInAnotherProcess
// once got "Corruption: ... the checkpoint holds only 760 bytes" here).
TEST_F(CatalogDamageTest,
       ACheckpointDeletedAndCollectedSinceAReadOnlyOpenIsNotFound) {
  ExpectDeletedSinceAReadOnlyOpenIsNotFound(/*collect=*/true);
}

// Many ids on one column family: each one's problem names a few of the
// others and counts the rest, so the report grows with the catalog, not
// with its square.
TEST_F(CatalogDamageTest, ManyAliasesGiveMessagesOfBoundedSize) {
  constexpr int kAliases = 300;
  {
    RawStore raw(store_path());
    for (int i = 0; i < kAliases; ++i) {
      const std::string alias = "alias-" + std::to_string(i);
      PutEntry(raw, "victim", alias, [&](CheckpointInfo& e) { e.id = alias; });
    }
  }
  OpenStore({.read_only = true});
  ASSERT_OK_AND_ASSIGN(VerifyReport report, store_->Verify());
  ASSERT_EQ(report.checkpoints.size(), 3u + kAliases);
  int aliased = 0;
  for (const CheckpointVerifyReport& c : report.checkpoints) {
    if (c.checkpoint_id == "before" || c.checkpoint_id == "after") {
      EXPECT_TRUE(c.ok()) << c.checkpoint_id;
      continue;
    }
    ASSERT_FALSE(c.problems.empty()) << c.checkpoint_id;
    const std::string& message = c.problems[0].status.message();
    EXPECT_THAT(message, AllOf(HasSubstr("shares its column family 'victim'"),
                               HasSubstr("and " + std::to_string(kAliases - 3) +
                                         " more")));
    EXPECT_LT(message.size(), 400u);
    ++aliased;
  }
  EXPECT_EQ(aliased, 1 + kAliases);
}

// Deleting a damaged entry removes it alone; the column family it named
// is GC's, and it drops only an orphan.
TEST_F(CatalogDamageTest, DeletingAnUndecodableEntryRemovesItAlone) {
  RawStore(store_path()).Put(kDefault, keys::CatalogKey("victim"), "garbage");
  OpenStore();
  ASSERT_OK(store_->Delete("victim"));
  ASSERT_OK_AND_ASSIGN(auto list, store_->List());
  ASSERT_EQ(list.size(), 2u);
  for (const CheckpointInfo& c : list) EXPECT_THAT(c.id, Not("victim"));
  ASSERT_OK_AND_ASSIGN(GcReport gc, store_->CollectGarbage());
  EXPECT_THAT(gc.dropped_column_families, ElementsAre("victim"));
  ExpectLoads("before", 1);
  ExpectLoads("after", 3);
}

}  // namespace
}  // namespace rocksdcp::testing
