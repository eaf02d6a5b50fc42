// What a Store reports: a checkpoint as its catalog records it
// (CheckpointInfo), what CollectGarbage, Materialize, KeepLast and Verify
// did or found, and a reader's counters (ReaderStats).

#ifndef ROCKSDCP_STORE_REPORTS_H_
#define ROCKSDCP_STORE_REPORTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rocksdcp/metadata.h"
#include "rocksdcp/status.h"

namespace rocksdcp {

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
  // An incremental save's references (see RocksDBWriterOptions::base): the
  // column families other than its own that hold pieces of it, and those
  // pieces' payload bytes (part of `bytes`; the rest are its own). Empty
  // and 0 for a checkpoint that holds every piece itself.
  std::vector<std::string> referenced_column_families;
  uint64_t referenced_bytes = 0;
  // What its column family takes on disk (SST files and memtables), and
  // what deleting it would free now: that, unless another checkpoint
  // references it, plus the column families only it references that no
  // committed checkpoint holds. Set by List and Info.
  uint64_t stored_bytes = 0;
  uint64_t freed_by_delete = 0;
  // Empty for a sound catalog entry. For one that can't be read (its value
  // does not decode, or names another id), what is wrong with it: then
  // only `id`, from the entry's key, is set, and the checkpoint can't be
  // loaded. List reports such entries beside the sound ones rather than
  // fail; Verify says the same of them.
  std::string damage;
};

// What CollectGarbage removed (or, in a dry run, would remove).
struct GcReport {
  std::vector<std::string> dropped_column_families;
  std::vector<std::string> deleted_staging_files;
  uint64_t freed_bytes = 0;
};

// What Store::Materialize copied and released.
struct MaterializeReport {
  // The referenced pieces it copied, and their payload bytes (the pieces
  // it held are copied too, and not counted here).
  uint64_t pieces = 0;
  uint64_t bytes = 0;
  // Column families it referenced that nothing needs any more, dropped.
  std::vector<std::string> dropped_column_families;
};

// What Store::KeepLast kept and deleted.
struct RetentionReport {
  // The newest checkpoints, newest first.
  std::vector<std::string> kept;
  // The others, oldest first, in the order they were deleted.
  std::vector<std::string> deleted;
};

// One problem Store::Verify found.
struct VerifyProblem {
  // The checkpoint's id.
  std::string checkpoint_id;
  // The item (its fqn and, for a tensor chunk, the chunk's offsets); unset
  // for a problem of the checkpoint itself (its catalog entry or metadata).
  std::optional<MetadataIndex> item;
  // The piece of `item` that is bad; unset for a problem of the item as
  // the metadata describes it, or of the checkpoint.
  std::optional<uint32_t> piece;
  // What is wrong: Corruption, whose message names the checkpoint, the
  // item and the piece as a load's error does, and says what failed.
  Status status;
};

// One item with at least one problem, as Store::Verify sums them up: all
// of them, listed in CheckpointVerifyReport::problems or not.
struct DamagedItem {
  // The item's fqn. A tensor saved in chunks is one item: its chunks'
  // problems are summed here.
  std::string fqn;
  // Pieces of it, over all its chunks, that failed their checks.
  uint64_t bad_pieces = 0;
  // Every problem of it: its bad pieces, and any chunk the metadata
  // describes wrongly (which names no piece, and whose pieces are not read).
  uint64_t problems = 0;
  // The first of them, in key order: Corruption, worded as a load of the
  // item would fail.
  Status first_problem;
};

// What Store::Verify checked of one checkpoint, and what it found.
struct CheckpointVerifyReport {
  std::string checkpoint_id;
  // Items and pieces the metadata lists that were read and checked, and
  // their payload bytes (as the metadata gives them, read or not).
  uint64_t items_checked = 0;
  uint64_t pieces_checked = 0;
  uint64_t bytes_checked = 0;
  // Every problem found, in the order found: catalog entry, metadata, then
  // items in key order; at most VerifyOptions::max_problems of them.
  std::vector<VerifyProblem> problems;
  // Problems found beyond max_problems: counted, not listed.
  uint64_t unlisted_problems = 0;
  // Every item with a problem, once each, in key order (the order items
  // are checked), whether or not its problems are listed: complete
  // whatever max_problems is, and bounded by the items the metadata lists.
  // Problems of the checkpoint itself (its catalog entry or metadata) name
  // no item and are not here.
  std::vector<DamagedItem> damaged_items;

  bool ok() const { return problems.empty() && unlisted_problems == 0; }
};

// What Store::Verify found, checkpoint by checkpoint.
struct VerifyReport {
  // In the order asked for, or, when none were named, in id order.
  std::vector<CheckpointVerifyReport> checkpoints;

  bool ok() const {
    for (const CheckpointVerifyReport& c : checkpoints) {
      if (!c.ok()) return false;
    }
    return true;
  }
};

// Counters of one reader, cumulative since it was made.
struct ReaderStats {
  // Chunk pieces fetched from RocksDB and verified.
  uint64_t pieces_read = 0;
  // Payload bytes of those pieces.
  uint64_t bytes_read = 0;
  // Of pieces_read, those read in place (RocksDBReaderOptions::read_in_place).
  uint64_t pieces_read_in_place = 0;
  // Pieces read in place that did not verify, and were read again through
  // RocksDB.
  uint64_t in_place_misses = 0;
  // Bytes of the checkpoint's files asked to be read ahead
  // (RocksDBReaderOptions::prefetch_bytes).
  uint64_t bytes_prefetched = 0;
  // Of bytes_read, the payload read with O_DIRECT (direct_span_bytes).
  uint64_t bytes_read_direct = 0;
  // Threads the latest ReadData read with (see read_threads).
  uint32_t read_threads = 0;
};

}  // namespace rocksdcp

#endif  // ROCKSDCP_STORE_REPORTS_H_
