// MpiCollective under mpirun: the collectives themselves, then DCP's
// protocol with ranks as processes sharing one Store (the coordinator's
// process holds it read-write, the others open it as followers to save and
// read-only to load). The same scenarios run over threads in
// tests/rocksdb/multirank_test.cc and multirank_errors_test.cc.
//
// Every rank runs every test, so a test must make the same collective calls
// on every rank whatever happens: checks that could differ between ranks
// are agreed on (EveryRank) before a rank returns early. Works for any
// world size >= 2; ctest runs it with 2 and 4 processes.

#include <mpi.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "format/metadata_codec.h"
#include "rocksdb/store_fixture.h"
#include "rocksdcp/mpi_collective.h"

namespace rocksdcp::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// MpiCollective::Create called before MPI_Init, by main.
Status create_before_init_status = Status::Internal("main did not run it");

// Splits `n` into `parts` contiguous ranges, the first ones one larger.
std::pair<int64_t, int64_t> Part(int64_t n, int parts, int i) {
  int64_t at = 0;
  for (int p = 0; p < i; ++p) at += n / parts + (p < n % parts ? 1 : 0);
  return {at, n / parts + (i < n % parts ? 1 : 0)};
}

// Owns the MPI communicator of the fixture and a directory every rank sees.
class MpiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(world_, MpiCollective::Create(0));
    if (world_->world_size() < 2) GTEST_SKIP() << "needs 2 or more ranks";
    // One node: rank 0's /tmp is everyone's.
    std::string path;
    if (world_->rank() == 0) {
      char pattern[] = "/tmp/rocksdcp-mpi-XXXXXX";
      if (mkdtemp(pattern) != nullptr) path = pattern;
    }
    ASSERT_OK_AND_ASSIGN(dir_, world_->Broadcast(path));
    ASSERT_FALSE(dir_.empty()) << "rank 0 could not make a temp dir";
  }

  void TearDown() override {
    if (world_ == nullptr) return;
    store_.reset();  // Every rank lets go of the store before it goes.
    EXPECT_OK(world_->Barrier());
    if (world_->rank() == 0 && !dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }

  int rank() const { return world_->rank(); }
  int world_size() const { return world_->world_size(); }
  std::string store_path() const { return dir_ + "/store"; }

  // True on every rank iff `ok` is true on every rank: assert on this, not
  // on `ok`, so that no rank leaves a test while the others wait for it.
  bool EveryRank(bool ok) {
    auto all = world_->AllGather(ok ? "1" : "0");
    if (!all.ok()) return false;
    for (const std::string& v : *all) {
      if (v != "1") return false;
    }
    return true;
  }

  std::unique_ptr<MpiCollective> Ranks(int coordinator) {
    auto c = MpiCollective::Create(coordinator);
    EXPECT_OK(c);
    return c.ok() ? std::move(c).value() : nullptr;
  }

  std::unique_ptr<MpiCollective> world_;
  std::string dir_;
  std::unique_ptr<Store> store_;
};

// ---- The collectives. ----

class MpiCollectiveTest : public MpiTest {
 protected:
  // Rank r's message for a call: rank 0's is empty, the last rank's is
  // 1 MiB, the others' sizes differ, and every byte depends on `salt`.
  std::string Payload(int r, uint64_t salt) const {
    size_t size = 1000 * r + 7;
    if (r == 0) size = 0;
    if (r == world_size() - 1) size = 1 << 20;
    return RandomBytes(size, salt * 1000 + r);
  }
  std::vector<std::string> AllPayloads(uint64_t salt) const {
    std::vector<std::string> all;
    for (int r = 0; r < world_size(); ++r) all.push_back(Payload(r, salt));
    return all;
  }
};

TEST_F(MpiCollectiveTest, CreateNeedsMpiInitialised) {
  EXPECT_THAT(create_before_init_status,
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("MPI_Init")));
}

TEST_F(MpiCollectiveTest, CreateRejectsABadCoordinator) {
  EXPECT_THAT(MpiCollective::Create(-1),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("-1")));
  EXPECT_THAT(
      MpiCollective::Create(world_size()),
      StatusIs(StatusCode::kInvalidArgument,
               HasSubstr("not in [0, " + std::to_string(world_size()))));
}

TEST_F(MpiCollectiveTest, RoundTripsWithTheLastRankAsCoordinator) {
  const int last = world_size() - 1;
  auto c = Ranks(last);
  ASSERT_TRUE(EveryRank(c != nullptr));
  EXPECT_EQ(c->rank(), rank());
  EXPECT_EQ(c->world_size(), world_size());
  EXPECT_EQ(c->coordinator_rank(), last);
  EXPECT_EQ(c->is_coordinator(), rank() == last);

  // Gather: the coordinator gets every message in rank order. (Messages
  // are compared with ==: gtest would print all of a 1 MiB mismatch.)
  auto gathered = c->Gather(Payload(rank(), 1));
  ASSERT_TRUE(EveryRank(gathered.ok())) << gathered.status().ToString();
  if (c->is_coordinator()) {
    EXPECT_TRUE(*gathered == AllPayloads(1));
  } else {
    EXPECT_THAT(*gathered, IsEmpty());
  }

  // Scatter: each rank gets its own message.
  auto scattered = c->Scatter(c->is_coordinator() ? AllPayloads(2)
                                                  : std::vector<std::string>());
  ASSERT_TRUE(EveryRank(scattered.ok())) << scattered.status().ToString();
  EXPECT_TRUE(*scattered == Payload(rank(), 2));

  // Broadcast: the coordinator's message replaces everyone else's.
  auto broadcast =
      c->Broadcast(c->is_coordinator() ? Payload(last, 3) : "not sent");
  ASSERT_TRUE(EveryRank(broadcast.ok())) << broadcast.status().ToString();
  EXPECT_TRUE(*broadcast == Payload(last, 3));
  auto empty = c->Broadcast(c->is_coordinator() ? "" : "not sent");
  ASSERT_TRUE(EveryRank(empty.ok())) << empty.status().ToString();
  EXPECT_EQ(*empty, "");

  // AllGather: every rank gets every message in rank order.
  auto all = c->AllGather(Payload(rank(), 4));
  ASSERT_TRUE(EveryRank(all.ok())) << all.status().ToString();
  EXPECT_TRUE(*all == AllPayloads(4));

  EXPECT_OK(c->Barrier());
}

TEST_F(MpiCollectiveTest, BadScatterFailsOnEveryRankAndLeavesTheGroupUsable) {
  auto c = Ranks(world_size() - 1);
  ASSERT_TRUE(EveryRank(c != nullptr));
  // One message too few: the coordinator's error, and no rank left waiting.
  std::vector<std::string> messages;
  if (c->is_coordinator()) messages.resize(world_size() - 1);
  auto got = c->Scatter(messages);
  if (c->is_coordinator()) {
    EXPECT_THAT(got, StatusIs(StatusCode::kInvalidArgument,
                              HasSubstr("one message per rank")));
  } else {
    EXPECT_THAT(got, StatusIs(StatusCode::kAborted,
                              HasSubstr("the coordinator (rank " +
                                        std::to_string(world_size() - 1))));
  }
  auto all = c->AllGather(std::to_string(rank()));
  ASSERT_OK(all);
  EXPECT_EQ(all->back(), std::to_string(world_size() - 1));
}

// ---- DCP's protocol with ranks as processes. ----

// Forwards to a real writer; write_data fails on rank `fail_rank`.
class FaultyWriter final : public StorageWriterWrapper {
 public:
  FaultyWriter(StorageWriter* w, int fail_rank)
      : StorageWriterWrapper(w), fail_(fail_rank) {}
  Status SetUpStorageWriter(bool c, int r, int ws) override {
    rank_ = r;
    return StorageWriterWrapper::SetUpStorageWriter(c, r, ws);
  }
  std::future<Result<std::vector<WriteResult>>> WriteData(
      const SavePlan& plan, SavePlanner& planner) override {
    if (rank_ != fail_) return target()->WriteData(plan, planner);
    return ReadyFuture(Result<std::vector<WriteResult>>(
        Status::IOError("injected fault at write_data")));
  }

 private:
  const int fail_;
  int rank_ = -1;
};

class MpiCheckpointTest : public MpiTest {
 protected:
  static constexpr int64_t kRows = 10;
  static constexpr int64_t kCols = 6;

  MpiCheckpointTest()
      : global_(RandomTensor(DType::kFloat32, {kRows, kCols}, 42)),
        replicated_(RandomTensor(DType::kInt64, {3}, 43)) {}

  // The coordinator's process opens (or creates) the store read-write;
  // after a barrier the others open it as followers, which needs it to
  // exist.
  void OpenForSave(Collective& c) {
    Status s;
    if (c.is_coordinator()) s = Open({});
    ASSERT_OK(c.Barrier());
    if (!c.is_coordinator()) s = Open({.follower = true});
    ASSERT_TRUE(EveryRank(s.ok())) << s.ToString();
  }

  // The coordinator keeps its read-write store; the others reopen it
  // read-only, which shows them what was committed until now.
  void OpenForLoad(Collective& c) {
    Status s;
    if (!c.is_coordinator()) {
      store_.reset();
      s = Open({.read_only = true});
    }
    ASSERT_TRUE(EveryRank(s.ok())) << s.ToString();
  }

  Status Open(const StoreOptions& options) {
    auto opened = Store::Open(store_path(), options);
    if (!opened.ok()) return opened.status();
    store_ = std::move(opened).value();
    return Status::OK();
  }

  // This rank's rows of "w" (none when there are more ranks than rows),
  // the replicated "bias" and the byte item "step".
  StateDict RowShard(const Collective& c) {
    const auto [first, rows] = Part(kRows, c.world_size(), c.rank());
    ShardedTensor w;
    w.dtype = DType::kFloat32;
    w.global_size = {kRows, kCols};
    if (rows > 0) {
      w.local_shards.push_back(
          {{first, 0}, global_.view.Narrow({first, 0}, {rows, kCols})});
    }
    return {{"w", w},
            {"bias", replicated_.view},
            {"step", std::string("step=300")}};
  }

  // Saves every rank's RowShard; write_data fails on rank `fail_rank`.
  Result<Metadata> SaveRows(Collective& c, const std::string& id,
                            int fail_rank = -1) {
    auto writer = store_->NewWriter({.max_piece_bytes = 16});
    if (!writer.ok()) return writer.status();
    FaultyWriter faulty(writer->get(), fail_rank);
    return Save(RowShard(c), faulty, {.checkpoint_id = id, .collective = &c});
  }

  // Every rank got the same metadata as this one.
  void ExpectSameOnEveryRank(const Metadata& mine) {
    auto all = world_->AllGather(format::EncodeMetadata(mine));
    ASSERT_OK(all);
    for (size_t r = 0; r < all->size(); ++r) {
      auto theirs = format::DecodeMetadata((*all)[r]);
      ASSERT_OK(theirs) << "rank " << r;
      EXPECT_TRUE(*theirs == mine) << "rank " << r << " vs rank " << rank();
    }
  }

  // Loads `id` column-wise (this rank's columns of "w", none when there
  // are more ranks than columns) and checks every byte.
  void ExpectLoadsByColumns(Collective& c, const std::string& id) {
    auto reader = store_->NewReader();
    ASSERT_TRUE(EveryRank(reader.ok())) << reader.status().ToString();
    const auto [first, cols] = Part(kCols, c.world_size(), c.rank());
    OwnedTensor dest = ZeroTensor(DType::kFloat32, {kRows, cols});
    ShardedTensor w;
    w.dtype = DType::kFloat32;
    w.global_size = {kRows, kCols};
    if (cols > 0) w.local_shards.push_back({{0, first}, dest.view});
    OwnedTensor bias = ZeroTensor(DType::kInt64, {3});
    StateDict sd{{"w", w}, {"bias", bias.view}, {"step", std::string()}};
    ASSERT_OK(Load(&sd, **reader, {.checkpoint_id = id, .collective = &c}));
    EXPECT_TRUE(
        SameTensor(dest.view, global_.view.Narrow({0, first}, {kRows, cols})));
    EXPECT_TRUE(SameTensor(bias.view, replicated_.view));
    EXPECT_EQ(std::get<std::string>(sd["step"]), "step=300");
  }

  // On the coordinator: `id` was saved by every rank, with "bias" and
  // "step" (the same on every rank) stored once.
  void ExpectStoredOnce(const std::string& id) {
    ASSERT_OK_AND_ASSIGN(CheckpointInfo info, store_->Info(id));
    EXPECT_EQ(info.world_size, world_size());
    // One "w" item per rank holding rows, then "bias" and "step".
    const int holders = std::min<int>(world_size(), kRows);
    EXPECT_EQ(info.items, static_cast<uint64_t>(holders + 2));
  }

  // On the coordinator: the committed checkpoints are `ids`.
  void ExpectCommitted(const std::vector<std::string>& ids) {
    ASSERT_OK_AND_ASSIGN(auto list, store_->List());
    std::vector<std::string> listed;
    for (const CheckpointInfo& info : list) listed.push_back(info.id);
    EXPECT_EQ(listed, ids);
  }

  // Rank-specific checks live in helpers like these: an ASSERT there
  // leaves the helper, not the test, so the rank still makes the test's
  // later collective calls.

  // The whole scenario with `coordinator` holding the store read-write.
  void SaveRowsLoadColumns(int coordinator) {
    auto c = Ranks(coordinator);
    ASSERT_TRUE(EveryRank(c != nullptr));
    ASSERT_NO_FATAL_FAILURE(OpenForSave(*c));
    auto saved = SaveRows(*c, "ck");
    ASSERT_TRUE(EveryRank(saved.ok())) << saved.status().ToString();
    EXPECT_TRUE(saved->storage_meta.has_value() &&
                saved->storage_meta->checkpoint_id == "ck");
    ExpectSameOnEveryRank(*saved);
    if (c->is_coordinator()) ExpectStoredOnce("ck");
    ASSERT_NO_FATAL_FAILURE(OpenForLoad(*c));
    ExpectLoadsByColumns(*c, "ck");
  }

  OwnedTensor global_;
  OwnedTensor replicated_;
};

TEST_F(MpiCheckpointTest, RowShardedSaveLoadsResharded) {
  SaveRowsLoadColumns(/*coordinator=*/0);
}

TEST_F(MpiCheckpointTest, CoordinatorNotRankZero) {
  SaveRowsLoadColumns(/*coordinator=*/world_size() - 1);
}

TEST_F(MpiCheckpointTest, FailureOnOneRankReachesAll) {
  auto c = Ranks(0);
  ASSERT_TRUE(EveryRank(c != nullptr));
  ASSERT_NO_FATAL_FAILURE(OpenForSave(*c));
  EXPECT_THAT(SaveRows(*c, "ck", /*fail_rank=*/1),
              StatusIs(StatusCode::kIOError,
                       AllOf(HasSubstr("failed on rank 1 at write_data"),
                             HasSubstr("injected fault"))));
  if (c->is_coordinator()) ExpectCommitted({});
  // Nothing of the failed save is in the way of a clean one.
  auto saved = SaveRows(*c, "ck");
  EXPECT_TRUE(EveryRank(saved.ok())) << saved.status().ToString();
  if (c->is_coordinator()) ExpectCommitted({"ck"});
}

TEST_F(MpiCheckpointTest, SecondProcessOpeningReadWriteIsBusy) {
  Status s;
  if (rank() == 0) s = Open({});
  ASSERT_OK(world_->Barrier());
  ASSERT_TRUE(EveryRank(s.ok())) << s.ToString();
  if (rank() != 0) {
    EXPECT_THAT(
        Store::Open(store_path()),
        StatusIs(StatusCode::kBusy, HasSubstr("locked by another process")));
  }
  // Rank 0 holds the store until every other rank has tried.
  EXPECT_OK(world_->Barrier());
}

// On ranks other than 0, prints only failures, tagged with the rank, so
// that the output is rank 0's plus whatever went wrong elsewhere.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  // Noted here: UnitTest::current_test_info() would deadlock in
  // OnTestPartResult, which gtest calls holding the lock it takes.
  void OnTestStart(const ::testing::TestInfo& test) override {
    test_ = std::string(test.test_suite_name()) + "." + test.name();
  }
  void OnTestEnd(const ::testing::TestInfo&) override { test_ = "(global)"; }
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::cerr << "[rank " << rank_ << "] " << test_ << ": "
              << (result.file_name() ? result.file_name() : "?") << ":"
              << result.line_number() << ": " << result.summary() << "\n";
  }

 private:
  const int rank_;
  std::string test_ = "(global)";
};

}  // namespace
}  // namespace rocksdcp::testing

int main(int argc, char** argv) {
  using rocksdcp::testing::create_before_init_status;
  create_before_init_status = rocksdcp::MpiCollective::Create().status();
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ::testing::InitGoogleTest(&argc, argv);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new rocksdcp::testing::FailurePrinter(rank));
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  // Every rank exits non-zero if any rank failed, whichever one mpirun
  // reports.
  int any_failed = failed;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && any_failed && !failed) {
    std::cerr << "FAILED on another rank (see its [rank N] lines above)\n";
  }
  MPI_Finalize();
  return any_failed;
}
