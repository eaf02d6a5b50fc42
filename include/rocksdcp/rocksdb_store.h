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
// REQUIRES: a Store outlives every writer and reader made from it.

#ifndef ROCKSDCP_ROCKSDB_STORE_H_
#define ROCKSDCP_ROCKSDB_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rocksdcp/metadata.h"
#include "rocksdcp/status.h"
#include "rocksdcp/storage.h"

namespace rocksdcp {

struct StoreOptions {
  // ---- Behavior ----

  // Create the store directory and its RocksDB when missing. When false,
  // opening a missing store is NotFound.
  // Default: true
  bool create_if_missing = true;

  // Open read-only: load and inspect, never change. Many processes may open
  // a store read-only while one holds it read-write. Such a Store sees the
  // checkpoints committed at the time it opened.
  // Default: false
  bool read_only = false;

  // Open as a follower rank of a save whose coordinator runs in another
  // process (MPI ranks): no RocksDB is opened, so the coordinator's process
  // can hold the store read-write. Only NewWriter works, and its writer
  // can't be the coordinator: it writes staging SST files that the
  // coordinator ingests. The store must exist, at the same path on every
  // rank (one node, or a shared filesystem mounted at the same path).
  // Default: false
  bool follower = false;

  // ---- Performance ----

  // RocksDB background threads (flushes of the catalog). Checkpoint column
  // families are never compacted, so few are needed.
  // Default: 2
  int max_background_jobs = 2;
};

// NOTE: persisted in catalog entries; never change existing values.
enum class CheckpointState : uint8_t {
  kCommitted = 1,
};

// One checkpoint as the catalog records it.
struct CheckpointInfo {
  std::string id;
  // The RocksDB column family holding it: the id, or "<id>~<generation>"
  // after an overwrite.
  std::string column_family;
  CheckpointState state = CheckpointState::kCommitted;
  // When finish committed it, in microseconds since the Unix epoch.
  int64_t created_unix_micros = 0;
  // Payload bytes (tensor data and byte items) and item count.
  uint64_t bytes = 0;
  uint64_t items = 0;
  int32_t world_size = 0;
  // XXH3-64 of the encoded metadata value, checked on every read of it.
  uint64_t metadata_checksum = 0;
};

// What CollectGarbage removed (or, in a dry run, would remove).
struct GcReport {
  std::vector<std::string> dropped_column_families;
  std::vector<std::string> deleted_staging_files;
  uint64_t freed_bytes = 0;
};

struct RocksDBWriterOptions {
  // ---- Behavior ----

  // Saving an id that is already committed fails with AlreadyExists unless
  // this is true. With overwrite, the new checkpoint is written into a fresh
  // column family and replaces the old one atomically in the commit batch;
  // the old column family is dropped afterwards. A crash at any point leaves
  // either the old checkpoint or the new one.
  // Default: false
  bool overwrite = false;

  // Called as bytes are written by WriteData.
  // Default: none
  ProgressCallback progress;

  // ---- Performance ----

  // Tensor chunks larger than this are split into pieces of this size, each
  // its own key and checksum. Larger pieces mean fewer keys; smaller ones
  // mean finer-grained resharded reads and smaller read buffers. Must be in
  // [1, 1 GiB]: FlatBuffers can't encode 2 GiB and RocksDB refuses values
  // over 4 GiB.
  // Default: 64 MiB
  uint64_t max_piece_bytes = 64ull << 20;

  // WriteData starts a new staging SST file once the current one holds this
  // many bytes.
  // Default: 1 GiB
  uint64_t target_file_bytes = 1ull << 30;
};

struct RocksDBReaderOptions {
  // Called as bytes are read by ReadData.
  // Default: none
  ProgressCallback progress;

  // ---- Performance ----

  // Keep read blocks in RocksDB's block cache. A piece is one block of up
  // to max_piece_bytes, so caching it would evict everything else.
  // Default: false
  bool fill_cache = false;
};

// Counters of one reader, cumulative since it was made.
struct ReaderStats {
  // Chunk pieces fetched from RocksDB and verified.
  uint64_t pieces_read = 0;
  // Payload bytes of those pieces.
  uint64_t bytes_read = 0;
};

// Saves a checkpoint into a Store. Make one with Store::NewWriter.
class RocksDBStorageWriter : public StorageWriter {
 public:
  // OK for ids that are 1..128 bytes, without control characters (bytes
  // < 0x20 or 0x7f), and not "default" (RocksDB's own column family). The
  // error says which rule the id breaks.
  static Status ValidateCheckpointId(std::string_view checkpoint_id);
};

// Loads a checkpoint from a Store. Make one with Store::NewReader.
class RocksDBStorageReader : public StorageReader {
 public:
  static Status ValidateCheckpointId(std::string_view checkpoint_id) {
    return RocksDBStorageWriter::ValidateCheckpointId(checkpoint_id);
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

  // Committed checkpoints, oldest first.
  virtual Result<std::vector<CheckpointInfo>> List() = 0;

  // NotFound if `id` is not committed.
  virtual Result<CheckpointInfo> Info(std::string_view id) = 0;

  // Deletes a committed checkpoint: the catalog entry goes first, in a
  // synced write, then its column family is dropped. Readers already
  // loading it finish their load.
  // REQUIRES: not read-only.
  virtual Status Delete(std::string_view id) = 0;

  // Drops column families that no committed catalog entry names (left by
  // saves that never finished) and deletes staging files of writers that
  // are no longer running. With `dry_run`, only reports.
  // REQUIRES: not read-only.
  virtual Result<GcReport> CollectGarbage(bool dry_run = false) = 0;

  virtual Result<std::unique_ptr<RocksDBStorageWriter>> NewWriter(
      const RocksDBWriterOptions& options = {}) = 0;
  virtual Result<std::unique_ptr<RocksDBStorageReader>> NewReader(
      const RocksDBReaderOptions& options = {}) = 0;
};

}  // namespace rocksdcp

#endif  // ROCKSDCP_ROCKSDB_STORE_H_
