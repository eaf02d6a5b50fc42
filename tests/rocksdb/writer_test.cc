// RocksDBStorageWriter's write path: how many threads WriteData uses, its
// memory budget and buffer reuse change how a checkpoint is written, never
// what is written; and a failure on any thread fails WriteData cleanly.

#include "rocksdb/writer.h"

#include <rocksdb/options.h>
#include <rocksdb/sst_file_reader.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "rocksdb/catalog_codec.h"
#include "rocksdb/store_fixture.h"

namespace rocksdcp::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::SizeIs;

// Forwards to a DefaultSavePlanner, except that resolving `fail_fqn` fails;
// counts ResolveData and ReleaseData calls, from any thread.
class CountingPlanner : public SavePlannerWrapper {
 public:
  explicit CountingPlanner(std::string fail_fqn = "")
      : SavePlannerWrapper(&inner_), fail_fqn_(std::move(fail_fqn)) {}

  Result<ResolvedData> ResolveData(const WriteItem& item) override {
    if (item.index.fqn == fail_fqn_) {
      return Status::IOError("injected failure");
    }
    ++resolved;
    return SavePlannerWrapper::ResolveData(item);
  }
  void ReleaseData(const WriteItem& item) override { ++released; }

  std::atomic<int> resolved{0};
  std::atomic<int> released{0};

 private:
  DefaultSavePlanner inner_;
  const std::string fail_fqn_;
};

// What one WriteData wrote: every key and value of its staging files, in
// key order, and the files themselves.
struct Written {
  std::map<std::string, std::string> entries;
  std::set<std::string> files;
  int items = 0;
};

class WriterTest : public StoreTest {
 protected:
  // 60 tensors of mixed dtypes, shapes (a transposed view among them) and
  // sizes, several of them many pieces long at max_piece_bytes = 4096, a
  // 0-d one, and byte items, one of them empty. Contents depend on `seed`.
  struct MixedState {
    std::vector<OwnedTensor> tensors;
    std::vector<int64_t> transposed_strides;
    StateDict dict;
  };
  static MixedState Mixed(uint64_t seed) {
    MixedState s;
    s.tensors.reserve(64);
    const DType dtypes[] = {DType::kFloat32, DType::kBFloat16, DType::kInt8,
                            DType::kFloat64, DType::kComplex64};
    for (int i = 0; i < 60; ++i) {
      const int64_t rows = 1 + (i * 7) % 23, cols = 1 + (i * 13) % 97;
      s.tensors.push_back(
          RandomTensor(dtypes[i % 5], {rows, cols}, seed * 1000 + i));
      s.dict["layer." + std::to_string(i) + ".w"] = s.tensors.back().view;
    }
    // A transposed view: saved as its contiguous projection.
    s.tensors.push_back(RandomTensor(DType::kFloat32, {40, 30}, seed));
    TensorView t = s.tensors.back().view;
    t.sizes = {30, 40};
    t.strides = {1, 30};
    s.dict["layer.t"] = t;
    s.tensors.push_back(RandomTensor(DType::kInt64, {}, seed + 7));
    s.dict["step"] = s.tensors.back().view;
    for (int i = 0; i < 6; ++i) {
      s.dict["opt/" + std::to_string(i)] = RandomBytes(i * 3000, seed + i);
    }
    return s;
  }

  static RocksDBWriterOptions Options(int threads) {
    RocksDBWriterOptions o;
    o.max_piece_bytes = 4096;
    o.write_threads = threads;
    return o;
  }

  // Runs a single-rank save's steps up to WriteData (no Finish), then reads
  // back the staging files WriteData's results name.
  Result<Written> WriteStaging(const StateDict& sd,
                               const RocksDBWriterOptions& options,
                               SavePlanner* planner = nullptr) {
    ROCKSDCP_ASSIGN_OR_RETURN(auto writer, store_->NewWriter(options));
    CountingPlanner default_planner;
    SavePlanner& p = planner ? *planner : default_planner;
    ROCKSDCP_RETURN_IF_ERROR(writer->Reset("staged"));
    ROCKSDCP_RETURN_IF_ERROR(
        p.SetUpPlanner(&sd, writer->GetStorageMeta(), true));
    ROCKSDCP_RETURN_IF_ERROR(writer->SetUpStorageWriter(true, 0, 1));
    ROCKSDCP_ASSIGN_OR_RETURN(SavePlan local, p.CreateLocalPlan());
    ROCKSDCP_ASSIGN_OR_RETURN(local, writer->PrepareLocalPlan(local));
    ROCKSDCP_ASSIGN_OR_RETURN(GlobalSavePlan global,
                              p.CreateGlobalPlan({local}));
    ROCKSDCP_ASSIGN_OR_RETURN(std::vector<SavePlan> plans,
                              writer->PrepareGlobalPlan(global.plans));
    ROCKSDCP_ASSIGN_OR_RETURN(SavePlan final_plan, p.FinishPlan(plans[0]));
    auto results = writer->WriteData(final_plan, p).get();
    if (!results.ok()) {
      last_staging_files_ = StagingSstFiles();
      return results.status();
    }
    Written out;
    out.items = static_cast<int>(results->size());
    for (const WriteResult& r : *results) {
      ROCKSDCP_ASSIGN_OR_RETURN(format::StorageInfo info,
                                format::DecodeStorageInfo(r.storage_data));
      out.files.insert(info.file);
    }
    for (const std::string& file : out.files) {
      rocksdb::SstFileReader reader{rocksdb::Options()};
      if (!reader.Open(file).ok()) return Status::IOError("open " + file);
      std::unique_ptr<rocksdb::Iterator> it(
          reader.NewIterator(rocksdb::ReadOptions()));
      std::string previous;
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        const std::string key = it->key().ToString();
        if (!previous.empty() && key <= previous) {
          return Status::Corruption("keys out of order in " + file);
        }
        previous = key;
        if (!out.entries.emplace(key, it->value().ToString()).second) {
          return Status::Corruption("key " + key + " in two files");
        }
      }
    }
    return out;
  }

  // The .sst files under the store's staging directory.
  std::vector<std::string> StagingSstFiles() const {
    std::vector<std::string> found;
    const fs::path root = fs::path(store_path()) / "staging";
    std::error_code ec;
    for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end;
         it.increment(ec)) {
      if (it->path().extension() == ".sst") found.push_back(it->path());
    }
    return found;
  }

  // What Save committed, less what differs from one save to the next by
  // design: the save id (storage_meta).
  // Without what tells where in its files each item lies, which depends on
  // how the items were cut into files.
  static Metadata Comparable(Metadata m) {
    m.storage_meta.reset();
    for (auto& [index, value] : m.storage_data) {
      auto info = format::DecodeStorageInfo(value, format::PieceHashes::kRead);
      EXPECT_TRUE(info.ok()) << info.status().ToString();
      if (!info.ok()) continue;
      info->piece_offsets.clear();
      info->file_first_key_xxh3 = 0;
      value = format::EncodeStorageInfo(*info);
    }
    return m;
  }

  // Saves a tensor through `writer` (reset already) as the only rank of
  // a save, set up as rank 0 of `world_size`: DCP's steps, one by one.
  static Status SaveOneRank(RocksDBStorageWriter& writer, int world_size) {
    OwnedTensor t = RandomTensor(DType::kFloat32, {8}, world_size);
    StateDict sd{{"w", t.view}};
    DefaultSavePlanner planner;
    ROCKSDCP_RETURN_IF_ERROR(
        planner.SetUpPlanner(&sd, writer.GetStorageMeta(), true));
    ROCKSDCP_RETURN_IF_ERROR(writer.SetUpStorageWriter(true, 0, world_size));
    ROCKSDCP_ASSIGN_OR_RETURN(SavePlan local, planner.CreateLocalPlan());
    ROCKSDCP_ASSIGN_OR_RETURN(GlobalSavePlan global,
                              planner.CreateGlobalPlan({local}));
    ROCKSDCP_ASSIGN_OR_RETURN(auto plans,
                              writer.PrepareGlobalPlan(global.plans));
    ROCKSDCP_ASSIGN_OR_RETURN(SavePlan final_plan,
                              planner.FinishPlan(plans[0]));
    ROCKSDCP_ASSIGN_OR_RETURN(auto results,
                              writer.WriteData(final_plan, planner).get());
    return writer.Finish(&global.metadata, {results});
  }

  std::vector<std::string> last_staging_files_;
};

TEST_F(WriterTest, ThreadsWriteTheSameKeysAndValues) {
  MixedState s = Mixed(1);
  ASSERT_OK_AND_ASSIGN(Written one, WriteStaging(s.dict, Options(1)));
  EXPECT_THAT(one.files, SizeIs(1));
  for (int threads : {2, 3, 7}) {
    ASSERT_OK_AND_ASSIGN(Written many, WriteStaging(s.dict, Options(threads)));
    EXPECT_THAT(many.files, SizeIs(threads));
    EXPECT_EQ(many.items, one.items);
    // Byte for byte: keys, piece headers, checksums and data.
    EXPECT_TRUE(many.entries == one.entries) << threads << " threads";
  }
}

TEST_F(WriterTest, ThreadsSaveCheckpointsThatLoadBitExact) {
  MixedState s = Mixed(2);
  ASSERT_OK_AND_ASSIGN(Metadata one, SaveDict(s.dict, "one", Options(1)));
  ASSERT_OK_AND_ASSIGN(Metadata four, SaveDict(s.dict, "four", Options(4)));
  // storage_data no longer names files once committed, so it is equal too.
  EXPECT_TRUE(Comparable(one) == Comparable(four));
  for (const std::string id : {"one", "four"}) {
    MixedState into = Mixed(2);
    for (OwnedTensor& t : into.tensors) {
      std::fill(t.bytes.begin(), t.bytes.end(), 0);
    }
    for (auto& [fqn, v] : into.dict) {
      if (auto* b = std::get_if<std::string>(&v)) b->assign(b->size(), 'x');
    }
    ASSERT_OK(LoadDict(&into.dict, id));
    for (const auto& [fqn, v] : s.dict) {
      if (const auto* t = std::get_if<TensorView>(&v)) {
        EXPECT_TRUE(SameTensor(std::get<TensorView>(into.dict[fqn]), *t))
            << id << " " << fqn;
      } else {
        EXPECT_EQ(std::get<std::string>(into.dict[fqn]),
                  std::get<std::string>(v))
            << id << " " << fqn;
      }
    }
  }
}

TEST_F(WriterTest, ReuseOnAndOffWriteIdenticalBytes) {
  MixedState s = Mixed(3);
  RocksDBWriterOptions reuse = Options(2), fresh = Options(2);
  fresh.reuse_buffers = false;
  ASSERT_OK_AND_ASSIGN(Written a, WriteStaging(s.dict, reuse));
  ASSERT_OK_AND_ASSIGN(Written b, WriteStaging(s.dict, fresh));
  EXPECT_FALSE(a.entries.empty());
  EXPECT_TRUE(a.entries == b.entries);
}

TEST_F(WriterTest, OneWriterSavesAgainWithItsReusedBuffers) {
  ASSERT_OK_AND_ASSIGN(auto writer, store_->NewWriter(Options(3)));
  for (uint64_t seed : {4, 5}) {
    MixedState s = Mixed(seed);
    const std::string id = "again-" + std::to_string(seed);
    ASSERT_OK(Save(s.dict, *writer, {.checkpoint_id = id}));
    MixedState into = Mixed(seed + 100);
    ASSERT_OK(LoadDict(&into.dict, id));
    for (size_t i = 0; i < s.tensors.size(); ++i) {
      EXPECT_EQ(into.tensors[i].bytes, s.tensors[i].bytes) << i;
    }
  }
}

// The coordinator's metadata and commit buffers, kept between saves: a
// metadata larger than any before it outgrows them, a smaller one follows
// into buffers that held more, and each checkpoint reads back exactly
// what its save committed. Without reuse_buffers, fresh ones each time.
TEST_F(WriterTest, OneWriterCommitsMetadataOfEveryCountWithItsBuffers) {
  for (bool reuse : {true, false}) {
    RocksDBWriterOptions o = Options(2);
    o.reuse_buffers = reuse;
    ASSERT_OK_AND_ASSIGN(auto writer, store_->NewWriter(o));
    for (int items : {3, 3000, 7}) {
      SCOPED_TRACE(std::to_string(items) + " items, reuse " +
                   std::to_string(reuse));
      StateDict sd;
      for (int i = 0; i < items; ++i) {
        sd["optim.state." + std::to_string(i) + ".step"] =
            std::string(1 + i % 40, static_cast<char>('a' + items % 26));
      }
      const std::string id =
          "n" + std::to_string(items) + (reuse ? "-reuse" : "-fresh");
      ASSERT_OK_AND_ASSIGN(Metadata saved,
                           Save(sd, *writer, {.checkpoint_id = id}));
      ASSERT_OK_AND_ASSIGN(auto reader, store_->NewReader());
      ASSERT_OK(reader->Reset(id));
      ASSERT_OK_AND_ASSIGN(Metadata read, reader->ReadMetadata());
      EXPECT_EQ(read.state_dict_metadata.size(), static_cast<size_t>(items));
      EXPECT_TRUE(Comparable(read) == Comparable(saved));
      StateDict into = sd;
      for (auto& [fqn, v] : into) std::get<std::string>(v).assign(1, '?');
      ASSERT_OK(LoadDict(&into, id));
      for (const auto& [fqn, v] : sd) {
        EXPECT_EQ(std::get<std::string>(into[fqn]), std::get<std::string>(v))
            << fqn;
      }
    }
  }
  ExpectVerifies();
}

TEST_F(WriterTest, MemoryBudgetCapsTheThreads) {
  MixedState s = Mixed(6);
  RocksDBWriterOptions o = Options(8);
  o.memory_budget =
      2 * RocksDBStorageWriterImpl::ThreadMemory(o, o.max_piece_bytes);
  ASSERT_OK_AND_ASSIGN(Written w, WriteStaging(s.dict, o));
  EXPECT_THAT(w.files, SizeIs(2));
}

TEST_F(WriterTest, BudgetTooSmallForOnePieceIsInvalidArgument) {
  RocksDBWriterOptions o;
  o.max_piece_bytes = 64 << 20;
  o.memory_budget = 64 << 20;
  EXPECT_THAT(store_->NewWriter(o),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("memory_budget"),
                             HasSubstr("max_piece_bytes"))));
  // Enough for one thread is enough.
  o.memory_budget =
      RocksDBStorageWriterImpl::ThreadMemory(o, o.max_piece_bytes);
  EXPECT_OK(store_->NewWriter(o));
}

TEST_F(WriterTest, BadThreadCountOrBufferSizeIsInvalidArgument) {
  RocksDBWriterOptions o;
  o.write_threads = -1;
  EXPECT_THAT(store_->NewWriter(o), StatusIs(StatusCode::kInvalidArgument,
                                             HasSubstr("write_threads")));
  o.write_threads = 0;
  o.writable_file_max_buffer_size = 0;
  EXPECT_THAT(store_->NewWriter(o),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("writable_file_max_buffer_size")));
}

TEST_F(WriterTest, FailureOnOneThreadNamesTheItemAndLeavesNoStagingFiles) {
  MixedState s = Mixed(7);
  // The last item in key order, so that every thread has written files by
  // the time its thread fails, most likely; either way none may remain.
  CountingPlanner planner("step");
  EXPECT_THAT(
      WriteStaging(s.dict, Options(4), &planner),
      StatusIs(StatusCode::kIOError,
               AllOf(HasSubstr("item 'step@"), HasSubstr("injected failure"))));
  EXPECT_THAT(last_staging_files_, SizeIs(0));
  // Every item resolved was released, on whichever thread.
  EXPECT_EQ(planner.released.load(), planner.resolved.load());
}

TEST_F(WriterTest, FailedSaveCommitsNothing) {
  MixedState s = Mixed(8);
  CountingPlanner planner("layer.17.w");
  ASSERT_OK_AND_ASSIGN(auto writer, store_->NewWriter(Options(3)));
  EXPECT_THAT(
      Save(s.dict, *writer, {.checkpoint_id = "f", .planner = &planner}),
      StatusIs(StatusCode::kIOError, HasSubstr("item 'layer.17.w@")));
  EXPECT_THAT(StagingSstFiles(), SizeIs(0));
  EXPECT_THAT(store_->Info("f"),
              StatusIs(StatusCode::kNotFound, HasSubstr("f")));
}

TEST_F(WriterTest, EveryResolvedItemIsReleased) {
  MixedState s = Mixed(9);
  CountingPlanner planner;
  ASSERT_OK_AND_ASSIGN(Written w, WriteStaging(s.dict, Options(3), &planner));
  EXPECT_EQ(planner.resolved.load(), w.items);
  EXPECT_EQ(planner.released.load(), w.items);
}

TEST_F(WriterTest, ProgressFromSeveralThreadsIsMonotonicAndComplete) {
  MixedState s = Mixed(10);
  std::vector<Progress> seen;  // The callback runs one call at a time.
  RocksDBWriterOptions o = Options(4);
  o.progress = [&](const Progress& p) { seen.push_back(p); };
  ASSERT_OK(SaveDict(s.dict, "p", o));
  ASSERT_FALSE(seen.empty());
  for (size_t i = 1; i < seen.size(); ++i) {
    EXPECT_GE(seen[i].bytes_done, seen[i - 1].bytes_done);
    EXPECT_GE(seen[i].items_done, seen[i - 1].items_done);
  }
  EXPECT_EQ(seen.back().bytes_done, seen.back().bytes_total);
  EXPECT_EQ(seen.back().items_done, seen.back().items_total);
  EXPECT_EQ(seen.back().items_total, s.dict.size());
}

TEST_F(WriterTest, DirectWritesSaveTheSameCheckpoint) {
  MixedState s = Mixed(11);
  RocksDBWriterOptions direct = Options(2);
  direct.use_direct_writes = true;
  direct.writable_file_max_buffer_size = 64 << 10;
  auto written = WriteStaging(s.dict, direct);
  if (!written.ok() && written.status().message().find("Invalid argument") !=
                           std::string::npos) {
    GTEST_SKIP() << "no O_DIRECT here: " << written.status().ToString();
  }
  ASSERT_OK(written);
  ASSERT_OK_AND_ASSIGN(Written buffered, WriteStaging(s.dict, Options(2)));
  EXPECT_TRUE(written->entries == buffered.entries);
}

// torch's driver asks for a save's StorageMeta before it sets the writer
// up: the save id it was told is the one the checkpoint records.
TEST_F(WriterTest, ResetWithSaveIdRecordsTheCallersSaveId) {
  ASSERT_OK_AND_ASSIGN(auto writer, store_->NewWriter());
  ASSERT_OK(writer->ResetWithSaveId("c", "0123abcd-x_Y"));
  EXPECT_EQ(writer->GetStorageMeta()->save_id, "0123abcd-x_Y");
  ASSERT_OK(SaveOneRank(*writer, 1));
  ASSERT_OK_AND_ASSIGN(auto reader, store_->NewReader());
  ASSERT_OK(reader->Reset("c"));
  ASSERT_OK_AND_ASSIGN(Metadata md, reader->ReadMetadata());
  EXPECT_EQ(md.storage_meta->save_id, "0123abcd-x_Y");
}

TEST_F(WriterTest, ResetWithSaveIdRefusesIdsThatCannotNameAFile) {
  ASSERT_OK_AND_ASSIGN(auto writer, store_->NewWriter());
  for (const char* bad : {"", "../x", "a b", "x/y"}) {
    EXPECT_THAT(
        writer->ResetWithSaveId("c", bad),
        StatusIs(StatusCode::kInvalidArgument,
                 HasSubstr("is not 1 to 64 characters of [0-9A-Za-z_-]")))
        << bad;
  }
  EXPECT_THAT(writer->ResetWithSaveId("c", std::string(65, 'a')),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("save id")));
}

// The checkpoint records the ranks the coordinator planned, whatever world
// size it was told: torch's driver tells a writer its rank only.
TEST_F(WriterTest, TheWorldSizeRecordedIsTheNumberOfPlannedRanks) {
  ASSERT_OK_AND_ASSIGN(auto writer, store_->NewWriter());
  ASSERT_OK(writer->Reset("c"));
  ASSERT_OK(SaveOneRank(*writer, 4));
  ASSERT_OK_AND_ASSIGN(CheckpointInfo info, store_->Info("c"));
  EXPECT_EQ(info.world_size, 1);
}

}  // namespace
}  // namespace rocksdcp::testing
