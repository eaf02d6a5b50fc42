// Store: one RocksDB directory holding many checkpoints, and the
// StorageWriter / StorageReader that save into and load from it.
//
// On disk (schema/README.md has the full grammar):
//   - the `default` column family is the catalog: `checkpoint/<id>` maps to
//     a CatalogEntry naming the checkpoint's live column family;
//   - each checkpoint is one column family, named by its id, holding its
//     chunk pieces and its `__metadata__` key.
// A checkpoint exists for readers iff its catalog entry and its metadata
// key are both committed; both are written in one synced WriteBatch.
//
// Thread safety: a Store is thread-safe. Many writers and readers created
// from one Store may run at once on distinct threads; each writer or reader
// is used from one thread at a time. Two writers saving the same id at once
// conflict: the second fails with Busy.
//
// Processes: one process opens a store read-write; RocksDB's LOCK file
// enforces this and Open reports it as Busy "store is locked by another
// process". Other processes may open it with `read_only = true` to load or
// inspect (a read-only Store sees the checkpoints committed when it
// opened), or with `follower = true` to write their rank's part of a save.
//
// Failures: a save, delete or GC that fails leaves every committed
// checkpoint as it was. After a failed write into RocksDB itself (a full
// disk, an I/O error while committing, deleting or collecting garbage) a
// Store stops writing: later saves, deletes and GC return IOError "stopped
// writing after an I/O error; reopen it to go on", while loads go on. Open
// the store again once the cause is fixed; the retry then succeeds. A
// failure of a save's last step, the synced write of its catalog entry,
// is indeterminate, as a power cut at that moment is: after reopening, the
// checkpoint is either absent or committed whole, never partly. A store
// one of whose SST files is damaged or missing refuses to open read-write
// (Corruption naming the file); opened read-only it loads every other
// checkpoint, and Verify finds the damaged one.
//
// Info log: a read-write Store keeps RocksDB's messages in <store>/LOG,
// at most 4 MiB (then LOG.old, at most one); a line that can't be written
// (a full disk) is dropped, never an error. A read-only Store writes
// nothing into the store, its log included.
//
// REQUIRES: a Store outlives every writer and reader made from it.

#ifndef ROCKSDCP_STORE_H_
#define ROCKSDCP_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rocksdcp/metadata.h"
#include "rocksdcp/status.h"
#include "rocksdcp/storage.h"
#include "rocksdcp/store_options.h"
#include "rocksdcp/store_reports.h"

namespace rocksdcp {

// OK for an id a Store accepts as a checkpoint's: 1..128 bytes, without
// control characters (bytes < 0x20 or 0x7f), and not "default" (RocksDB's
// own column family). Otherwise InvalidArgument, saying which rule the id
// breaks.
Status ValidateCheckpointId(std::string_view checkpoint_id);

// Saves a checkpoint into a Store. Make one with Store::NewWriter. Calls
// come in StorageWriter's order (storage.h): Reset, SetUpStorageWriter,
// PrepareLocalPlan, PrepareGlobalPlan (coordinator), WriteData, Finish
// (coordinator).
//
// GetStorageMeta() returns the id of the latest Reset and a save id: from
// Reset, one of this rank's own; from WriteData on, the coordinator's,
// which every rank's plan carries and the checkpoint records; and after
// the save, on every rank, that committed one, until the next Reset. So
// each rank's writer can tell which save of the id it made, as a reader
// sees it in Metadata::storage_meta.
class RocksDBStorageWriter : public StorageWriter {
 public:
  // rocksdcp::ValidateCheckpointId, as DCP's validate_checkpoint_id.
  static Status ValidateCheckpointId(std::string_view checkpoint_id) {
    return rocksdcp::ValidateCheckpointId(checkpoint_id);
  }

  // Reset, with a save id the caller chose rather than a fresh random one:
  // for a driver that reports the save's StorageMeta before the writer is
  // set up (torch's save asks for it before set_up_storage_writer), so
  // that the id it reported is the one the checkpoint records. 1 to 64
  // characters of [0-9A-Za-z_-]; the caller keeps it unique per save.
  virtual Status ResetWithSaveId(std::string_view checkpoint_id,
                                 std::string_view save_id) = 0;
};

// Loads a checkpoint from a Store. Make one with Store::NewReader. Calls
// come in StorageReader's order (storage.h): Reset, ReadMetadata,
// SetUpStorageReader, PrepareLocalPlan, PrepareGlobalPlan (coordinator),
// ReadData.
class RocksDBStorageReader : public StorageReader {
 public:
  // rocksdcp::ValidateCheckpointId, as DCP's validate_checkpoint_id.
  static Status ValidateCheckpointId(std::string_view checkpoint_id) {
    return rocksdcp::ValidateCheckpointId(checkpoint_id);
  }

  virtual ReaderStats stats() const = 0;
};

class Store {
 public:
  // Opens (or creates) the store at `path`.
  static Result<std::unique_ptr<Store>> Open(const std::string& path,
                                             const StoreOptions& options = {});

  Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;
  virtual ~Store() = default;

  virtual const std::string& path() const = 0;

  // Committed checkpoints, oldest first; a damaged catalog entry is listed
  // too, first, with CheckpointInfo::damage saying what is wrong.
  virtual Result<std::vector<CheckpointInfo>> List() = 0;

  // NotFound if `id` is not committed.
  virtual Result<CheckpointInfo> Info(std::string_view id) = 0;

  // Deletes a committed checkpoint: the catalog entry goes first, in a
  // synced write, then its column family is dropped. Readers already
  // loading it finish their load. A checkpoint that others reference
  // (incremental saves) leaves the catalog at once, but its column family
  // stays until no committed checkpoint references it (Delete of the last
  // one, Materialize, or CollectGarbage drops it then); CheckpointInfo::
  // freed_by_delete says what a Delete frees. The column families the
  // deleted checkpoint referenced go with it if nothing else needs them.
  // While another catalog entry is damaged, no column family is dropped
  // (the damaged one may reference it): CollectGarbage drops them once
  // that entry is deleted. A damaged catalog entry (List marks it;
  // under an id no save accepts, such as "", too) is deleted alone,
  // dropping no column family, since the one it names may be another's
  // (CollectGarbage drops an orphan). Corruption, and
  // nothing deleted, if another entry names the same column family.
  // REQUIRES: not read-only.
  virtual Status Delete(std::string_view id) = 0;

  // Retention: deletes every committed checkpoint but the newest `n`, by
  // created time (of two created in the same microsecond, the greater id
  // counts as newer), oldest first, each as Delete does. A failed delete
  // stops it; the error names the ones deleted before it. Damaged catalog
  // entries (CheckpointInfo::damage) are neither counted nor deleted.
  // REQUIRES: not read-only.
  Result<RetentionReport> KeepLast(uint64_t n);

  // Drops column families that no committed catalog entry names, as its
  // own or as one it references, and no save in progress pins (left by
  // saves that never finished, or by deleted checkpoints that were
  // referenced), and deletes staging files of writers that are no longer
  // running. With `dry_run`, only reports. Refuses
  // (Corruption) while a catalog entry is damaged: the column family it
  // named can't be told from garbage.
  // REQUIRES: not read-only.
  virtual Result<GcReport> CollectGarbage(bool dry_run = false) = 0;

  // What the open reclaimed (StoreOptions::reclaim_torn_saves): empty for
  // a read-only store, or when nothing was left.
  virtual const GcReport& ReclaimedOnOpen() const = 0;

  // Makes checkpoint `id` (an incremental save's) stand alone: copies
  // every piece it references, and those it holds, each verified as a load
  // does, into a fresh column family, and commits it there without
  // references as an overwrite of the checkpoint with itself (one synced
  // write; its id, content and created time stay). Then its old column
  // family, and the column families it referenced, are dropped unless
  // another checkpoint references them. Memory: one piece at a time,
  // through a staging SST file; disk: a second copy of the checkpoint
  // until the commit. A failure or crash at any point leaves it as it was.
  // Busy while a save of `id` runs in this process; NotFound if it is not
  // committed; Aborted if it is deleted or overwritten meanwhile;
  // Corruption, and nothing changed, if a piece is damaged. A checkpoint
  // with no references is left as it is. `progress` counts all its bytes.
  // REQUIRES: not read-only.
  virtual Result<MaterializeReport> Materialize(
      std::string_view id, const ProgressCallback& progress = {}) = 0;

  virtual Result<std::unique_ptr<RocksDBStorageWriter>> NewWriter(
      const RocksDBWriterOptions& options = {}) = 0;
  virtual Result<std::unique_ptr<RocksDBStorageReader>> NewReader(
      const RocksDBReaderOptions& options = {}) = 0;

  // Checks the checkpoints options.checkpoint_ids names (every committed
  // one if it names none) as a load would: the catalog entry, the metadata
  // value against the checksum the entry records, and every piece of every
  // item the metadata lists (RocksDB's block checksums, the FlatBuffers
  // verifier, the identifier, the piece's header against the metadata, its
  // XXH3). It does not stop at a bad piece: per checkpoint, the report lists
  // the problems (up to options.max_problems; the rest are counted) and,
  // whatever that cap, names every damaged item once. A damaged checkpoint
  // is a finding in the report, not an error. The errors: NotFound for a
  // named checkpoint that is not committed, InvalidArgument for an invalid
  // id, FailedPrecondition on a follower, IOError when the store cannot be
  // read. Reads one piece at a time, on the calling thread, through the
  // store's pooled read buffers. Works on a read-only store. Blocks this
  // Store already holds in its block cache (8 MiB) are checked as cached:
  // open a fresh Store (as the CLI does) to check every byte on disk.
  virtual Result<VerifyReport> Verify(const VerifyOptions& options = {}) = 0;
};

// The payload bytes of item `index` of a checkpoint of a Store, as the
// metadata its reader read records them (a byte item's size is nowhere
// else in DCP's metadata). A reader checks, before it hands the metadata
// out, that every item's bytes fit in what the store really holds.
// Corruption if the metadata records no storage for it, or its record
// does not decode.
Result<uint64_t> StoredItemBytes(const Metadata& metadata,
                                 const MetadataIndex& index);

}  // namespace rocksdcp

#endif  // ROCKSDCP_STORE_H_
