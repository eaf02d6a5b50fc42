#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <system_error>

#include "format/catalog_codec.h"
#include "keys/keys.h"
#include "rocksdb/reader.h"
#include "rocksdb/rocksdb_status.h"
#include "util/file_lock.h"
#include "util/text.h"
#include "rocksdb/store_impl.h"
#include "rocksdb/writer.h"

namespace rocksdcp {

using util::Quote;
using util::RandomHex;

namespace fs = std::filesystem;

namespace {

constexpr char kStagingDirName[] = "staging";

int64_t NowUnixMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool IsLockError(const rocksdb::Status& s) {
  const std::string msg = s.ToString();
  return s.IsIOError() && (msg.find("LOCK") != std::string::npos ||
                           msg.find("lock") != std::string::npos);
}

}  // namespace

rocksdb::Options CheckpointColumnFamilyOptions(
    std::shared_ptr<rocksdb::Cache> block_cache) {
  rocksdb::Options options;
  options.compression = rocksdb::kNoCompression;
  options.bottommost_compression = rocksdb::kNoCompression;
  options.disable_auto_compactions = true;
  rocksdb::BlockBasedTableOptions table;
  // A piece is one value of up to max_piece_bytes; it becomes its own
  // block whatever this is. Small blocks keep the index of small items
  // fine-grained.
  table.block_size = 16 << 10;
  // Every read verifies the block checksum over the whole piece. Debian's
  // librocksdb is built for baseline x86-64: its CRC32c is the software
  // one (1.6 GB/s) and its XXH3, the default, runs at 4.5 GB/s on blocks
  // of 1 MiB and more, the slowest step of a warm load; its XXH64 runs at
  // 22 GB/s. Files written earlier keep their own type: readers handle all.
  table.checksum = rocksdb::kxxHash64;
  if (block_cache) table.block_cache = std::move(block_cache);
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  return options;
}

StoreImpl::StoreImpl(std::string path, StoreOptions options,
                     std::shared_ptr<rocksdb::FileSystem> fs)
    : path_(std::move(path)),
      options_(options),
      staging_root_((fs::path(path_) / kStagingDirName).string()),
      fs_(std::move(fs)),
      env_(rocksdb::NewCompositeEnv(fs_)) {}

StoreImpl::~StoreImpl() {
  cfs_.clear();
  if (db_ && default_cf_ != nullptr) {
    db_->DestroyColumnFamilyHandle(default_cf_).PermitUncheckedError();
  }
  if (db_) db_->Close().PermitUncheckedError();
}

Result<std::unique_ptr<Store>> Store::Open(const std::string& path,
                                           const StoreOptions& options) {
  return StoreImpl::Open(path, options);
}

Result<std::unique_ptr<Store>> StoreImpl::Open(const std::string& path,
                                               const StoreOptions& options) {
  return Open(path, options, rocksdb::FileSystem::Default());
}

Result<std::unique_ptr<Store>> StoreImpl::Open(
    const std::string& path, const StoreOptions& options,
    std::shared_ptr<rocksdb::FileSystem> fs) {
  if (path.empty()) return Status::InvalidArgument("store path is empty");
  if (options.read_only && options.follower) {
    return Status::InvalidArgument(
        "store options read_only and follower exclude each other");
  }
  // Absolute and normalised: staging file paths cross between ranks, and
  // the coordinator checks them against its own staging directory.
  std::error_code ec;
  std::string canonical =
      fs::weakly_canonical(fs::absolute(path), ec).string();
  if (ec) canonical = fs::absolute(path).lexically_normal().string();
  std::unique_ptr<StoreImpl> store(
      new StoreImpl(canonical, options, std::move(fs)));
  ROCKSDCP_RETURN_IF_ERROR(store->OpenDB());
  return std::unique_ptr<Store>(std::move(store));
}

Status StoreImpl::OpenDB() {
  const std::string where = "store " + Quote(path_);
  const rocksdb::IOStatus current = fs_->FileExists(
      (fs::path(path_) / "CURRENT").string(), rocksdb::IOOptions(), nullptr);
  if (!current.ok() && !current.IsNotFound()) {
    return FromRocksDB(current, "cannot open " + where);
  }
  const bool exists = current.ok();
  if (!exists) {
    if (!options_.create_if_missing || options_.read_only ||
        options_.follower) {
      return Status::NotFound(where + " does not exist (no RocksDB there)");
    }
    // RocksDB fsyncs the files it creates in the store directory, and the
    // directory itself, but not the directory's own entry in its parent:
    // without this, a power loss after the first commit could lose the
    // whole store.
    ROCKSDCP_RETURN_IF_ERROR(CreateDirs(path_, /*durable_entries=*/true)
                                 .WithContext("cannot create " + where));
  }
  if (!options_.read_only) {
    // Not durable: a staging directory lost to a power loss only held
    // files that were never committed, and every open re-creates it.
    ROCKSDCP_RETURN_IF_ERROR(
        CreateDirs(staging_root_, /*durable_entries=*/false)
            .WithContext("cannot create staging directory of " + where));
  }
  if (options_.follower) return Status::OK();  // No DB: see StoreOptions.

  // One block cache for every checkpoint column family, of RocksDB's
  // default size, whose allocator recycles the buffers pieces are read into
  // (reads with fill_cache = false allocate through it too). A piece larger
  // than the cache is freed into the pool as soon as its reader lets go.
  BlockBufferPool::Options pool_options;
  pool_options.capacity_bytes = options_.read_buffer_pool_bytes;
  block_pool_ = std::make_shared<BlockBufferPool>(pool_options);
  rocksdb::LRUCacheOptions cache_options;
  cache_options.capacity = 8 << 20;
  cache_options.memory_allocator = block_pool_;
  block_cache_ = rocksdb::NewLRUCache(cache_options);

  rocksdb::DBOptions db_options;
  db_options.env = env_.get();
  db_options.create_if_missing = options_.create_if_missing;
  db_options.max_background_jobs = options_.max_background_jobs;
  // Checkpoint data arrives as ingested SST files; only the catalog and
  // metadata keys go through the WAL, each in a synced write.
  db_options.avoid_flush_during_shutdown = false;
  // Loads read pieces in key order, which is file order: leave the
  // kernel's readahead on (RocksDB's default advises POSIX_FADV_RANDOM on
  // every SST file, so each small block was its own synchronous disk read).
  db_options.advise_random_on_open = false;
  db_options.use_direct_reads = options_.use_direct_reads;
  // With paranoid_checks (RocksDB's default) Open opens every SST file and
  // refuses the whole store if one is truncated, missing or has a damaged
  // footer: one bad checkpoint would make every other one unreachable. A
  // read-only open never writes, so it opens without: the damaged
  // checkpoint's reads fail as Corruption, and the rest load. Read-write
  // opens keep the checks, which also stop writes after a write error.
  if (options_.read_only) db_options.paranoid_checks = false;

  std::vector<std::string> names;
  if (exists) {
    rocksdb::Status s =
        rocksdb::DB::ListColumnFamilies(db_options, path_, &names);
    if (!s.ok()) return FromRocksDB(s, "cannot list column families of " + where);
  } else {
    names.push_back(rocksdb::kDefaultColumnFamilyName);
  }

  const rocksdb::Options cf_options =
      CheckpointColumnFamilyOptions(block_cache_);
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& name : names) {
    if (name == rocksdb::kDefaultColumnFamilyName) {
      descriptors.emplace_back(name, rocksdb::ColumnFamilyOptions());
    } else {
      descriptors.emplace_back(name, rocksdb::ColumnFamilyOptions(cf_options));
    }
  }

  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s =
      options_.read_only
          ? rocksdb::DB::OpenForReadOnly(db_options, path_, descriptors,
                                         &handles, &raw)
          : rocksdb::DB::Open(db_options, path_, descriptors, &handles, &raw);
  if (!s.ok()) {
    if (IsLockError(s)) {
      const bool same_process =
          s.ToString().find("current process") != std::string::npos;
      return Status::Busy(
          where +
          (same_process ? " is already open read-write in this process"
                        : " is locked by another process") +
          " (RocksDB's LOCK file is held; only one process may open a store "
          "read-write; open it with read_only = true to load or inspect)");
    }
    Status failed = FromRocksDB(s, "cannot open " + where);
    if (failed.IsCorruption() && !options_.read_only) {
      return Status::Corruption(
          failed.message() +
          " (open it with read_only = true to load the other checkpoints, "
          "and Verify to find the damaged one)");
    }
    return failed;
  }
  db_.reset(raw);
  rocksdb::DB* db = raw;
  for (rocksdb::ColumnFamilyHandle* h : handles) {
    if (h->GetName() == rocksdb::kDefaultColumnFamilyName) {
      default_cf_ = h;
      continue;
    }
    cfs_[h->GetName()] = std::shared_ptr<rocksdb::ColumnFamilyHandle>(
        h, [db](rocksdb::ColumnFamilyHandle* p) {
          db->DestroyColumnFamilyHandle(p).PermitUncheckedError();
        });
  }
  return Status::OK();
}

Result<std::map<std::string, CheckpointInfo>> StoreImpl::ReadCatalog() {
  std::map<std::string, CheckpointInfo> catalog;
  rocksdb::ReadOptions ro;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, default_cf_));
  const std::string prefix(keys::kCatalogPrefix);
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix);
       it->Next()) {
    const std::string key = it->key().ToString();
    auto entry = format::DecodeCatalogEntry(
        std::string_view(it->value().data(), it->value().size()));
    if (!entry.ok()) {
      return entry.status().WithContext("store " + Quote(path_) +
                                        ": catalog entry " + Quote(key));
    }
    ROCKSDCP_ASSIGN_OR_RETURN(std::string id, keys::ParseCatalogKey(key));
    if (entry->id != id) {
      return Status::Corruption("store " + Quote(path_) + ": catalog entry " +
                                Quote(key) + " names checkpoint " +
                                Quote(entry->id));
    }
    catalog.emplace(std::move(id), std::move(entry).value());
  }
  if (!it->status().ok()) {
    return FromRocksDB(it->status(), "store " + Quote(path_) + ": catalog scan");
  }
  return catalog;
}

Status StoreImpl::NeedDB(std::string_view what) const {
  if (db_) return Status::OK();
  return Status::FailedPrecondition(
      std::string(what) + ": store " + Quote(path_) +
      " is open as a follower (staging files only)");
}

Result<std::vector<CheckpointInfo>> StoreImpl::List() {
  ROCKSDCP_RETURN_IF_ERROR(NeedDB("list"));
  ROCKSDCP_ASSIGN_OR_RETURN(auto catalog, ReadCatalog());
  std::vector<CheckpointInfo> out;
  out.reserve(catalog.size());
  for (auto& [id, info] : catalog) out.push_back(std::move(info));
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.created_unix_micros < b.created_unix_micros;
  });
  return out;
}

Result<CheckpointInfo> StoreImpl::Info(std::string_view id) {
  ROCKSDCP_ASSIGN_OR_RETURN(CommittedCheckpoint c,
                            LookupCommitted(std::string(id)));
  return c.info;
}

namespace {

// The id as one path component: escaped as keys are, plus '/' and '.', so
// that the '.' before the save id is the only one.
std::string FileSafeId(std::string_view id) {
  std::string out;
  for (char c : keys::EscapeFqn(id)) {
    if (c == '/') {
      out += "%2F";
    } else if (c == '.') {
      out += "%2E";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string StagingDirName(std::string_view id, std::string_view save_id) {
  return FileSafeId(id) + "." + std::string(save_id);
}

bool StoreImpl::HasStagingDirFor(const std::string& id) const {
  const std::string prefix = FileSafeId(id) + ".";
  std::vector<std::string> names;
  // Unreadable counts as absent: this only picks a NotFound message.
  fs_->GetChildren(staging_root_, rocksdb::IOOptions(), &names, nullptr)
      .PermitUncheckedError();
  for (const std::string& name : names) {
    if (name.size() > prefix.size() && name.rfind(prefix, 0) == 0 &&
        name.find('.', prefix.size()) == std::string::npos) {
      return true;
    }
  }
  return false;
}

Result<CommittedCheckpoint> StoreImpl::LookupCommitted(const std::string& id) {
  ROCKSDCP_RETURN_IF_ERROR(NeedDB("lookup of checkpoint " + Quote(id)));
  ROCKSDCP_RETURN_IF_ERROR(RocksDBStorageWriter::ValidateCheckpointId(id));
  std::lock_guard<std::mutex> lock(mu_);
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), default_cf_,
                               keys::CatalogKey(id), &value);
  if (s.IsNotFound()) {
    const bool begun = cfs_.count(id) > 0 || saving_ids_.count(id) > 0 ||
                       HasStagingDirFor(id);
    if (begun) {
      return Status::NotFound(
          "checkpoint " + Quote(id) + " in store " + Quote(path_) +
          " was never committed (its save did not finish, or is still "
          "running); it cannot be loaded");
    }
    return Status::NotFound("checkpoint " + Quote(id) +
                            " not found in store " + Quote(path_));
  }
  if (!s.ok()) {
    return FromRocksDB(s, "checkpoint " + Quote(id) + ": reading catalog");
  }
  auto info = format::DecodeCatalogEntry(value);
  if (!info.ok()) {
    return info.status().WithContext("checkpoint " + Quote(id) +
                                     ": catalog entry");
  }
  auto it = cfs_.find(info->column_family);
  if (it == cfs_.end()) {
    return Status::Corruption("checkpoint " + Quote(id) +
                              ": catalog names column family " +
                              Quote(info->column_family) +
                              ", which the store does not have");
  }
  return CommittedCheckpoint{std::move(info).value(), it->second};
}

std::string StagingLockPath(const std::string& staging_dir) {
  return staging_dir + ".lock";
}

namespace {

// Whether `path` is a directory; nullopt if it does not exist, which is no
// error here (POSIX's IsDirectory reports it as an IOError, not NotFound).
Result<std::optional<bool>> IsDirectory(rocksdb::FileSystem& fs,
                                        const std::string& path) {
  const rocksdb::IOOptions io;
  rocksdb::IOStatus s = fs.FileExists(path, io, nullptr);
  if (s.IsNotFound()) return std::optional<bool>();
  bool is_dir = false;
  if (s.ok()) s = fs.IsDirectory(path, io, &is_dir, nullptr);
  if (!s.ok()) return FromRocksDB(s, "reading " + path);
  return std::optional<bool>(is_dir);
}

// Appends the paths of the regular files under `path` (itself, if it is
// one; nothing if it does not exist) to *files and their sizes to *bytes.
Status ListFilesUnder(rocksdb::FileSystem& fs, const std::string& path,
                      std::vector<std::string>* files, uint64_t* bytes) {
  const rocksdb::IOOptions io;
  ROCKSDCP_ASSIGN_OR_RETURN(std::optional<bool> is_dir, IsDirectory(fs, path));
  if (!is_dir) return Status::OK();
  rocksdb::IOStatus s;
  if (!*is_dir) {
    uint64_t size = 0;
    s = fs.GetFileSize(path, io, &size, nullptr);
    if (s.IsNotFound()) return Status::OK();
    if (!s.ok()) return FromRocksDB(s, "reading the size of " + path);
    files->push_back(path);
    *bytes += size;
    return Status::OK();
  }
  std::vector<std::string> children;
  s = fs.GetChildren(path, io, &children, nullptr);
  if (s.IsNotFound()) return Status::OK();
  if (!s.ok()) return FromRocksDB(s, "listing " + path);
  for (const std::string& child : children) {
    ROCKSDCP_RETURN_IF_ERROR(ListFilesUnder(
        fs, (fs::path(path) / child).string(), files, bytes));
  }
  return Status::OK();
}

// Removes `path`, a file or a directory with everything under it.
Status RemoveTree(rocksdb::FileSystem& fs, const std::string& path) {
  const rocksdb::IOOptions io;
  ROCKSDCP_ASSIGN_OR_RETURN(std::optional<bool> is_dir, IsDirectory(fs, path));
  if (!is_dir) return Status::OK();
  rocksdb::IOStatus s;
  if (*is_dir) {
    std::vector<std::string> children;
    s = fs.GetChildren(path, io, &children, nullptr);
    if (!s.ok()) return FromRocksDB(s, "listing " + path);
    for (const std::string& child : children) {
      ROCKSDCP_RETURN_IF_ERROR(
          RemoveTree(fs, (fs::path(path) / child).string()));
    }
    s = fs.DeleteDir(path, io, nullptr);
  } else {
    s = fs.DeleteFile(path, io, nullptr);
  }
  if (!s.ok() && !s.IsNotFound()) {
    return FromRocksDB(s, "cannot remove " + path);
  }
  return Status::OK();
}

}  // namespace

Status StoreImpl::RemoveStagingDir(const std::string& dir) const {
  return RemoveTree(*fs_, dir);
}

Status StoreImpl::CreateDirs(const std::string& dir,
                             bool durable_entries) const {
  const rocksdb::IOOptions io;
  fs::path path = fs::path(dir).lexically_normal();
  if (path.filename().empty()) path = path.parent_path();  // "a/b/" -> "a/b"
  const bool exists = fs_->FileExists(path.string(), io, nullptr).ok();
  if (!exists) {
    if (path.has_parent_path() && path.parent_path() != path) {
      ROCKSDCP_RETURN_IF_ERROR(
          CreateDirs(path.parent_path().string(), durable_entries));
    }
    rocksdb::IOStatus s = fs_->CreateDirIfMissing(path.string(), io, nullptr);
    if (!s.ok()) return FromRocksDB(s, "creating directory " + path.string());
  }
  // Existing, it may still be a crashed process's new directory, whose
  // entry never reached the disk: fsync its parent all the same.
  if (!durable_entries || !path.has_parent_path()) return Status::OK();
  rocksdb::IOStatus s;
  std::unique_ptr<rocksdb::FSDirectory> parent;
  const std::string parent_path = path.parent_path().string();
  s = fs_->NewDirectory(parent_path, io, &parent, nullptr);
  if (s.ok()) s = parent->Fsync(io, nullptr);
  if (s.ok()) s = parent->Close(io, nullptr);
  if (!s.ok()) return FromRocksDB(s, "syncing directory " + parent_path);
  return Status::OK();
}

Status StoreImpl::BeginSave(const std::string& id, bool claim_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (claim_id && !saving_ids_.insert(id).second) {
    return Status::Busy("checkpoint " + Quote(id) +
                        " is already being saved by another writer of store " +
                        Quote(path_));
  }
  return Status::OK();
}

void StoreImpl::EndSave(const std::string& id, bool claimed_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (claimed_id) saving_ids_.erase(id);
}

std::string StoreImpl::FreshColumnFamilyName(const std::string& id) const {
  auto taken = [this](const std::string& name) {
    return cfs_.count(name) > 0 || handleless_cfs_.count(name) > 0;
  };
  if (!taken(id)) return id;
  for (uint64_t gen = 1;; ++gen) {
    std::string name = id + "~" + std::to_string(gen);
    if (!taken(name)) return name;
  }
}

Status StoreImpl::StopLocked(const rocksdb::Status& s,
                             const std::string& context) {
  Status error = FromRocksDB(s, context);
  if (stopped_.ok()) stopped_ = error;
  return error;
}

Status StoreImpl::FailedMetadataWriteLocked(const rocksdb::Status& s,
                                            const std::string& context,
                                            const std::string& cf_name) {
  const Status error = FromRocksDB(s, context);
  // Whether or not RocksDB wrote the MANIFEST record (and then deleted the
  // files it named), dropping the column family writes a fresh MANIFEST
  // from what RocksDB holds in memory, without that record. RocksDB keeps
  // failing ingestions with the first error all the same, so the store
  // stops, for that error.
  DropColumnFamilyLocked(cf_name).IgnoreError();
  stopped_ = error;
  return error;
}

Status StoreImpl::CheckWritableLocked(std::string_view what) const {
  if (stopped_.ok()) return Status::OK();
  return Status::IOError(std::string(what) + ": store " + Quote(path_) +
                         " stopped writing after an I/O error; reopen it to "
                         "go on (the error: " + stopped_.message() + ")");
}

Status StoreImpl::DropColumnFamilyLocked(const std::string& name) {
  auto it = cfs_.find(name);
  if (it == cfs_.end()) return Status::OK();
  // A column family that is not dropped stays known, so that no new one is
  // given its name, and GC drops it later.
  const std::string what = "dropping column family " + Quote(name);
  ROCKSDCP_RETURN_IF_ERROR(CheckWritableLocked(what));
  // Readers holding the handle keep reading; RocksDB deletes the files once
  // the last handle goes.
  rocksdb::Status s = db_->DropColumnFamily(it->second.get());
  if (!s.ok()) return StopLocked(s, what);
  cfs_.erase(it);
  return Status::OK();
}

Status StoreImpl::CheckIngestedKeyRanges(
    rocksdb::ColumnFamilyHandle* cf,
    std::vector<std::pair<std::string, std::string>> want) const {
  rocksdb::ColumnFamilyMetaData meta;
  db_->GetColumnFamilyMetaData(cf, &meta);
  std::vector<std::pair<std::string, std::string>> got;
  for (const rocksdb::LevelMetaData& level : meta.levels) {
    for (const rocksdb::SstFileMetaData& file : level.files) {
      got.emplace_back(file.smallestkey, file.largestkey);
    }
  }
  std::sort(want.begin(), want.end());
  std::sort(got.begin(), got.end());
  if (got == want) return Status::OK();
  return Status::IOError(
      "RocksDB recorded key ranges for the ingested files that differ from "
      "the keys written into them (a read error while it scanned them)");
}

Result<CheckpointInfo> StoreImpl::Commit(CommitRequest req) {
  const std::string& id = req.checkpoint_id;
  const std::string ctx = "commit of checkpoint " + Quote(id);
  ROCKSDCP_RETURN_IF_ERROR(NeedDB(ctx));
  std::lock_guard<std::mutex> lock(mu_);
  ROCKSDCP_RETURN_IF_ERROR(CheckWritableLocked(ctx));

  std::string old_value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), default_cf_,
                               keys::CatalogKey(id), &old_value);
  std::string old_cf;
  if (s.ok()) {
    if (!req.overwrite) {
      return Status::AlreadyExists(
          "checkpoint " + Quote(id) + " already exists in store " +
          Quote(path_) + "; save with overwrite = true to replace it");
    }
    auto old_info = format::DecodeCatalogEntry(old_value);
    // A corrupt old entry is replaced; its column family is left to GC.
    if (old_info.ok()) old_cf = old_info->column_family;
  } else if (!s.IsNotFound()) {
    return FromRocksDB(s, ctx + ": reading catalog");
  }

  const std::string cf_name = FreshColumnFamilyName(id);
  rocksdb::ColumnFamilyHandle* raw = nullptr;
  s = db_->CreateColumnFamily(
      rocksdb::ColumnFamilyOptions(CheckpointColumnFamilyOptions(block_cache_)),
      cf_name, &raw);
  rocksdb::DB* db = db_.get();
  // RocksDB can fail after creating the column family (writing the OPTIONS
  // file) and still hand out its handle: keep it, so that its name is not
  // given out again and GC drops it.
  if (raw != nullptr) {
    cfs_[cf_name] = std::shared_ptr<rocksdb::ColumnFamilyHandle>(
        raw, [db](rocksdb::ColumnFamilyHandle* p) {
          db->DestroyColumnFamilyHandle(p).PermitUncheckedError();
        });
  } else if (!s.ok()) {
    // It can also fail after creating it without handing out the handle
    // (creating its directory): the name stays taken.
    handleless_cfs_.insert(cf_name);
  }
  if (!s.ok()) {
    return FailedMetadataWriteLocked(s, ctx + ": creating column family",
                                     cf_name);
  }
  if (commit_hook_) commit_hook_("after_create_cf");

  if (!req.files.empty()) {
    rocksdb::IngestExternalFileArg arg;
    arg.column_family = raw;
    arg.external_files = req.files;
    arg.options.move_files = true;
    arg.options.failed_move_fall_back_to_copy = true;
    arg.options.verify_checksums_before_ingest = false;
    s = db_->IngestExternalFiles({arg});
    if (!s.ok()) {
      return FailedMetadataWriteLocked(
          s, ctx + ": ingesting " + std::to_string(req.files.size()) +
                 " staging file(s)",
          cf_name);
    }
    if (Status st = CheckIngestedKeyRanges(raw, req.key_ranges); !st.ok()) {
      DropColumnFamilyLocked(cf_name).IgnoreError();  // Else GC's.
      return st.WithContext(ctx + ": ingesting " +
                            std::to_string(req.files.size()) +
                            " staging file(s)");
    }
  }
  if (commit_hook_) commit_hook_("after_ingest");

  CheckpointInfo info = std::move(req.info);
  info.id = id;
  info.column_family = cf_name;
  info.state = CheckpointState::kCommitted;
  info.created_unix_micros = NowUnixMicros();

  rocksdb::WriteBatch batch;
  s = batch.Put(raw, rocksdb::Slice(keys::kMetadataKey.data(),
                                    keys::kMetadataKey.size()),
                req.metadata_value);
  if (s.ok()) {
    s = batch.Put(default_cf_, keys::CatalogKey(id),
                  format::EncodeCatalogEntry(info));
  }
  if (s.ok()) {
    rocksdb::WriteOptions wo;
    wo.sync = true;
    s = db_->Write(wo, &batch);
  }
  if (!s.ok()) {
    // The batch may be durable all the same (its WAL record written, the
    // sync failed): then the next open commits it. So its column family
    // stays, and with the store stopped, GC waits for that open to decide.
    return StopLocked(s, ctx + ": writing metadata and catalog entry");
  }
  if (commit_hook_) commit_hook_("after_write");
  if (!old_cf.empty() && old_cf != cf_name) {
    // Committed: an old column family that is not dropped is GC's.
    DropColumnFamilyLocked(old_cf).IgnoreError();
  }
  return info;
}

Status StoreImpl::Delete(std::string_view id_view) {
  const std::string id(id_view);
  if (read_only()) {
    return Status::FailedPrecondition("cannot delete checkpoint " + Quote(id) +
                                      ": store " + Quote(path_) +
                                      " is open read-only");
  }
  ROCKSDCP_RETURN_IF_ERROR(NeedDB("delete of checkpoint " + Quote(id)));
  ROCKSDCP_RETURN_IF_ERROR(RocksDBStorageWriter::ValidateCheckpointId(id));
  std::lock_guard<std::mutex> lock(mu_);
  ROCKSDCP_RETURN_IF_ERROR(
      CheckWritableLocked("delete of checkpoint " + Quote(id)));
  std::string value;
  rocksdb::Status s =
      db_->Get(rocksdb::ReadOptions(), default_cf_, keys::CatalogKey(id), &value);
  if (s.IsNotFound()) {
    return Status::NotFound("checkpoint " + Quote(id) +
                            " not found in store " + Quote(path_));
  }
  if (!s.ok()) return FromRocksDB(s, "delete of checkpoint " + Quote(id));
  auto info = format::DecodeCatalogEntry(value);
  rocksdb::WriteOptions wo;
  wo.sync = true;
  // The catalog entry goes first: once it is gone the checkpoint does not
  // exist, whatever happens to the column family.
  s = db_->Delete(wo, default_cf_, keys::CatalogKey(id));
  if (!s.ok()) {
    // Maybe durable all the same, as a commit's batch (see Commit).
    return StopLocked(s, "delete of checkpoint " + Quote(id) +
                             ": removing its catalog entry");
  }
  if (commit_hook_) commit_hook_("delete_after_catalog");
  // Deleted: a column family that is not dropped is GC's.
  if (info.ok()) DropColumnFamilyLocked(info->column_family).IgnoreError();
  return Status::OK();
}

Result<GcReport> StoreImpl::CollectGarbage(bool dry_run) {
  if (read_only()) {
    return Status::FailedPrecondition("cannot collect garbage: store " +
                                      Quote(path_) + " is open read-only");
  }
  ROCKSDCP_RETURN_IF_ERROR(NeedDB("garbage collection"));
  // Under the lock, so that no commit lands between reading the catalog and
  // dropping what it does not name.
  std::lock_guard<std::mutex> lock(mu_);
  if (!dry_run) {
    ROCKSDCP_RETURN_IF_ERROR(
        CheckWritableLocked("garbage collection of store " + Quote(path_)));
  }
  ROCKSDCP_ASSIGN_OR_RETURN(auto catalog, ReadCatalog());
  GcReport report;
  std::set<std::string> live;
  for (const auto& [id, info] : catalog) live.insert(info.column_family);
  std::vector<std::string> orphans;
  for (const auto& [name, handle] : cfs_) {
    if (live.count(name) == 0) orphans.push_back(name);
  }
  for (const std::string& name : orphans) {
    rocksdb::ColumnFamilyMetaData meta;
    db_->GetColumnFamilyMetaData(cfs_[name].get(), &meta);
    report.freed_bytes += meta.size;
    report.dropped_column_families.push_back(name);
    if (dry_run) continue;
    ROCKSDCP_RETURN_IF_ERROR(DropColumnFamilyLocked(name).WithContext(
        "GC of store " + Quote(path_)));
    if (commit_hook_) commit_hook_("gc_after_drop_cf");
  }

  // Staging: each writer holds an flock on "<dir>.lock" beside its
  // directory for as long as it runs, in whatever process. A directory (or
  // lock file) whose lock we can take belongs to a writer that is gone.
  const std::string gc = "GC of store " + Quote(path_);
  std::vector<std::string> children;
  rocksdb::IOStatus io = fs_->GetChildren(staging_root_, rocksdb::IOOptions(),
                                          &children, nullptr);
  if (!io.ok() && !io.IsNotFound()) {
    return FromRocksDB(io, gc + ": listing " + staging_root_);
  }
  std::set<std::string> names;
  for (const std::string& child : children) {
    const fs::path p(child);
    names.insert(p.extension() == ".lock" ? p.stem().string() : child);
  }
  for (const std::string& name : names) {
    const std::string dir = (fs::path(staging_root_) / name).string();
    ROCKSDCP_ASSIGN_OR_RETURN(std::optional<util::FileLock> lock,
                              util::FileLock::TryAcquire(StagingLockPath(dir)));
    if (!lock) continue;  // A live writer's.
    std::vector<std::string> files;
    ROCKSDCP_RETURN_IF_ERROR(
        ListFilesUnder(*fs_, dir, &files, &report.freed_bytes)
            .WithContext(gc));
    report.deleted_staging_files.insert(report.deleted_staging_files.end(),
                                        files.begin(), files.end());
    if (dry_run) continue;
    if (commit_hook_) commit_hook_("gc_removing_staging");
    ROCKSDCP_RETURN_IF_ERROR(RemoveStagingDir(dir).WithContext(gc));
    lock->UnlinkAndRelease();
  }
  return report;
}

Result<std::unique_ptr<RocksDBStorageWriter>> StoreImpl::NewWriter(
    const RocksDBWriterOptions& options) {
  if (read_only()) {
    return Status::FailedPrecondition("cannot save: store " + Quote(path_) +
                                      " is open read-only");
  }
  if (options.max_piece_bytes == 0 || options.max_piece_bytes > (1ull << 30)) {
    return Status::InvalidArgument(
        "max_piece_bytes must be in [1, 1 GiB], got " +
        std::to_string(options.max_piece_bytes));
  }
  ROCKSDCP_RETURN_IF_ERROR(RocksDBStorageWriterImpl::ValidateOptions(options));
  return std::unique_ptr<RocksDBStorageWriter>(
      new RocksDBStorageWriterImpl(this, options));
}

Result<std::unique_ptr<RocksDBStorageReader>> StoreImpl::NewReader(
    const RocksDBReaderOptions& options) {
  ROCKSDCP_RETURN_IF_ERROR(NeedDB("load"));
  return std::unique_ptr<RocksDBStorageReader>(
      new RocksDBStorageReaderImpl(this, options));
}

}  // namespace rocksdcp
