// Concurrency and load: at once against one Store, threads saving distinct
// checkpoints, threads loading committed ones and checking every byte, a
// thread deleting old ones and collecting garbage, and pairs of threads
// racing to save one id. Afterwards every listed checkpoint loads, and
// RocksDB's column families are exactly the catalog's.
//
// Environment: ROCKSDCP_STRESS_SAVES=N saves per saving thread (default 30).

#include <atomic>
#include <barrier>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <mutex>
#include <random>
#include <thread>

#include "rocksdb/checkpoint_content.h"

namespace rocksdcp::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int kSavers = 3;
constexpr int kLoaders = 2;
constexpr int kRaces = 16;
// The deleter keeps this many of the savers' newest checkpoints.
constexpr size_t kKeep = 4;

// Unexpected errors of any thread, reported at the end.
class Errors {
 public:
  void Add(const std::string& what, const Status& s) {
    std::lock_guard<std::mutex> lock(mu_);
    list_.push_back(what + ": " + s.ToString());
  }
  std::vector<std::string> list() {
    std::lock_guard<std::mutex> lock(mu_);
    return list_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> list_;
};

// Lets the deleter and idle loaders wait for the next commit rather than
// spin.
class Commits {
 public:
  void Add() {
    std::lock_guard<std::mutex> lock(mu_);
    ++count_;
    cv_.notify_all();
  }
  void Finish() {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    cv_.notify_all();
  }
  // Waits for more than `seen` commits, or for the end; returns the count.
  uint64_t WaitBeyond(uint64_t seen) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return count_ > seen || done_; });
    return count_;
  }
  bool done() {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t count_ = 0;
  bool done_ = false;
};

bool IsSaverId(const std::string& id) { return id.rfind("saver", 0) == 0; }

class StressTest : public StoreTest {
 protected:
  // Every checkpoint the catalog lists loads whole; the saver ones hold
  // generation 1.
  void ExpectEveryListedCheckpointLoads() {
    ASSERT_OK_AND_ASSIGN(std::vector<CheckpointInfo> list, store_->List());
    for (const CheckpointInfo& info : list) {
      auto gen = LoadAndVerifyContent(*store_, info.id);
      ASSERT_OK(gen);
      if (IsSaverId(info.id)) {
        EXPECT_EQ(*gen, 1u) << info.id;
      }
    }
  }
};

TEST_F(StressTest, SavesLoadsDeletesAndGcAtOnceKeepEveryCheckpointWhole) {
  const int saves = static_cast<int>(
      std::max<uint64_t>(1, EnvU64("ROCKSDCP_STRESS_SAVES", 30)));
  Errors errors;
  Commits commits;
  std::atomic<int> loads{0}, vanished{0}, deletes{0}, gcs{0}, busy{0};
  std::atomic<bool> saving{true};
  Store& store = *store_;

  std::vector<std::thread> threads;
  for (int t = 0; t < kSavers; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < saves; ++i) {
        const std::string id =
            "saver" + std::to_string(t) + "/" + std::to_string(i);
        if (Status s = SaveContent(store, id, 1, false); !s.ok()) {
          errors.Add("save " + id, s);
        } else {
          commits.Add();
        }
      }
    });
  }
  for (int t = 0; t < kLoaders; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      uint64_t seen = 0;
      while (saving.load()) {
        auto list = store.List();
        if (!list.ok()) {
          errors.Add("list", list.status());
          return;
        }
        if (list->empty()) {
          seen = commits.WaitBeyond(seen);
          continue;
        }
        const std::string id = (*list)[rng() % list->size()].id;
        auto gen = LoadAndVerifyContent(store, id);
        if (gen.ok() && (*gen == 1 || !IsSaverId(id))) {
          ++loads;
        } else if (gen.status().IsNotFound()) {
          ++vanished;  // Deleted since the List: not an error.
        } else {
          errors.Add("load " + id,
                     gen.ok() ? Status::Internal("wrong gen") : gen.status());
        }
      }
    });
  }
  // The deleter: after each commit, deletes the oldest saver checkpoints
  // beyond kKeep; every third time, collects garbage too.
  threads.emplace_back([&] {
    uint64_t seen = 0;
    int passes = 0;
    for (bool last = false; !last;) {
      // A pass after the end too, for the commits it has not seen.
      last = commits.done();
      seen = commits.WaitBeyond(seen);
      auto list = store.List();
      if (!list.ok()) {
        errors.Add("list", list.status());
        return;
      }
      std::vector<std::string> ids;
      for (const CheckpointInfo& info : *list) {
        if (IsSaverId(info.id)) ids.push_back(info.id);
      }
      for (size_t i = 0; i + kKeep < ids.size(); ++i) {
        if (Status s = store.Delete(ids[i]); !s.ok()) {
          errors.Add("delete " + ids[i], s);
        } else {
          ++deletes;
        }
      }
      if (++passes % 3 == 0) {
        auto gc = store.CollectGarbage();
        if (!gc.ok()) errors.Add("gc", gc.status());
        ++gcs;
      }
    }
  });
  // Two threads at a time save the same id: exactly one commits, and the
  // other is Busy (both ran at once) or AlreadyExists (it came later).
  std::thread racers([&] {
    for (int r = 0; r < kRaces; ++r) {
      const std::string id = "race/" + std::to_string(r);
      std::barrier start(2);
      Status result[2];
      std::thread other([&] {
        start.arrive_and_wait();
        result[1] = SaveContent(store, id, 2, false);
      });
      start.arrive_and_wait();
      result[0] = SaveContent(store, id, 1, false);
      other.join();
      const int ok = result[0].ok() + result[1].ok();
      const Status& loser = result[0].ok() ? result[1] : result[0];
      if (ok != 1 || !(loser.IsBusy() || loser.IsAlreadyExists())) {
        errors.Add("race on " + id,
                   Status::Internal(result[0].ToString() + " / " +
                                    result[1].ToString()));
      }
      busy += loser.IsBusy();
      commits.Add();
    }
  });

  for (int t = 0; t < kSavers; ++t) threads[t].join();
  racers.join();
  saving = false;
  commits.Finish();
  for (std::thread& t : threads) {
    if (t.joinable()) t.join();
  }
  std::printf(
      "%d saves, %d loads verified, %d loads found their checkpoint "
      "deleted, %d deletes, %d GCs, %d of %d racing saves Busy\n",
      kSavers * saves + 2 * kRaces, loads.load(), vanished.load(),
      deletes.load(), gcs.load(), busy.load(), kRaces);

  EXPECT_THAT(errors.list(), IsEmpty());
  EXPECT_GT(loads.load(), 0);
  EXPECT_GT(deletes.load(), 0);
  EXPECT_GT(gcs.load(), 0);
  ASSERT_OK(store_->CollectGarbage());
  ExpectEveryListedCheckpointLoads();
  ASSERT_OK_AND_ASSIGN(std::vector<CheckpointInfo> list, store_->List());
  EXPECT_EQ(list.size(), kKeep + kRaces);
  std::set<std::string> cfs{"default"};
  for (const CheckpointInfo& info : list) cfs.insert(info.column_family);
  CloseStore();
  EXPECT_EQ(ColumnFamiliesOnDisk(store_path()), cfs)
      << "leaked column families";
  EXPECT_THAT(StagingEntries(store_path()), IsEmpty());
}

// Holds its save inside WriteData until released, so that another save of
// the same id surely runs meanwhile.
class HeldWriter final : public StorageWriterWrapper {
 public:
  HeldWriter(StorageWriter* target, std::shared_future<void> release)
      : StorageWriterWrapper(target), release_(std::move(release)) {}
  std::future<Result<std::vector<WriteResult>>> WriteData(
      const SavePlan& plan, SavePlanner& planner) override {
    entered_.set_value();
    release_.wait();
    return target()->WriteData(plan, planner);
  }
  std::future<void> entered() { return entered_.get_future(); }

 private:
  std::promise<void> entered_;
  std::shared_future<void> release_;
};

TEST_F(StressTest, SecondSaveOfAnIdBeingSavedIsBusyAndHarmsNothing) {
  ASSERT_OK_AND_ASSIGN(auto writer, store_->NewWriter(ContentWriterOptions(1)));
  std::promise<void> release;
  HeldWriter held(writer.get(), release.get_future().share());
  std::future<void> entered = held.entered();
  const GeneratedContent first = MakeContent("same", 1);
  std::future<Result<Metadata>> saving = std::async(std::launch::async, [&] {
    return Save(first.dict, held, {.checkpoint_id = "same"});
  });
  entered.wait();
  for (bool overwrite : {false, true}) {
    EXPECT_THAT(SaveContent(*store_, "same", 2, overwrite),
                StatusIs(StatusCode::kBusy,
                         HasSubstr("checkpoint 'same' is already being saved")))
        << "overwrite " << overwrite;
  }
  release.set_value();
  ASSERT_OK(saving.get());

  ASSERT_OK_AND_ASSIGN(uint64_t gen, LoadAndVerifyContent(*store_, "same"));
  EXPECT_EQ(gen, 1u);
  // The refused saves left nothing behind.
  ASSERT_OK_AND_ASSIGN(GcReport gc, store_->CollectGarbage(/*dry_run=*/true));
  EXPECT_THAT(gc.dropped_column_families, IsEmpty());
  EXPECT_THAT(gc.deleted_staging_files, IsEmpty());
  // Once the first is committed, a save without overwrite is refused as
  // such; with it, it replaces the checkpoint.
  EXPECT_THAT(SaveContent(*store_, "same", 2, false),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("'same'")));
  ASSERT_OK(SaveContent(*store_, "same", 3, true));
  ASSERT_OK_AND_ASSIGN(gen, LoadAndVerifyContent(*store_, "same"));
  EXPECT_EQ(gen, 3u);
}

}  // namespace
}  // namespace rocksdcp::testing
