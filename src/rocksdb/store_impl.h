// StoreImpl: the Store over one RocksDB directory, and the internal API its
// writers and readers use (lookup, commit, staging directories).

#ifndef ROCKSDCP_SRC_ROCKSDB_STORE_IMPL_H_
#define ROCKSDCP_SRC_ROCKSDB_STORE_IMPL_H_

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "rocksdb/block_buffer_pool.h"
#include "rocksdb/store_staging.h"
#include "rocksdcp/store.h"

namespace rocksdcp {

// The size past which a store's MANIFEST is rewritten (StoreImpl::
// MakeDBOptions): 4 MiB, some 18,000 saves and deletes.
inline constexpr uint64_t kMaxManifestBytes = 4ull << 20;

// The memtable arena's block, for every column family of a store: a
// checkpoint's memtable holds its metadata alone, and the catalog's a few
// hundred bytes a checkpoint. RocksDB's default, an eighth of the write
// buffer (8 MiB), made each save allocate 8 MiB, which raised glibc's mmap
// threshold so that those blocks came from the heap, and a process that
// saves every step grew its RSS by some 5 KiB a save (the soak test).
inline constexpr size_t kMemtableArenaBlockBytes = 64 << 10;

// The catalog's table files past which a read-write open merges them
// (StoreImpl::CompactCatalogIfFragmented).
inline constexpr size_t kCatalogFilesBeforeCompaction = 8;

// The metadata value from which a commit flushes the checkpoint's column
// family and the catalog (StoreImpl::FlushLargeMetadataLocked): 1 MiB, some
// 3,600 items.
inline constexpr size_t kFlushMetadataBytes = 1 << 20;

// The default column family's options: the catalog.
rocksdb::ColumnFamilyOptions CatalogColumnFamilyOptions();

// Options of every checkpoint column family, and of the SST files written
// for one: no compression (tensor bytes don't compress), no auto compaction
// (a checkpoint is immutable and is never rewritten). A store passes its
// `block_cache`, whose memory allocator recycles read buffers (see
// BlockBufferPool); nullptr gives RocksDB's default (8 MiB, malloc).
rocksdb::Options CheckpointColumnFamilyOptions(
    std::shared_ptr<rocksdb::Cache> block_cache = nullptr);

// A committed checkpoint, pinned: its column family stays readable while
// this lives, even if it is deleted or overwritten meanwhile.
struct CommittedCheckpoint {
  CheckpointInfo info;
  std::shared_ptr<rocksdb::ColumnFamilyHandle> cf;
  // The column families it references (CheckpointInfo::
  // referenced_column_families) that the store holds, pinned too, and what
  // each holds: the pieces referenced there must fit in it.
  struct Source {
    std::shared_ptr<rocksdb::ColumnFamilyHandle> cf;
    uint64_t stored_bytes = 0;
  };
  using Sources = std::map<std::string, Source, std::less<>>;
  Sources sources;
  // What its column family really holds: its SST files' sizes and its
  // memtables'. Whatever its metadata claims must fit in it (forged
  // metadata can claim anything; see format::MetadataLimits).
  uint64_t stored_bytes = 0;
};

// What `c` holds besides its metadata value (`metadata_value`), which is
// what its pieces can take: the bound of format::MetadataLimits and
// CheckStorageFits.
inline uint64_t PieceBytes(const CommittedCheckpoint& c,
                           std::string_view metadata_value) {
  return c.stored_bytes -
         std::min<uint64_t>(c.stored_bytes, metadata_value.size());
}

// What Finish hands the store to commit.
struct CommitRequest {
  std::string checkpoint_id;
  bool overwrite = false;
  // Staging SST files to ingest, from every rank.
  std::vector<std::string> files;
  // The smallest and largest key written into each of them, in any order:
  // Commit checks what RocksDB ingested against them.
  std::vector<std::pair<std::string, std::string>> key_ranges;
  // The encoded Metadata value (the caller's, until Commit returns), and
  // the catalog entry to write (its column_family is filled in by Commit,
  // and its created time unless set).
  std::string_view metadata_value;
  CheckpointInfo info;
  // If set, the batch Commit writes them with (cleared first): a writer
  // that commits again keeps its memory warm, where a fresh batch for a
  // 51,000-item metadata (16 MB) faults in 4,000 pages. Else Commit uses
  // one of its own.
  rocksdb::WriteBatch* batch = nullptr;
  // The column families the save pinned (LookupCommitted's pin_for_save):
  // on success Commit releases them, and drops those nothing keeps.
  std::vector<std::string> pinned;
  // If set, the column family the checkpoint's current entry must name
  // (Materialize's rewrite of it): Aborted otherwise.
  std::string replaces;
};

class StoreImpl final : public Store {
 public:
  static Result<std::unique_ptr<Store>> Open(const std::string& path,
                                             const StoreOptions& options);
  // As Open, with every file operation of the store (the DB, its writers'
  // staging files and directories, ingestion, GC) going through `fs`:
  // tests pass a fault-injecting one. The staging directories' flock-based
  // locks (util/file_lock.h) are the one exception: they stay POSIX, as
  // they guard against live processes, not for durability.
  static Result<std::unique_ptr<Store>> Open(
      const std::string& path, const StoreOptions& options,
      std::shared_ptr<rocksdb::FileSystem> fs);
  ~StoreImpl() override;

  const std::string& path() const override { return path_; }
  Result<std::vector<CheckpointInfo>> List() override;
  Result<CheckpointInfo> Info(std::string_view id) override;
  Status Delete(std::string_view id) override;
  Result<GcReport> CollectGarbage(bool dry_run) override;
  const GcReport& ReclaimedOnOpen() const override { return reclaimed_; }
  Result<MaterializeReport> Materialize(
      std::string_view id, const ProgressCallback& progress) override;
  Result<std::unique_ptr<RocksDBStorageWriter>> NewWriter(
      const RocksDBWriterOptions& options) override;
  Result<std::unique_ptr<RocksDBStorageReader>> NewReader(
      const RocksDBReaderOptions& options) override;
  Result<VerifyReport> Verify(const VerifyOptions& options) override;

  // ---- Internal API for writers and readers. ----

  rocksdb::DB* db() const { return db_.get(); }
  // The file system every file operation goes through, and an Env on it
  // (for SstFileWriter).
  rocksdb::FileSystem* fs() const { return fs_.get(); }
  rocksdb::Env* env() const { return env_.get(); }
  // Where RocksDB allocates the blocks readers fetch; nullptr for a
  // follower.
  BlockBufferPool* block_buffer_pool() const { return block_pool_.get(); }
  // The bytes RocksDB's block cache holds (8 MiB at most); 0 for a
  // follower. Tests tell it from what the process grows by otherwise.
  size_t block_cache_usage() const {
    return block_cache_ ? block_cache_->GetUsage() : 0;
  }
  bool read_only() const { return options_.read_only; }
  bool use_direct_reads() const { return options_.use_direct_reads; }

  // The ids whose catalog entries name column family `cf`: one, unless the
  // catalog is damaged. Entries damaged by themselves (they don't decode,
  // name another id, or sit under an invalid id) are left out.
  // The one test of a sound catalog entry: `value`, under the key of `id`,
  // decodes and names `id`, and `id` is one a save accepts. Else
  // Corruption saying what is wrong (List's CheckpointInfo::damage).
  static Result<CheckpointInfo> SoundCatalogEntry(const std::string& id,
                                                  std::string_view value);
  Result<std::vector<std::string>> IdsNamingColumnFamily(
      const std::string& cf) const;
  // The same for every column family the catalog names, in one scan.
  Result<std::map<std::string, std::vector<std::string>>> IdsByColumnFamily()
      const;
  // The bytes column family `cf` holds: its SST files and memtables (the
  // memory they take, an upper bound of the bytes in them).
  uint64_t StoredBytes(rocksdb::ColumnFamilyHandle* cf) const;
  // What `cf` takes on disk, for accounting: its SST files and the keys
  // and values in its memtables (which the WAL holds until a flush).
  uint64_t DiskBytes(rocksdb::ColumnFamilyHandle* cf) const;

  // What checkpoint `id` is in the store as it is on disk now, which a
  // read-only Store, whose view is the store when it opened, can't tell by
  // itself: opens the store read-only again to look (and, for a committed
  // checkpoint, verifies it). For error messages only.
  enum class OnDiskNow { kGone, kIntact, kDamaged };
  Result<OnDiskNow> CheckpointOnDiskNow(const std::string& id) const;
  bool follower() const { return options_.follower; }
  // FailedPrecondition naming `what` when there is no DB (a follower).
  Status NeedDB(std::string_view what) const;

  // Where writers put staging SST files: <path>/staging.
  const std::string& staging_root() const { return staging_root_; }
  // Creates `dir` and any missing parents through fs(); with
  // `durable_entries`, fsyncs the parent of each directory it creates, so
  // that the new directory survives a power loss.
  Status CreateDirs(const std::string& dir, bool durable_entries) const;
  // Removes the staging directory `dir` and the files in it, through fs().
  Status RemoveStagingDir(const std::string& dir) const;

  // With `claim_id` (the coordinator), marks `id` as being saved: Busy if
  // another writer of this process is saving it.
  Status BeginSave(const std::string& id, bool claim_id);
  // Undoes BeginSave.
  void EndSave(const std::string& id, bool claimed_id);

  // The committed checkpoint `id`, pinned; NotFound (saying whether a save
  // of it was begun but never committed) if there is none. Its referenced
  // column families' handles are in `sources` (one that is missing is
  // left out: reading a piece there fails then). With `pin_for_save`, its
  // column family and those it references are also pinned against drops
  // (Delete, overwrite, GC) until UnpinColumnFamilies: what an incremental
  // save based on it may reference; their names are appended to it.
  Result<CommittedCheckpoint> LookupCommitted(
      const std::string& id, std::vector<std::string>* pin_for_save = nullptr);
  void UnpinColumnFamilies(const std::vector<std::string>& names);

  // Creates a fresh column family, ingests the files into it in one
  // IngestExternalFiles call, then writes the metadata key and the catalog
  // entry in one synced WriteBatch. On any failure the new column family is
  // dropped and nothing is visible. With overwrite, the old column family
  // is dropped after the commit.
  Result<CheckpointInfo> Commit(CommitRequest request);

  // Test-only: called by Commit at "after_create_cf", "after_ingest" and
  // "after_write" (the commit batch is durable, the old column family not
  // yet dropped), by Delete at "delete_after_catalog" (the catalog entry is
  // deleted, the column family not yet dropped), by Materialize at
  // "materialize_copied" (its staging file is written, the commit not
  // begun), and by CollectGarbage at
  // "gc_after_drop_cf" (after each drop) and "gc_removing_staging" (before
  // each staging directory goes), so crash tests can stop a process at each
  // point. Called with the store's mutex held.
  void TEST_SetCommitHook(std::function<void(std::string_view)> hook) {
    commit_hook_ = std::move(hook);
  }

 private:
  StoreImpl(std::string path, StoreOptions options,
            std::shared_ptr<rocksdb::FileSystem> fs);

  Status OpenDB();
  // Whether the store exists; creates its directory (if it may) and the
  // staging directory (read-write opens). `where` names the store.
  Result<bool> PrepareDirectories(const std::string& where);
  // The DB's options, as StoreOptions say; makes the block cache.
  rocksdb::DBOptions MakeDBOptions();
  // What a failed open of the DB with `s` tells the user: Busy for a lock
  // that another opener holds, Corruption with what to do next.
  Status OpenFailed(const rocksdb::Status& s, const std::string& where) const;
  // Takes over the column family handles of the opened DB.
  void AdoptHandles(const std::vector<rocksdb::ColumnFamilyHandle*>& handles);
  // Keeps a checkpoint column family's handle in cfs_, under its name,
  // destroyed when the last holder lets go of it.
  void AdoptHandle(rocksdb::ColumnFamilyHandle* h);
  std::string FreshColumnFamilyName(const std::string& id) const;
  // True if a writer's staging directory for `id` exists (a save that was
  // begun, maybe by a process that died).
  bool HasStagingDirFor(const std::string& id) const;
  // RocksDB 7.8 takes an ingested file's key range from an iterator whose
  // errors it does not check (ExternalSstFileIngestionJob::
  // GetIngestedFileInfo): a read error there ingests the file with a wrong
  // range, and then its keys are never found. IOError unless the ranges of
  // the files in `cf` are `want`.
  Status CheckIngestedKeyRanges(
      rocksdb::ColumnFamilyHandle* cf,
      std::vector<std::pair<std::string, std::string>> want) const;
  // After a RocksDB write fails and cannot be undone, the store stops
  // writing until it is reopened: RocksDB 7.8 then holds a background error
  // and refuses writes, or worse (under tests/rocksdb/io_fault_test.cc a
  // later ingestion into such a DB failed an assertion, which aborts with
  // Debian's librocksdb); and a failed synced write may be durable all the
  // same, which only the next open decides. StopLocked records `s` (with
  // `context`) and returns it; CheckWritableLocked is IOError naming `what`
  // once stopped. Reads go on.
  Status StopLocked(const rocksdb::Status& s, const std::string& context);
  // Creating column family `cf_name` or ingesting into it failed with `s`:
  // RocksDB 7.8 may have written the MANIFEST record (its fsync failed) and
  // then deleted the ingested files it names, and reopening would fail on
  // them. Drops the column family, which makes RocksDB write a fresh
  // MANIFEST, then stops the store. Returns `s` with context.
  Status FailedMetadataWriteLocked(const rocksdb::Status& s,
                                   const std::string& context,
                                   const std::string& cf_name);
  Status CheckWritableLocked(std::string_view what) const;
  // Commit's steps; `ctx` names the commit in their errors.
  // The column family of the committed checkpoint that `req` replaces
  // ("" if none, or its entry is unreadable); AlreadyExists if it may not,
  // Aborted if it is not the one `req` was prepared to replace.
  Result<std::string> ReplacedColumnFamilyLocked(const CommitRequest& req,
                                                 const std::string& ctx);
  // FailedPrecondition unless every column family `info` references is
  // there and pinned by the save.
  Status CheckReferencesLocked(const CheckpointInfo& info,
                               const std::string& ctx) const;
  // Creates column family `cf_name`, which is then the store's (or taken,
  // if RocksDB failed half-way).
  Result<rocksdb::ColumnFamilyHandle*> CreateColumnFamilyLocked(
      const std::string& cf_name, const std::string& ctx);
  // Ingests req.files into `cf`, moving them, and checks their key ranges.
  Status IngestLocked(rocksdb::ColumnFamilyHandle* cf, const CommitRequest& req,
                      const std::string& ctx);
  // A checkpoint's commit: its metadata value in column family `cf` and
  // its catalog entry `info`, in one synced WriteBatch: `batch`, cleared
  // first, or a fresh one if null.
  rocksdb::Status WriteMetadataAndEntryLocked(rocksdb::ColumnFamilyHandle* cf,
                                              std::string_view metadata_value,
                                              const CheckpointInfo& info,
                                              rocksdb::WriteBatch* batch);
  // Drops column family `name`; one that is not dropped stays in cfs_.
  Status DropColumnFamilyLocked(const std::string& name);
  // The column families that must stay: each sound catalog entry's own and
  // those it references, and those pinned by saves in progress.
  // Corruption if a catalog entry is damaged: what it named is unknown.
  Result<std::set<std::string>> KeptColumnFamiliesLocked();
  // The same from `catalog`, as ReadCatalog returned it.
  Result<std::set<std::string>> KeptColumnFamiliesLocked(
      const std::map<std::string, CheckpointInfo>& catalog);
  // CollectGarbage's two halves, each adding to `report`: the column
  // families nothing keeps (Corruption, and none dropped, while a catalog
  // entry is damaged), and the staging directories of writers that are gone.
  Status DropOrphanColumnFamiliesLocked(bool dry_run, GcReport* report);
  Status RemoveDeadStagingLocked(bool dry_run, GcReport* report);
  // StoreOptions::reclaim_torn_saves: collects garbage into reclaimed_ as
  // the store opens read-write. What it can't reclaim it logs, and leaves
  // to CollectGarbage: the open goes on.
  void ReclaimTornSaves();
  // On a read-write open: merges the catalog's table files into one when
  // there are more than kCatalogFilesBeforeCompaction. Logs a failure.
  void CompactCatalogIfFragmented();
  // After the commit of a metadata value of kFlushMetadataBytes or more,
  // into column family `cf`: flushes it and the catalog, so that the value
  // leaves the memtable and the WAL. Logs a failure: the commit is durable
  // in the WAL all the same.
  void FlushLargeMetadataLocked(rocksdb::ColumnFamilyHandle* cf,
                                size_t metadata_bytes);
  // LookupCommitted's NotFound for checkpoint `id`, which the catalog has
  // no entry for: why, as far as the store tells.
  Status NotCommittedLocked(const std::string& id) const;
  // LookupCommitted's error for checkpoint `id`, whose catalog entry names
  // column family `cf_name`, which the store does not have: NotFound if a
  // save or delete raced this read-only store's open (it opens the store
  // again to tell), Corruption if not.
  Status MissingColumnFamilyLocked(const std::string& id,
                                   const std::string& cf_name) const;
  // Checkpoint `info`, in column family `cf`, with the column families it
  // references that the store has.
  CommittedCheckpoint CommittedLocked(
      CheckpointInfo info,
      std::shared_ptr<rocksdb::ColumnFamilyHandle> cf) const;
  // Releases one pin (LookupCommitted's pin_for_save) of each of `names`.
  void UnpinLocked(const std::vector<std::string>& names);
  // Drops each of `candidates` that is not kept; leaves them all to GC if
  // the catalog can't tell (errors are GC's too).
  void DropUnkeptLocked(const std::vector<std::string>& candidates);
  // Fills stored_bytes and freed_by_delete of the sound entries of
  // `catalog` (the whole catalog), or, with `only`, of that id's entry
  // alone (each entry's costs a look at the files of its column families).
  void AccountLocked(std::map<std::string, CheckpointInfo>& catalog,
                     const std::string* only = nullptr);
  Result<std::map<std::string, CheckpointInfo>> ReadCatalog();

  const std::string path_;
  const StoreOptions options_;
  const std::string staging_root_;
  // Before db_, which uses env_, which uses fs_.
  const std::shared_ptr<rocksdb::FileSystem> fs_;
  const std::unique_ptr<rocksdb::Env> env_;

  // Before db_: blocks RocksDB holds are freed into the pool when db_
  // closes, so it must outlive db_.
  std::shared_ptr<BlockBufferPool> block_pool_;
  std::shared_ptr<rocksdb::Cache> block_cache_;
  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::ColumnFamilyHandle* default_cf_ = nullptr;

  std::mutex mu_;  // Guards the members below, and serialises commits.
  std::map<std::string, std::shared_ptr<rocksdb::ColumnFamilyHandle>> cfs_;
  std::set<std::string> saving_ids_;
  // Column families that saves in progress may reference (their bases'),
  // once per save: never dropped while here.
  std::multiset<std::string> pinned_cfs_;
  // Column families whose creation failed half-way without a handle: they
  // may exist, so their names are not given out again; GC drops them once
  // the store reopens (and opens a handle on them).
  std::set<std::string> handleless_cfs_;
  // Read-only: column families listed but gone by the time the store
  // opened (dropped by another process meanwhile), so left out.
  std::set<std::string> vanished_cfs_;
  // Set on the read-only store LookupCommitted opens to look at the store
  // as it is now, so that store does not look again.
  bool probing_ = false;
  // The first error of a RocksDB write (catalog, column family, ingestion)
  // since the store opened; then the store writes no more (see StopLocked).
  Status stopped_;
  // What ReclaimTornSaves reclaimed as the store opened.
  GcReport reclaimed_;
  std::function<void(std::string_view)> commit_hook_;
};

// "checkpoint 'a' shares its column family 'x' with checkpoint 'b': the
// catalog is damaged ...": `ids` are IdsNamingColumnFamily(cf), `id` among
// them.
std::string SharedColumnFamilyProblem(const std::string& id,
                                      const std::string& cf,
                                      const std::vector<std::string>& ids);

}  // namespace rocksdcp

#endif  // ROCKSDCP_SRC_ROCKSDB_STORE_IMPL_H_
