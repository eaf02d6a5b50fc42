#include "rocksdb/fault_fs_fixture.h"

#include <rocksdb/db.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "rocksdb/store_impl.h"

namespace rocksdcp::testing {

namespace fs = std::filesystem;

FaultFsStoreTest::FaultFsStoreTest()
    : fs_(std::make_shared<FaultFs>(dir_.path().string())) {}

Status FaultFsStoreTest::OpenStore(const StoreOptions& options) {
  store_.reset();
  ROCKSDCP_ASSIGN_OR_RETURN(store_,
                            StoreImpl::Open(store_path(), options, fs_));
  return Status::OK();
}

Status FaultFsStoreTest::SaveSeed(const std::string& id, uint64_t seed,
                                  bool overwrite, int write_threads,
                                  const std::string& base) {
  RocksDBWriterOptions options;
  options.overwrite = overwrite;
  options.base = base;
  // Pieces under 4 KiB share data blocks: each save's file is one block.
  // Debian's RocksDB 7.8 asserts (aborts) when the read of a staging
  // file's last data block fails while IngestExternalFiles looks up its
  // largest key (ExternalSstFileIngestionJob::GetIngestedFileInfo reads
  // key() after SeekToLast without checking Valid()), which only a file of
  // several blocks reads apart from its first; these sweeps fail every
  // read in turn, and would abort there.
  options.max_piece_bytes = 3000;
  options.write_threads = write_threads;
  if (compressed_) options.compression = Compression::kBytePlaneZstd;
  ROCKSDCP_ASSIGN_OR_RETURN(auto writer, store_->NewWriter(options));
  const ExampleState state = ExampleStateDict(seed, compressed_);
  SaveOptions so;
  so.checkpoint_id = id;
  return Save(state.dict, *writer, so).status();
}

Status FaultFsStoreTest::LoadInto(const std::string& id, ExampleState* out) {
  *out = EmptyExampleStateDict();
  RocksDBReaderOptions options;
  options.read_threads = 1;
  ROCKSDCP_ASSIGN_OR_RETURN(auto reader, store_->NewReader(options));
  LoadOptions lo;
  lo.checkpoint_id = id;
  return Load(&out->dict, *reader, lo);
}

::testing::AssertionResult FaultFsStoreTest::LoadsAsOneOf(
    const std::string& id, const std::vector<uint64_t>& seeds) {
  ExampleState loaded;
  if (Status s = LoadInto(id, &loaded); !s.ok()) {
    return ::testing::AssertionFailure()
           << "checkpoint '" << id << "' does not load: " << s.ToString();
  }
  std::string why;
  for (uint64_t seed : seeds) {
    auto same = IsExampleState(loaded, seed, compressed_);
    if (same) return same;
    why += " seed " + std::to_string(seed) + ": " + same.message() + ";";
  }
  return ::testing::AssertionFailure()
         << "checkpoint '" << id << "' loads wrong bytes:" << why;
}

::testing::AssertionResult FaultFsStoreTest::CheckStore(
    const Expected& expected) {
  auto fail = [] { return ::testing::AssertionFailure(); };
  auto listed = store_->List();
  if (!listed.ok()) return fail() << "List: " << listed.status().ToString();
  std::set<std::string> ids, live_cfs;
  for (const CheckpointInfo& info : *listed) {
    ids.insert(info.id);
    live_cfs.insert(info.column_family);
    live_cfs.insert(info.referenced_column_families.begin(),
                    info.referenced_column_families.end());
    auto e = expected.find(info.id);
    if (e == expected.end()) {
      return fail() << "the catalog lists '" << info.id
                    << "', which was never saved";
    }
    std::vector<uint64_t> seeds;
    for (const auto& seed : e->second) {
      if (seed) seeds.push_back(*seed);
    }
    if (seeds.empty()) {
      return fail() << "the catalog lists '" << info.id
                    << "', which was never committed";
    }
    if (auto r = LoadsAsOneOf(info.id, seeds); !r) return r;
  }
  for (const auto& [id, allowed] : expected) {
    const bool may_be_absent = std::find(allowed.begin(), allowed.end(),
                                         std::nullopt) != allowed.end();
    if (ids.count(id)) continue;
    if (!may_be_absent)
      return fail() << "committed checkpoint '" << id << "' is lost";
    auto info = store_->Info(id);
    if (info.status().code() != StatusCode::kNotFound) {
      return fail() << "'" << id << "' is not listed, but Info says "
                    << info.status().ToString();
    }
  }

  auto gc = store_->CollectGarbage();
  if (!gc.ok()) return fail() << "GC: " << gc.status().ToString();
  auto again = store_->CollectGarbage(/*dry_run=*/true);
  if (!again.ok()) return fail() << "GC: " << again.status().ToString();
  if (!again->dropped_column_families.empty() ||
      !again->deleted_staging_files.empty()) {
    return fail() << "GC left garbage behind";
  }
  std::error_code ec;
  for (fs::directory_iterator it(store_path() + "/staging", ec), end;
       !ec && it != end; it.increment(ec)) {
    return fail() << "GC left " << it->path() << " in the staging area";
  }
  std::vector<std::string> cfs;
  rocksdb::Status s =
      rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), store_path(), &cfs);
  if (!s.ok()) return fail() << "ListColumnFamilies: " << s.ToString();
  for (const std::string& cf : cfs) {
    if (cf != rocksdb::kDefaultColumnFamilyName && !live_cfs.count(cf)) {
      return fail() << "GC left orphan column family '" << cf << "'";
    }
  }

  // The store still takes a save, which loads back; the check then removes
  // it, so that the store holds what it held.
  const std::string fresh = "after-check";
  if (Status st = SaveSeed(fresh, 999, /*overwrite=*/true); !st.ok()) {
    return fail() << "a fresh save fails: " << st.ToString();
  }
  if (auto r = LoadsAsOneOf(fresh, {999}); !r) return r;
  if (Status st = store_->Delete(fresh); !st.ok()) {
    return fail() << "deleting the fresh save: " << st.ToString();
  }
  return ::testing::AssertionSuccess();
}

uint64_t SweepStride(uint64_t total, uint64_t points) {
  const char* full = std::getenv("ROCKSDCP_FULL_FAULT_SWEEP");
  if (full != nullptr && std::string(full) == "1") return 1;
  if (kSanitized) points /= kSanitizerSweepDivisor;
  return std::max<uint64_t>(1, total / std::max<uint64_t>(1, points));
}

}  // namespace rocksdcp::testing
