// Readers in one process race a writer in another: while the test child
// commits and deletes checkpoints (keep-last 2, with garbage collection),
// this process opens the store read-only again and again, lists it and
// loads what it lists. Every open and list must succeed; every load either
// gives back exactly the checkpoint saved, or fails with NotFound saying
// it is not committed (deleted meanwhile); never a wrong byte.

#include <set>
#include <string>

#include "rocksdb/child_process.h"
#include "rocksdb/store_fixture.h"

namespace rocksdcp::testing {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

TEST_F(StoreTest, ReadOnlyReadersSurviveAWriterInAnotherProcess) {
  ExampleState first = ExampleStateDict(1);
  ASSERT_OK(SaveDict(first.dict, "seed"));
  CloseStore();
  BackgroundChild writer({"churn", store_path(), "60"});
  int opens = 0, loaded = 0, vanished = 0;
  // Until the writer is done, and at least once after.
  for (bool done = false; !done;) {
    done = writer.Exited();
    auto store = Store::Open(store_path(), {.read_only = true});
    ASSERT_OK(store) << "open " << opens;
    ++opens;
    ASSERT_OK_AND_ASSIGN(auto list, (*store)->List());
    for (const CheckpointInfo& c : list) {
      if (c.id == "seed") continue;
      const uint64_t seed = std::stoull(c.id.substr(1)) % 7 + 1;
      ExampleState into = EmptyExampleStateDict();
      ASSERT_OK_AND_ASSIGN(auto reader, (*store)->NewReader());
      Status s = Load(&into.dict, *reader, {.checkpoint_id = c.id});
      if (s.ok()) {
        EXPECT_TRUE(IsExampleState(into, seed)) << c.id;
        ++loaded;
      } else {
        // Deleted after this store opened (its pieces went with it), or
        // being saved while it opened: what happened, never "damaged".
        EXPECT_THAT(
            s, AnyOf(StatusIs(StatusCode::kNotFound,
                              HasSubstr("was deleted after this read-only "
                                        "store opened")),
                     StatusIs(StatusCode::kNotFound,
                              HasSubstr("changed while this read-only store "
                                        "opened")),
                     StatusIs(StatusCode::kAborted,
                              HasSubstr("it is intact on disk: open the "
                                        "store again"))))
            << c.id;
        ++vanished;
      }
    }
  }
  EXPECT_EQ(writer.exit_code(), 0);
  EXPECT_GT(opens, 1);
  EXPECT_GT(loaded, 0);
  std::printf(
      "race: %d read-only opens, %d loads, %d checkpoints deleted under a "
      "reader\n",
      opens, loaded, vanished);
}

}  // namespace
}  // namespace rocksdcp::testing
