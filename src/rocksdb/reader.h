// RocksDBStorageReaderImpl: loads a committed checkpoint, verifying every
// piece before any of its bytes reach a destination.
//
// ReadData first checks every read item of the plan against the metadata
// (one pass, on the calling thread), then cuts the plan into tasks: one per
// piece of a tensor box that spans several pieces, one per other item, and
// one per run of consecutive small items, which are fetched with one
// MultiGet (one pass over the index). Items are taken in the store's key
// order, which is the order of their pieces in the files. Up to
// read_threads threads (the caller's among them) each take a contiguous
// share of the tasks, of about equal bytes, and run it in order, so that
// each region of the checkpoint's files has one reader going forwards and
// the kernel's readahead follows it; a thread done with its share takes the
// second half of the largest one left. Each fetches through PinnableSlices
// of its own: at most one large piece, or one run of small items, per
// thread at a time.
//
// Errors: what the first pass finds (metadata that does not match the plan,
// a destination the planner refuses for a box spanning several pieces) is
// returned before any byte is read. After that, the error returned is that
// of the earliest task in key order that failed, as a sequential read
// would return: after an error the threads skip every later task but run
// every earlier one, so all of those have run by the time the threads are
// joined. Items of later tasks may have been loaded meanwhile; no byte of
// a piece that fails verification stays in its destination (one read in
// place lands there first: its part is zeroed), and a tensor is committed
// only once every piece of its box has verified.

#ifndef ROCKSDCP_SRC_ROCKSDB_READER_H_
#define ROCKSDCP_SRC_ROCKSDB_READER_H_

#include <rocksdb/file_system.h>
#include <rocksdb/slice.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "format/piece_codec.h"
#include "rocksdb/catalog_codec.h"
#include "rocksdb/store_impl.h"
#include "rocksdb/stored_item.h"
#include "rocksdcp/store.h"

namespace rocksdcp {

class RocksDBStorageReaderImpl final : public RocksDBStorageReader {
 public:
  RocksDBStorageReaderImpl(StoreImpl* store, RocksDBReaderOptions options);
  ~RocksDBStorageReaderImpl() override;

  // InvalidArgument, naming the option, if `options` can't work: a
  // negative read_threads, or a direct_span_bytes over 1 GiB. Every check
  // of a reader's options is here; Store::NewReader makes them. A
  // memory_budget too small for one thread's piece is not one: a reader
  // learns its pieces' size only from the checkpoint, and then reads on
  // one thread.
  static Status ValidateOptions(const RocksDBReaderOptions& options);

  Status Reset(std::string_view checkpoint_id) override;
  Result<Metadata> ReadMetadata() override;
  Status SetUpStorageReader(const Metadata& metadata, bool is_coordinator,
                            int rank, int world_size) override;
  Result<LoadPlan> PrepareLocalPlan(LoadPlan plan) override;
  Result<std::vector<LoadPlan>> PrepareGlobalPlan(
      std::vector<LoadPlan> plans) override;
  std::future<Status> ReadData(const LoadPlan& plan,
                               LoadPlanner& planner) override;
  ReaderStats stats() const override;

 private:
  using Item = StoredItem;

  // A batch reads the pieces of its items that lie in place in one file,
  // in file order, with one read of up to this many bytes each, if no two
  // are more than kMaxInPlaceGap apart (what lies between them is read
  // too: their blocks' trailers and keys, and items of the file the plan
  // skips or that share blocks).
  static constexpr uint64_t kMaxInPlaceSpan = 1 << 20;
  static constexpr uint64_t kMaxInPlaceGap = 64 << 10;
  // O_DIRECT reads (direct_span_bytes) start, end and land on multiples of
  // this, or of the file's required alignment if larger.
  static constexpr uint64_t kDirectAlignment = 4096;

  // One read item of the plan, checked against the metadata.
  struct PlannedRead {
    const ReadItem* ri = nullptr;
    Item item;
    // Bytes it delivers: the box of a tensor, all of a byte item.
    uint64_t bytes = 0;
    // The pieces it may need: [first_piece, end_piece).
    uint32_t first_piece = 0;
    uint32_t end_piece = 0;
    // Tensors: rows of the box (runs contiguous in the chunk), the chunk's
    // row-major strides, and for each outer dimension the rows per step.
    uint64_t rows = 0;
    std::vector<int64_t> chunk_strides;
    std::vector<uint64_t> rows_per_step;
    // The box covers every inner dimension of the chunk whole: its
    // elements are one run in the chunk, from element box_first.
    bool box_is_run = false;
    uint64_t box_first = 0;
    // A box over several pieces is read by one task per piece: its
    // destination is resolved before they run, and the task that copies
    // the last piece commits it.
    bool split = false;
    TensorView dest;
    std::atomic<uint32_t> pieces_left{0};
    // Of a read whose pieces can be read in place: the file that
    // holds them (an index into the Run's files), else -1; the same per
    // source of its pieces (StorageInfo::sources); and whether any is.
    int file = -1;
    std::vector<int> source_files;
    bool in_place = false;
  };

  // A unit of work: piece `piece` of planned read `read` if it is split;
  // with `batch` > 0, planned reads [read, read + batch), each of one small
  // piece; else all of planned read `read`.
  struct Task {
    uint32_t read = 0;
    uint32_t piece = 0;
    uint32_t batch = 0;
    uint64_t batch_bytes = 0;
  };

  // A buffer from the store's pool, aligned for O_DIRECT, given back when
  // it goes.
  class AlignedBuffer {
   public:
    AlignedBuffer() = default;
    AlignedBuffer(const AlignedBuffer&) = delete;
    AlignedBuffer& operator=(const AlignedBuffer&) = delete;
    ~AlignedBuffer() { Release(); }
    // Makes it hold at least `bytes`, aligned to `align`, from `pool`;
    // false if it can't (no memory).
    bool Reserve(BlockBufferPool& pool, uint64_t bytes, uint64_t align);
    uint8_t* data() const { return data_; }

   private:
    void Release();

    BlockBufferPool* pool_ = nullptr;
    void* raw_ = nullptr;
    uint8_t* data_ = nullptr;
    uint64_t capacity_ = 0;
  };

  // What one reading thread reuses from task to task.
  struct Worker {
    // Its index among the run's threads, and the task it runs.
    size_t thread = 0;
    size_t task = 0;
    rocksdb::PinnableSlice pinned;
    // The piece a reference names (incremental saves).
    rocksdb::PinnableSlice referenced;
    // What a compressed piece decodes into.
    format::PieceDecodeBuffer decoded;
    std::string key;
    std::string bytes_buffer;  // Assembles byte items of several pieces.
    // A piece read in place for a box that takes only part of it.
    std::vector<uint8_t> in_place;
    // Its own handles of the Run's files (by index), opened as it first
    // reads each in place.
    std::vector<std::unique_ptr<rocksdb::FSRandomAccessFile>> files;
    // O_DIRECT reads (direct_span_bytes): its handles of the run's files
    // opened for them, and those the file system refused.
    std::vector<std::unique_ptr<rocksdb::FSRandomAccessFile>> direct_files;
    std::vector<bool> direct_refused;
    // The span of file `span_file` it last looked at, [span_start,
    // span_start + span_size): read with O_DIRECT into `span` if
    // span_direct, else found cached (its pieces are read through the
    // page cache).
    AlignedBuffer span;
    int span_file = -1;
    uint64_t span_start = 0;
    uint64_t span_size = 0;
    bool span_direct = false;
    // For batches: which of its items are delivered, and the ones read
    // through RocksDB.
    std::vector<bool> batch_done;
    std::vector<uint32_t> batch_reads;
    std::vector<std::string> keys;
    std::vector<rocksdb::Slice> key_slices;
    std::vector<rocksdb::PinnableSlice> values;
    std::vector<rocksdb::Status> statuses;
  };

  struct Run;          // The shared state of one ReadData.
  struct InPlaceFile;  // A file pieces are read from in place.
  // The first key of each read of a run, and the read's index in the plan,
  // in key order (KeyOrder).
  using KeyedReads = std::vector<std::pair<std::string, uint32_t>>;
  // Sets pr.file, pr.source_files and pr.in_place for every read whose
  // pieces the checkpoint's files (and its sources') let read in place.
  // `keyed[i].first` is the first key of run.reads[i].
  void FindInPlaceFiles(Run& run, const KeyedReads& keyed) const;
  // The worker's own handle of file `f` of the run, opened on first use
  // (so that each thread's reads keep their own readahead), for O_DIRECT
  // reads if `direct`; nullptr if it can't be opened (the piece is then
  // read through the page cache, or through RocksDB).
  rocksdb::FSRandomAccessFile* OwnHandle(Worker& worker, const Run& run, int f,
                                         bool direct) const;
  // Points `*data` at bytes [at, at + length) of file `f` of the run, read
  // with O_DIRECT in a span with the pieces the worker reads next (up to
  // direct_span_bytes), or found there from an earlier such read. False
  // when they are to be read through the page cache: most of the span is
  // cached, O_DIRECT is off or refused, or the read failed.
  bool ReadDirect(Run& run, Worker& worker, int f, uint64_t at, uint64_t length,
                  const uint8_t** data);
  // The end of what the worker's tasks after its current one read in place
  // from file `f` in order from `end` on, no more than kMaxInPlaceGap
  // apart, within `cap` bytes of `start`.
  static uint64_t SpanEnd(Run& run, const Worker& worker, int f, uint64_t start,
                          uint64_t end, uint64_t cap);
  // Whether a piece of `length` bytes read in place is `verified` (read
  // whole and matching its hash); counts it as read in place, or as a
  // miss to be read again through RocksDB.
  bool CountInPlace(bool verified, uint64_t length);
  // Reads piece `p` of split read `pr` in place, verifies it and copies
  // its part of the box. False (and the piece is to be fetched through
  // RocksDB) when it can't be read so or does not verify.
  bool ReadInPlace(Run& run, Worker& worker, const PlannedRead& pr, uint32_t p,
                   uint64_t piece_first, uint64_t* copied);
  // The file (an index into the run's files) that piece `p` of `pr` can be
  // read from in place, else -1.
  static int InPlaceFileOf(const Run& run, const PlannedRead& pr, uint32_t p);
  // Reads bytes [start, start + span) of file `f`, which hold the pieces
  // of those items [begin, end) of batch `task` that lie in place in it;
  // verifies each such piece against its hash, delivers it and marks it
  // done in worker.batch_done. Those that don't verify, or all if the read
  // fails, are left to be read through RocksDB.
  Status ReadSpanInPlace(Run& run, Worker& worker, const Task& task,
                         uint32_t begin, uint32_t end, int f, uint64_t start,
                         uint64_t span);

  Status ReadDataSync(const LoadPlan& plan, LoadPlanner& planner);
  // A read of a read-only Store that found damage: NotFound when the
  // checkpoint was deleted after the store opened (by the process that
  // writes the store), Aborted when a store opened now reads it intact;
  // else `s` as it was.
  Status ExplainReadOnlyRace(Status s) const;
  // The plan's items in the store's key order (by the first key of the
  // chunk each reads), which is the order of their pieces in the
  // checkpoint's files. Reading in plan order instead jumped back and forth
  // in the files wherever the two differ (layers.1 before layers.10 in
  // key order, after it in a state dict), and the kernel's readahead
  // restarted at every jump.
  static KeyedReads KeyOrder(const LoadPlan& plan);
  Result<Item> LookupItem(const MetadataIndex& index, bool tensor,
                          ChunkFinder& chunks) const;
  Status Plan(const ReadItem& ri, LoadPlanner& planner, ChunkFinder& chunks,
              PlannedRead* pr, uint32_t index, std::vector<Task>* tasks) const;
  // The elements of ri's box; InvalidArgument unless it has the chunk's
  // rank and lies within it.
  Result<uint64_t> BoxElements(const ReadItem& ri, const Item& item) const;
  // Where pr's box (of ri, not empty) lies in its chunk: its strides and
  // rows, whether it is one run, and the pieces it reads; Corruption if
  // the item's pieces do not cover them.
  Status PlanPieces(const ReadItem& ri, PlannedRead* pr) const;
  // A task per piece of pr, whose destination it resolves and checks now,
  // once for all of them.
  Status PlanSplit(const ReadItem& ri, LoadPlanner& planner, PlannedRead* pr,
                   uint32_t index, std::vector<Task>* tasks) const;
  // How many threads to read `tasks` with, given the largest piece, and
  // the largest that may be compressed (each thread decodes one into a
  // buffer of that size, through planes of that size; 0 if none is).
  int ThreadsFor(const std::vector<Task>& tasks, uint64_t payload_bytes,
                 uint64_t max_piece_bytes,
                 uint64_t max_compressed_piece_bytes) const;
  void Work(Run& run, size_t thread, Worker& worker);
  // What a task reads, in payload bytes, to share tasks by.
  static uint64_t TaskBytes(const Run& run, const Task& task);
  Status RunTask(Run& run, Worker& worker, const Task& task);
  // Adds the task for `pr`, or appends it to the batch the last task is.
  static void AddTask(const PlannedRead& pr, uint32_t index,
                      std::vector<Task>* tasks);
  // Fetches piece `p` of `pr` and verifies it. The result points into
  // worker.pinned, valid until the worker's next fetch.
  Status FetchPiece(Worker& worker, const PlannedRead& pr, uint32_t p,
                    format::DecodedPiece* out);
  // Verifies what a Get or MultiGet of piece `p` of `pr` (at `key`)
  // returned, following a reference into worker.referenced. The result
  // points into `value` or that.
  Status VerifyPiece(Worker& worker, const rocksdb::Status& s,
                     const rocksdb::Slice& value, const std::string& key,
                     const PlannedRead& pr, uint32_t p,
                     format::DecodedPiece* out);
  // Resolves pr's destination, copies `piece` (nullptr for an empty box)
  // into it and commits it.
  Status DeliverTensor(Run& run, PlannedRead& pr,
                       const format::DecodedPiece* piece);
  Status DeliverBytes(Run& run, PlannedRead& pr, std::string_view data);
  // DeliverTensor or DeliverBytes, as pr is.
  Status DeliverPiece(Run& run, PlannedRead& pr,
                      const format::DecodedPiece& piece);
  Status ReadWholeTensor(Run& run, Worker& worker, PlannedRead& pr);
  Status ReadTensorPiece(Run& run, Worker& worker, PlannedRead& pr, uint32_t p);
  Status ReadBytes(Run& run, Worker& worker, PlannedRead& pr);
  Status ReadBatch(Run& run, Worker& worker, const Task& task);
  // Checks the planner's destination of a tensor read.
  Status CheckDest(const PlannedRead& pr, const TensorView& dest) const;
  // Copies the part of pr's box that lies in the piece starting at chunk
  // element `piece_first` (`piece` holds its data) into `dest`. Returns
  // the bytes copied.
  static uint64_t CopyBoxPart(const PlannedRead& pr, const TensorView& dest,
                              uint64_t piece_first,
                              const format::DecodedPiece& piece);
  // The first row of pr's box that ends past chunk element `first`.
  static uint64_t FirstRowEndingAfter(const PlannedRead& pr, uint64_t first);
  static uint64_t RowStart(const PlannedRead& pr,
                           const std::vector<int64_t>& idx);

  // Starts a thread that asks the kernel to read the files of `c`'s own
  // column family ahead, in key order, up to options_.prefetch_bytes
  // (RocksDBReaderOptions::prefetch_bytes); stops the one before, if any.
  void StartPrefetch(const CommittedCheckpoint& c);
  // Stops the prefetch thread, if any, and waits for it: it asks for
  // nothing more.
  void StopPrefetch();
  // Tells the prefetch thread to ask for nothing more, without waiting
  // for the hint it may be in: that can take as long as the kernel takes
  // to queue 8 MiB of reads. StopPrefetch (Reset, the next ReadMetadata,
  // the destructor) waits for it.
  void EndPrefetch() { stop_prefetch_.store(true, std::memory_order_relaxed); }

  std::string Where() const;
  std::string ItemWhere(const MetadataIndex& index) const;
  std::string PieceWhere(const PlannedRead& pr, uint32_t p) const;

  StoreImpl* const store_;
  const RocksDBReaderOptions options_;

  std::string checkpoint_id_;
  std::string load_id_;
  bool has_id_ = false;
  // Pinned by ReadMetadata: the checkpoint stays readable while we load it.
  std::optional<CommittedCheckpoint> checkpoint_;
  const Metadata* metadata_ = nullptr;

  std::atomic<uint64_t> pieces_read_{0};
  std::atomic<uint64_t> bytes_read_{0};
  std::atomic<uint32_t> last_read_threads_{0};
  std::atomic<uint64_t> pieces_in_place_{0};
  std::atomic<uint64_t> in_place_misses_{0};
  std::atomic<uint64_t> bytes_prefetched_{0};
  std::atomic<uint64_t> bytes_read_direct_{0};

  std::thread prefetch_;
  std::atomic<bool> stop_prefetch_{false};
};

}  // namespace rocksdcp

#endif  // ROCKSDCP_SRC_ROCKSDB_READER_H_
