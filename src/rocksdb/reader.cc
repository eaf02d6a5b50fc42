#include "rocksdb/reader.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <system_error>
#include <thread>

#include "format/checksum.h"
#include "format/metadata_codec.h"
#include "keys/keys.h"
#include "rocksdb/rocksdb_status.h"
#include "util/ready_future.h"
#include "util/strided.h"
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
// Items of one piece up to this size are fetched in batches: one MultiGet
// of up to kBatchItems keys and kBatchBytes of payload. A batch pins the
// blocks of all its values at once; those are at most the payload plus a
// block (16 KiB) per value.
constexpr uint64_t kSmallPieceBytes = 256ull << 10;
constexpr uint32_t kBatchItems = 64;
constexpr uint64_t kBatchBytes = 4ull << 20;
constexpr uint64_t kBatchPinnedBytes = kBatchBytes + kBatchItems * (16 << 10);

}  // namespace

// The state one ReadData shares between its threads.
struct RocksDBStorageReaderImpl::Run {
  explicit Run(LoadPlanner& p, const ProgressCallback& cb)
      : planner(p), progress_callback(cb) {}

  // Adds to the progress and tells the callback, one call at a time.
  void Report(uint64_t bytes, uint64_t items) {
    std::lock_guard<std::mutex> lock(mu);
    progress.bytes_done += bytes;
    progress.items_done += items;
    if (progress_callback) progress_callback(progress);
  }

  // Keeps the error of the earliest task: tasks are taken in order, so once
  // every thread has stopped, that is the error a sequential read in plan
  // order would have returned.
  void Fail(size_t task, Status s) {
    std::lock_guard<std::mutex> lock(mu);
    if (task < error_task) {
      error_task = task;
      error = std::move(s);
    }
    failed.store(true, std::memory_order_relaxed);
  }

  LoadPlanner& planner;
  const ProgressCallback& progress_callback;
  std::unique_ptr<PlannedRead[]> reads;
  std::vector<Task> tasks;
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};

  std::mutex mu;  // Guards the members below.
  Progress progress;
  size_t error_task = std::numeric_limits<size_t>::max();
  Status error;
};

RocksDBStorageReaderImpl::RocksDBStorageReaderImpl(StoreImpl* store,
                                                   RocksDBReaderOptions options)
    : store_(store), options_(std::move(options)) {}

RocksDBStorageReaderImpl::~RocksDBStorageReaderImpl() = default;

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
  std::string value;
  rocksdb::ReadOptions ro;
  ro.verify_checksums = true;
  rocksdb::Status s = store_->db()->Get(
      ro, c.cf.get(),
      rocksdb::Slice(keys::kMetadataKey.data(), keys::kMetadataKey.size()),
      &value);
  if (s.IsNotFound()) {
    return Status::Corruption(Where() +
                              ": the catalog lists it but its metadata key " +
                              std::string(keys::kMetadataKey) + " is missing");
  }
  if (!s.ok()) return FromRocksDB(s, Where() + ": reading metadata");
  const uint64_t sum = format::Xxh3(value);
  if (sum != c.info.metadata_checksum) {
    return Status::Corruption(Where() +
                              ": metadata checksum mismatch (catalog records " +
                              std::to_string(c.info.metadata_checksum) +
                              ", value hashes to " + std::to_string(sum) + ")");
  }
  auto metadata = format::DecodeMetadata(value);
  if (!metadata.ok()) {
    return metadata.status().WithContext(Where() + ": metadata");
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
  return s;
}

std::future<Status> RocksDBStorageReaderImpl::ReadData(const LoadPlan& plan,
                                                       LoadPlanner& planner) {
  return util::ReadyFuture(ReadDataSync(plan, planner));
}

Result<StoredItem> LookupStoredItem(const Metadata& metadata,
                                    const MetadataIndex& index, bool tensor) {
  auto it = metadata.storage_data.find(index);
  if (it == metadata.storage_data.end()) {
    return Status::Corruption("the metadata records no storage for it");
  }
  StoredItem item;
  ROCKSDCP_ASSIGN_OR_RETURN(item.info, format::DecodeStorageInfo(it->second));
  const auto want =
      tensor ? format::ItemKind::kTensor : format::ItemKind::kBytes;
  if (item.info.kind != want) {
    return Status::Corruption(
        std::string("stored as ") + (tensor ? "bytes" : "a tensor") +
        " but planned as " + (tensor ? "a tensor" : "bytes"));
  }
  if (!tensor) return item;

  auto sd = metadata.state_dict_metadata.find(index.fqn);
  const auto* tm = sd == metadata.state_dict_metadata.end()
                       ? nullptr
                       : std::get_if<TensorStorageMetadata>(&sd->second);
  if (tm == nullptr || !index.offset) {
    return Status::Corruption("the metadata has no tensor of that name");
  }
  const ChunkStorageMetadata* chunk = nullptr;
  if (index.index && *index.index >= 0 &&
      static_cast<size_t>(*index.index) < tm->chunks.size() &&
      tm->chunks[*index.index].offsets == *index.offset) {
    chunk = &tm->chunks[*index.index];
  } else {
    for (const auto& c : tm->chunks) {
      if (c.offsets == *index.offset) chunk = &c;
    }
  }
  if (chunk == nullptr) {
    return Status::Corruption("the metadata has no chunk at that offset");
  }
  item.dtype = tm->properties.dtype;
  item.chunk_sizes = chunk->sizes;
  const uint64_t elem = DTypeSize(item.dtype);
  uint64_t numel = 1;
  for (int64_t s : chunk->sizes) numel *= static_cast<uint64_t>(s);
  if (item.info.length != numel * elem || item.info.piece_bytes % elem != 0) {
    return Status::Corruption(
        "storage info (" + std::to_string(item.info.length) +
        " bytes in pieces of " + std::to_string(item.info.piece_bytes) +
        ") does not match the chunk's " + std::to_string(numel) + " x " +
        std::to_string(elem) + "-byte elements");
  }
  return item;
}

Result<RocksDBStorageReaderImpl::Item> RocksDBStorageReaderImpl::LookupItem(
    const MetadataIndex& index, bool tensor) const {
  auto item = LookupStoredItem(*metadata_, index, tensor);
  if (!item.ok()) return item.status().WithContext(ItemWhere(index));
  return item;
}

uint64_t RocksDBStorageReaderImpl::RowStart(const PlannedRead& pr,
                                            const std::vector<int64_t>& idx) {
  const std::vector<int64_t>& so = pr.ri->storage_offsets;
  const size_t dims = so.size();
  uint64_t start = dims == 0 ? 0 : static_cast<uint64_t>(so[dims - 1]);
  for (size_t d = 0; d < idx.size(); ++d) {
    start += static_cast<uint64_t>((so[d] + idx[d]) * pr.chunk_strides[d]);
  }
  return start;
}

namespace {

// The outer-dimension index of row `r` of a box whose outer dimensions
// advance every `rows_per_step[d]` rows.
void Unravel(uint64_t r, const std::vector<uint64_t>& rows_per_step,
             const std::vector<int64_t>& lengths, std::vector<int64_t>* idx) {
  idx->resize(rows_per_step.size());
  for (size_t d = 0; d < rows_per_step.size(); ++d) {
    (*idx)[d] = static_cast<int64_t>((r / rows_per_step[d]) %
                                     static_cast<uint64_t>(lengths[d]));
  }
}

}  // namespace

uint64_t RocksDBStorageReaderImpl::FirstRowEndingAfter(const PlannedRead& pr,
                                                       uint64_t first) {
  const std::vector<int64_t>& lengths = pr.ri->lengths;
  const uint64_t run =
      lengths.empty() ? 1 : static_cast<uint64_t>(lengths.back());
  // Row starts grow with the row number: binary search.
  uint64_t lo = 0, hi = pr.rows;
  std::vector<int64_t> idx;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    Unravel(mid, pr.rows_per_step, lengths, &idx);
    if (RowStart(pr, idx) + run > first) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

uint64_t RocksDBStorageReaderImpl::CopyBoxPart(
    const PlannedRead& pr, const TensorView& dest, uint64_t piece_first,
    const format::DecodedPiece& piece) {
  const std::vector<int64_t>& lengths = pr.ri->lengths;
  const size_t dims = lengths.size();
  const size_t outer = pr.rows_per_step.size();
  const size_t elem = DTypeSize(pr.item.dtype);
  const uint64_t run = dims == 0 ? 1 : static_cast<uint64_t>(lengths.back());
  const uint64_t piece_end = piece_first + piece.size / elem;
  if (pr.box_is_run && dest.IsContiguous()) {
    // One run in the chunk and in the destination: one copy.
    const uint64_t lo = std::max(pr.box_first, piece_first);
    const uint64_t hi =
        std::min(pr.box_first + pr.bytes / elem, piece_end);
    if (hi <= lo) return 0;
    std::memcpy(static_cast<uint8_t*>(dest.data) + (lo - pr.box_first) * elem,
                piece.data + (lo - piece_first) * elem, (hi - lo) * elem);
    return (hi - lo) * elem;
  }
  const std::vector<int64_t> ds = dest.EffectiveStrides();
  const int64_t dest_step =
      dims == 0 ? static_cast<int64_t>(elem) : ds[dims - 1] * int64_t(elem);

  uint64_t r = FirstRowEndingAfter(pr, piece_first);
  std::vector<int64_t> idx;
  Unravel(r, pr.rows_per_step, lengths, &idx);
  uint64_t copied = 0;
  for (; r < pr.rows; ++r) {
    const uint64_t start = RowStart(pr, idx);
    if (start >= piece_end) break;
    const uint64_t lo = std::max(start, piece_first);
    const uint64_t hi = std::min(start + run, piece_end);
    int64_t dest_off = 0;
    for (size_t d = 0; d < outer; ++d) dest_off += idx[d] * ds[d];
    auto* row_dest = static_cast<uint8_t*>(dest.data) +
                     dest_off * static_cast<int64_t>(elem);
    util::CopyRun(piece.data + (lo - piece_first) * elem, hi - lo, elem,
                  row_dest + static_cast<int64_t>(lo - start) * dest_step,
                  dest_step);
    copied += (hi - lo) * elem;
    // Next row: an odometer over the outer dimensions.
    for (size_t d = outer; d-- > 0;) {
      if (++idx[d] < lengths[d]) break;
      idx[d] = 0;
    }
  }
  return copied;
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

Status RocksDBStorageReaderImpl::Plan(const ReadItem& ri, LoadPlanner& planner,
                                      PlannedRead* pr, uint32_t index,
                                      std::vector<Task>* tasks) const {
  pr->ri = &ri;
  const bool tensor = ri.type == LoadItemType::kTensor;
  ROCKSDCP_ASSIGN_OR_RETURN(pr->item, LookupItem(ri.storage_index, tensor));
  const Item& item = pr->item;
  if (!tensor) {
    pr->bytes = item.info.length;
    pr->end_piece = item.info.num_pieces;
    AddTask(*pr, index, tasks);
    return Status::OK();
  }

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
  const uint64_t elem = DTypeSize(item.dtype);
  pr->bytes = numel * elem;
  if (numel == 0) {
    AddTask(*pr, index, tasks);
    return Status::OK();
  }

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
  const uint32_t pieces = pr->end_piece - pr->first_piece;
  if (pieces <= 1) {
    AddTask(*pr, index, tasks);
    return Status::OK();
  }
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

int RocksDBStorageReaderImpl::ThreadsFor(const std::vector<Task>& tasks,
                                         uint64_t payload_bytes,
                                         uint64_t max_piece_bytes) const {
  int n = options_.read_threads;
  if (n <= 0) {
    n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    n = static_cast<int>(std::min<uint64_t>(
        n, std::max<uint64_t>(1, payload_bytes / kBytesPerAutoThread)));
  }
  const uint64_t per_thread =
      std::max(max_piece_bytes, kBatchPinnedBytes) + kPieceOverhead;
  n = static_cast<int>(std::min<uint64_t>(
      n, std::max<uint64_t>(1, options_.memory_budget / per_thread)));
  n = std::min<int>(n, kMaxThreads);
  n = static_cast<int>(std::min<size_t>(n, tasks.size()));
  return std::max(n, 1);
}

Status RocksDBStorageReaderImpl::FetchPiece(Worker& worker,
                                            const PlannedRead& pr, uint32_t p,
                                            format::DecodedPiece* out) {
  worker.key = keys::PieceKey(pr.ri->storage_index, p);
  rocksdb::ReadOptions ro;
  ro.fill_cache = options_.fill_cache;
  ro.verify_checksums = true;
  worker.pinned.Reset();
  rocksdb::Status s =
      store_->db()->Get(ro, checkpoint_->cf.get(), worker.key, &worker.pinned);
  return VerifyPiece(s, worker.pinned, worker.key, pr, p, out);
}

Status VerifyPieceValue(const rocksdb::Status& s, std::string_view value,
                        std::string_view key, const MetadataIndex& index,
                        const StoredItem& item, uint32_t p,
                        format::DecodedPiece* out) {
  if (s.IsNotFound()) {
    return Status::Corruption("key " + Quote(key) + " is missing");
  }
  if (s.IsPathNotFound()) {
    // A file of the store is gone: damage, not a failing disk.
    return Status::Corruption("reading key " + Quote(key) + ": " +
                              s.ToString());
  }
  if (!s.ok()) return FromRocksDB(s, "reading key " + Quote(key));
  ROCKSDCP_ASSIGN_OR_RETURN(*out, format::DecodePiece(value));
  const format::PieceHeader& h = out->header;
  const uint64_t offset = uint64_t{p} * item.info.piece_bytes;
  const uint64_t length =
      std::min(item.info.piece_bytes, item.info.length - offset);
  const bool tensor = item.info.kind == format::ItemKind::kTensor;
  const bool matches = h.kind == item.info.kind && h.piece == p &&
                       h.num_pieces == item.info.num_pieces &&
                       h.byte_offset == offset && h.byte_length == length &&
                       (!tensor || (h.dtype == item.dtype && index.offset &&
                                    h.chunk_offsets == *index.offset &&
                                    h.chunk_sizes == item.chunk_sizes));
  if (!matches) {
    return Status::Corruption(
        "the piece's header does not match the metadata (piece " +
        std::to_string(h.piece) + "/" + std::to_string(h.num_pieces) +
        ", bytes " + std::to_string(h.byte_offset) + "+" +
        std::to_string(h.byte_length) + ", expected " + std::to_string(p) +
        "/" + std::to_string(item.info.num_pieces) + ", bytes " +
        std::to_string(offset) + "+" + std::to_string(length) + ")");
  }
  return Status::OK();
}

Status RocksDBStorageReaderImpl::VerifyPiece(
    const rocksdb::Status& s, const rocksdb::Slice& value,
    const std::string& key, const PlannedRead& pr, uint32_t p,
    format::DecodedPiece* out) {
  // The context is built only on failure: a load of many small items
  // would otherwise spend much of its time formatting it.
  Status verified =
      VerifyPieceValue(s, std::string_view(value.data(), value.size()), key,
                       pr.ri->storage_index, pr.item, p, out);
  if (!verified.ok()) return verified.WithContext(PieceWhere(pr, p));
  pieces_read_.fetch_add(1, std::memory_order_relaxed);
  bytes_read_.fetch_add(out->size, std::memory_order_relaxed);
  return Status::OK();
}

Status RocksDBStorageReaderImpl::DeliverTensor(
    Run& run, PlannedRead& pr, const format::DecodedPiece* piece) {
  const ReadItem& ri = *pr.ri;
  auto resolved = run.planner.ResolveTensor(ri);
  if (!resolved.ok()) {
    return resolved.status().WithContext(ItemWhere(ri.storage_index));
  }
  const TensorView& dest = *resolved;
  ROCKSDCP_RETURN_IF_ERROR(CheckDest(pr, dest));
  if (piece != nullptr) {
    const uint64_t piece_elems =
        pr.item.info.piece_bytes / DTypeSize(pr.item.dtype);
    CopyBoxPart(pr, dest, uint64_t{pr.first_piece} * piece_elems, *piece);
  }
  Status committed = run.planner.CommitTensor(ri, dest);
  if (!committed.ok()) {
    return committed.WithContext(ItemWhere(ri.storage_index));
  }
  run.Report(pr.bytes, 1);
  return Status::OK();
}

Status RocksDBStorageReaderImpl::DeliverBytes(Run& run, PlannedRead& pr,
                                              std::string_view data) {
  Status loaded = run.planner.LoadBytes(*pr.ri, data);
  if (!loaded.ok()) return loaded.WithContext(ItemWhere(pr.ri->storage_index));
  run.Report(pr.bytes, 1);
  return Status::OK();
}

Status RocksDBStorageReaderImpl::ReadWholeTensor(Run& run, Worker& worker,
                                                 PlannedRead& pr) {
  // At most one piece: a box over several is split into tasks.
  if (pr.end_piece == pr.first_piece) return DeliverTensor(run, pr, nullptr);
  format::DecodedPiece piece;
  ROCKSDCP_RETURN_IF_ERROR(FetchPiece(worker, pr, pr.first_piece, &piece));
  return DeliverTensor(run, pr, &piece);
}

Status RocksDBStorageReaderImpl::ReadTensorPiece(Run& run, Worker& worker,
                                                 PlannedRead& pr, uint32_t p) {
  const uint64_t piece_elems =
      pr.item.info.piece_bytes / DTypeSize(pr.item.dtype);
  const uint64_t piece_first = uint64_t{p} * piece_elems;
  uint64_t copied = 0;
  // A box can skip whole pieces (a few columns of a wide chunk): fetch
  // only those it has elements in.
  const uint64_t r = FirstRowEndingAfter(pr, piece_first);
  std::vector<int64_t> idx;
  Unravel(r, pr.rows_per_step, pr.ri->lengths, &idx);
  if (r < pr.rows && RowStart(pr, idx) < piece_first + piece_elems) {
    format::DecodedPiece piece;
    ROCKSDCP_RETURN_IF_ERROR(FetchPiece(worker, pr, p, &piece));
    copied = CopyBoxPart(pr, pr.dest, piece_first, piece);
  }
  // The last piece's task commits, once every copy is done (acq_rel
  // orders the other tasks' copies before the commit).
  if (pr.pieces_left.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    Status committed = run.planner.CommitTensor(*pr.ri, pr.dest);
    if (!committed.ok()) {
      return committed.WithContext(ItemWhere(pr.ri->storage_index));
    }
    run.Report(copied, 1);
  } else {
    run.Report(copied, 0);
  }
  return Status::OK();
}

Status RocksDBStorageReaderImpl::ReadBytes(Run& run, Worker& worker,
                                           PlannedRead& pr) {
  const uint32_t n = pr.item.info.num_pieces;
  format::DecodedPiece piece;
  if (n == 1) {
    // Handed over in place, from the pinned block.
    ROCKSDCP_RETURN_IF_ERROR(FetchPiece(worker, pr, 0, &piece));
    return DeliverBytes(
        run, pr,
        std::string_view(reinterpret_cast<const char*>(piece.data),
                         piece.size));
  }
  worker.bytes_buffer.clear();
  worker.bytes_buffer.reserve(pr.item.info.length);
  for (uint32_t p = 0; p < n; ++p) {
    ROCKSDCP_RETURN_IF_ERROR(FetchPiece(worker, pr, p, &piece));
    worker.bytes_buffer.append(reinterpret_cast<const char*>(piece.data),
                               piece.size);
  }
  return DeliverBytes(run, pr, worker.bytes_buffer);
}

Status RocksDBStorageReaderImpl::ReadBatch(Run& run, Worker& worker,
                                           const Task& task) {
  const uint32_t n = task.batch;
  worker.keys.resize(n);
  worker.key_slices.resize(n);
  worker.values.resize(n);
  worker.statuses.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    const PlannedRead& pr = run.reads[task.read + i];
    worker.keys[i] = keys::PieceKey(pr.ri->storage_index, pr.first_piece);
    worker.key_slices[i] = worker.keys[i];
    worker.values[i].Reset();
  }
  rocksdb::ReadOptions ro;
  ro.fill_cache = options_.fill_cache;
  ro.verify_checksums = true;
  store_->db()->MultiGet(ro, checkpoint_->cf.get(), n, worker.key_slices.data(),
                         worker.values.data(), worker.statuses.data());
  Status status;
  for (uint32_t i = 0; i < n && status.ok(); ++i) {
    PlannedRead& pr = run.reads[task.read + i];
    format::DecodedPiece piece;
    status = VerifyPiece(worker.statuses[i], worker.values[i], worker.keys[i],
                         pr, pr.first_piece, &piece);
    if (!status.ok()) break;
    if (pr.ri->type == LoadItemType::kTensor) {
      status = DeliverTensor(run, pr, &piece);
    } else {
      status = DeliverBytes(
          run, pr,
          std::string_view(reinterpret_cast<const char*>(piece.data),
                           piece.size));
    }
  }
  for (uint32_t i = 0; i < n; ++i) worker.values[i].Reset();
  return status;
}

Status RocksDBStorageReaderImpl::RunTask(Run& run, Worker& worker,
                                         const Task& task) {
  if (task.batch > 0) return ReadBatch(run, worker, task);
  PlannedRead& pr = run.reads[task.read];
  if (pr.ri->type != LoadItemType::kTensor) return ReadBytes(run, worker, pr);
  if (pr.split) return ReadTensorPiece(run, worker, pr, task.piece);
  return ReadWholeTensor(run, worker, pr);
}

void RocksDBStorageReaderImpl::Work(Run& run, Worker& worker) {
  while (!run.failed.load(std::memory_order_relaxed)) {
    const size_t t = run.next.fetch_add(1, std::memory_order_relaxed);
    if (t >= run.tasks.size()) break;
    Status s = RunTask(run, worker, run.tasks[t]);
    if (!s.ok()) run.Fail(t, std::move(s));
  }
  // Release the last piece's block now, not when the worker goes.
  worker.pinned.Reset();
}

Status RocksDBStorageReaderImpl::ReadDataSync(const LoadPlan& plan,
                                              LoadPlanner& planner) {
  if (metadata_ == nullptr) {
    return Status::FailedPrecondition(
        "ReadData called before SetUpStorageReader");
  }
  Run run(planner, options_.progress);
  const size_t n = plan.items.size();
  run.reads.reset(new PlannedRead[n]);
  run.tasks.reserve(n);
  uint64_t max_piece = 0;
  for (size_t i = 0; i < n; ++i) {
    PlannedRead& pr = run.reads[i];
    ROCKSDCP_RETURN_IF_ERROR(Plan(plan.items[i], planner, &pr,
                                  static_cast<uint32_t>(i), &run.tasks));
    run.progress.bytes_total += pr.bytes;
    max_piece = std::max(
        max_piece, std::min(pr.item.info.piece_bytes, pr.item.info.length));
  }
  run.progress.items_total = n;

  const int threads =
      ThreadsFor(run.tasks, run.progress.bytes_total, max_piece);
  std::vector<Worker> workers(threads);
  std::vector<std::thread> helpers;
  helpers.reserve(threads - 1);
  for (int i = 1; i < threads; ++i) {
    try {
      helpers.emplace_back(
          [this, &run, &workers, i] { Work(run, workers[i]); });
    } catch (const std::system_error&) {
      break;  // No more threads to be had: read with those there are.
    }
  }
  last_read_threads_.store(static_cast<uint32_t>(helpers.size() + 1),
                           std::memory_order_relaxed);
  Work(run, workers[0]);
  for (std::thread& t : helpers) t.join();
  return run.error;
}

}  // namespace rocksdcp
