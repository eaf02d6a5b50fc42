// The options of a Store (StoreOptions), of its writers
// (RocksDBWriterOptions), its readers (RocksDBReaderOptions) and of
// Store::Verify (VerifyOptions).

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
  // can't be the coordinator: it writes staging SST files that the
  // coordinator ingests. The store must exist, at the same path on every
  // rank (one node, or a shared filesystem mounted at the same path).
  // Default: false
  bool follower = false;

  // On a read-write open, reclaim what saves that never committed left in
  // the store (a trainer killed mid-save, a preempted job): what
  // CollectGarbage would drop and delete, before Open returns. Column
  // families are left alone while a catalog entry is damaged (as
  // CollectGarbage does), and staging files of writers still running, in
  // any process, are never touched. A failure to reclaim goes to the store's
  // LOG, never fails the open; Store::ReclaimedOnOpen says what went.
  // False leaves it all to CollectGarbage (`rocksdcp gc --dry-run`, which
  // must report what it finds, opens so).
  // Default: true
  bool reclaim_torn_saves = true;

  // ---- Performance ----

  // RocksDB background threads (flushes of the catalog). Checkpoint column
  // families are never compacted, so few are needed.
  // Default: 2
  int max_background_jobs = 2;

  // The most SST files the store keeps open at once (a file descriptor and
  // RocksDB's parsed index for each), across all its checkpoints. A table
  // file is opened when first read and closed when others push it out, so
  // opening a store costs the same with one checkpoint or a thousand. -1
  // opens every table file of every checkpoint when the store opens and
  // keeps them open: that open's time, memory and descriptors then grow
  // with the checkpoints in the store. RocksDB keeps 10 of these for its
  // own files, and at least 16 table files (one per shard of its table
  // cache). Other values under 20 are refused.
  // Default: 256
  int max_open_files = 256;

  // The write-ahead log the store keeps, in bytes. Each commit writes its
  // checkpoint's metadata (about 300 bytes an item: 16 MB for 51,000) and
  // catalog entry into the WAL, and the metadata stays in memory until
  // its column family is flushed; RocksDB deletes a WAL file only once
  // every column family written in it has flushed, which the catalog's
  // rarely does. Past this many bytes RocksDB flushes them in the
  // background, so that the WAL on disk and the memory held for it stay
  // bounded however long the store is open: a soft bound, which the WAL
  // runs past while the flushes run or wait for a busy machine's cores.
  // 0 leaves it to RocksDB, whose bound grows with the number of column
  // families (a long-lived store's WAL grew by each commit's metadata).
  // Default: 64 MiB
  uint64_t max_total_wal_size = 64ull << 20;

  // The most bytes of freed read buffers the store keeps for reuse, shared
  // by all its readers. RocksDB reads each piece (up to max_piece_bytes)
  // into a buffer of its own; fresh memory costs a page fault per 4 KiB on
  // first touch, which costs more than reading the bytes from the page
  // cache, so buffers of 1 MiB and more are kept and reused. Size it to
  // hold the pieces in flight: the read threads of the store's readers
  // times the largest piece (the writer's max_piece_bytes, plus up to
  // 1/16). The pool keeps only buffers it has handed out, and they stay
  // resident after a load (on transparent huge pages where the kernel
  // allows); 0 returns every buffer to the system at once. Pieces of the
  // default 128 KiB don't use it: malloc recycles buffers that small; it
  // serves checkpoints saved with a max_piece_bytes of 1 MiB and more
  // (benchmarks/README.md has the measurements).
  // Default: 256 MiB
  uint64_t read_buffer_pool_bytes = 256ull << 20;

  // Read SST files with O_DIRECT, bypassing the page cache: a load then
  // leaves the page cache to whatever else the machine caches (a trainer's
  // data set) and spends no CPU filling it, but every load reads from the
  // disk, warm or not, and RocksDB reads each block into an aligned buffer
  // of its own, then copies it: about half the CPU of a buffered load, and
  // slower cold and warm where the host caches and reads ahead
  // (benchmarks/README.md). Writes are unaffected. The store's file system
  // must take O_DIRECT (tmpfs before Linux 6.6 does not): Open fails with
  // InvalidArgument where it does not.
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
  // bytes hardly: see benchmarks/README.md for ratios and speeds.
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
  // this is true. With overwrite, the new checkpoint is written into a fresh
  // column family and replaces the old one atomically in the commit batch;
  // the old column family is dropped afterwards. A crash at any point leaves
  // either the old checkpoint or the new one.
  // Default: false
  bool overwrite = false;

  // Called as bytes are written by WriteData.
  // Default: none
  ProgressCallback progress;

  // ---- Incremental saves ----

  // Save incrementally against `base`, a committed checkpoint of this
  // store: a piece whose payload bytes are identical to the base's piece
  // at the same key (same item, chunk and piece, with the same dtype and
  // chunk shape) is not written again; the new checkpoint stores a
  // reference to the column family that holds the base's piece (the
  // base's own, or the one the base references: references are one level
  // deep). Identity is the XXH3-128 of the payload bytes, which every
  // piece's storage info records, so the base's data is not read; the
  // hash of each piece is computed from the state dict before its bytes
  // are copied. Loads follow references; Store::Delete of a referenced
  // checkpoint keeps its column family while it is referenced, and
  // Store::Materialize copies what a checkpoint references into its own.
  // The base and what it references are pinned from SetUpStorageWriter
  // until the save commits or is abandoned, so no Delete, overwrite or GC
  // drops them meanwhile. NotFound at SetUpStorageWriter if `base` is not
  // committed. Only the coordinator's options count: followers learn the
  // base, and its piece hashes for the items they write, from their plan.
  // Default: empty (a full save)
  std::string base;

  // Base the save on the newest committed checkpoint (by created time),
  // whatever its id, the one being overwritten included; a full save if
  // the store has none. Not together with `base`.
  // Default: false
  bool base_on_newest = false;

  // ---- Compression ----

  // How pieces are stored. With kBytePlaneZstd a piece that compression
  // shrinks by at least min_compression_saving is stored compressed (piece
  // format version 3, which readers from before compression refuse); the
  // others, and pieces under 64 bytes, are stored as they are. It trades
  // CPU on save and load for bytes on disk: a win where storage is slow
  // (SD cards, eMMC) or space is short, a loss on a disk faster than zstd
  // unless compression_policy leaves it to the disk to decide
  // (benchmarks/README.md). Every reader, the CLI and Store::Verify decode
  // compressed pieces whatever this option says. Checksums cover both the
  // stored and the decoded bytes, and an incremental save compares
  // decoded payloads, so an unchanged piece is referenced whatever codec
  // wrote either save.
  // Default: kNone
  Compression compression = Compression::kNone;

  // Which pieces are offered to the codec. kWhenDiskBound decides for
  // each write thread, window by window of its payload (4 *
  // bytes_per_sync bytes: 8 MiB, with write-behind every 2 MiB, if
  // bytes_per_sync is 0), from what it measured: its own work per byte
  // with and without compression, the share compressed pieces store, and
  // the time the disk takes per byte, seen in the windows that waited for
  // it. It compresses the next window if that predicts at least a tenth
  // less time; a thread that never waited does not compress. Each
  // thread's first window is an eighth of the others and compressed, so a
  // save that small is compressed whole. On a disk that keeps up with
  // uncompressed writes a save then runs at nearly an uncompressed one's
  // speed, stored mostly uncompressed; on one slower than the cores
  // compress, it is stored compressed and gains what compression saves
  // (benchmarks/README.md). To see the waits, staging files are written
  // back as they are written, with at most bytes_per_sync under writeback
  // (RocksDB's strict_bytes_per_sync), which also bounds the page cache a
  // save dirties; with use_direct_writes, the writes are the waits.
  // kAlways offers every piece: the smallest checkpoint, at the speed of
  // compression.
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
  // its own key and checksum. Larger pieces mean fewer keys; smaller ones
  // mean finer-grained resharded reads and smaller read buffers. Must be in
  // [1, 1 GiB]: FlatBuffers can't encode 2 GiB and RocksDB refuses values
  // over 4 GiB; memory_budget must hold about 4 pieces.
  //
  // Why 128 KiB: a load reads whole pieces, so a rank whose shard starts
  // or ends inside a piece reads, verifies and drops the rest of it, and
  // resharded loads want small pieces; whole tensors save and load at the
  // same speed from 128 KiB to 8 MiB. Smaller pieces cost per-key work and
  // index memory (RocksDB keeps about 80 bytes per piece while a
  // checkpoint's files are open). Not above 32 MiB: RocksDB 7.8's SST
  // writer copies each piece into a block buffer it allocates afresh, and
  // glibc maps requests over 32 MiB afresh, every page faulting on first
  // touch. The measurements are in benchmarks/README.md ("Piece size").
  // Default: 128 KiB
  uint64_t max_piece_bytes = 128ull << 10;

  // Each of WriteData's threads starts a new staging SST file once its
  // current one holds this many bytes.
  // Default: 1 GiB
  uint64_t target_file_bytes = 1ull << 30;

  // WriteData cuts this rank's items, in key order, into this many runs of
  // about equal bytes, and writes each run into staging SST files of its
  // own on a thread of its own. More threads overlap the copying and
  // checksumming of pieces with each other and with the kernel's write
  // path, up to the cores and disk bandwidth there are; each costs one
  // more set of buffers (see memory_budget) and one more file, synced on
  // its own. An item is never split between threads, so a rank holding one
  // huge tensor writes it on one thread. 0 picks one thread per hardware
  // thread, but no more than one per 32 MiB of data. Either way, threads
  // whose buffers would not fit memory_budget are not started.
  // Default: 0
  int write_threads = 0;

  // Bounds the memory WriteData allocates for what it writes, over all its
  // threads; the state dict itself is not counted, as WriteData reads it in
  // place. A thread holds about 4 * max_piece_bytes +
  // writable_file_max_buffer_size + 1 MiB: the piece it encodes, RocksDB's
  // copy of the previous one in the SST block builder (SstFileWriter copies
  // every value into its block buffer; it has no call that takes a value in
  // place, and it grows that buffer by doubling for a file's first block),
  // what the allocator keeps of freed block buffers, and the file's write
  // buffer; with compression, 3 more pieces and zstd's context. WriteData
  // starts only as many threads as fit, and NewWriter refuses a budget smaller
  // than one thread's need. A larger budget allows more threads and larger
  // pieces. Default: 512 MiB
  uint64_t memory_budget = 512ull << 20;

  // Benchmark and diagnostic knob: whether each thread's piece buffer (a
  // pre-sized FlatBuffers builder) is reused from piece to piece, and kept
  // by the writer for its next save until the writer is destroyed; and so
  // the coordinator's buffers for the metadata and the batch that commits
  // it (each about the encoded metadata's size: 16 MB for 51,000 items).
  // False allocates fresh buffers for every piece and every commit, to
  // measure what reuse saves: fresh memory costs a page fault per 4 KiB
  // on first touch, although glibc recycles freed buffers under 32 MiB
  // itself.
  // Default: true
  bool reuse_buffers = true;

  // Write staging SST files with O_DIRECT, bypassing the page cache: no
  // copy into the kernel, no page cache to fill and evict, and the least
  // CPU, but each write waits for the disk, in chunks of
  // writable_file_max_buffer_size, so a thread's copying no longer overlaps
  // its writing. The staging directory's filesystem must support O_DIRECT
  // (tmpfs before Linux 6.6 does not: the save fails with IOError).
  // Default: false
  bool use_direct_writes = false;

  // Start writing a staging file back to disk every this many bytes
  // (sync_file_range), so that the fsync that ends each file waits for
  // less. 0 leaves it to SstFileWriter, which already starts writeback and
  // drops written pages from the page cache about every MiB
  // (posix_fadvise DONTNEED).
  // Default: 0
  uint64_t bytes_per_sync = 0;

  // The buffer through which a staging file is written. With buffered
  // I/O, small values are gathered in it and a piece larger than it goes
  // to the kernel in one write; with use_direct_writes every byte goes
  // through it, and it is the size of each direct write. Must be in
  // [4 KiB, 1 GiB].
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

  // ReadData's threads, the calling thread among them. Each takes the
  // plan's items in order (a tensor box spanning several pieces is taken
  // piece by piece) and fetches, verifies and copies through buffers of
  // its own, so that the steps of several pieces overlap, on cores and on
  // the disk. Each holds one piece at a time: threads beyond what
  // memory_budget allows are not started. 0 picks one per hardware thread
  // and at least 4 (a thread waiting for the disk leaves its core to one
  // that verifies), but at most one per 32 MiB of the plan's payload.
  // Default: 0
  int read_threads = 0;

  // Bounds the memory ReadData holds for what it reads: each thread holds
  // one piece (up to the max_piece_bytes the checkpoint was saved with)
  // at a time, or a batch of small items (up to 4 MiB of payload, and a
  // 16 KiB block each); up to 1 MiB read in place (read_in_place) and
  // direct_span_bytes read with O_DIRECT; and for a compressed piece two more
  // of its size (what it decodes into, and its planes), so ReadData starts at
  // most memory_budget / (what a thread needs for the plan's largest piece)
  // threads, but always at least one. Not counted: the
  // destinations (the state dict itself), the store's kept buffers
  // (StoreOptions::read_buffer_pool_bytes), the 8 MiB block cache, and a
  // byte item of several pieces, which is assembled whole for LoadBytes.
  // Default: 512 MiB
  uint64_t memory_budget = 512ull << 20;

  // Read through the block cache the store keeps for checkpoints (8 MiB;
  // the catalog's is separate). Only a block read this way can be handed
  // out in place; otherwise RocksDB copies every value out of its block,
  // a second copy of every piece. A piece larger than the cache passes
  // through it and is freed (into the store's buffer pool) once read, so
  // it evicts only other checkpoint blocks; blocks of small items stay, so
  // items sharing a block are read from the file once.
  // Default: true
  bool fill_cache = true;

  // Read each piece whose offset in its file the checkpoint records
  // (rocksdcp from 2026-12-03: pieces of 4 KiB or more) straight from the
  // file, then verify it against the metadata's XXH3-128 of the piece
  // before it is used: a piece of a multi-piece tensor into its
  // destination (or, for a box that takes part of the piece, into the
  // thread's buffer), before the tensor is committed; the small items a
  // load fetches in batches, those of a batch that lie in one file close
  // together with one read into the thread's buffer (up to 1 MiB). That
  // skips RocksDB's copy of the piece into its block, its block checksum
  // and the copy out of the block. A piece that does not verify this way
  // (its part of the destination is zeroed) is read again through RocksDB,
  // which then reports what is wrong with it. Off: every piece is read
  // through RocksDB. Not with StoreOptions::use_direct_reads.
  // Default: true
  bool read_in_place = true;

  // While a load reads and decodes the checkpoint's metadata and plans,
  // before ReadData reads, a thread asks the kernel to read the files of
  // the checkpoint's column family ahead, in key order (the order loads
  // read in), 8 MiB at a time, until ReadData begins or it has asked for
  // this many bytes. So the disk works while the CPU plans: for a
  // checkpoint of many small items that is a fair part of a cold load.
  // It holds no memory of the process (the pages are the kernel's page
  // cache, which it reclaims), and stops once ReadData reads, whose own
  // reads it would only compete with. A partial load may have the disk
  // read up to this many bytes it does not need. Pieces an incremental
  // checkpoint references in other column families are not read ahead.
  // Nothing with StoreOptions::use_direct_reads. 0 turns it off.
  // Default: 256 MiB
  uint64_t prefetch_bytes = 256ull << 20;

  // Pieces read in place (read_in_place) that are not in the page cache
  // are read with O_DIRECT: a read thread reads up to this many bytes of
  // its share of a file at once (the pieces it reads next, and what lies
  // between them), aligned to the device's blocks, into a buffer of its
  // own, verifies each piece there and copies it to its destination. So
  // the disk sees large reads, one per thread in flight, and the kernel
  // neither fills its page cache nor copies out of it; the page cache is
  // left to what else the machine caches (a trainer's data set). Before
  // each such read the thread asks the kernel (cachestat, else mincore)
  // whether those bytes are cached; if most are, it reads them through the
  // page cache as before, from memory. The cost: a load leaves none of
  // what it read this way in the page cache, so loading the same
  // checkpoint again reads the disk again, at the same speed. Each thread
  // holds a buffer of this size from the store's buffer pool
  // (StoreOptions::read_buffer_pool_bytes), kept there from one load to
  // the next; memory_budget counts it. Files the file system refuses
  // O_DIRECT for, and reads that fail this way, are read through the page
  // cache. 0 reads every piece through the page cache: loading again then
  // reads memory. benchmarks/README.md has the measurements.
  // Default: 8 MiB (SmallDeviceProfile: 2 MiB)
  uint64_t direct_span_bytes = 8ull << 20;

  // ---- Integrity ----

  // Verify RocksDB's checksum of every block a piece is read from, before
  // RocksDB parses the block. Every piece is verified as well, whatever
  // this is, before any byte of it is used: its XXH3 over the payload,
  // seeded with the hash of its key, the FlatBuffers verifier over its
  // header, and the header against the metadata. Off saves a second hash
  // of the same bytes (about a sixth of a warm load's CPU time), but then
  // RocksDB parses unverified blocks, and a damaged one can crash the
  // process inside RocksDB (Debian's librocksdb asserts on a malformed
  // block entry): turn it off only for a store this process wrote and
  // trusts. A block already in the store's block cache (fill_cache) is not
  // read again, so not checked again either. Store::Verify and
  // `rocksdcp verify` check both whatever this is.
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
  // Bounds the report's memory: metadata that is damaged, or forged, can
  // describe billions of pieces that are not there. It does not bound
  // CheckpointVerifyReport::damaged_items, which names every damaged item:
  // 0 lists no problem and keeps only those, one entry per item rather
  // than one per bad piece.
  // Default: 10000
  uint64_t max_problems = 10000;
};

}  // namespace rocksdcp

#endif  // ROCKSDCP_STORE_OPTIONS_H_
