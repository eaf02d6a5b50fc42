// RocksDBStorageReaderImpl's tasks: the threads of one ReadData, and what
// each task does: fetch its pieces, verify them, and copy the part of each
// the box holds into the planner's destination.

#include <rocksdb/file_system.h>
#include <rocksdb/metadata.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <system_error>
#include <thread>

#include "format/checksum.h"
#include "keys/keys.h"
#include "rocksdb/reader.h"
#include "util/page_cache.h"
#include "util/partition.h"
#include "util/strided.h"
#include "util/threads.h"

namespace rocksdcp {

// One of the SST files that pieces are read from in place, as RocksDB
// lists it. Each read thread opens it itself (OwnHandle).
struct RocksDBStorageReaderImpl::InPlaceFile {
  std::string smallest;  // Its first and last user keys.
  std::string largest;
  uint64_t smallest_xxh3 = 0;  // As StorageInfo::file_first_key_xxh3.
  std::string path;
  uint64_t size = 0;
};

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

  // Keeps the error of the earliest task. Threads skip the tasks after it
  // but run every task before it, so once they have stopped, that is the
  // error a sequential read in key order would have returned.
  void Fail(size_t task, Status s) {
    std::lock_guard<std::mutex> lock(mu);
    if (task < error_task) {
      error_task = task;
      error = std::move(s);
      first_error.store(task, std::memory_order_relaxed);
    }
  }

  // Cuts the tasks into one contiguous share per thread, of about equal
  // bytes.
  void Share(int threads, const std::vector<uint64_t>& task_bytes) {
    if (!task_bytes.empty()) {
      const std::vector<size_t> bounds = util::SplitByWeight(
          task_bytes, std::min<size_t>(threads, task_bytes.size()));
      for (size_t i = 0; i + 1 < bounds.size(); ++i) {
        shares.emplace_back(bounds[i], bounds[i + 1]);
      }
    }
    shares.resize(threads, {0, 0});
  }

  // The next task of thread `i`: the first of its share; once that is
  // done, the second half of the largest share left (taken from its end,
  // so that both are read forwards). False when no task is left.
  bool Claim(size_t i, size_t* task) {
    std::lock_guard<std::mutex> lock(claim_mu);
    std::pair<size_t, size_t>& mine = shares[i];
    if (mine.first == mine.second) {
      size_t most = 0;
      size_t largest = 0;
      for (size_t j = 0; j < shares.size(); ++j) {
        const size_t left = shares[j].second - shares[j].first;
        if (left > most) {
          most = left;
          largest = j;
        }
      }
      if (most == 0) return false;
      std::pair<size_t, size_t>& theirs = shares[largest];
      const size_t mid = theirs.first + most / 2;
      mine = {mid, theirs.second};
      theirs.second = mid;
    }
    *task = mine.first++;
    return true;
  }

  // The end of thread `i`'s share now (another thread may take part of it
  // later).
  size_t ShareEnd(size_t i) {
    std::lock_guard<std::mutex> lock(claim_mu);
    return shares[i].second;
  }

  LoadPlanner& planner;
  const ProgressCallback& progress_callback;
  std::unique_ptr<PlannedRead[]> reads;
  std::vector<Task> tasks;
  // The earliest failed task so far (tasks after it are skipped).
  std::atomic<size_t> first_error{std::numeric_limits<size_t>::max()};

  std::mutex claim_mu;  // Guards shares.
  // Per thread, the [begin, end) of plan tasks it reads in order, so that
  // each region of the checkpoint's files is read by one thread at a time,
  // front to back, and the kernel's readahead follows each. (Handing out
  // tasks one at a time in plan order interleaved the threads' reads of
  // one file: cold W2 loads ran at 0.41-0.67x a raw cold read, against
  // 0.79-2.29x with shares; docs/tuning.md.) Tasks are in key order,
  // the order of the pieces in the files, not plan order: see KeyOrder.
  std::vector<std::pair<size_t, size_t>> shares;

  // The files pieces are read from in place (PlannedRead::file).
  std::vector<InPlaceFile> files;

  std::mutex mu;  // Guards the members below.
  Progress progress;
  size_t error_task = std::numeric_limits<size_t>::max();
  Status error;
};

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
    const uint64_t hi = std::min(pr.box_first + pr.bytes / elem, piece_end);
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

Status RocksDBStorageReaderImpl::FetchPiece(Worker& worker,
                                            const PlannedRead& pr, uint32_t p,
                                            format::DecodedPiece* out) {
  worker.key = keys::PieceKey(pr.ri->storage_index, p);
  rocksdb::ReadOptions ro;
  ro.fill_cache = options_.fill_cache;
  ro.verify_checksums = options_.verify_block_checksums;
  if (pr.item.info.SourceOf(p) != nullptr) {
    // Referenced: straight from where the storage info says it is.
    Status s = ReadReferencedPiece(*store_, *checkpoint_, ro, worker.key,
                                   pr.ri->storage_index, pr.item, p,
                                   &worker.pinned, &worker.decoded, out);
    if (!s.ok()) return s.WithContext(PieceWhere(pr, p));
    pieces_read_.fetch_add(1, std::memory_order_relaxed);
    bytes_read_.fetch_add(out->size, std::memory_order_relaxed);
    return Status::OK();
  }
  worker.pinned.Reset();
  rocksdb::Status s =
      store_->db()->Get(ro, checkpoint_->cf.get(), worker.key, &worker.pinned);
  return VerifyPiece(worker, s, worker.pinned, worker.key, pr, p, out);
}

Status RocksDBStorageReaderImpl::VerifyPiece(Worker& worker,
                                             const rocksdb::Status& s,
                                             const rocksdb::Slice& value,
                                             const std::string& key,
                                             const PlannedRead& pr, uint32_t p,
                                             format::DecodedPiece* out) {
  // The context is built only on failure: a load of many small items
  // would otherwise spend much of its time formatting it.
  rocksdb::ReadOptions ro;
  ro.fill_cache = options_.fill_cache;
  ro.verify_checksums = options_.verify_block_checksums;
  Status verified = VerifyPieceOrReference(
      *store_, *checkpoint_, ro, s,
      std::string_view(value.data(), value.size()), key, pr.ri->storage_index,
      pr.item, p, &worker.referenced, &worker.decoded, out);
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

void RocksDBStorageReaderImpl::FindInPlaceFiles(Run& run,
                                                const KeyedReads& keyed) const {
  if (!options_.read_in_place || store_->use_direct_reads()) return;
  // Per column family (the checkpoint's, "", and those it references), its
  // files' [begin, end) in run.files, listed once, on first need.
  std::map<std::string, std::pair<size_t, size_t>, std::less<>> listed;
  auto files_of = [&](const std::string& name) {
    auto [at, fresh] = listed.try_emplace(name, run.files.size(), 0);
    if (fresh) {
      rocksdb::ColumnFamilyHandle* cf = checkpoint_->cf.get();
      if (!name.empty()) {
        auto held = checkpoint_->sources.find(name);
        cf = held == checkpoint_->sources.end() ? nullptr
                                                : held->second.cf.get();
      }
      rocksdb::ColumnFamilyMetaData meta;
      if (cf != nullptr) store_->db()->GetColumnFamilyMetaData(cf, &meta);
      for (const rocksdb::LevelMetaData& level : meta.levels) {
        for (const rocksdb::SstFileMetaData& f : level.files) {
          run.files.push_back(
              {f.smallestkey, f.largestkey, format::Xxh3(f.smallestkey) | 1,
               f.directory + "/" + f.relative_filename, f.size});
        }
      }
      at->second.second = run.files.size();
    }
    return at->second;
  };
  // The file of `name` whose key range holds [first, last] and whose first
  // key hashes to `wanted` (unless 0); -1 if none or, without `wanted`,
  // several. Ranks' files may overlap (each holds a rank's items, which
  // interleave in key order).
  auto find = [&](const std::string& name, const std::string& first,
                  const std::string& last, uint64_t wanted) {
    const auto [begin, end] = files_of(name);
    int found = -1;
    for (size_t f = begin; f < end; ++f) {
      const InPlaceFile& file = run.files[f];
      if (file.smallest > last || file.largest < first) continue;
      if (wanted != 0 && file.smallest_xxh3 != wanted) continue;
      if (found >= 0 || file.smallest > first || file.largest < last) {
        return -1;
      }
      found = static_cast<int>(f);
    }
    return found;
  };
  std::string last_of_several;
  for (size_t i = 0; i < keyed.size(); ++i) {
    PlannedRead& pr = run.reads[i];
    const format::StorageInfo& info = pr.item.info;
    if (info.piece_offsets.empty()) continue;
    const std::string& first = keyed[i].first;
    if (info.num_pieces > 1) {
      last_of_several = first;
      keys::SetKeyPiece(&last_of_several, info.num_pieces - 1);
    }
    const std::string& last = info.num_pieces > 1 ? last_of_several : first;
    pr.file = find("", first, last, info.file_first_key_xxh3);
    bool any = pr.file >= 0;
    pr.source_files.assign(info.sources.size(), -1);
    for (size_t k = 0; k < info.sources.size(); ++k) {
      pr.source_files[k] = find(info.sources[k], first, last,
                                info.source_file_first_key_xxh3.empty()
                                    ? 0
                                    : info.source_file_first_key_xxh3[k]);
      any |= pr.source_files[k] >= 0;
    }
    pr.in_place = any;
  }
}

rocksdb::FSRandomAccessFile* RocksDBStorageReaderImpl::OwnHandle(
    Worker& worker, const Run& run, int f, bool direct) const {
  auto& handles = direct ? worker.direct_files : worker.files;
  if (handles.size() < run.files.size()) handles.resize(run.files.size());
  std::unique_ptr<rocksdb::FSRandomAccessFile>& own = handles[f];
  if (!own) {
    rocksdb::FileOptions fo;
    fo.use_direct_reads = direct;
    if (!store_->fs()
             ->NewRandomAccessFile(run.files[f].path, fo, &own, nullptr)
             .ok()) {
      own.reset();
      return nullptr;
    }
    // Each thread reads its share front to back (Run::Claim).
    if (!direct) own->Hint(rocksdb::FSRandomAccessFile::kSequential);
  }
  return own.get();
}

int RocksDBStorageReaderImpl::InPlaceFileOf(const Run& run,
                                            const PlannedRead& pr, uint32_t p) {
  if (!pr.in_place) return -1;
  const format::StorageInfo& info = pr.item.info;
  const uint64_t at = info.piece_offsets[p];
  const int f = info.SourceOf(p) == nullptr
                    ? pr.file
                    : pr.source_files[info.piece_sources[p] - 1];
  if (at == 0 || f < 0) return -1;
  const uint64_t size = run.files[f].size;
  const uint64_t length = info.PieceLength(p);
  if (at > size || length > size - at) return -1;
  return f;
}

void RocksDBStorageReaderImpl::AlignedBuffer::Release() {
  if (raw_ == nullptr) return;
  pool_->Deallocate(raw_);
  raw_ = nullptr;
  data_ = nullptr;
  capacity_ = 0;
}

bool RocksDBStorageReaderImpl::AlignedBuffer::Reserve(BlockBufferPool& pool,
                                                      uint64_t bytes,
                                                      uint64_t align) {
  if (raw_ != nullptr && capacity_ >= bytes &&
      reinterpret_cast<uintptr_t>(data_) % align == 0) {
    return true;
  }
  Release();
  // The pool's buffers are kept from one load to the next, so their pages
  // are not touched fresh each time (a page fault, up to about 20 us per
  // 4 KiB page on small VMs).
  pool_ = &pool;
  try {
    raw_ = pool.Allocate(bytes + align);
  } catch (const std::bad_alloc&) {
    return false;
  }
  const uintptr_t at = reinterpret_cast<uintptr_t>(raw_);
  data_ = reinterpret_cast<uint8_t*>((at + align - 1) / align * align);
  capacity_ = bytes;
  return true;
}

uint64_t RocksDBStorageReaderImpl::SpanEnd(Run& run, const Worker& worker,
                                           int f, uint64_t start, uint64_t end,
                                           uint64_t cap) {
  const size_t last = run.ShareEnd(worker.thread);
  for (size_t t = worker.task + 1; t < last; ++t) {
    const Task& task = run.tasks[t];
    if (task.batch > 0) break;
    const PlannedRead& pr = run.reads[task.read];
    if (!pr.split || InPlaceFileOf(run, pr, task.piece) != f) break;
    const uint64_t at = pr.item.info.piece_offsets[task.piece];
    const uint64_t next_end = at + pr.item.info.PieceLength(task.piece);
    if (at < end || at - end > kMaxInPlaceGap || next_end - start > cap) break;
    end = next_end;
  }
  return end;
}

bool RocksDBStorageReaderImpl::ReadDirect(Run& run, Worker& worker, int f,
                                          uint64_t at, uint64_t length,
                                          const uint8_t** data) {
  if (worker.span_file == f && at >= worker.span_start &&
      at + length <= worker.span_start + worker.span_size) {
    if (!worker.span_direct) return false;
    *data = worker.span.data() + (at - worker.span_start);
    return true;
  }
  const uint64_t cap = options_.direct_span_bytes;
  if (cap == 0 || length > cap) return false;
  if (worker.direct_refused.size() < run.files.size()) {
    worker.direct_refused.resize(run.files.size());
  }
  if (worker.direct_refused[f]) return false;
  const uint64_t end = SpanEnd(run, worker, f, at, at + length, cap);
  worker.span_file = f;
  worker.span_start = at;
  worker.span_size = end - at;
  worker.span_direct = false;
  // Most of it cached: read from memory, through the page cache.
  const std::optional<util::CachedPages> cached =
      util::PagesInCache(run.files[f].path, at, end - at);
  if (cached.has_value() && cached->cached * 2 > cached->total) return false;
  rocksdb::FSRandomAccessFile* handle = OwnHandle(worker, run, f, true);
  if (handle == nullptr) {
    worker.direct_refused[f] = true;
    return false;
  }
  const uint64_t align = std::max<uint64_t>(
      kDirectAlignment, handle->GetRequiredBufferAlignment());
  const uint64_t first = at / align * align;
  const uint64_t last = (end + align - 1) / align * align;
  if (!worker.span.Reserve(*store_->block_buffer_pool(), cap + 2 * align,
                           align)) {
    return false;
  }
  rocksdb::Slice got;
  char* buffer = reinterpret_cast<char*>(worker.span.data());
  const rocksdb::IOStatus s = handle->Read(
      first, last - first, rocksdb::IOOptions(), &got, buffer, nullptr);
  if (!s.ok() || got.data() != buffer || got.size() < end - first) {
    // Not O_DIRECT again for this file (the file system may refuse it for
    // reads of this alignment); the page cache's read of the piece says
    // what is wrong, if anything is.
    worker.direct_refused[f] = true;
    return false;
  }
  worker.span_start = first;
  worker.span_size = got.size();
  worker.span_direct = true;
  *data = worker.span.data() + (at - first);
  return true;
}

bool RocksDBStorageReaderImpl::ReadInPlace(Run& run, Worker& worker,
                                           const PlannedRead& pr, uint32_t p,
                                           uint64_t piece_first,
                                           uint64_t* copied) {
  const format::StorageInfo& info = pr.item.info;
  const int f = InPlaceFileOf(run, pr, p);
  if (f < 0) return false;
  const uint64_t at = info.piece_offsets[p];
  const uint64_t length = info.PieceLength(p);
  const uint8_t* direct = nullptr;
  if (ReadDirect(run, worker, f, at, length, &direct)) {
    // Verified where it was read, before a byte of it is used.
    if (!CountInPlace(format::Xxh3_128(direct, length) == info.piece_hashes[p],
                      length)) {
      return false;
    }
    bytes_read_direct_.fetch_add(length, std::memory_order_relaxed);
    format::DecodedPiece piece;
    piece.data = direct;
    piece.size = length;
    piece.stored_size = length;
    *copied = CopyBoxPart(pr, pr.dest, piece_first, piece);
    return true;
  }
  rocksdb::FSRandomAccessFile* handle = OwnHandle(worker, run, f, false);
  if (handle == nullptr) return false;
  const uint64_t elem = DTypeSize(pr.item.dtype);
  // Straight into the destination when the box holds the whole piece
  // there as it is; else into the thread's buffer.
  const bool whole =
      pr.box_is_run && pr.dest.IsContiguous() && piece_first >= pr.box_first &&
      piece_first * elem + length <= pr.box_first * elem + pr.bytes;
  uint8_t* target;
  if (whole) {
    target = static_cast<uint8_t*>(pr.dest.data) +
             (piece_first - pr.box_first) * elem;
  } else {
    if (worker.in_place.size() < length) worker.in_place.resize(length);
    target = worker.in_place.data();
  }
  rocksdb::Slice got;
  const rocksdb::IOStatus s =
      handle->Read(at, length, rocksdb::IOOptions(), &got,
                   reinterpret_cast<char*>(target), nullptr);
  const bool read = s.ok() && got.size() == length;
  if (read && got.data() != reinterpret_cast<const char*>(target)) {
    std::memcpy(target, got.data(), length);
  }
  if (!CountInPlace(
          read && format::Xxh3_128(target, length) == info.piece_hashes[p],
          length)) {
    if (whole) std::memset(target, 0, length);
    return false;
  }
  if (whole) {
    *copied = length;
  } else {
    format::DecodedPiece piece;
    piece.data = target;
    piece.size = length;
    piece.stored_size = length;
    *copied = CopyBoxPart(pr, pr.dest, piece_first, piece);
  }
  return true;
}

bool RocksDBStorageReaderImpl::CountInPlace(bool verified, uint64_t length) {
  if (!verified) {
    in_place_misses_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  pieces_in_place_.fetch_add(1, std::memory_order_relaxed);
  pieces_read_.fetch_add(1, std::memory_order_relaxed);
  bytes_read_.fetch_add(length, std::memory_order_relaxed);
  return true;
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
  if (r < pr.rows && RowStart(pr, idx) < piece_first + piece_elems &&
      (!pr.in_place ||
       !ReadInPlace(run, worker, pr, p, piece_first, &copied))) {
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

Status RocksDBStorageReaderImpl::DeliverPiece(
    Run& run, PlannedRead& pr, const format::DecodedPiece& piece) {
  if (pr.ri->type == LoadItemType::kTensor) {
    return DeliverTensor(run, pr, &piece);
  }
  return DeliverBytes(
      run, pr,
      std::string_view(reinterpret_cast<const char*>(piece.data), piece.size));
}

Status RocksDBStorageReaderImpl::ReadSpanInPlace(Run& run, Worker& worker,
                                                 const Task& task,
                                                 uint32_t begin, uint32_t end,
                                                 int f, uint64_t start,
                                                 uint64_t span) {
  rocksdb::FSRandomAccessFile* handle = OwnHandle(worker, run, f, false);
  if (handle == nullptr) return Status::OK();
  if (worker.in_place.size() < span) worker.in_place.resize(span);
  char* buffer = reinterpret_cast<char*>(worker.in_place.data());
  rocksdb::Slice got;
  const rocksdb::IOStatus s =
      handle->Read(start, span, rocksdb::IOOptions(), &got, buffer, nullptr);
  if (!s.ok() || got.size() != span) return Status::OK();
  for (uint32_t i = begin; i < end; ++i) {
    PlannedRead& pr = run.reads[task.read + i];
    const uint32_t p = pr.first_piece;
    if (InPlaceFileOf(run, pr, p) != f) continue;
    format::DecodedPiece piece;
    piece.data = reinterpret_cast<const uint8_t*>(got.data()) +
                 (pr.item.info.piece_offsets[p] - start);
    piece.size = pr.item.info.PieceLength(p);
    piece.stored_size = piece.size;
    if (!CountInPlace(format::Xxh3_128(piece.data, piece.size) ==
                          pr.item.info.piece_hashes[p],
                      piece.size)) {
      continue;  // Read again through RocksDB, which says what is wrong.
    }
    ROCKSDCP_RETURN_IF_ERROR(DeliverPiece(run, pr, piece));
    worker.batch_done[i] = true;
  }
  return Status::OK();
}

Status RocksDBStorageReaderImpl::ReadBatch(Run& run, Worker& worker,
                                           const Task& task) {
  const uint32_t n = task.batch;
  worker.batch_done.assign(n, false);
  // Runs of items whose pieces lie in place in one file, in file order and
  // close together: one read each.
  for (uint32_t i = 0; i < n;) {
    const PlannedRead& pr = run.reads[task.read + i];
    const int f = InPlaceFileOf(run, pr, pr.first_piece);
    if (f < 0) {
      ++i;
      continue;
    }
    const uint64_t start = pr.item.info.piece_offsets[pr.first_piece];
    uint64_t end_at = start + pr.item.info.PieceLength(pr.first_piece);
    // Items between that aren't in place (small ones share blocks) are
    // left to RocksDB; they are in the span, so in the page cache.
    uint32_t j = i + 1;
    uint32_t end = j;
    for (; j < n; ++j) {
      const PlannedRead& next = run.reads[task.read + j];
      const int g = InPlaceFileOf(run, next, next.first_piece);
      if (g < 0) continue;
      if (g != f) break;
      const uint64_t at = next.item.info.piece_offsets[next.first_piece];
      const uint64_t next_end =
          at + next.item.info.PieceLength(next.first_piece);
      if (at < end_at || at - end_at > kMaxInPlaceGap ||
          next_end - start > kMaxInPlaceSpan) {
        break;
      }
      end_at = next_end;
      end = j + 1;
    }
    ROCKSDCP_RETURN_IF_ERROR(
        ReadSpanInPlace(run, worker, task, i, end, f, start, end_at - start));
    i = end;
  }
  // The rest through RocksDB.
  worker.keys.resize(n);
  worker.key_slices.resize(n);
  worker.values.resize(n);
  worker.statuses.resize(n);
  worker.batch_reads.clear();
  for (uint32_t i = 0; i < n; ++i) {
    if (worker.batch_done[i]) continue;
    const PlannedRead& pr = run.reads[task.read + i];
    const uint32_t k = static_cast<uint32_t>(worker.batch_reads.size());
    worker.batch_reads.push_back(i);
    worker.keys[k] = keys::PieceKey(pr.ri->storage_index, pr.first_piece);
    worker.key_slices[k] = worker.keys[k];
    worker.values[k].Reset();
  }
  const uint32_t m = static_cast<uint32_t>(worker.batch_reads.size());
  if (m == 0) return Status::OK();
  rocksdb::ReadOptions ro;
  ro.fill_cache = options_.fill_cache;
  ro.verify_checksums = options_.verify_block_checksums;
  store_->db()->MultiGet(ro, checkpoint_->cf.get(), m, worker.key_slices.data(),
                         worker.values.data(), worker.statuses.data());
  Status status;
  for (uint32_t k = 0; k < m && status.ok(); ++k) {
    PlannedRead& pr = run.reads[task.read + worker.batch_reads[k]];
    format::DecodedPiece piece;
    status = VerifyPiece(worker, worker.statuses[k], worker.values[k],
                         worker.keys[k], pr, pr.first_piece, &piece);
    if (status.ok()) status = DeliverPiece(run, pr, piece);
  }
  for (uint32_t k = 0; k < m; ++k) worker.values[k].Reset();
  return status;
}

uint64_t RocksDBStorageReaderImpl::TaskBytes(const Run& run, const Task& task) {
  if (task.batch > 0) return task.batch_bytes;
  const PlannedRead& pr = run.reads[task.read];
  if (pr.ri->type == LoadItemType::kTensor && pr.split) {
    return pr.item.info.PieceLength(task.piece);
  }
  return std::max<uint64_t>(pr.bytes, 1);
}

Status RocksDBStorageReaderImpl::RunTask(Run& run, Worker& worker,
                                         const Task& task) {
  if (task.batch > 0) return ReadBatch(run, worker, task);
  PlannedRead& pr = run.reads[task.read];
  if (pr.ri->type != LoadItemType::kTensor) return ReadBytes(run, worker, pr);
  if (pr.split) return ReadTensorPiece(run, worker, pr, task.piece);
  return ReadWholeTensor(run, worker, pr);
}

void RocksDBStorageReaderImpl::Work(Run& run, size_t thread, Worker& worker) {
  worker.thread = thread;
  size_t t = 0;
  while (run.Claim(thread, &t)) {
    if (t > run.first_error.load(std::memory_order_relaxed)) continue;
    worker.task = t;
    Status s;
    try {
      s = RunTask(run, worker, run.tasks[t]);
    } catch (const std::bad_alloc&) {
      // Nothing may leave a reader thread: the load fails, naming the item.
      const PlannedRead& pr = run.reads[run.tasks[t].read];
      s = Status::ResourceExhausted(
          ItemWhere(pr.ri->storage_index) + ": out of memory reading its " +
          std::to_string(pr.item.info.length) + " bytes");
    }
    if (!s.ok()) run.Fail(t, std::move(s));
  }
  // Release the last piece's block now, not when the worker goes.
  worker.pinned.Reset();
  worker.referenced.Reset();
}

RocksDBStorageReaderImpl::KeyedReads RocksDBStorageReaderImpl::KeyOrder(
    const LoadPlan& plan) {
  KeyedReads keyed;
  keyed.reserve(plan.items.size());
  for (uint32_t i = 0; i < plan.items.size(); ++i) {
    keyed.emplace_back(keys::PieceKey(plan.items[i].storage_index, 0), i);
  }
  // Stable: reads of one chunk keep their plan order.
  std::stable_sort(
      keyed.begin(), keyed.end(),
      [](const auto& a, const auto& b) { return a.first < b.first; });
  return keyed;
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
  uint64_t max_compressed_piece = 0;
  ChunkFinder chunks;
  KeyedReads keyed = KeyOrder(plan);
  for (size_t i = 0; i < n; ++i) {
    PlannedRead& pr = run.reads[i];
    ROCKSDCP_RETURN_IF_ERROR(Plan(plan.items[keyed[i].second], planner, chunks,
                                  &pr, static_cast<uint32_t>(i), &run.tasks));
    run.progress.bytes_total += pr.bytes;
    const uint64_t piece =
        std::min(pr.item.info.piece_bytes, pr.item.info.length);
    max_piece = std::max(max_piece, piece);
    if (pr.item.info.compressed) {
      max_compressed_piece = std::max(max_compressed_piece, piece);
    }
  }
  run.progress.items_total = n;
  FindInPlaceFiles(run, keyed);
  keyed = KeyedReads();  // Not needed while reading.

  const int threads = ThreadsFor(run.tasks, run.progress.bytes_total, max_piece,
                                 max_compressed_piece);
  std::vector<uint64_t> task_bytes;
  task_bytes.reserve(run.tasks.size());
  for (const Task& task : run.tasks) task_bytes.push_back(TaskBytes(run, task));
  run.Share(threads, task_bytes);
  std::vector<Worker> workers(threads);
  // From here on the reads ask for what they need: hints ahead of them
  // only compete with them (docs/tuning.md, prefetch_bytes).
  EndPrefetch();
  // A share whose thread could not be started is taken over by the
  // others, and its worker, run after them, finds it done.
  const size_t ran = util::RunOnThreads(
      threads, [this, &run, &workers](size_t i) { Work(run, i, workers[i]); });
  last_read_threads_.store(static_cast<uint32_t>(ran),
                           std::memory_order_relaxed);
  return run.error;
}

}  // namespace rocksdcp
