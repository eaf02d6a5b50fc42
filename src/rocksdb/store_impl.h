// StoreImpl: the Store over one RocksDB directory, and the internal API its
// writers and readers use (lookup, commit, staging directories).

#ifndef ROCKSDCP_SRC_ROCKSDB_STORE_IMPL_H_
#define ROCKSDCP_SRC_ROCKSDB_STORE_IMPL_H_

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "rocksdb/block_buffer_pool.h"
#include "rocksdcp/rocksdb_store.h"

namespace rocksdcp {

// The staging directory of one save, under <store>/staging: the escaped id
// (so a person can tell whose files they are) and the writer's save id.
std::string StagingDirName(std::string_view id, std::string_view save_id);

// The lock file a writer holds while it uses `staging_dir`: GC, in any
// process, removes only staging directories whose lock it can take.
std::string StagingLockPath(const std::string& staging_dir);

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
};

// What Finish hands the store to commit.
struct CommitRequest {
  std::string checkpoint_id;
  bool overwrite = false;
  // Staging SST files to ingest, from every rank.
  std::vector<std::string> files;
  // The encoded Metadata value, and the catalog entry to write (its
  // column_family and created time are filled in by Commit).
  std::string metadata_value;
  CheckpointInfo info;
};

class StoreImpl final : public Store {
 public:
  static Result<std::unique_ptr<Store>> Open(const std::string& path,
                                             const StoreOptions& options);
  ~StoreImpl() override;

  const std::string& path() const override { return path_; }
  Result<std::vector<CheckpointInfo>> List() override;
  Result<CheckpointInfo> Info(std::string_view id) override;
  Status Delete(std::string_view id) override;
  Result<GcReport> CollectGarbage(bool dry_run) override;
  Result<std::unique_ptr<RocksDBStorageWriter>> NewWriter(
      const RocksDBWriterOptions& options) override;
  Result<std::unique_ptr<RocksDBStorageReader>> NewReader(
      const RocksDBReaderOptions& options) override;

  // ---- Internal API for writers and readers. ----

  rocksdb::DB* db() const { return db_.get(); }
  // Where RocksDB allocates the blocks readers fetch; nullptr for a
  // follower.
  BlockBufferPool* block_buffer_pool() const { return block_pool_.get(); }
  bool read_only() const { return options_.read_only; }
  bool follower() const { return options_.follower; }
  // FailedPrecondition naming `what` when there is no DB (a follower).
  Status NeedDB(std::string_view what) const;

  // Where writers put staging SST files: <path>/staging.
  const std::string& staging_root() const { return staging_root_; }

  // With `claim_id` (the coordinator), marks `id` as being saved: Busy if
  // another writer of this process is saving it.
  Status BeginSave(const std::string& id, bool claim_id);
  // Undoes BeginSave.
  void EndSave(const std::string& id, bool claimed_id);

  // The committed checkpoint `id`, pinned; NotFound (saying whether a save
  // of it was begun but never committed) if there is none.
  Result<CommittedCheckpoint> LookupCommitted(const std::string& id);

  // Creates a fresh column family, ingests the files into it in one
  // IngestExternalFiles call, then writes the metadata key and the catalog
  // entry in one synced WriteBatch. On any failure the new column family is
  // dropped and nothing is visible. With overwrite, the old column family
  // is dropped after the commit.
  Result<CheckpointInfo> Commit(CommitRequest request);

  // Test-only: called by Commit at "after_create_cf", "after_ingest" and
  // "after_write" (the commit batch is durable, the old column family not
  // yet dropped), so crash tests can stop a process at each point.
  void TEST_SetCommitHook(std::function<void(std::string_view)> hook) {
    commit_hook_ = std::move(hook);
  }

 private:
  StoreImpl(std::string path, StoreOptions options);

  Status OpenDB();
  std::string FreshColumnFamilyName(const std::string& id) const;
  // True if a writer's staging directory for `id` exists (a save that was
  // begun, maybe by a process that died).
  bool HasStagingDirFor(const std::string& id) const;
  void DropColumnFamilyLocked(const std::string& name);
  Result<std::map<std::string, CheckpointInfo>> ReadCatalog();

  const std::string path_;
  const StoreOptions options_;
  const std::string staging_root_;

  // Before db_: blocks RocksDB holds are freed into the pool when db_
  // closes, so it must outlive db_.
  std::shared_ptr<BlockBufferPool> block_pool_;
  std::shared_ptr<rocksdb::Cache> block_cache_;
  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::ColumnFamilyHandle* default_cf_ = nullptr;

  std::mutex mu_;  // Guards the members below, and serialises commits.
  std::map<std::string, std::shared_ptr<rocksdb::ColumnFamilyHandle>> cfs_;
  std::set<std::string> saving_ids_;
  std::function<void(std::string_view)> commit_hook_;
};

}  // namespace rocksdcp

#endif  // ROCKSDCP_SRC_ROCKSDB_STORE_IMPL_H_
