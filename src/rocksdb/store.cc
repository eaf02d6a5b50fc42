#include <fcntl.h>
#include <linux/magic.h>
#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <rocksdb/table.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <system_error>

#include "keys/keys.h"
#include "rocksdb/catalog_codec.h"
#include "rocksdb/reader.h"
#include "rocksdb/rocksdb_status.h"
#include "rocksdb/store_impl.h"
#include "rocksdb/store_log.h"
#include "rocksdb/vetting_fs.h"
#include "rocksdb/writer.h"
#include "util/text.h"

namespace rocksdcp {

using util::Quote;

namespace fs = std::filesystem;

namespace {

constexpr char kStagingDirName[] = "staging";

// How often a read-only open lists and opens again when a writer in another
// process changed the store under it (see OpenDB).
constexpr int kReadOnlyOpenAttempts = 32;

// True if a committed checkpoint of the freshly opened `db` shows no piece:
// its catalog entry and metadata (one WAL write) arrived without its
// ingested files (a MANIFEST change), which a read-only open beside a
// writer can see. A catalog entry that can't be decoded is left to the
// calls that read it.
//
// An entry naming a column family the open did not ask for tears the view
// too if `exists_now` says the column family is there now: a save created
// it between ListColumnFamilies and the open. One that is not there now
// either is not torn: the catalog is damaged, and the lookup says so.
bool ViewIsTorn(rocksdb::DB* db,
                const std::vector<rocksdb::ColumnFamilyHandle*>& handles,
                const std::function<bool(const std::string&)>& exists_now) {
  std::map<std::string, rocksdb::ColumnFamilyHandle*> by_name;
  rocksdb::ColumnFamilyHandle* catalog = nullptr;
  for (rocksdb::ColumnFamilyHandle* h : handles) {
    by_name[h->GetName()] = h;
    if (h->GetName() == rocksdb::kDefaultColumnFamilyName) catalog = h;
  }
  if (catalog == nullptr) return false;
  const std::string prefix(keys::kCatalogPrefix);
  std::unique_ptr<rocksdb::Iterator> it(
      db->NewIterator(rocksdb::ReadOptions(), catalog));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix);
       it->Next()) {
    auto entry = format::DecodeCatalogEntry(
        std::string_view(it->value().data(), it->value().size()));
    if (!entry.ok()) continue;
    auto cf = by_name.find(entry->column_family);
    if (cf == by_name.end()) {
      if (exists_now(entry->column_family)) return true;
      continue;
    }
    if (entry->items == 0) continue;
    // Files in its column family: the MANIFEST this open read has its
    // ingested pieces (a flush of its metadata comes after them). Asked
    // without opening a table file, which costs a store of many
    // checkpoints most of its open.
    rocksdb::ColumnFamilyMetaData files;
    db->GetColumnFamilyMetaData(cf->second, &files);
    if (files.file_count > 0) continue;
    std::unique_ptr<rocksdb::Iterator> keys(
        db->NewIterator(rocksdb::ReadOptions(), cf->second));
    keys->SeekToFirst();
    while (keys->Valid() && keys->key() == keys::kMetadataKey) keys->Next();
    if (keys->status().ok() && !keys->Valid()) return true;
  }
  return false;
}

// A file RocksDB named a moment ago is gone: another process replaced it.
bool FileRotated(const rocksdb::Status& s) {
  return s.IsPathNotFound() ||
         (s.IsIOError() &&
          s.ToString().find("No such file or directory") != std::string::npos);
}

// Who holds the store's LOCK file, as RocksDB's failed open says. Only
// these two are Busy; any other failure around the LOCK file (it can't be
// opened: permissions, a read-only filesystem) is that failure.
enum class LockHolder { kNone, kThisProcess, kAnotherProcess };

LockHolder LockHolderOf(const rocksdb::Status& s, const std::string& dir) {
  if (!s.IsIOError()) return LockHolder::kNone;
  const std::string msg = s.ToString();
  // PosixFileSystem::LockFile: the process's own lock table, then fcntl.
  if (msg.find("lock hold by current process") != std::string::npos) {
    return LockHolder::kThisProcess;
  }
  // fcntl(F_SETLK) fails with EAGAIN or EACCES when another process holds
  // a conflicting lock.
  if (msg.find("While lock file: " + dir + "/LOCK") != std::string::npos &&
      (msg.find("Resource temporarily unavailable") != std::string::npos ||
       msg.find("Permission denied") != std::string::npos)) {
    return LockHolder::kAnotherProcess;
  }
  return LockHolder::kNone;
}

// Whether `s` is RocksDB's "Column family not found: a, b" (a read-only
// open asked for column families a writer dropped meanwhile); adds their
// names to *names.
bool AddColumnFamiliesNotFound(const rocksdb::Status& s,
                               std::set<std::string>* names) {
  constexpr std::string_view kNotFound = "Column family not found: ";
  const std::string error = s.ToString();
  const size_t at = error.find(kNotFound);
  if (!s.IsInvalidArgument() || at == std::string::npos) return false;
  const std::string list = error.substr(at + kNotFound.size());
  for (size_t start = 0; start <= list.size();) {
    size_t end = list.find(", ", start);
    if (end == std::string::npos) end = list.size();
    names->insert(list.substr(start, end - start));
    start = end + 2;
  }
  return true;
}

}  // namespace

rocksdb::ColumnFamilyOptions CatalogColumnFamilyOptions() {
  rocksdb::ColumnFamilyOptions options;
  options.arena_block_size = kMemtableArenaBlockBytes;
  return options;
}

rocksdb::Options CheckpointColumnFamilyOptions(
    std::shared_ptr<rocksdb::Cache> block_cache) {
  rocksdb::Options options;
  options.compression = rocksdb::kNoCompression;
  options.bottommost_compression = rocksdb::kNoCompression;
  options.disable_auto_compactions = true;
  options.arena_block_size = kMemtableArenaBlockBytes;
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
      fs_(std::make_shared<VettingFileSystem>(fs)),
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

Status ValidateCheckpointId(std::string_view checkpoint_id) {
  return keys::ValidateCheckpointId(checkpoint_id);
}

Result<RetentionReport> Store::KeepLast(uint64_t n) {
  ROCKSDCP_ASSIGN_OR_RETURN(std::vector<CheckpointInfo> list, List());
  std::erase_if(list,
                [](const CheckpointInfo& c) { return !c.damage.empty(); });
  // Newest first.
  std::stable_sort(list.begin(), list.end(),
                   [](const CheckpointInfo& x, const CheckpointInfo& y) {
                     if (x.created_unix_micros != y.created_unix_micros) {
                       return x.created_unix_micros > y.created_unix_micros;
                     }
                     return x.id > y.id;
                   });
  RetentionReport report;
  for (size_t i = 0; i < list.size() && i < n; ++i) {
    report.kept.push_back(list[i].id);
  }
  for (size_t i = list.size(); i-- > report.kept.size();) {
    if (Status s = Delete(list[i].id); !s.ok()) {
      std::string done;
      for (const std::string& id : report.deleted) {
        done += (done.empty() ? "" : ", ") + Quote(id);
      }
      return s.WithContext("keep-last " + std::to_string(n) + " in store " +
                           Quote(path()) +
                           (done.empty() ? ", having deleted none"
                                         : ", having deleted " + done));
    }
    report.deleted.push_back(list[i].id);
  }
  return report;
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
  if (options.max_open_files != -1 && options.max_open_files < 20) {
    return Status::InvalidArgument(
        "store option max_open_files is " +
        std::to_string(options.max_open_files) +
        ": it must be -1 (every table file kept open) or at least 20");
  }
  // Absolute and normalised: staging file paths cross between ranks, and
  // the coordinator checks them against its own staging directory.
  std::error_code ec;
  std::string canonical = fs::weakly_canonical(fs::absolute(path), ec).string();
  if (ec) canonical = fs::absolute(path).lexically_normal().string();
  std::unique_ptr<StoreImpl> store(
      new StoreImpl(canonical, options, std::move(fs)));
  ROCKSDCP_RETURN_IF_ERROR(store->OpenDB());
  return std::unique_ptr<Store>(std::move(store));
}

namespace {

// Why the store directory `path` can't be read, where the file system can
// tell: RocksDB's FileExists folds EACCES and ENOTDIR into NotFound, which
// would read as "no store there". OK if it is a directory this process may
// list, or if nothing is there. Asks the operating system directly (not
// the store's FileSystem): this explains an error, it opens nothing.
Status ExplainUnreadableDirectory(const std::string& path,
                                  const std::string& where) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) return Status::OK();
    if (err == ENOTDIR) {
      return Status::InvalidArgument(
          where + " is not a directory: a component of its path is a file");
    }
    return Status::IOError("cannot open " + where + ": " + std::strerror(err) +
                           ": this process may not reach the store's "
                           "directory (a directory on its path may not be "
                           "searched)");
  }
  if (!S_ISDIR(st.st_mode)) {
    const char* what = S_ISREG(st.st_mode) ? "a regular file" : "no directory";
    return Status::InvalidArgument(where + " is not a directory (" + what +
                                   " is there): a store is a directory that "
                                   "RocksDB's files are in");
  }
  if (faccessat(AT_FDCWD, path.c_str(), R_OK | X_OK, AT_EACCESS) != 0) {
    const int err = errno;
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o",
                  static_cast<unsigned>(st.st_mode & 07777));
    return Status::IOError("cannot open " + where + ": " + std::strerror(err) +
                           ": this process may not read the store's "
                           "directory (mode " +
                           mode + ")");
  }
  return Status::OK();
}

// The descriptors that open column families `names`, but those in
// `unopenable`: the catalog's and, with `cf_options`, checkpoints'.
std::vector<rocksdb::ColumnFamilyDescriptor> DescriptorsFor(
    const std::vector<std::string>& names,
    const std::set<std::string>& unopenable,
    const rocksdb::Options& cf_options) {
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& name : names) {
    if (unopenable.count(name) > 0) continue;
    if (name == rocksdb::kDefaultColumnFamilyName) {
      descriptors.emplace_back(name, CatalogColumnFamilyOptions());
    } else {
      descriptors.emplace_back(name, rocksdb::ColumnFamilyOptions(cf_options));
    }
  }
  return descriptors;
}

// Whether a read-only open of the store at `path` that ended with `s` (if
// ok, `db` with `handles`) must open again: column families it asked for
// were dropped meanwhile (added to `unopenable`), or a writer changed the
// store under it.
bool MustOpenAgain(const rocksdb::Status& s, rocksdb::DB* db,
                   const std::vector<rocksdb::ColumnFamilyHandle*>& handles,
                   const rocksdb::DBOptions& db_options,
                   const std::string& path, std::set<std::string>* unopenable) {
  const bool vanished = AddColumnFamiliesNotFound(s, unopenable);
  // Asked once per open, and only if an entry names a column family the
  // open left out.
  std::optional<std::set<std::string>> listed_now;
  auto exists_now = [&](const std::string& cf) {
    if (unopenable->count(cf) > 0) return false;
    if (!listed_now) {
      std::vector<std::string> now;
      // Failing, it was most likely replacing its MANIFEST: open again.
      if (!rocksdb::DB::ListColumnFamilies(db_options, path, &now).ok()) {
        return true;
      }
      listed_now.emplace(now.begin(), now.end());
    }
    return listed_now->count(cf) > 0;
  };
  const bool changed = s.ok() && ViewIsTorn(db, handles, exists_now);
  // The writer replaced a file (MANIFEST, OPTIONS) between reading its
  // name and opening it.
  const bool rotated = !s.ok() && FileRotated(s);
  return vanished || changed || rotated;
}

// Closes and deletes `db`, which an open that must open again opened.
void CloseToOpenAgain(
    rocksdb::DB* db, const std::vector<rocksdb::ColumnFamilyHandle*>& handles) {
  for (rocksdb::ColumnFamilyHandle* h : handles) {
    db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  }
  db->Close().PermitUncheckedError();
  delete db;
}

}  // namespace

Result<bool> StoreImpl::PrepareDirectories(const std::string& where) {
  ROCKSDCP_RETURN_IF_ERROR(ExplainUnreadableDirectory(path_, where));
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
  return exists;
}

rocksdb::DBOptions StoreImpl::MakeDBOptions() {
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
  // Table files open as they are read, not all at open (RocksDB loads
  // every live table file at open only when this is -1).
  db_options.max_open_files = options_.max_open_files;
  // RocksDB splits its cache of open table files in 2^6 shards by default,
  // each of which keeps the file it last opened whatever its share of
  // max_open_files: 64 files open at least. 16 shards serve the store's
  // few read threads as well.
  db_options.table_cache_numshardbits = 4;
  // Nor does open read the properties of table files for compaction
  // estimates: checkpoint column families are never compacted, and with a
  // thousand checkpoints those reads were a fifth of an open.
  db_options.skip_stats_update_on_db_open = true;
  db_options.max_total_wal_size = options_.max_total_wal_size;
  // Every save and delete adds a few hundred bytes to the MANIFEST (a
  // column family created, files ingested, one dropped); RocksDB starts a
  // fresh one, holding only what is live, once it passes this size, and
  // its default of 1 GiB let a long-lived store's grow for millions of
  // saves.
  db_options.max_manifest_file_size = kMaxManifestBytes;
  // Checkpoint data arrives as ingested SST files; only the catalog and
  // metadata keys go through the WAL, each in a synced write.
  db_options.avoid_flush_during_shutdown = false;
  // Loads read pieces in key order, which is file order: leave the
  // kernel's readahead on (RocksDB's default advises POSIX_FADV_RANDOM on
  // every SST file, so each small block was its own synchronous disk read).
  db_options.advise_random_on_open = false;
  db_options.use_direct_reads = options_.use_direct_reads;
  // Open loads each column family's table files with this many threads,
  // started and joined per column family: a checkpoint has a few files, and
  // RocksDB's default of 16 made an open of a store of 300 checkpoints
  // start and join 4,500 threads, most of its time.
  db_options.max_file_opening_threads = 1;
  // On tmpfs a preallocation (fallocate, FALLOC_FL_KEEP_SIZE too) takes
  // and zeroes memory: the WAL's max_total_wal_size (64 MiB) and the
  // MANIFEST's 4 MiB, held while the store is open, and some 10 ms of the
  // kernel's time at each open; and tmpfs has no fragmentation to avoid.
  if (struct statfs st;
      statfs(path_.c_str(), &st) == 0 && st.f_type == TMPFS_MAGIC) {
    db_options.allow_fallocate = false;
  }
  // The store's own info log (store_log.h): no failure to log can abort,
  // and it stays bounded; a read-only open writes nothing into the store.
  db_options.info_log = options_.read_only
                            ? NullStoreLog()
                            : OpenStoreLog(path_, kStoreLogMaxBytes);
  // With paranoid_checks (RocksDB's default) Open opens every SST file and
  // refuses the whole store if one is truncated, missing or has a damaged
  // footer: one bad checkpoint would make every other one unreachable. A
  // read-only open never writes, so it opens without: the damaged
  // checkpoint's reads fail as Corruption, and the rest load. Read-write
  // opens keep the checks, which also stop writes after a write error.
  if (options_.read_only) db_options.paranoid_checks = false;
  return db_options;
}

Status StoreImpl::OpenDB() {
  const std::string where = "store " + Quote(path_);
  ROCKSDCP_ASSIGN_OR_RETURN(const bool exists, PrepareDirectories(where));
  if (options_.follower) return Status::OK();  // No DB: see StoreOptions.

  const rocksdb::DBOptions db_options = MakeDBOptions();
  const rocksdb::Options cf_options =
      CheckpointColumnFamilyOptions(block_cache_);
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s;
  // A read-only open runs beside a writer in another process, and sees the
  // store torn when the writer changes it meanwhile:
  //   - the writer drops a column family between the listing and the open:
  //     RocksDB fails with "Column family not found", and the open goes on
  //     without it (a read-only open may leave column families out);
  //   - RocksDB reads the MANIFEST (the files of each column family), then
  //     the WAL: a save that ingests its files (a MANIFEST change) and then
  //     commits (a WAL write) between the two shows its catalog entry and
  //     metadata without its pieces (ViewIsTorn): open again.
  // A read that still finds a piece missing asks the store as it is on
  // disk now what happened (RocksDBStorageReaderImpl::ReadData).
  // Column families a read-only open found listed but could not open: it
  // opens without them (a read-only open may leave column families out).
  std::set<std::string> unopenable;
  for (int attempt = 0;; ++attempt) {
    std::vector<std::string> names;
    if (exists) {
      s = rocksdb::DB::ListColumnFamilies(db_options, path_, &names);
      if (!s.ok() && options_.read_only && FileRotated(s) &&
          attempt < kReadOnlyOpenAttempts - 1) {
        continue;
      }
      if (!s.ok()) {
        return FromRocksDB(s, "cannot list column families of " + where);
      }
    } else {
      names.push_back(rocksdb::kDefaultColumnFamilyName);
    }
    const std::vector<rocksdb::ColumnFamilyDescriptor> descriptors =
        DescriptorsFor(names, unopenable, cf_options);
    handles.clear();
    s = options_.read_only
            ? rocksdb::DB::OpenForReadOnly(db_options, path_, descriptors,
                                           &handles, &raw)
            : rocksdb::DB::Open(db_options, path_, descriptors, &handles, &raw);
    if (!options_.read_only || attempt == kReadOnlyOpenAttempts - 1) break;
    if (!MustOpenAgain(s, raw, handles, db_options, path_, &unopenable)) {
      break;
    }
    if (s.ok()) {
      CloseToOpenAgain(raw, handles);
      raw = nullptr;
    }
  }
  if (!s.ok()) return OpenFailed(s, where);
  db_.reset(raw);
  vanished_cfs_ = std::move(unopenable);
  AdoptHandles(handles);
  // Merged first: the reclaim scans the catalog.
  if (!options_.read_only) CompactCatalogIfFragmented();
  if (!options_.read_only && options_.reclaim_torn_saves) ReclaimTornSaves();
  return Status::OK();
}

void StoreImpl::CompactCatalogIfFragmented() {
  // A store opened and closed for each save flushes the catalog at each
  // close: one small file per checkpoint, which RocksDB's compactions move
  // down a level whole, never merged, since new ids sort after old ones.
  // Every catalog scan (each open, List) then opened a file per checkpoint
  // saved, most of `rocksdcp ls`'s time on a store of a thousand. Merging
  // them reads and writes the catalog once, about 1 KiB a checkpoint.
  rocksdb::ColumnFamilyMetaData files;
  db_->GetColumnFamilyMetaData(default_cf_, &files);
  if (files.file_count <= kCatalogFilesBeforeCompaction) return;
  rocksdb::CompactRangeOptions options;
  options.bottommost_level_compaction =
      rocksdb::BottommostLevelCompaction::kForce;
  const rocksdb::Status s =
      db_->CompactRange(options, default_cf_, nullptr, nullptr);
  if (!s.ok()) {
    // The scans stay slower; nothing else depends on it.
    rocksdb::Log(rocksdb::InfoLogLevel::WARN_LEVEL,
                 db_->GetOptions().info_log.get(),
                 "rocksdcp: merging the catalog's %zu files: %s",
                 files.file_count, s.ToString().c_str());
  }
}

Status StoreImpl::OpenFailed(const rocksdb::Status& s,
                             const std::string& where) const {
  if (const LockHolder holder = LockHolderOf(s, path_);
      holder != LockHolder::kNone) {
    const bool same_process = holder == LockHolder::kThisProcess;
    return Status::Busy(
        where +
        (same_process ? " is already open read-write in this process"
                      : " is locked by another process") +
        " (RocksDB's LOCK file is held; only one process may open a store "
        "read-write; open it with read_only = true to load or inspect)");
  }
  Status failed = FromRocksDB(s, "cannot open " + where);
  // RocksDB's check, as it opens, that the directory takes O_DIRECT.
  if (options_.use_direct_reads && s.IsInvalidArgument() &&
      s.ToString().find("Direct I/O is not supported") != std::string::npos) {
    return Status::InvalidArgument(
        failed.message() +
        " (StoreOptions::use_direct_reads: its file system refuses O_DIRECT, "
        "as tmpfs before Linux 6.6 does; open it without)");
  }
  if (failed.IsCorruption() && !options_.read_only) {
    return Status::Corruption(
        failed.message() +
        " (open it with read_only = true to load the other checkpoints, "
        "and Verify to find the damaged one)");
  }
  return failed;
}

void StoreImpl::AdoptHandles(
    const std::vector<rocksdb::ColumnFamilyHandle*>& handles) {
  for (rocksdb::ColumnFamilyHandle* h : handles) {
    if (h->GetName() == rocksdb::kDefaultColumnFamilyName) {
      default_cf_ = h;
    } else {
      AdoptHandle(h);
    }
  }
}

void StoreImpl::AdoptHandle(rocksdb::ColumnFamilyHandle* h) {
  rocksdb::DB* db = db_.get();
  cfs_[h->GetName()] = std::shared_ptr<rocksdb::ColumnFamilyHandle>(
      h, [db](rocksdb::ColumnFamilyHandle* p) {
        db->DestroyColumnFamilyHandle(p).PermitUncheckedError();
      });
}

Status StoreImpl::NeedDB(std::string_view what) const {
  if (db_) return Status::OK();
  return Status::FailedPrecondition(
      std::string(what) + ": store " + Quote(path_) +
      " is open as a follower (staging files only)");
}

Result<std::unique_ptr<RocksDBStorageWriter>> StoreImpl::NewWriter(
    const RocksDBWriterOptions& options) {
  if (read_only()) {
    return Status::FailedPrecondition("cannot save: store " + Quote(path_) +
                                      " is open read-only");
  }
  ROCKSDCP_RETURN_IF_ERROR(RocksDBStorageWriterImpl::ValidateOptions(options));
  return std::unique_ptr<RocksDBStorageWriter>(
      new RocksDBStorageWriterImpl(this, options));
}

Result<std::unique_ptr<RocksDBStorageReader>> StoreImpl::NewReader(
    const RocksDBReaderOptions& options) {
  ROCKSDCP_RETURN_IF_ERROR(NeedDB("load"));
  ROCKSDCP_RETURN_IF_ERROR(RocksDBStorageReaderImpl::ValidateOptions(options));
  return std::unique_ptr<RocksDBStorageReader>(
      new RocksDBStorageReaderImpl(this, options));
}

}  // namespace rocksdcp
