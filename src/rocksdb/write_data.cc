// RocksDBStorageWriterImpl's runs: the threads of one WriteData, and what
// each writes: its items' pieces, encoded, into staging SST files of its
// own. Also the memory those threads need, which bounds how many run.

#include <rocksdb/flush_block_policy.h>
#include <rocksdb/sst_file_writer.h>
#include <rocksdb/table.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include "codec/plane_codec.h"
#include "format/checksum.h"
#include "keys/keys.h"
#include "rocksdb/adaptive_compression.h"
#include "rocksdb/catalog_codec.h"
#include "rocksdb/rocksdb_status.h"
#include "rocksdb/store_impl.h"
#include "rocksdb/writer.h"
#include "util/partition.h"
#include "util/strided.h"
#include "util/text.h"
#include "util/threads.h"

namespace rocksdcp {

using util::Quote;

namespace fs = std::filesystem;

namespace {

// What a piece value and its place in an SST data block add to the
// piece's data: the FlatBuffers header (its table, the chunk's offsets and
// sizes), the key and the block trailer. Generous: a rank-64 chunk's
// offsets and sizes take 1 KiB.
constexpr uint64_t kValueSlack = 64 << 10;
// A value of at least this many bytes starts a data block of its own, and
// an uncompressed piece stored in one has its payload's offset in the file
// recorded (StorageInfo::piece_offsets), for loads to read it in place.
// Smaller values share blocks: RocksDB keeps an index entry of about 80
// bytes per block in memory while a checkpoint's files are open, 2% of
// the data at this size.
constexpr uint64_t kOwnBlockValueBytes = 4 << 10;
// What else a writer thread's SstFileWriter holds: its index, properties
// and keys.
constexpr uint64_t kThreadSlack = 1 << 20;
// With write_threads = 0, a thread per this many bytes of the plan at most:
// below it, another file and its fsync cost more than the thread saves.
constexpr uint64_t kAutoBytesPerThread = 32 << 20;
// What writing a piece costs beyond copying its bytes (resolving, keys,
// encoding, the SST index), in bytes' worth, when balancing runs.
constexpr uint64_t kPieceCost = 4 << 10;
constexpr uint64_t kMinWriteBuffer = 4 << 10;
constexpr uint64_t kMaxWriteBuffer = 1 << 30;
// CompressionPolicy::kWhenDiskBound's write-behind when bytes_per_sync is
// 0, and its windows in syncs: several, so that every window of a save
// that waits for the disk, compressed or not, shows its waits.
constexpr uint64_t kAdaptiveSyncBytes = 2ull << 20;
constexpr uint64_t kSyncsPerWindow = 4;

// zstd's levels that compression_level may name.
constexpr int kMinCompressionLevel = -7;
constexpr int kMaxCompressionLevel = 19;

// Cuts data blocks as the checkpoint column family's table options say
// (block_size), whatever the SstFileWriter's own block_size is, and starts
// a block before every value of kOwnBlockValueBytes or more, so that such
// a value is the first entry of its block, where the writer can tell its
// offset in the file (StagingFiles::ValueOffset). The SstFileWriter's own
// block_size then only sizes the buffer that RocksDB 7.8 reserves afresh
// for every data block (BlockBasedTableBuilder::WriteBlock swaps the
// builder's buffer for a new string of block_size capacity): sized for the
// largest piece, a piece is copied into the block once, instead of into a
// buffer that then grows to twice its size, copying the piece again, when
// the block is finished.
class PieceBlockPolicy : public rocksdb::FlushBlockPolicy {
 public:
  explicit PieceBlockPolicy(rocksdb::FlushBlockPolicy* by_size)
      : by_size_(by_size) {}

  // Called once for every entry, before it is added; true finishes the
  // block first (never an empty one: RocksDB asserts it is not).
  bool Update(const rocksdb::Slice& key, const rocksdb::Slice& value) override {
    bool flush = false;
    if (entries_ > 0) {
      flush =
          value.size() >= kOwnBlockValueBytes || by_size_->Update(key, value);
    }
    entries_ = flush ? 1 : entries_ + 1;
    return flush;
  }

 private:
  const std::unique_ptr<rocksdb::FlushBlockPolicy> by_size_;
  uint64_t entries_ = 0;  // In the block being built.
};

class PieceBlockPolicyFactory : public rocksdb::FlushBlockPolicyFactory {
 public:
  PieceBlockPolicyFactory(uint64_t block_size, int deviation)
      : block_size_(block_size), deviation_(deviation) {}
  const char* Name() const override { return "RocksdcpPieceBlockPolicy"; }
  rocksdb::FlushBlockPolicy* NewFlushBlockPolicy(
      const rocksdb::BlockBasedTableOptions& /*table_options*/,
      const rocksdb::BlockBuilder& data_block_builder) const override {
    return new PieceBlockPolicy(
        rocksdb::FlushBlockBySizePolicyFactory::NewFlushBlockPolicy(
            block_size_, deviation_, data_block_builder));
  }

 private:
  const uint64_t block_size_;
  const int deviation_;
};

// SstFileWriter options for a staging file whose largest piece value is
// about `largest_value` bytes: the checkpoint column family's, with the
// block buffer sized to hold that value in one allocation.
rocksdb::Options StagingFileOptions(const rocksdb::Options& base,
                                    uint64_t largest_value) {
  rocksdb::Options options = base;
  const auto* base_table =
      base.table_factory->GetOptions<rocksdb::BlockBasedTableOptions>();
  rocksdb::BlockBasedTableOptions table =
      base_table ? *base_table : rocksdb::BlockBasedTableOptions();
  // Writing needs no cache; the factory would otherwise make one per file.
  table.block_cache = nullptr;
  table.no_block_cache = true;
  table.flush_block_policy_factory = std::make_shared<PieceBlockPolicyFactory>(
      table.block_size, table.block_size_deviation);
  table.block_size =
      std::max<uint64_t>(table.block_size, largest_value + kValueSlack);
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  return options;
}

// The bytes of an unsigned LEB128 varint of `v`, as RocksDB's block
// entries encode lengths.
uint64_t VarintLength(uint64_t v) {
  uint64_t n = 1;
  for (; v >= 128; v >>= 7) ++n;
  return n;
}

// One run's staging files, <stem><n>.sst for n = 0, 1, ..., written one
// after another. Its errors leave the context (the save, the item) to its
// callers.
class StagingFiles {
 public:
  // Appends each file's path to *paths as it creates it.
  StagingFiles(std::string stem, const rocksdb::EnvOptions& env_options,
               rocksdb::Options options, std::vector<std::string>* paths)
      : stem_(std::move(stem)),
        env_options_(env_options),
        options_(std::move(options)),
        paths_(paths) {}

  // Whether the next item starts a new file: none is open, or the open one
  // holds `target_bytes` already.
  bool Full(uint64_t target_bytes) const {
    return !sst_ || bytes_ >= target_bytes;
  }

  // Finishes the open file, if any, and opens the next.
  Status Next() {
    ROCKSDCP_RETURN_IF_ERROR(Close());
    path_ = stem_ + std::to_string(next_number_++) + ".sst";
    paths_->push_back(path_);
    sst_ = std::make_unique<rocksdb::SstFileWriter>(env_options_, options_);
    bytes_ = 0;
    first_key_xxh3_ = 0;
    const rocksdb::Status s = sst_->Open(path_);
    // EINVAL from open(2) with O_DIRECT: the file system refuses it.
    if (env_options_.use_direct_writes && s.IsIOError() &&
        s.ToString().find("Invalid argument") != std::string::npos) {
      return FromRocksDB(s, "opening staging file " + path_ +
                                " with O_DIRECT (RocksDBWriterOptions::"
                                "use_direct_writes), which its file system "
                                "refuses, as tmpfs before Linux 6.6 does");
    }
    return FromRocksDB(s, "opening staging file " + path_);
  }

  // Finishes (and syncs) the open file, if any.
  Status Close() {
    if (!sst_) return Status::OK();
    rocksdb::Status s = sst_->Finish();
    sst_.reset();
    return FromRocksDB(s, "finishing staging file " + path_);
  }

  // REQUIRES: a file is open.
  rocksdb::Status Put(const std::string& key, std::string_view value) {
    if (first_key_xxh3_ == 0) first_key_xxh3_ = format::Xxh3(key) | 1;
    bytes_ += value.size();
    return sst_->Put(key, rocksdb::Slice(value.data(), value.size()));
  }

  // The XXH3-64 of the open file's first key with its lowest bit set (so
  // never 0), once it has one; else 0.
  uint64_t first_key_xxh3() const { return first_key_xxh3_; }

  // Where the value just Put under `key` starts in the file, if it starts
  // a data block of its own (PieceBlockPolicy: it has kOwnBlockValueBytes
  // or more); else 0. Blocks are written in order, uncompressed, with no
  // padding, so the open file's size is where the block of the last value
  // starts, once that value has made the builder write out the block
  // before it. The block's first entry is <0><key length><value length>
  // (varints), then the internal key (the key and 8 bytes of sequence
  // number and type), then the value. A reader checks every byte it reads
  // this way against the item's piece hashes, so a wrong offset costs a
  // second read, never a wrong byte.
  uint64_t ValueOffset(const std::string& key, std::string_view value) const {
    if (value.size() < kOwnBlockValueBytes) return 0;
    const uint64_t internal_key = key.size() + 8;
    return sst_->FileSize() + 1 + VarintLength(internal_key) +
           VarintLength(value.size()) + internal_key;
  }

  // The open (or last) file.
  const std::string& path() const { return path_; }

 private:
  const std::string stem_;
  const rocksdb::EnvOptions env_options_;
  const rocksdb::Options options_;
  std::vector<std::string>* const paths_;
  std::unique_ptr<rocksdb::SstFileWriter> sst_;
  std::string path_;
  uint64_t bytes_ = 0;
  uint64_t first_key_xxh3_ = 0;
  int next_number_ = 0;
};

}  // namespace

// What the planner resolved an item to, cut into pieces.
struct RocksDBStorageWriterImpl::Payload {
  // The item's kind, dtype, chunk and number of pieces; WritePiece sets
  // the rest for each piece.
  format::PieceHeader header;
  const TensorView* view = nullptr;  // A tensor item's.
  std::string_view bytes;            // A byte item's.
  uint64_t total = 0;
  uint64_t piece_bytes = 0;

  // The payload from `offset` on, in place, where the state dict holds it
  // contiguously; otherwise nullptr.
  const uint8_t* InPlace(uint64_t offset) const {
    if (view == nullptr) {
      return reinterpret_cast<const uint8_t*>(bytes.data()) + offset;
    }
    if (!view->IsContiguous()) return nullptr;
    return static_cast<const uint8_t*>(view->data) + offset;
  }

  // Copies the payload of `piece` into `dst`, through the view's strides.
  void Copy(const format::PieceHeader& piece, uint8_t* dst) const {
    if (view != nullptr) {
      const uint64_t elem = DTypeSize(view->dtype);
      util::GatherElements(*view, piece.byte_offset / elem,
                           piece.byte_length / elem, dst);
    } else if (piece.byte_length > 0) {
      std::memcpy(dst, bytes.data() + piece.byte_offset, piece.byte_length);
    }
  }
};

namespace {

// Checks what the planner resolved `item` to against the plan, and cuts it
// into pieces of at most `max_piece_bytes`, a tensor's on element
// boundaries, so that a reader can copy whole elements out of each. The
// payload points into `resolved`. Errors leave the context to the caller.
Result<RocksDBStorageWriterImpl::Payload> CutIntoPieces(
    const WriteItem& item, const ResolvedData& resolved,
    uint64_t max_piece_bytes) {
  RocksDBStorageWriterImpl::Payload payload;
  format::PieceHeader& header = payload.header;
  payload.view = std::get_if<TensorView>(&resolved);
  payload.piece_bytes = max_piece_bytes;
  if (item.type == WriteItemType::kByteIO) {
    if (payload.view != nullptr) {
      return Status::InvalidArgument(
          "planner resolved a byte item to a tensor");
    }
    payload.bytes = std::get<std::string_view>(resolved);
    payload.total = payload.bytes.size();
    header.kind = format::ItemKind::kBytes;
  } else {
    const TensorView* view = payload.view;
    if (view == nullptr || !item.tensor_data) {
      return Status::InvalidArgument("planner resolved a tensor item to bytes");
    }
    ROCKSDCP_RETURN_IF_ERROR(view->Validate(item.index.fqn));
    const TensorWriteData& td = *item.tensor_data;
    if (view->dtype != td.properties.dtype || view->sizes != td.chunk.sizes) {
      return Status::InvalidArgument(
          "planned " + std::string(DTypeName(td.properties.dtype)) +
          util::ShapeString(td.chunk.sizes) + " but the state dict holds " +
          std::string(DTypeName(view->dtype)) + util::ShapeString(view->sizes));
    }
    const uint64_t elem = DTypeSize(view->dtype);
    payload.total = view->nbytes();
    payload.piece_bytes =
        std::max<uint64_t>(elem, max_piece_bytes - max_piece_bytes % elem);
    header.kind = format::ItemKind::kTensor;
    header.dtype = view->dtype;
    header.chunk_offsets = td.chunk.offsets;
    header.chunk_sizes = td.chunk.sizes;
  }
  const uint64_t num_pieces =
      payload.total == 0
          ? 1
          : (payload.total + payload.piece_bytes - 1) / payload.piece_bytes;
  if (num_pieces > UINT32_MAX) {
    return Status::InvalidArgument("needs more than 2^32 pieces");
  }
  header.num_pieces = static_cast<uint32_t>(num_pieces);
  return payload;
}

// In an incremental save, the base's storage info of the item at `index`
// if the base cut it into the same pieces as `payload`: then a piece that
// hashes as the base's is a reference to it. Otherwise nullptr.
const format::StorageInfo* SameCutInBase(
    const std::map<MetadataIndex, format::StorageInfo>& base,
    const MetadataIndex& index,
    const RocksDBStorageWriterImpl::Payload& payload) {
  auto b = base.find(index);
  if (b == base.end()) return nullptr;
  const format::StorageInfo& info = b->second;
  const uint32_t n = payload.header.num_pieces;
  return info.kind == payload.header.kind && info.length == payload.total &&
                 info.piece_bytes == payload.piece_bytes &&
                 info.num_pieces == n && info.piece_hashes.size() == n &&
                 info.piece_sources.size() == n
             ? &info
             : nullptr;
}

// Records piece `p` of *info as the base's piece, naming the base's source
// in info->sources, and returns the reference value to store for it.
std::string ReferToBase(const format::StorageInfo& base, uint32_t p,
                        const std::string& key, uint64_t byte_length,
                        format::StorageInfo* info) {
  const uint32_t source = base.piece_sources[p] - 1;
  const std::string& name = base.sources[source];
  auto at = std::find(info->sources.begin(), info->sources.end(), name);
  if (at == info->sources.end()) {
    at = info->sources.insert(info->sources.end(), name);
    // Which of that column family's files holds the piece, for loads that
    // read it in place.
    info->source_file_first_key_xxh3.push_back(
        base.source_file_first_key_xxh3.empty()
            ? 0
            : base.source_file_first_key_xxh3[source]);
  }
  info->piece_sources[p] =
      static_cast<uint32_t>(at - info->sources.begin()) + 1;
  if (!info->piece_offsets.empty() && !base.piece_offsets.empty()) {
    info->piece_offsets[p] = base.piece_offsets[p];
  }
  // The base's piece may be compressed.
  info->compressed |= base.compressed;
  return format::EncodePieceRef(
      {name, key, byte_length, info->piece_hashes[p]});
}

}  // namespace

// One item of the plan, in key order.
struct RocksDBStorageWriterImpl::Planned {
  const WriteItem* item;
  std::string first_key;
  // Payload bytes as planned; 0 for byte items, whose size is known only
  // once resolved.
  uint64_t bytes;
};

// What the threads of one WriteData share.
struct RocksDBStorageWriterImpl::Job {
  Job(SavePlanner& planner, const std::vector<Planned>& order)
      : planner(planner), order(order), results(order.size()) {}

  SavePlanner& planner;
  const std::vector<Planned>& order;
  std::string prefix;
  rocksdb::Options sst_options;
  rocksdb::EnvOptions env_options;
  // results[i] is order[i]'s; each thread fills those of its run.
  std::vector<WriteResult> results;
  // An incremental save's base: its storage info of the items this rank
  // writes, every piece's source named.
  std::map<MetadataIndex, format::StorageInfo> base;
  // Set by the first thread that fails; the others stop at their next
  // piece.
  std::atomic<bool> failed{false};
  std::mutex mu;  // Guards error and progress.
  Status error;
  Progress progress;

  // Records the first failure of any thread, and returns `s`: later ones
  // are consequences or coincidences, and the first names the item that
  // failed.
  Status Fail(Status s) {
    std::lock_guard<std::mutex> lock(mu);
    if (!failed.exchange(true)) error = s;
    return s;
  }
};

uint64_t RocksDBStorageWriterImpl::ThreadMemory(
    const RocksDBWriterOptions& options, uint64_t piece_bytes) {
  // The piece being encoded; RocksDB's block buffer holding the previous
  // one, which for a file's first block doubles (old and new buffer at
  // once); and, for buffers under glibc's mmap threshold, the freed buffer
  // that the allocator keeps for the next block. Measured: 3.0 to 3.6
  // pieces per thread.
  uint64_t need = 4 * (piece_bytes + kValueSlack) +
                  options.writable_file_max_buffer_size + kThreadSlack;
  // The payload to compress, its planes and their stored form.
  if (options.compression != Compression::kNone) {
    need += 3 * piece_bytes + codec::PlaneEncoder::ContextBytes(
                                  options.compression_level, piece_bytes);
  }
  return need;
}

Status RocksDBStorageWriterImpl::ValidateOptions(
    const RocksDBWriterOptions& options) {
  if (options.max_piece_bytes == 0 ||
      options.max_piece_bytes > format::kMaxPieceBytes) {
    return Status::InvalidArgument(
        "max_piece_bytes must be in [1, 1 GiB], got " +
        std::to_string(options.max_piece_bytes));
  }
  if (options.write_threads < 0) {
    return Status::InvalidArgument("write_threads must be >= 0, got " +
                                   std::to_string(options.write_threads));
  }
  if (options.writable_file_max_buffer_size < kMinWriteBuffer ||
      options.writable_file_max_buffer_size > kMaxWriteBuffer) {
    return Status::InvalidArgument(
        "writable_file_max_buffer_size must be in [4 KiB, 1 GiB], got " +
        std::to_string(options.writable_file_max_buffer_size));
  }
  if (options.compression != Compression::kNone &&
      options.compression != Compression::kBytePlaneZstd) {
    return Status::InvalidArgument(
        "unknown compression " +
        std::to_string(static_cast<int>(options.compression)));
  }
  if (options.compression_policy != CompressionPolicy::kAlways &&
      options.compression_policy != CompressionPolicy::kWhenDiskBound) {
    return Status::InvalidArgument(
        "unknown compression_policy " +
        std::to_string(static_cast<int>(options.compression_policy)));
  }
  if (options.compression_level < kMinCompressionLevel ||
      options.compression_level > kMaxCompressionLevel) {
    return Status::InvalidArgument("compression_level must be in [" +
                                   std::to_string(kMinCompressionLevel) + ", " +
                                   std::to_string(kMaxCompressionLevel) +
                                   "], got " +
                                   std::to_string(options.compression_level));
  }
  if (!(options.min_compression_saving >= 0 &&
        options.min_compression_saving < 1)) {
    return Status::InvalidArgument(
        "min_compression_saving must be in [0, 1), got " +
        std::to_string(options.min_compression_saving));
  }
  if (options.base_on_newest && !options.base.empty()) {
    return Status::InvalidArgument(
        "base names checkpoint " + Quote(options.base) +
        " and base_on_newest asks for the newest: set one of them");
  }
  if (!options.base.empty()) {
    ROCKSDCP_RETURN_IF_ERROR(
        ValidateCheckpointId(options.base).WithContext("base checkpoint"));
  }
  const uint64_t need = ThreadMemory(options, options.max_piece_bytes);
  if (options.memory_budget < need) {
    return Status::InvalidArgument(
        "memory_budget of " + std::to_string(options.memory_budget) +
        " bytes is less than one writer thread needs for pieces of "
        "max_piece_bytes = " +
        std::to_string(options.max_piece_bytes) + ": " + std::to_string(need) +
        " bytes (about 4 pieces: the piece being encoded, RocksDB's copies "
        "of it in the SST block builder, and the file's write buffer); raise "
        "memory_budget or lower max_piece_bytes");
  }
  return Status::OK();
}

size_t RocksDBStorageWriterImpl::ThreadCount(
    const std::vector<Planned>& order) const {
  uint64_t total = 0, largest = 0;
  bool byte_items = false;
  for (const Planned& p : order) {
    total += p.bytes;
    largest = std::max(largest, p.bytes);
    byte_items |= p.item->type == WriteItemType::kByteIO;
  }
  size_t threads;
  if (options_.write_threads > 0) {
    threads = static_cast<size_t>(options_.write_threads);
  } else {
    threads = std::max(1u, std::thread::hardware_concurrency());
    threads = std::min<uint64_t>(
        threads, std::max<uint64_t>(1, total / kAutoBytesPerThread));
  }
  threads = std::min(threads, order.size());
  // A byte item's size is unknown until resolved: it may need full pieces.
  const uint64_t piece = byte_items
                             ? options_.max_piece_bytes
                             : std::min(options_.max_piece_bytes, largest);
  const uint64_t fit = options_.memory_budget / ThreadMemory(options_, piece);
  threads = std::min<uint64_t>(threads, fit);
  return std::max<size_t>(threads, 1);
}

std::unique_ptr<format::PieceEncoder> RocksDBStorageWriterImpl::NewEncoder()
    const {
  if (options_.compression == Compression::kNone) {
    return std::make_unique<format::PieceEncoder>();
  }
  format::PieceCompression compression;
  compression.level = options_.compression_level;
  compression.min_saving = options_.min_compression_saving;
  return std::make_unique<format::PieceEncoder>(compression);
}

std::unique_ptr<format::PieceEncoder> RocksDBStorageWriterImpl::TakeEncoder() {
  std::lock_guard<std::mutex> lock(encoders_mu_);
  if (encoders_.empty()) return NewEncoder();
  std::unique_ptr<format::PieceEncoder> e = std::move(encoders_.back());
  encoders_.pop_back();
  return e;
}

void RocksDBStorageWriterImpl::ReturnEncoder(
    std::unique_ptr<format::PieceEncoder> encoder) {
  if (!options_.reuse_buffers) return;
  std::lock_guard<std::mutex> lock(encoders_mu_);
  encoders_.push_back(std::move(encoder));
}

Result<std::vector<RocksDBStorageWriterImpl::Planned>>
RocksDBStorageWriterImpl::KeyOrder(const SavePlan& plan) const {
  // SST files need their keys in order; each item's pieces are contiguous
  // in key order because '#' ends every item's key prefix.
  std::vector<Planned> order;
  order.reserve(plan.items.size());
  for (const WriteItem& item : plan.items) {
    order.push_back(
        {&item, keys::PieceKey(item.index, 0), item.TensorStorageSize()});
  }
  std::sort(order.begin(), order.end(), [](const Planned& a, const Planned& b) {
    return a.first_key < b.first_key;
  });
  for (size_t i = 1; i < order.size(); ++i) {
    if (order[i].first_key == order[i - 1].first_key) {
      return Status::InvalidArgument(Where() + ": plan holds item " +
                                     order[i].item->index.ToString() +
                                     " twice");
    }
  }
  return order;
}

Status RocksDBStorageWriterImpl::SetUpJob(const SavePlan& plan,
                                          format::RankPlan rank_plan,
                                          Job* job) const {
  job->progress.items_total = plan.items.size();
  for (const WriteItem& item : plan.items) {
    job->progress.bytes_total += item.TensorStorageSize();
  }
  job->prefix = std::move(rank_plan.file_prefix);
  job->base = std::move(rank_plan.base_items);
  if (job->prefix.empty()) job->prefix = "rank" + std::to_string(rank_);
  if (job->prefix.find('/') != std::string::npos || job->prefix == "..") {
    return Status::InvalidArgument(Where() + ": the plan's file prefix " +
                                   Quote(job->prefix) + " is not a file name");
  }
  job->sst_options = CheckpointColumnFamilyOptions();
  job->sst_options.env = store_->env();
  job->env_options.use_direct_writes = options_.use_direct_writes;
  job->env_options.bytes_per_sync = options_.bytes_per_sync;
  if (Adaptive()) {
    // Write-behind that waits when the disk falls behind: the waits the
    // governor of each thread measures.
    job->env_options.strict_bytes_per_sync = true;
    if (job->env_options.bytes_per_sync == 0) {
      job->env_options.bytes_per_sync = kAdaptiveSyncBytes;
    }
  }
  job->env_options.writable_file_max_buffer_size =
      static_cast<size_t>(options_.writable_file_max_buffer_size);
  return Status::OK();
}

std::vector<size_t> RocksDBStorageWriterImpl::SplitIntoRuns(
    const std::vector<Planned>& order) const {
  // Runs of consecutive keys, balanced by bytes plus a per-piece cost, so
  // that many small items spread as evenly as a few large ones.
  std::vector<uint64_t> weights(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    const uint64_t pieces =
        std::max<uint64_t>(1, (order[i].bytes + options_.max_piece_bytes - 1) /
                                  options_.max_piece_bytes);
    weights[i] = order[i].bytes + pieces * kPieceCost;
  }
  return util::SplitByWeight(weights, ThreadCount(order));
}

Result<std::vector<WriteResult>> RocksDBStorageWriterImpl::WriteDataSync(
    const SavePlan& plan, SavePlanner& planner) {
  if (!set_up_) {
    return Status::FailedPrecondition(
        "WriteData called before SetUpStorageWriter");
  }
  ROCKSDCP_ASSIGN_OR_RETURN(const std::vector<Planned> order, KeyOrder(plan));
  format::RankPlan rank_plan;
  if (format::IsRankPlan(plan.storage_data)) {
    auto decoded = format::DecodeRankPlan(plan.storage_data);
    if (!decoded.ok()) {
      return decoded.status().WithContext(Where() + ": the plan of rank " +
                                          std::to_string(rank_));
    }
    rank_plan = std::move(decoded).value();
  } else {
    rank_plan.file_prefix = plan.storage_data;
  }
  plan_save_id_ = std::move(rank_plan.save_id);
  if (order.empty()) {
    if (options_.progress) options_.progress(Progress{});
    return std::vector<WriteResult>{};
  }

  Job job(planner, order);
  ROCKSDCP_RETURN_IF_ERROR(SetUpJob(plan, std::move(rank_plan), &job));
  const std::vector<size_t> bounds = SplitIntoRuns(order);
  const size_t runs = bounds.size() - 1;
  std::vector<std::vector<std::string>> files(runs);
  // Each run records its failure in `job`; nothing may leave a writer
  // thread, so running out of memory is recorded too.
  auto write_run = [this, &job, &bounds, &files](size_t r) {
    size_t at = bounds[r];
    try {
      WriteRun(&job, r, bounds[r], bounds[r + 1], &files[r], &at).IgnoreError();
    } catch (const std::bad_alloc&) {
      job.Fail(Status::ResourceExhausted(
                   Where() + ", item " +
                   Quote(job.order[at].item->index.ToString()) +
                   ": out of memory writing it"))
          .IgnoreError();
    }
  };
  util::RunOnThreads(runs, write_run);

  if (job.failed.load()) {
    // Every thread has closed its files: remove what this call wrote, so
    // that a failed WriteData leaves no staging file behind.
    for (const auto& run_files : files) {
      for (const std::string& f : run_files) {
        // Best effort; Abandon and GC remove the rest.
        store_->fs()
            ->DeleteFile(f, rocksdb::IOOptions(), nullptr)
            .PermitUncheckedError();
      }
    }
    return job.error;
  }
  if (options_.progress) options_.progress(job.progress);
  return std::move(job.results);
}

// What one WriteRun keeps from item to item.
struct RocksDBStorageWriterImpl::Run {
  StagingFiles files;
  // With kWhenDiskBound: the clock of the run's waits for the disk.
  DiskBoundCompression* disk_bound;
  std::unique_ptr<format::PieceEncoder> encoder;
  // The current item's piece hashes and sources; reused across items.
  format::StorageInfo info;
};

Status RocksDBStorageWriterImpl::WriteRun(Job* job, size_t run, size_t begin,
                                          size_t end,
                                          std::vector<std::string>* files,
                                          size_t* at) {
  // The largest piece of the run, as planned (a byte item's size is known
  // only once resolved; a larger one still works, through RocksDB's
  // growing buffer).
  uint64_t largest_piece = 0;
  for (size_t i = begin; i < end; ++i) {
    largest_piece = std::max(
        largest_piece, std::min(job->order[i].bytes, options_.max_piece_bytes));
  }
  rocksdb::Options file_options =
      StagingFileOptions(job->sst_options, largest_piece);
  // With kWhenDiskBound, the thread's files are written through a clock of
  // the time they wait for the disk, which picks each window's mode.
  std::optional<DiskBoundCompression> disk_bound;
  if (Adaptive()) {
    disk_bound.emplace(store_->fs(),
                       kSyncsPerWindow * job->env_options.bytes_per_sync);
    file_options.env = disk_bound->env();
  }
  Run state{StagingFiles((fs::path(staging_dir_) /
                          (job->prefix + "-" + std::to_string(run) + "-"))
                             .string(),
                         job->env_options, std::move(file_options), files),
            disk_bound ? &*disk_bound : nullptr,
            nullptr,
            {}};

  if (options_.reuse_buffers) state.encoder = TakeEncoder();
  struct GiveBack {
    RocksDBStorageWriterImpl* self;
    std::unique_ptr<format::PieceEncoder>* encoder;
    ~GiveBack() {
      // Not one an exception left half-way through an Encode.
      if (*encoder && std::uncaught_exceptions() == 0) {
        self->ReturnEncoder(std::move(*encoder));
      }
    }
  } give_back{this, &state.encoder};

  for (size_t i = begin; i < end; ++i) {
    *at = i;
    if (job->failed.load(std::memory_order_relaxed)) {
      return Status::Aborted("another writer thread failed");
    }
    ROCKSDCP_RETURN_IF_ERROR(WriteItemOfRun(job, &state, i));
  }
  if (Status s = state.files.Close(); !s.ok()) {
    return job->Fail(s.WithContext(Where()));
  }
  return Status::OK();
}

std::string RocksDBStorageWriterImpl::ItemWhere(const WriteItem& item) const {
  return Where() + ", item " + Quote(item.index.ToString());
}

Status RocksDBStorageWriterImpl::WriteItemOfRun(Job* job, Run* run, size_t i) {
  const WriteItem& item = *job->order[i].item;
  auto resolved = job->planner.ResolveData(item);
  if (!resolved.ok()) {
    return job->Fail(resolved.status().WithContext(ItemWhere(item)));
  }
  // Once the item is written (every piece copied into the SST builder),
  // or has failed, the planner may reuse its memory.
  struct Release {
    SavePlanner& planner;
    const WriteItem& item;
    ~Release() { planner.ReleaseData(item); }
  } release{job->planner, item};

  auto payload = CutIntoPieces(item, *resolved, options_.max_piece_bytes);
  if (!payload.ok()) {
    return job->Fail(payload.status().WithContext(ItemWhere(item)));
  }
  // An item stays within one staging file, so its WriteResult can name it.
  if (run->files.Full(options_.target_file_bytes)) {
    if (Status s = run->files.Next(); !s.ok()) {
      return job->Fail(s.WithContext(ItemWhere(item)));
    }
  }
  const uint32_t num_pieces = payload->header.num_pieces;
  format::StorageInfo& info = run->info;
  info.piece_hashes.resize(num_pieces);
  // Cleared below if no piece has one.
  info.piece_offsets.assign(num_pieces, 0);
  info.sources.clear();
  info.source_file_first_key_xxh3.clear();
  info.piece_sources.clear();
  info.compressed = false;
  const format::StorageInfo* base =
      job->base.empty() ? nullptr
                        : SameCutInBase(job->base, item.index, *payload);
  if (base != nullptr) info.piece_sources.assign(num_pieces, 0);
  for (uint32_t p = 0; p < num_pieces; ++p) {
    if (p > 0 && job->failed.load(std::memory_order_relaxed)) {
      return Status::Aborted("another writer thread failed");
    }
    ROCKSDCP_RETURN_IF_ERROR(WritePiece(job, run, item, &*payload, base, p));
  }
  if (info.sources.empty()) {
    info.piece_sources.clear();
    info.source_file_first_key_xxh3.clear();
  }
  if (std::all_of(info.piece_offsets.begin(), info.piece_offsets.end(),
                  [](uint64_t o) { return o == 0; })) {
    info.piece_offsets.clear();
  }
  info.file_first_key_xxh3 = run->files.first_key_xxh3();
  if (!options_.reuse_buffers) run->encoder.reset();

  info.kind = payload->header.kind;
  info.length = payload->total;
  info.num_pieces = num_pieces;
  info.piece_bytes = payload->piece_bytes;
  info.file = run->files.path();
  job->results[i] =
      WriteResult{item.index, payload->total, format::EncodeStorageInfo(info)};
  return Status::OK();
}

Status RocksDBStorageWriterImpl::WritePiece(Job* job, Run* run,
                                            const WriteItem& item,
                                            Payload* payload,
                                            const format::StorageInfo* base,
                                            uint32_t p) {
  format::PieceHeader& header = payload->header;
  format::StorageInfo& info = run->info;
  header.piece = p;
  header.byte_offset = p * payload->piece_bytes;
  header.byte_length =
      std::min(payload->piece_bytes, payload->total - header.byte_offset);
  const std::string key = keys::PieceKey(item.index, p);
  std::string_view value;
  std::string ref_value;
  // Hashed in place before anything is copied: an unchanged piece is read
  // once, and a changed one is hashed here rather than in Encode.
  const uint8_t* in_place = base == nullptr || header.byte_length == 0
                                ? nullptr
                                : payload->InPlace(header.byte_offset);
  const bool hashed = in_place != nullptr;
  if (hashed) {
    info.piece_hashes[p] = format::Xxh3_128(in_place, header.byte_length);
  }
  if (!hashed || info.piece_hashes[p] != base->piece_hashes[p]) {
    // Without reuse, a fresh encoder (and buffer) per piece: the cost that
    // reuse_buffers exists to show.
    if (!options_.reuse_buffers) run->encoder = NewEncoder();
    value = run->encoder->Encode(
        header, key, [&](uint8_t* dst) { payload->Copy(header, dst); },
        hashed ? nullptr : &info.piece_hashes[p],
        run->disk_bound == nullptr || run->disk_bound->compress());
    info.compressed |= run->encoder->last_compressed();
  }
  if (base != nullptr && header.byte_length > 0 &&
      info.piece_hashes[p] == base->piece_hashes[p]) {
    // Identical to the base's piece: a reference to where it is.
    ref_value = ReferToBase(*base, p, key, header.byte_length, &info);
    value = ref_value;
  }
  if (rocksdb::Status s = run->files.Put(key, value); !s.ok()) {
    return job->Fail(FromRocksDB(s, ItemWhere(item) + ": writing piece " +
                                        std::to_string(p) + " to " +
                                        run->files.path()));
  }
  if (!info.piece_offsets.empty() && ref_value.empty() &&
      !run->encoder->last_compressed()) {
    const uint64_t at = run->files.ValueOffset(key, value);
    if (at != 0) {
      info.piece_offsets[p] = at + run->encoder->last_payload_offset();
    }
  }
  // A reference (an unchanged piece of an incremental save) is neither
  // compressed nor written: only encoded pieces tell the governor what
  // compressing costs and saves.
  if (run->disk_bound != nullptr && ref_value.empty()) {
    run->disk_bound->Wrote(header.byte_length, value.size());
  }
  if (options_.progress) {
    std::lock_guard<std::mutex> lock(job->mu);
    job->progress.bytes_done += header.byte_length;
    if (item.type == WriteItemType::kByteIO) {
      job->progress.bytes_total += header.byte_length;
    }
    if (p + 1 == header.num_pieces) ++job->progress.items_done;
    options_.progress(job->progress);
  }
  return Status::OK();
}

}  // namespace rocksdcp
