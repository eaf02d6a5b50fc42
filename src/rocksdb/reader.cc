#include "rocksdb/reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <system_error>
#include <thread>

#include "format/checksum.h"
#include "format/metadata_codec.h"
#include "keys/keys.h"
#include "rocksdb/rocksdb_status.h"
#include "util/ready_future.h"
#include "util/text.h"

namespace rocksdcp {

using util::Quote;
using util::RandomHex;

namespace {

// With read_threads = 0, no more than one thread per this much payload:
// starting a thread costs tens of microseconds, reading this much tens of
// milliseconds.
constexpr uint64_t kBytesPerAutoThread = 32ull << 20;
// A piece's value is its data plus a FlatBuffers header of at most this,
// and RocksDB's buffer adds its block trailer.
constexpr uint64_t kPieceOverhead = 64ull << 10;
constexpr int kMaxThreads = 64;
// read_threads = 0 starts at least this many threads, whatever the core
// count: a thread waiting for the disk leaves its core to one that
// verifies and copies. On 2 cores, cold W1 and W2 loads ran at 0.74x and
// 0.61x a buffered cold read with 2 threads, 0.82x and 0.82x with 4, and
// 0.72x and 0.69x with 8 (medians of 4 runs; docs/tuning.md).
constexpr unsigned kMinAutoThreads = 4;
// Items of one piece up to this size are fetched in batches: one MultiGet
// of up to kBatchItems keys and kBatchBytes of payload. A batch pins the
// blocks of all its values at once; those are at most the payload plus a
// block (16 KiB) per value.
constexpr uint64_t kSmallPieceBytes = 256ull << 10;
constexpr uint32_t kBatchItems = 64;
constexpr uint64_t kBatchBytes = 4ull << 20;
constexpr uint64_t kBatchPinnedBytes = kBatchBytes + kBatchItems * (16 << 10);
// What one hint asks the kernel to read ahead (StartPrefetch), so that a
// stop takes effect soon.
constexpr uint64_t kPrefetchStep = 8ull << 20;
// The largest direct_span_bytes: each read thread holds a buffer of that
// size, and the span's arithmetic stays far from overflowing.
constexpr uint64_t kMaxDirectSpan = 1ull << 30;

}  // namespace

Status RocksDBStorageReaderImpl::ValidateOptions(
    const RocksDBReaderOptions& options) {
  if (options.read_threads < 0) {
    return Status::InvalidArgument(
        "read_threads must be >= 0 (0 picks the count), got " +
        std::to_string(options.read_threads));
  }
  if (options.direct_span_bytes > kMaxDirectSpan) {
    return Status::InvalidArgument(
        "direct_span_bytes must be in [0, 1 GiB] (0 reads through the page "
        "cache), got " +
        std::to_string(options.direct_span_bytes));
  }
  return Status::OK();
}

RocksDBStorageReaderImpl::RocksDBStorageReaderImpl(StoreImpl* store,
                                                   RocksDBReaderOptions options)
    : store_(store), options_(std::move(options)) {}

RocksDBStorageReaderImpl::~RocksDBStorageReaderImpl() { StopPrefetch(); }

void RocksDBStorageReaderImpl::StartPrefetch(const CommittedCheckpoint& c) {
  StopPrefetch();
  // With direct reads, the page cache serves no read.
  if (options_.prefetch_bytes == 0 || store_->use_direct_reads() || !c.cf) {
    return;
  }
  struct File {
    std::string smallest_key;
    std::string path;
    uint64_t size;
  };
  std::vector<File> files;
  rocksdb::ColumnFamilyMetaData meta;
  store_->db()->GetColumnFamilyMetaData(c.cf.get(), &meta);
  for (const rocksdb::LevelMetaData& level : meta.levels) {
    for (const rocksdb::SstFileMetaData& f : level.files) {
      files.push_back(
          {f.smallestkey, f.directory + "/" + f.relative_filename, f.size});
    }
  }
  // Key order: the order a load reads in.
  std::sort(files.begin(), files.end(), [](const File& a, const File& b) {
    return a.smallest_key < b.smallest_key;
  });
  // Straight through the kernel, not the store's file system: a hint that
  // reads nothing into the process and fails nothing, and whose timing
  // must not shift the store's own reads (the fault tests count them).
  auto prefetch = [this, files = std::move(files),
                   left = options_.prefetch_bytes]() mutable {
    for (const File& file : files) {
      const int fd = ::open(file.path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;  // The load's own reads say what is wrong.
      for (uint64_t at = 0; at < file.size && left > 0 &&
                            !stop_prefetch_.load(std::memory_order_relaxed);) {
        const uint64_t n = std::min({kPrefetchStep, file.size - at, left});
        if (::posix_fadvise(fd, static_cast<off_t>(at), static_cast<off_t>(n),
                            POSIX_FADV_WILLNEED) != 0) {
          break;
        }
        bytes_prefetched_.fetch_add(n, std::memory_order_relaxed);
        at += n;
        left -= n;
      }
      ::close(fd);
    }
  };
  try {
    prefetch_ = std::thread(std::move(prefetch));
  } catch (const std::system_error&) {
    // No thread to spare: the load reads as it would without prefetching.
  }
}

void RocksDBStorageReaderImpl::StopPrefetch() {
  if (!prefetch_.joinable()) return;
  stop_prefetch_.store(true, std::memory_order_relaxed);
  prefetch_.join();
  stop_prefetch_.store(false, std::memory_order_relaxed);
}

std::string RocksDBStorageReaderImpl::Where() const {
  return "load of checkpoint " + Quote(checkpoint_id_) + " from store " +
         Quote(store_->path());
}

std::string RocksDBStorageReaderImpl::ItemWhere(
    const MetadataIndex& index) const {
  return Where() + ", item " + Quote(index.ToString());
}

std::string RocksDBStorageReaderImpl::PieceWhere(const PlannedRead& pr,
                                                 uint32_t p) const {
  return ItemWhere(pr.ri->storage_index) + ", piece " + std::to_string(p) +
         " of " + std::to_string(pr.item.info.num_pieces);
}

Status RocksDBStorageReaderImpl::Reset(std::string_view checkpoint_id) {
  StopPrefetch();
  has_id_ = false;
  checkpoint_.reset();
  metadata_ = nullptr;
  ROCKSDCP_RETURN_IF_ERROR(ValidateCheckpointId(checkpoint_id));
  checkpoint_id_ = std::string(checkpoint_id);
  load_id_ = RandomHex(16);
  has_id_ = true;
  return Status::OK();
}

Result<Metadata> RocksDBStorageReaderImpl::ReadMetadata() {
  if (!has_id_) {
    return Status::FailedPrecondition(
        "ReadMetadata called before Reset(checkpoint_id)");
  }
  ROCKSDCP_ASSIGN_OR_RETURN(CommittedCheckpoint c,
                            store_->LookupCommitted(checkpoint_id_));
  // The disk reads the checkpoint while this thread decodes its metadata
  // and the load plans.
  StartPrefetch(c);
  auto metadata = ReadCheckpointMetadata(*store_, c);
  if (!metadata.ok()) {
    StopPrefetch();
    return ExplainReadOnlyRace(metadata.status()).WithContext(Where());
  }
  if (!metadata->storage_meta) metadata->storage_meta = StorageMeta();
  metadata->storage_meta->load_id = load_id_;
  checkpoint_ = std::move(c);
  return std::move(metadata).value();
}

Status RocksDBStorageReaderImpl::SetUpStorageReader(const Metadata& metadata,
                                                    bool is_coordinator,
                                                    int rank, int world_size) {
  if (!checkpoint_) {
    return Status::FailedPrecondition(
        "SetUpStorageReader called before ReadMetadata");
  }
  metadata_ = &metadata;
  return Status::OK();
}

Result<LoadPlan> RocksDBStorageReaderImpl::PrepareLocalPlan(LoadPlan plan) {
  return plan;
}

Result<std::vector<LoadPlan>> RocksDBStorageReaderImpl::PrepareGlobalPlan(
    std::vector<LoadPlan> plans) {
  return plans;
}

ReaderStats RocksDBStorageReaderImpl::stats() const {
  ReaderStats s;
  s.pieces_read = pieces_read_.load(std::memory_order_relaxed);
  s.bytes_read = bytes_read_.load(std::memory_order_relaxed);
  s.read_threads = last_read_threads_.load(std::memory_order_relaxed);
  s.pieces_read_in_place = pieces_in_place_.load(std::memory_order_relaxed);
  s.in_place_misses = in_place_misses_.load(std::memory_order_relaxed);
  s.bytes_prefetched = bytes_prefetched_.load(std::memory_order_relaxed);
  s.bytes_read_direct = bytes_read_direct_.load(std::memory_order_relaxed);
  return s;
}

std::future<Status> RocksDBStorageReaderImpl::ReadData(const LoadPlan& plan,
                                                       LoadPlanner& planner) {
  Status s = ReadDataSync(plan, planner);
  EndPrefetch();  // If the read failed before it began.
  return util::ReadyFuture(ExplainReadOnlyRace(std::move(s)));
}

Status RocksDBStorageReaderImpl::ExplainReadOnlyRace(Status s) const {
  // A read-only Store sees the checkpoints committed when it opened; the
  // process that writes the store may delete one meanwhile, and its pieces
  // go with it. Say so, rather than call the checkpoint damaged.
  // And a read-only open beside a writer committing the checkpoint can
  // see its catalog entry before its pieces; a store opened now reads it.
  if (!s.IsCorruption() || !store_->read_only()) return s;
  const std::string where = "checkpoint " + util::Quote(checkpoint_id_) +
                            " in store " + util::Quote(store_->path());
  auto now = store_->CheckpointOnDiskNow(checkpoint_id_);
  if (now.ok() && *now == StoreImpl::OnDiskNow::kGone) {
    return Status::NotFound(
        where +
        " was deleted after this read-only store opened (by the process "
        "that writes the store), and its pieces with it; it cannot be "
        "loaded (the read failed with: " +
        s.message() + ")");
  }
  if (now.ok() && *now == StoreImpl::OnDiskNow::kIntact) {
    return Status::Aborted(
        where +
        " could not be read through this read-only store, which opened "
        "while another process was committing it; it is intact on disk: "
        "open the store again to load it (the read failed with: " +
        s.message() + ")");
  }
  return s;
}

Result<RocksDBStorageReaderImpl::Item> RocksDBStorageReaderImpl::LookupItem(
    const MetadataIndex& index, bool tensor, ChunkFinder& chunks) const {
  auto item = LookupStoredItem(*metadata_, index, tensor, chunks);
  if (!item.ok()) return item.status().WithContext(ItemWhere(index));
  return item;
}

Status RocksDBStorageReaderImpl::CheckDest(const PlannedRead& pr,
                                           const TensorView& dest) const {
  const ReadItem& ri = *pr.ri;
  if (dest.dtype != pr.item.dtype || dest.sizes != ri.lengths) {
    return Status::InvalidArgument(
        ItemWhere(ri.storage_index) + ": the planner's destination is " +
        std::string(DTypeName(dest.dtype)) + " of the wrong shape; expected " +
        std::string(DTypeName(pr.item.dtype)));
  }
  if (pr.bytes > 0) ROCKSDCP_RETURN_IF_ERROR(dest.Validate(ri.dest_index.fqn));
  return Status::OK();
}

Result<uint64_t> RocksDBStorageReaderImpl::BoxElements(const ReadItem& ri,
                                                       const Item& item) const {
  const size_t dims = item.chunk_sizes.size();
  if (ri.storage_offsets.size() != dims || ri.lengths.size() != dims) {
    return Status::InvalidArgument(ItemWhere(ri.storage_index) +
                                   ": read item has the wrong rank");
  }
  uint64_t numel = 1;
  for (size_t d = 0; d < dims; ++d) {
    if (ri.storage_offsets[d] < 0 || ri.lengths[d] < 0 ||
        ri.lengths[d] > item.chunk_sizes[d] - ri.storage_offsets[d]) {
      return Status::InvalidArgument(
          ItemWhere(ri.storage_index) +
          ": read item's box lies outside the chunk");
    }
    numel *= static_cast<uint64_t>(ri.lengths[d]);
  }
  return numel;
}

Status RocksDBStorageReaderImpl::PlanPieces(const ReadItem& ri,
                                            PlannedRead* pr) const {
  const Item& item = pr->item;
  const size_t dims = item.chunk_sizes.size();
  const uint64_t elem = DTypeSize(item.dtype);
  pr->chunk_strides = ContiguousStrides(item.chunk_sizes);
  const size_t outer = dims == 0 ? 0 : dims - 1;
  pr->rows_per_step.assign(outer, 1);
  for (size_t d = outer; d-- > 1;) {
    pr->rows_per_step[d - 1] =
        pr->rows_per_step[d] * static_cast<uint64_t>(ri.lengths[d]);
  }
  pr->rows = outer == 0
                 ? 1
                 : pr->rows_per_step[0] * static_cast<uint64_t>(ri.lengths[0]);
  const uint64_t run = dims == 0 ? 1 : static_cast<uint64_t>(ri.lengths.back());
  std::vector<int64_t> first_row(outer, 0);
  std::vector<int64_t> last_row(outer);
  for (size_t d = 0; d < outer; ++d) last_row[d] = ri.lengths[d] - 1;
  const uint64_t first = RowStart(*pr, first_row);
  const uint64_t last = RowStart(*pr, last_row) + run - 1;
  pr->box_first = first;
  pr->box_is_run = true;
  for (size_t d = 1; d < dims; ++d) {
    if (ri.lengths[d] != item.chunk_sizes[d]) pr->box_is_run = false;
  }
  const uint64_t piece_elems = item.info.piece_bytes / elem;
  pr->first_piece = static_cast<uint32_t>(first / piece_elems);
  const uint64_t end_piece = last / piece_elems + 1;
  if (end_piece > item.info.num_pieces) {
    return Status::Corruption(ItemWhere(ri.storage_index) +
                              ": its pieces do not cover the chunk");
  }
  pr->end_piece = static_cast<uint32_t>(end_piece);
  return Status::OK();
}

Status RocksDBStorageReaderImpl::PlanSplit(const ReadItem& ri,
                                           LoadPlanner& planner,
                                           PlannedRead* pr, uint32_t index,
                                           std::vector<Task>* tasks) const {
  const uint32_t pieces = pr->end_piece - pr->first_piece;
  // Split: the destination is resolved now, once, for all its tasks.
  pr->split = true;
  auto resolved = planner.ResolveTensor(ri);
  if (!resolved.ok()) {
    return resolved.status().WithContext(ItemWhere(ri.storage_index));
  }
  pr->dest = std::move(resolved).value();
  ROCKSDCP_RETURN_IF_ERROR(CheckDest(*pr, pr->dest));
  pr->pieces_left.store(pieces, std::memory_order_relaxed);
  for (uint32_t p = pr->first_piece; p < pr->end_piece; ++p) {
    tasks->push_back({index, p});
  }
  return Status::OK();
}

Status RocksDBStorageReaderImpl::Plan(const ReadItem& ri, LoadPlanner& planner,
                                      ChunkFinder& chunks, PlannedRead* pr,
                                      uint32_t index,
                                      std::vector<Task>* tasks) const {
  pr->ri = &ri;
  const bool tensor = ri.type == LoadItemType::kTensor;
  ROCKSDCP_ASSIGN_OR_RETURN(pr->item,
                            LookupItem(ri.storage_index, tensor, chunks));
  const Item& item = pr->item;
  if (!tensor) {
    pr->bytes = item.info.length;
    pr->end_piece = item.info.num_pieces;
    AddTask(*pr, index, tasks);
    return Status::OK();
  }

  ROCKSDCP_ASSIGN_OR_RETURN(const uint64_t numel, BoxElements(ri, item));
  pr->bytes = numel * DTypeSize(item.dtype);
  if (numel == 0) {
    AddTask(*pr, index, tasks);
    return Status::OK();
  }
  ROCKSDCP_RETURN_IF_ERROR(PlanPieces(ri, pr));
  if (pr->end_piece - pr->first_piece <= 1) {
    AddTask(*pr, index, tasks);
    return Status::OK();
  }
  return PlanSplit(ri, planner, pr, index, tasks);
}

void RocksDBStorageReaderImpl::AddTask(const PlannedRead& pr, uint32_t index,
                                       std::vector<Task>* tasks) {
  const format::StorageInfo& info = pr.item.info;
  uint64_t bytes = kSmallPieceBytes + 1;
  if (pr.end_piece == pr.first_piece + 1) {
    bytes = std::min(info.piece_bytes,
                     info.length - uint64_t{pr.first_piece} * info.piece_bytes);
  }
  if (bytes > kSmallPieceBytes) {
    tasks->push_back({index, 0});
    return;
  }
  if (!tasks->empty()) {
    Task& last = tasks->back();
    if (last.batch > 0 && last.read + last.batch == index &&
        last.batch < kBatchItems && last.batch_bytes + bytes <= kBatchBytes) {
      ++last.batch;
      last.batch_bytes += bytes;
      return;
    }
  }
  tasks->push_back({index, 0, 1, bytes});
}

int RocksDBStorageReaderImpl::ThreadsFor(
    const std::vector<Task>& tasks, uint64_t payload_bytes,
    uint64_t max_piece_bytes, uint64_t max_compressed_piece_bytes) const {
  int n = options_.read_threads;
  if (n <= 0) {
    n = static_cast<int>(
        std::max(kMinAutoThreads, std::thread::hardware_concurrency()));
    n = static_cast<int>(std::min<uint64_t>(
        n, std::max<uint64_t>(1, payload_bytes / kBytesPerAutoThread)));
  }
  const uint64_t direct = options_.read_in_place && !store_->use_direct_reads()
                              ? options_.direct_span_bytes
                              : 0;
  const uint64_t per_thread = std::max(max_piece_bytes, kBatchPinnedBytes) +
                              kMaxInPlaceSpan + direct + kPieceOverhead +
                              2 * max_compressed_piece_bytes;
  n = static_cast<int>(std::min<uint64_t>(
      n, std::max<uint64_t>(1, options_.memory_budget / per_thread)));
  n = std::min<int>(n, kMaxThreads);
  n = static_cast<int>(std::min<size_t>(n, tasks.size()));
  return std::max(n, 1);
}

}  // namespace rocksdcp
