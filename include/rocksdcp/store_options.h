// The options of a Store (StoreOptions), of its writers
// (RocksDBWriterOptions), its readers (RocksDBReaderOptions) and of
// Store::Verify (VerifyOptions). Sizes are in bytes. docs/tuning.md says
// when to change which, and why the defaults are what they are.

#ifndef ROCKSDCP_STORE_OPTIONS_H_
#define ROCKSDCP_STORE_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

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
  // can't be the coordinator: it writes staging files that the coordinator
  // ingests. The store must exist, at the same path on every rank.
  // Default: false
  bool follower = false;

  // On a read-write open, reclaim what saves that never committed left in
  // the store (a trainer killed mid-save), as CollectGarbage would, before
  // Open returns; Store::ReclaimedOnOpen says what went. Staging files of
  // writers still running, in any process, are never touched, and a
  // failure to reclaim goes to the store's LOG, never fails the open.
  // False leaves it all to CollectGarbage.
  // Default: true
  bool reclaim_torn_saves = true;

  // ---- Performance ----

  // RocksDB's background threads, which flush the catalog. Checkpoints are
  // never compacted, so few are needed.
  // Default: 2
  int max_background_jobs = 2;

  // The most SST files the store keeps open at once, over all its
  // checkpoints (a file descriptor and an index in memory each); a file is
  // opened when first read. -1 opens every file of every checkpoint when
  // the store opens and keeps it open: that open's time, memory and
  // descriptors then grow with the checkpoints. Other values under 20 are
  // refused.
  // Default: 256
  int max_open_files = 256;

  // The write-ahead log past which the store flushes in the background, so
  // that the log on disk and the memory held for it stay bounded however
  // long the store is open (each commit logs its checkpoint's metadata,
  // about 300 bytes an item). A soft bound. 0 leaves it to RocksDB, whose
  // bound grows with the number of checkpoints.
  // Default: 64 MiB
  uint64_t max_total_wal_size = 64ull << 20;

  // The most bytes of freed read buffers the store keeps for reuse, shared
  // by all its readers: reused memory costs no page faults. Size it to hold
  // the pieces in flight, the read threads times the largest piece, and
  // the readers' O_DIRECT buffers (direct_span_bytes each). Kept buffers
  // stay resident after a load; 0 returns every buffer at once. Pieces
  // under 1 MiB don't use it.
  // Default: 256 MiB
  uint64_t read_buffer_pool_bytes = 256ull << 20;

  // Read SST files with O_DIRECT, bypassing the page cache: a load leaves
  // the page cache to what else the machine caches and spends less CPU,
  // but every load reads the disk, warm or not. Writes are unaffected.
  // Open fails with InvalidArgument where the file system refuses O_DIRECT
  // (tmpfs before Linux 6.6).
  // Default: false
  bool use_direct_reads = false;
};

// How a writer stores each piece's payload (RocksDBWriterOptions::
// compression).
// NOTE: these values are stable; never change an existing value.
enum class Compression : uint8_t {
  // As it is.
  kNone = 0,
  // Byte planes, each compressed with zstd: byte k of every element of the
  // piece (its dtype's size; 1 for a byte item) goes into plane k, and each
  // plane is compressed alone, or kept as it is where zstd does not shrink
  // it. Trained weights' exponent bytes compress well, their mantissa
  // bytes hardly.
  kBytePlaneZstd = 1,
};

// Which pieces a writer with compression on offers to its codec
// (RocksDBWriterOptions::compression_policy).
// NOTE: these values are stable; never change an existing value.
enum class CompressionPolicy : uint8_t {
  // Every piece: the smallest checkpoint, saved at the pace at which the
  // cores compress.
  kAlways = 0,
  // A write thread's pieces only while the disk bounds that thread's save
  // (see compression_policy).
  kWhenDiskBound = 1,
};

struct RocksDBWriterOptions {
  // ---- Behavior ----

  // Saving an id that is already committed fails with AlreadyExists unless
  // this is true. With overwrite, the new checkpoint replaces the old one
  // atomically when it commits: a crash at any point leaves either the old
  // checkpoint or the new one.
  // Default: false
  bool overwrite = false;

  // Called as bytes are written by WriteData.
  // Default: none
  ProgressCallback progress;

  // ---- Incremental saves ----

  // Save incrementally against `base`, a committed checkpoint of this
  // store: a piece whose payload is identical to the base's piece at the
  // same key (same item, chunk, piece, dtype and chunk shape; compared by
  // the XXH3-128 the base recorded, so the base is not read) is not written
  // again but referenced. Loads follow references. The base is pinned until
  // the save commits or is abandoned: no Delete, overwrite or GC drops it
  // meanwhile. NotFound at SetUpStorageWriter if `base` is not committed.
  // Only the coordinator's options count.
  // Default: empty (a full save)
  std::string base;

  // Base the save on the newest committed checkpoint (by created time),
  // whatever its id, the one being overwritten included; a full save if
  // the store has none. Not together with `base`.
  // Default: false
  bool base_on_newest = false;

  // ---- Compression ----

  // How pieces are stored. With kBytePlaneZstd a piece that compression
  // shrinks by at least min_compression_saving is stored compressed; the
  // others, and pieces under 64 bytes, are stored as they are. It trades
  // CPU on save and load for bytes on disk: a win where storage is slow
  // (SD cards, eMMC) or space is short, a loss on a disk faster than zstd
  // unless compression_policy leaves it to the disk to decide. Readers
  // older than compression refuse compressed pieces.
  // Default: kNone
  Compression compression = Compression::kNone;

  // Which pieces are offered to the codec. kWhenDiskBound lets each write
  // thread decide, window by window of its payload, from how long it waits
  // for the disk: it compresses while that predicts a tenth less time. On
  // a disk that keeps up, a save runs at nearly uncompressed speed; on a
  // slower one it is stored compressed. It writes staging files back as
  // they are written, with at most bytes_per_sync (or 2 MiB) under
  // writeback. kAlways: the smallest checkpoint, at compression's speed.
  // Default: kWhenDiskBound
  CompressionPolicy compression_policy = CompressionPolicy::kWhenDiskBound;

  // zstd's level for kBytePlaneZstd, in [-7, 19]: 1 is zstd's fastest
  // positive level; negative levels are faster still and compress less.
  // Default: 1
  int compression_level = 1;

  // The least share of a piece's payload compression must save for the
  // piece to be stored compressed, in [0, 1).
  // Default: 0.05
  double min_compression_saving = 0.05;

  // ---- Performance ----

  // Tensor chunks larger than this are split into pieces of this size, each
  // its own key and checksum. A load reads whole pieces, so smaller ones
  // suit resharded loads and smaller read buffers; larger ones mean fewer
  // keys and less index memory (about 80 bytes a piece). In [1, 1 GiB], and
  // memory_budget must hold about 4 pieces; above 32 MiB saves slow down.
  // Default: 128 KiB
  uint64_t max_piece_bytes = 128ull << 10;

  // Each of WriteData's threads starts a new staging SST file once its
  // current one holds this many bytes.
  // Default: 1 GiB
  uint64_t target_file_bytes = 1ull << 30;

  // WriteData cuts this rank's items, in key order, into this many runs of
  // about equal bytes, each written on a thread of its own into staging
  // files of its own. More threads overlap copying and checksumming with
  // the kernel's writes, up to the cores and disk bandwidth there are; each
  // costs a set of buffers (memory_budget) and a file. An item is never
  // split between threads. 0 picks one per hardware thread, at most one
  // per 32 MiB of data. Threads that don't fit memory_budget don't start.
  // Default: 0
  int write_threads = 0;

  // Bounds the memory WriteData allocates, over all its threads; the state
  // dict, read in place, is not counted. A thread needs about
  // 4 * max_piece_bytes + writable_file_max_buffer_size + 1 MiB; with
  // compression, 3 more pieces and zstd's context. WriteData starts as many
  // threads as fit; NewWriter refuses a budget below one thread's need.
  // Default: 512 MiB
  uint64_t memory_budget = 512ull << 20;

  // Benchmark and diagnostic knob: reuse each thread's piece buffer from
  // piece to piece, and the coordinator's metadata and commit buffers from
  // save to save, until the writer is destroyed. False allocates them
  // afresh every time, to measure what reuse saves.
  // Default: true
  bool reuse_buffers = true;

  // Write staging SST files with O_DIRECT, bypassing the page cache: the
  // least CPU and no page cache to fill, but each write (of
  // writable_file_max_buffer_size) waits for the disk, so a thread's
  // copying no longer overlaps its writing. The save fails with IOError
  // where the file system refuses O_DIRECT (tmpfs before Linux 6.6).
  // Default: false
  bool use_direct_writes = false;

  // Start writing a staging file back to disk every this many bytes
  // (sync_file_range), so that the fsync that ends each file waits for
  // less. 0 leaves it to RocksDB, which starts writeback about every MiB.
  // Default: 0
  uint64_t bytes_per_sync = 0;

  // The buffer through which a staging file is written. With buffered
  // I/O, small values are gathered in it and a piece larger than it goes
  // to the kernel in one write; with use_direct_writes it is the size of
  // each write. In [4 KiB, 1 GiB].
  // Default: 1 MiB
  uint64_t writable_file_max_buffer_size = 1ull << 20;
};

struct RocksDBReaderOptions {
  // Called as ReadData completes items (and, for a tensor box spanning
  // several pieces, each piece). With several read threads the calls come
  // from any of them, one at a time, never two at once.
  // Default: none
  ProgressCallback progress;

  // ---- Performance ----

  // ReadData's threads, the calling thread among them. Each fetches,
  // verifies and copies pieces through buffers of its own, so that several
  // pieces' steps overlap, on cores and on the disk. 0 picks one per
  // hardware thread and at least 4, but at most one per 32 MiB of the
  // plan's payload. Threads that don't fit memory_budget don't start.
  // Must be >= 0.
  // Default: 0
  int read_threads = 0;

  // Bounds the memory ReadData holds for what it reads. A thread holds one
  // piece (up to the max_piece_bytes the checkpoint was saved with) or a
  // batch of small items (up to 4 MiB), up to 1 MiB read in place,
  // direct_span_bytes read with O_DIRECT, and two more pieces' worth for a
  // compressed piece. ReadData starts as many threads as fit, at least one.
  // Not counted: the state dict, the store's kept buffers and block cache,
  // and a byte item of several pieces, which is assembled whole.
  // Default: 512 MiB
  uint64_t memory_budget = 512ull << 20;

  // Read through the store's block cache for checkpoints (8 MiB). Only a
  // block read this way can be handed out in place; otherwise every piece
  // is copied once more. Blocks of small items stay, so items sharing a
  // block are read from the file once; a larger piece passes through.
  // Default: true
  bool fill_cache = true;

  // Read each piece whose place in its file the checkpoint records (pieces
  // of 4 KiB or more) straight from the file, and verify it against the
  // metadata's XXH3-128 before it is used, skipping RocksDB's copies and
  // block checksum. A piece that does not verify is read again through
  // RocksDB, which says what is wrong with it. Off: every piece is read
  // through RocksDB. No effect with StoreOptions::use_direct_reads.
  // Default: true
  bool read_in_place = true;

  // While a load reads the metadata and plans, a thread asks the kernel to
  // read the checkpoint's files ahead, in the order loads read, until
  // ReadData begins or it has asked for this many bytes: the disk works
  // while the CPU plans. It holds only page cache, which the kernel
  // reclaims; a partial load may read up to this many bytes it does not
  // need. No effect with StoreOptions::use_direct_reads. 0 turns it off.
  // Default: 256 MiB
  uint64_t prefetch_bytes = 256ull << 20;

  // Pieces read in place that are not in the page cache are read with
  // O_DIRECT, up to this many bytes of a file at once per thread, into a
  // buffer from the store's pool (memory_budget counts it): large reads,
  // no page cache filled, but loading the same checkpoint again reads the
  // disk again. Cached bytes, and files that refuse O_DIRECT, are read
  // through the page cache. 0 reads every piece through the page cache;
  // at most 1 GiB.
  // Default: 8 MiB (SmallDeviceProfile: 2 MiB)
  uint64_t direct_span_bytes = 8ull << 20;

  // ---- Integrity ----

  // Verify RocksDB's checksum of every block a piece is read from, before
  // RocksDB parses it. Every piece is verified by its own XXH3 and header
  // whatever this is; off saves a second hash of the same bytes, but a
  // damaged block can then crash the process inside RocksDB: turn it off
  // only for a store this process wrote and trusts. Store::Verify checks
  // both whatever this is.
  // Default: true
  bool verify_block_checksums = true;
};

struct VerifyOptions {
  // The checkpoints to verify; empty verifies every committed one.
  // Default: empty
  std::vector<std::string> checkpoint_ids;

  // Called on the calling thread after each piece is checked, with bytes
  // and items over every checkpoint verified. The totals start as the
  // catalog entries record them, and are corrected to what a checkpoint's
  // metadata lists when it is read (or drop it, if it can't be).
  // Default: none
  ProgressCallback progress;

  // The most problems listed per checkpoint; the rest are only counted.
  // Bounds the report's memory against damaged or forged metadata that
  // describes billions of pieces. CheckpointVerifyReport::damaged_items
  // still names every damaged item: 0 lists no problem, only those.
  // Default: 10000
  uint64_t max_problems = 10000;
};

}  // namespace rocksdcp

#endif  // ROCKSDCP_STORE_OPTIONS_H_
