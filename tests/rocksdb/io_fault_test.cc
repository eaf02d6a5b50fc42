// I/O faults: a small save, an overwrite, a delete and a load, each run
// once per file-system operation it makes, with that operation failing:
// ENOSPC from then on (a full disk stays full), and EIO once. Each time
//   - the call fails with IOError naming the operation and the checkpoint
//     (or succeeds, when only best-effort cleanup failed, and then did all
//     it should);
//   - the checkpoints committed before still load bit-exact, at once and
//     after the store reopens;
//   - a retry on the same store succeeds, or fails with IOError saying the
//     store must be reopened (after a failed RocksDB write: see
//     StoreImpl::StopLocked);
//   - the store reopens, GC leaves nothing behind, and a retry succeeds.
//
// ctest tests every operation of each call (about 200 runs, 20 s), so
// ROCKSDCP_FULL_FAULT_SWEEP=1 changes nothing here.

#include <filesystem>
#include <functional>
#include <iostream>

#include "rocksdb/fault_fs_fixture.h"

namespace rocksdcp::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// One call to sweep, and what the store holds after it.
struct Call {
  // What its errors must name: the operation and the checkpoint.
  std::string operation;
  std::string checkpoint;
  std::function<Status()> run;
  FaultFsStoreTest::Expected if_ok;
  FaultFsStoreTest::Expected if_failed;
};

class IoFaultTest : public FaultFsStoreTest {
 protected:
  // Every run starts from the same store: "base" and "victim" committed,
  // and what SaveMore adds.
  void SetUp() override {
    ASSERT_OK(OpenStore());
    ASSERT_OK(SaveSeed("base", 1, false));
    ASSERT_OK(SaveSeed("victim", 2, false));
    SaveMore();
    CloseStore();
    std::filesystem::copy(store_path(), template_path(),
                          std::filesystem::copy_options::recursive);
  }

  virtual void SaveMore() {}

  std::string template_path() const { return dir_.Sub("template"); }

  void ResetStore() {
    CloseStore();
    fs_->AssumeDurable();
    std::filesystem::remove_all(store_path());
    std::filesystem::copy(template_path(), store_path(),
                          std::filesystem::copy_options::recursive);
    ASSERT_OK(OpenStore());
  }

  // The committed checkpoints of `expected` load as they should.
  ::testing::AssertionResult CommittedLoad(const Expected& expected) {
    for (const auto& [id, allowed] : expected) {
      std::vector<uint64_t> seeds;
      for (const auto& seed : allowed) {
        if (seed) seeds.push_back(*seed);
      }
      if (seeds.size() != allowed.size()) continue;  // May be absent.
      if (auto r = LoadsAsOneOf(id, seeds); !r) return r;
    }
    return ::testing::AssertionSuccess();
  }

  void Sweep(const Call& call) {
    for (const bool enospc : {true, false}) {
      const FaultType type = enospc ? FaultType::kNoSpace : FaultType::kIOError;
      ResetStore();
      fs_->ResetCounts();
      ASSERT_OK(call.run());
      const uint64_t total = fs_->Count(kOpAll);
      ASSERT_GT(total, 0u);
      for (uint64_t n = 1; n <= total; n += SweepStride(total, 1000)) {
        ResetStore();
        const uint64_t injected = fs_->faults_injected();
        fs_->InjectFault(n, kOpAll, type, /*sticky=*/enospc);
        const Status s = call.run();
        fs_->ClearFault();
        if (fs_->faults_injected() == injected) {
          // Background work made this run shorter: no fault was hit.
          ASSERT_OK(s);
          continue;
        }
        faults_ += fs_->faults_injected() - injected;
        SCOPED_TRACE(std::string(enospc ? "ENOSPC" : "EIO") + " at " +
                     fs_->last_fault() + " (operation " + std::to_string(n) +
                     " of " + std::to_string(total) + ")");
        bool in_doubt = false;
        if (s.ok()) {
          ++succeeded_;
        } else {
          ++failed_;
          EXPECT_THAT(s,
                      StatusIs(StatusCode::kIOError,
                               AllOf(HasSubstr(call.operation),
                                     HasSubstr("'" + call.checkpoint + "'"))));
          if (enospc) {
            EXPECT_THAT(s.message(), HasSubstr("No space left on device"));
          }
          // The synced write of a commit or delete failed: its WAL record
          // may be whole all the same, and then reopening replays it.
          in_doubt = s.message().find("writing metadata and catalog entry") !=
                         std::string::npos ||
                     s.message().find("removing its catalog entry") !=
                         std::string::npos;
        }
        ASSERT_TRUE(CommittedLoad(s.ok() ? call.if_ok : call.if_failed));

        // The fault has cleared: a retry on the same store.
        Status retry;
        if (!s.ok()) {
          retry = call.run();
          if (retry.ok()) {
            ++retried_in_place_;
          } else {
            ++retried_after_reopen_;
            if (first_stuck_.empty()) first_stuck_ = retry.ToString();
            EXPECT_THAT(retry,
                        StatusIs(StatusCode::kIOError,
                                 AllOf(HasSubstr("'" + call.checkpoint + "'"),
                                       HasSubstr("reopen"))));
          }
        }
        const bool done = s.ok() || retry.ok();
        CloseStore();
        ASSERT_OK(OpenStore());
        Expected reopened = done ? call.if_ok : call.if_failed;
        if (!done && in_doubt) {
          for (const auto& [id, seeds] : call.if_ok) {
            reopened[id].insert(reopened[id].end(), seeds.begin(), seeds.end());
          }
        }
        ASSERT_TRUE(CheckStore(reopened));
        if (!done) {
          // In doubt, the first attempt may have done it all already:
          // then a save finds it exists, a delete finds it gone.
          const Status again = call.run();
          if (!in_doubt) {
            EXPECT_OK(again);
          } else if (!again.ok()) {
            ++in_doubt_done_;
            EXPECT_THAT(again.code(),
                        ::testing::AnyOf(StatusCode::kAlreadyExists,
                                         StatusCode::kNotFound))
                << again.ToString();
          }
          ASSERT_TRUE(CheckStore(call.if_ok));
        }
      }
    }
  }

  void TearDown() override {
    std::cout << "[ FIGURES  ] fault points: " << failed_ + succeeded_
              << ", failed operations: " << faults_
              << "; calls failed: " << failed_
              << " (retry on the same store succeeded: " << retried_in_place_
              << ", needed a reopen: " << retried_after_reopen_
              << "), succeeded despite the fault: " << succeeded_
              << "; in doubt and found done after the reopen: "
              << in_doubt_done_ << "\n";
    if (!first_stuck_.empty()) {
      std::cout << "[ FIGURES  ] first retry that needed a reopen: "
                << first_stuck_ << "\n";
    }
    RecordProperty("fault_points", static_cast<int>(failed_ + succeeded_));
    RecordProperty("failed_operations", static_cast<int>(faults_));
  }

  uint64_t faults_ = 0;
  uint64_t failed_ = 0;
  uint64_t succeeded_ = 0;
  uint64_t retried_in_place_ = 0;
  uint64_t retried_after_reopen_ = 0;
  uint64_t in_doubt_done_ = 0;
  std::string first_stuck_;
};

TEST_F(IoFaultTest, Save) {
  Sweep(Call{"save of",
             "new",
             [this] { return SaveSeed("new", 3, false); },
             {{"base", {1}}, {"victim", {2}}, {"new", {3}}},
             {{"base", {1}}, {"victim", {2}}, {"new", {std::nullopt}}}});
}

TEST_F(IoFaultTest, Overwrite) {
  Sweep(Call{"save of",
             "victim",
             [this] { return SaveSeed("victim", 4, /*overwrite=*/true); },
             {{"base", {1}}, {"victim", {4}}},
             {{"base", {1}}, {"victim", {2}}}});
}

TEST_F(IoFaultTest, Delete) {
  Sweep(Call{"delete of",
             "victim",
             [this] { return store_->Delete("victim"); },
             {{"base", {1}}, {"victim", {std::nullopt}}},
             {{"base", {1}}, {"victim", {2}}}});
}

TEST_F(IoFaultTest, Load) {
  ExampleState loaded;
  Sweep(Call{"load of",
             "base",
             [this, &loaded] {
               ROCKSDCP_RETURN_IF_ERROR(LoadInto("base", &loaded));
               EXPECT_TRUE(IsExampleState(loaded, 1));
               return Status::OK();
             },
             {{"base", {1}}, {"victim", {2}}},
             {{"base", {1}}, {"victim", {2}}}});
}

// An incremental save: every piece a reference to "victim"'s.
TEST_F(IoFaultTest, IncrementalSave) {
  Sweep(Call{"save of",
             "new",
             [this] { return SaveSeed("new", 2, false, 1, "victim"); },
             {{"base", {1}}, {"victim", {2}}, {"new", {2}}},
             {{"base", {1}}, {"victim", {2}}, {"new", {std::nullopt}}}});
}

// The template also holds "incr", saved against "victim": all of it
// references "victim"'s column family.
class IoFaultReferencedTest : public IoFaultTest {
 protected:
  void SaveMore() override {
    ASSERT_OK(SaveSeed("incr", 2, false, 1, "victim"));
  }
};

// Deleting a referenced base: its column family stays for "incr".
TEST_F(IoFaultReferencedTest, DeleteOfAReferencedBase) {
  Sweep(Call{"delete of",
             "victim",
             [this] { return store_->Delete("victim"); },
             {{"base", {1}}, {"victim", {std::nullopt}}, {"incr", {2}}},
             {{"base", {1}}, {"victim", {2}}, {"incr", {2}}}});
}

// Materialize copies what "incr" references; failed or not, "incr" and
// "victim" load as they did.
TEST_F(IoFaultReferencedTest, Materialize) {
  Sweep(Call{"materialize of",
             "incr",
             [this] { return store_->Materialize("incr").status(); },
             {{"base", {1}}, {"victim", {2}}, {"incr", {2}}},
             {{"base", {1}}, {"victim", {2}}, {"incr", {2}}}});
}

// A load reads what is not in the page cache with O_DIRECT
// (RocksDBReaderOptions::direct_span_bytes); where the file system refuses
// O_DIRECT it reads the same pieces through the page cache, and loads the
// same bytes.
class DirectReadFallbackTest : public FaultFsStoreTest {
 protected:
  // Loads "d" cold into `into`; returns the reader's stats.
  ReaderStats LoadCold(OwnedTensor* into) {
    CloseStore();
    DropFromPageCache(store_path());
    EXPECT_OK(OpenStore());
    RocksDBReaderOptions options;
    options.read_threads = 1;
    options.prefetch_bytes = 0;  // It would bring the files into the cache.
    auto reader = store_->NewReader(options);
    EXPECT_OK(reader.status());
    if (!reader.ok()) return {};
    StateDict sd{{"t", into->view}};
    EXPECT_OK(Load(&sd, **reader, {.checkpoint_id = "d"}));
    return (*reader)->stats();
  }
};

TEST_F(DirectReadFallbackTest,
       PiecesARefusedODirectWouldReadComeFromThePageCache) {
  ASSERT_OK(OpenStore());
  // 4 MiB in pieces of 64 KiB.
  OwnedTensor big = RandomTensor(DType::kUInt8, {64, 65536}, 7);
  RocksDBWriterOptions wo;
  wo.max_piece_bytes = 65536;
  ASSERT_OK_AND_ASSIGN(auto writer, store_->NewWriter(wo));
  ASSERT_OK(Save({{"t", big.view}}, *writer, {.checkpoint_id = "d"}).status());
  writer.reset();

  fs_->RefuseDirectReads(true);
  OwnedTensor refused = ZeroTensor(DType::kUInt8, {64, 65536});
  const ReaderStats without = LoadCold(&refused);
  EXPECT_TRUE(SameTensor(refused.view, big.view));
  EXPECT_EQ(without.bytes_read_direct, 0u);
  EXPECT_EQ(without.pieces_read_in_place, 64u);
  EXPECT_EQ(without.in_place_misses, 0u);

  // The same cold load where O_DIRECT is taken reads with it.
  fs_->RefuseDirectReads(false);
  OwnedTensor taken = ZeroTensor(DType::kUInt8, {64, 65536});
  const ReaderStats with = LoadCold(&taken);
  EXPECT_TRUE(SameTensor(taken.view, big.view));
  if (with.bytes_read_direct == 0) {
    GTEST_SKIP() << "no O_DIRECT under " << store_path();
  }
  EXPECT_EQ(with.pieces_read_in_place, 64u);
}

}  // namespace
}  // namespace rocksdcp::testing
