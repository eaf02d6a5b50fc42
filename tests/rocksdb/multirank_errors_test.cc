// A failure injected on one rank at any step of save or load reaches every
// rank as one error naming the failing rank and step; a failed save commits
// nothing, leaves no staging files behind, and the store still saves.
// These mirror DCP's test_save_error_handling / test_load_error_handling.

#include <functional>
#include <thread>

#include "rocksdb/store_fixture.h"

namespace rocksdcp::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Where and how to fail: the call `step` on rank `rank`.
struct Fault {
  std::string step;
  int rank = -1;
  bool async = false;  // For write_data/read_data: fail in the future.
  bool Hits(const std::string& s, int r) const {
    return s == step && r == rank;
  }
  Status Injected() const {
    return Status::IOError("injected fault at " + step);
  }
};

// Forwards to a real RocksDB writer, failing where the Fault says.
class FaultyWriter final : public StorageWriterWrapper {
 public:
  FaultyWriter(StorageWriter* w, Fault f)
      : StorageWriterWrapper(w), f_(std::move(f)) {}
  Status SetUpStorageWriter(bool c, int r, int ws) override {
    rank_ = r;
    if (f_.Hits("set_up_storage_writer", r)) return f_.Injected();
    return target()->SetUpStorageWriter(c, r, ws);
  }
  Result<SavePlan> PrepareLocalPlan(SavePlan p) override {
    if (f_.Hits("prepare_local_plan", rank_)) return f_.Injected();
    return target()->PrepareLocalPlan(std::move(p));
  }
  Result<std::vector<SavePlan>> PrepareGlobalPlan(
      std::vector<SavePlan> p) override {
    if (f_.Hits("prepare_global_plan", rank_)) return f_.Injected();
    return target()->PrepareGlobalPlan(std::move(p));
  }
  std::future<Result<std::vector<WriteResult>>> WriteData(
      const SavePlan& plan, SavePlanner& planner) override {
    if (!f_.Hits("write_data", rank_))
      return target()->WriteData(plan, planner);
    if (!f_.async) {
      return ReadyFuture(Result<std::vector<WriteResult>>(f_.Injected()));
    }
    // Writes for real on another thread, then fails.
    return std::async(std::launch::async, [this, &plan, &planner] {
      auto written = target()->WriteData(plan, planner).get();
      return written.ok() ? Result<std::vector<WriteResult>>(f_.Injected())
                          : written;
    });
  }
  Status Finish(Metadata* m,
                const std::vector<std::vector<WriteResult>>& r) override {
    if (f_.Hits("finish", rank_)) return f_.Injected();
    return target()->Finish(m, r);
  }

 private:
  Fault f_;
  int rank_ = -1;
};

// Forwards to a real RocksDB reader, failing where the Fault says. Its rank
// is known from construction: read_metadata comes before set-up.
class FaultyReader final : public StorageReaderWrapper {
 public:
  FaultyReader(StorageReader* r, Fault f, int rank)
      : StorageReaderWrapper(r), f_(std::move(f)), rank_(rank) {}
  Result<Metadata> ReadMetadata() override {
    if (f_.Hits("read_metadata", rank_)) return f_.Injected();
    return target()->ReadMetadata();
  }
  Status SetUpStorageReader(const Metadata& m, bool c, int r, int ws) override {
    if (f_.Hits("set_up_storage_reader", rank_)) return f_.Injected();
    return target()->SetUpStorageReader(m, c, r, ws);
  }
  Result<LoadPlan> PrepareLocalPlan(LoadPlan p) override {
    if (f_.Hits("prepare_local_plan", rank_)) return f_.Injected();
    return target()->PrepareLocalPlan(std::move(p));
  }
  Result<std::vector<LoadPlan>> PrepareGlobalPlan(
      std::vector<LoadPlan> p) override {
    if (f_.Hits("prepare_global_plan", rank_)) return f_.Injected();
    return target()->PrepareGlobalPlan(std::move(p));
  }
  std::future<Status> ReadData(const LoadPlan& plan,
                               LoadPlanner& planner) override {
    if (f_.Hits("read_data", rank_)) return ReadyFuture(f_.Injected());
    return target()->ReadData(plan, planner);
  }

 private:
  Fault f_;
  int rank_;
};

constexpr int kRanks = 3;
constexpr int kCoordinator = 1;  // Not rank 0, on purpose.

struct Case {
  std::string step;
  int rank;
  bool async;
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return info.param.step + "_rank" + std::to_string(info.param.rank) +
         (info.param.async ? "_async" : "");
}

class ErrorOnAnyRankTest : public StoreTest,
                           public ::testing::WithParamInterface<Case> {
 protected:
  // Each rank saves (or loads) its own ExampleStateDict, as if replicated.
  std::vector<Status> SaveAll(const std::string& id, const Fault& fault) {
    std::vector<Status> results(kRanks);
    std::vector<ExampleState> states;
    for (int r = 0; r < kRanks; ++r) states.push_back(ExampleStateDict(r));
    RunRanks(kRanks, kCoordinator, [&](int r, Collective& c) {
      auto writer = store_->NewWriter({.max_piece_bytes = 4096});
      ASSERT_OK(writer);
      FaultyWriter faulty(writer->get(), fault);
      // Distinct fqns per rank, so every rank writes data.
      StateDict sd;
      for (auto& [k, v] : states[r].dict)
        sd["r" + std::to_string(r) + "." + k] = v;
      results[r] =
          Save(sd, faulty, {.checkpoint_id = id, .collective = &c}).status();
    });
    return results;
  }
};

TEST_P(ErrorOnAnyRankTest, SaveFailsOnEveryRankAndCommitsNothing) {
  const Case& tc = GetParam();
  std::vector<Status> results =
      SaveAll("ck", {.step = tc.step, .rank = tc.rank, .async = tc.async});
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_THAT(
        results[r],
        StatusIs(StatusCode::kIOError,
                 AllOf(HasSubstr("save of checkpoint 'ck' failed on "
                                 "rank " +
                                 std::to_string(tc.rank) + " at " + tc.step),
                       HasSubstr("injected fault"))))
        << "rank " << r;
  }
  ASSERT_OK_AND_ASSIGN(auto list, store_->List());
  EXPECT_THAT(list, IsEmpty());
  ASSERT_OK_AND_ASSIGN(GcReport gc, store_->CollectGarbage(/*dry_run=*/true));
  EXPECT_THAT(gc.deleted_staging_files, IsEmpty());
  EXPECT_THAT(gc.dropped_column_families, IsEmpty());
  // The store still saves, and the id is free.
  results = SaveAll("ck", {});
  for (int r = 0; r < kRanks; ++r) EXPECT_OK(results[r]) << "rank " << r;
  ASSERT_OK_AND_ASSIGN(list, store_->List());
  EXPECT_EQ(list.size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(
    Steps, ErrorOnAnyRankTest,
    ::testing::Values(Case{"set_up_storage_writer", 0, false},
                      Case{"set_up_storage_writer", kCoordinator, false},
                      Case{"prepare_local_plan", 2, false},
                      Case{"prepare_global_plan", kCoordinator, false},
                      Case{"write_data", 2, false}, Case{"write_data", 0, true},
                      Case{"write_data", kCoordinator, true},
                      Case{"finish", kCoordinator, false}),
    CaseName);

class LoadErrorOnAnyRankTest : public StoreTest,
                               public ::testing::WithParamInterface<Case> {};

TEST_P(LoadErrorOnAnyRankTest, LoadFailsOnEveryRank) {
  const Case& tc = GetParam();
  ExampleState saved = ExampleStateDict(1);
  ASSERT_OK(SaveDict(saved.dict, "ck"));
  const Fault fault{.step = tc.step, .rank = tc.rank};
  std::vector<Status> results(kRanks);
  std::vector<ExampleState> into(kRanks);
  RunRanks(kRanks, kCoordinator, [&](int r, Collective& c) {
    auto reader = store_->NewReader();
    ASSERT_OK(reader);
    FaultyReader faulty(reader->get(), fault, r);
    into[r] = EmptyExampleStateDict();
    results[r] =
        Load(&into[r].dict, faulty, {.checkpoint_id = "ck", .collective = &c});
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_THAT(
        results[r],
        StatusIs(StatusCode::kIOError,
                 AllOf(HasSubstr("load of checkpoint 'ck' failed on "
                                 "rank " +
                                 std::to_string(tc.rank) + " at " + tc.step),
                       HasSubstr("injected fault"))))
        << "rank " << r;
  }
  // The checkpoint is untouched and loads.
  ExampleState again = EmptyExampleStateDict();
  ASSERT_OK(LoadDict(&again.dict, "ck"));
  EXPECT_TRUE(IsExampleState(again, 1));
}

INSTANTIATE_TEST_SUITE_P(
    Steps, LoadErrorOnAnyRankTest,
    ::testing::Values(Case{"read_metadata", 2, false},
                      Case{"set_up_storage_reader", 0, false},
                      Case{"prepare_local_plan", kCoordinator, false},
                      Case{"prepare_global_plan", kCoordinator, false},
                      Case{"read_data", 2, false}),
    CaseName);

TEST_F(StoreTest, FailuresOnSeveralRanksAreAllNamed) {
  std::vector<Status> results(kRanks);
  std::vector<ExampleState> states;
  for (int r = 0; r < kRanks; ++r) states.push_back(ExampleStateDict(r));
  RunRanks(kRanks, kCoordinator, [&](int r, Collective& c) {
    auto writer = store_->NewWriter();
    ASSERT_OK(writer);
    // Ranks 0 and 2 fail at different steps.
    Fault fault{.step = r == 0 ? "prepare_local_plan" : "set_up_storage_writer",
                .rank = r == 1 ? -1 : r};
    FaultyWriter faulty(writer->get(), fault);
    results[r] =
        Save(states[r].dict, faulty, {.checkpoint_id = "ck", .collective = &c})
            .status();
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_THAT(results[r],
                StatusIs(StatusCode::kIOError,
                         AllOf(HasSubstr("failed on 2 ranks"),
                               HasSubstr("rank 0 at prepare_local_plan"),
                               HasSubstr("rank 2 at set_up_storage_writer"))))
        << "rank " << r;
  }
}

}  // namespace
}  // namespace rocksdcp::testing
