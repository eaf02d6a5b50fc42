#include "rocksdb/reader.h"

#include <random>

#include "format/checksum.h"
#include "format/metadata_codec.h"
#include "keys/keys.h"
#include "rocksdb/rocksdb_status.h"
#include "util/text.h"
#include "util/ready_future.h"
#include "util/strided.h"

namespace rocksdcp {

using util::Quote;
using util::RandomHex;

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
  rocksdb::Status s =
      store_->db()->Get(ro, c.cf.get(),
                        rocksdb::Slice(keys::kMetadataKey.data(),
                                       keys::kMetadataKey.size()),
                        &value);
  if (s.IsNotFound()) {
    return Status::Corruption(
        Where() + ": the catalog lists it but its metadata key " +
        std::string(keys::kMetadataKey) + " is missing");
  }
  if (!s.ok()) return FromRocksDB(s, Where() + ": reading metadata");
  const uint64_t sum = format::Xxh3(value);
  if (sum != c.info.metadata_checksum) {
    return Status::Corruption(
        Where() + ": metadata checksum mismatch (catalog records " +
        std::to_string(c.info.metadata_checksum) + ", value hashes to " +
        std::to_string(sum) + ")");
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
  return s;
}

std::future<Status> RocksDBStorageReaderImpl::ReadData(const LoadPlan& plan,
                                                       LoadPlanner& planner) {
  return util::ReadyFuture(ReadDataSync(plan, planner));
}

Result<RocksDBStorageReaderImpl::Item> RocksDBStorageReaderImpl::LookupItem(
    const MetadataIndex& index, bool tensor) {
  auto it = metadata_->storage_data.find(index);
  if (it == metadata_->storage_data.end()) {
    return Status::Corruption(ItemWhere(index) +
                              ": the metadata records no storage for it");
  }
  Item item;
  auto info = format::DecodeStorageInfo(it->second);
  if (!info.ok()) return info.status().WithContext(ItemWhere(index));
  item.info = *info;
  const auto want = tensor ? format::ItemKind::kTensor : format::ItemKind::kBytes;
  if (item.info.kind != want) {
    return Status::Corruption(ItemWhere(index) + ": stored as " +
                              (tensor ? "bytes" : "a tensor") +
                              " but planned as " +
                              (tensor ? "a tensor" : "bytes"));
  }
  if (!tensor) return item;

  auto sd = metadata_->state_dict_metadata.find(index.fqn);
  const auto* tm = sd == metadata_->state_dict_metadata.end()
                       ? nullptr
                       : std::get_if<TensorStorageMetadata>(&sd->second);
  if (tm == nullptr || !index.offset) {
    return Status::Corruption(ItemWhere(index) +
                              ": the metadata has no tensor of that name");
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
    return Status::Corruption(ItemWhere(index) +
                              ": the metadata has no chunk at that offset");
  }
  item.dtype = tm->properties.dtype;
  item.chunk_sizes = chunk->sizes;
  const uint64_t elem = DTypeSize(item.dtype);
  uint64_t numel = 1;
  for (int64_t s : chunk->sizes) numel *= static_cast<uint64_t>(s);
  if (item.info.length != numel * elem || item.info.piece_bytes % elem != 0) {
    return Status::Corruption(
        ItemWhere(index) + ": storage info (" +
        std::to_string(item.info.length) + " bytes in pieces of " +
        std::to_string(item.info.piece_bytes) +
        ") does not match the chunk's " + std::to_string(numel) + " x " +
        std::to_string(elem) + "-byte elements");
  }
  return item;
}

Result<format::DecodedPiece> RocksDBStorageReaderImpl::FetchPiece(
    const MetadataIndex& index, const Item& item, uint32_t p) {
  const std::string where = ItemWhere(index) + ", piece " + std::to_string(p) +
                            " of " + std::to_string(item.info.num_pieces);
  const std::string key = keys::PieceKey(index, p);
  rocksdb::ReadOptions ro;
  ro.fill_cache = options_.fill_cache;
  ro.verify_checksums = true;
  pinned_.Reset();
  rocksdb::Status s = store_->db()->Get(ro, checkpoint_->cf.get(), key, &pinned_);
  if (s.IsNotFound()) {
    return Status::Corruption(where + ": key " + Quote(key) + " is missing");
  }
  if (!s.ok()) return FromRocksDB(s, where);
  auto piece =
      format::DecodePiece(std::string_view(pinned_.data(), pinned_.size()));
  if (!piece.ok()) return piece.status().WithContext(where);

  const format::PieceHeader& h = piece->header;
  const uint64_t offset = uint64_t{p} * item.info.piece_bytes;
  const uint64_t length =
      std::min(item.info.piece_bytes, item.info.length - offset);
  const bool tensor = item.info.kind == format::ItemKind::kTensor;
  const bool matches =
      h.kind == item.info.kind && h.piece == p &&
      h.num_pieces == item.info.num_pieces && h.byte_offset == offset &&
      h.byte_length == length &&
      (!tensor || (h.dtype == item.dtype && h.chunk_offsets == *index.offset &&
                   h.chunk_sizes == item.chunk_sizes));
  if (!matches) {
    return Status::Corruption(
        where + ": the piece's header does not match the metadata (piece " +
        std::to_string(h.piece) + "/" + std::to_string(h.num_pieces) +
        ", bytes " + std::to_string(h.byte_offset) + "+" +
        std::to_string(h.byte_length) + ", expected " + std::to_string(p) +
        "/" + std::to_string(item.info.num_pieces) + ", bytes " +
        std::to_string(offset) + "+" + std::to_string(length) + ")");
  }
  pieces_read_.fetch_add(1, std::memory_order_relaxed);
  bytes_read_.fetch_add(piece->size, std::memory_order_relaxed);
  return piece;
}

Status RocksDBStorageReaderImpl::ReadTensor(const ReadItem& ri,
                                            LoadPlanner& planner,
                                            Progress* progress) {
  ROCKSDCP_ASSIGN_OR_RETURN(Item item, LookupItem(ri.storage_index, true));
  const size_t dims = item.chunk_sizes.size();
  const std::string where = ItemWhere(ri.storage_index);
  if (ri.storage_offsets.size() != dims || ri.lengths.size() != dims) {
    return Status::InvalidArgument(where + ": read item has the wrong rank");
  }
  int64_t numel = 1;
  for (size_t d = 0; d < dims; ++d) {
    if (ri.storage_offsets[d] < 0 || ri.lengths[d] < 0 ||
        ri.lengths[d] > item.chunk_sizes[d] - ri.storage_offsets[d]) {
      return Status::InvalidArgument(where +
                                     ": read item's box lies outside the chunk");
    }
    numel *= ri.lengths[d];
  }
  auto resolved = planner.ResolveTensor(ri);
  if (!resolved.ok()) return resolved.status().WithContext(where);
  const TensorView& dest = *resolved;
  if (dest.dtype != item.dtype || dest.sizes != ri.lengths) {
    return Status::InvalidArgument(
        where + ": the planner's destination is " +
        std::string(DTypeName(dest.dtype)) + " of the wrong shape; expected " +
        std::string(DTypeName(item.dtype)));
  }
  if (numel > 0) {
    ROCKSDCP_RETURN_IF_ERROR(dest.Validate(ri.dest_index.fqn));
    const size_t elem = DTypeSize(item.dtype);
    const std::vector<int64_t> cs = ContiguousStrides(item.chunk_sizes);
    const std::vector<int64_t> ds = dest.EffectiveStrides();
    const uint64_t piece_elems = item.info.piece_bytes / elem;
    const size_t outer = dims == 0 ? 0 : dims - 1;
    const int64_t run = dims == 0 ? 1 : ri.lengths[dims - 1];
    const int64_t dest_step =
        dims == 0 ? static_cast<int64_t>(elem) : ds[dims - 1] * int64_t(elem);
    std::vector<int64_t> idx(outer, 0);
    int64_t current = -1;
    format::DecodedPiece piece;
    while (true) {
      // One row of the box: a run of `run` elements, contiguous in the
      // chunk, strided in the destination.
      uint64_t start = 0;
      int64_t dest_off = 0;
      for (size_t d = 0; d < outer; ++d) {
        start += static_cast<uint64_t>((ri.storage_offsets[d] + idx[d]) * cs[d]);
        dest_off += idx[d] * ds[d];
      }
      if (dims > 0) start += static_cast<uint64_t>(ri.storage_offsets[dims - 1]);
      auto* row_dest = static_cast<uint8_t*>(dest.data) +
                       dest_off * static_cast<int64_t>(elem);
      uint64_t pos = start;
      const uint64_t end = start + static_cast<uint64_t>(run);
      while (pos < end) {
        const uint64_t p = pos / piece_elems;
        if (static_cast<int64_t>(p) != current) {
          ROCKSDCP_ASSIGN_OR_RETURN(
              piece,
              FetchPiece(ri.storage_index, item, static_cast<uint32_t>(p)));
          current = static_cast<int64_t>(p);
        }
        const uint64_t piece_start = p * piece_elems;
        const uint64_t piece_end = piece_start + piece.size / elem;
        const uint64_t n = std::min(end, piece_end) - pos;
        util::CopyRun(piece.data + (pos - piece_start) * elem, n, elem,
                      row_dest + static_cast<int64_t>(pos - start) * dest_step,
                      dest_step);
        pos += n;
      }
      progress->bytes_done += static_cast<uint64_t>(run) * elem;
      // Next row; done once the outermost index wraps.
      bool done = true;
      for (size_t d = outer; d-- > 0;) {
        if (++idx[d] < ri.lengths[d]) {
          done = false;
          break;
        }
        idx[d] = 0;
      }
      if (done) break;
    }
  }
  auto committed = planner.CommitTensor(ri, dest);
  return committed.WithContext(where);
}

Status RocksDBStorageReaderImpl::ReadBytes(const ReadItem& ri,
                                           LoadPlanner& planner,
                                           Progress* progress) {
  ROCKSDCP_ASSIGN_OR_RETURN(Item item, LookupItem(ri.storage_index, false));
  bytes_buffer_.clear();
  bytes_buffer_.reserve(item.info.length);
  for (uint32_t p = 0; p < item.info.num_pieces; ++p) {
    ROCKSDCP_ASSIGN_OR_RETURN(format::DecodedPiece piece,
                              FetchPiece(ri.storage_index, item, p));
    bytes_buffer_.append(reinterpret_cast<const char*>(piece.data), piece.size);
    progress->bytes_done += piece.size;
  }
  return planner.LoadBytes(ri, bytes_buffer_)
      .WithContext(ItemWhere(ri.storage_index));
}

Status RocksDBStorageReaderImpl::ReadDataSync(const LoadPlan& plan,
                                              LoadPlanner& planner) {
  if (metadata_ == nullptr) {
    return Status::FailedPrecondition(
        "ReadData called before SetUpStorageReader");
  }
  Progress progress;
  progress.items_total = plan.items.size();
  for (const ReadItem& ri : plan.items) {
    if (ri.type == LoadItemType::kTensor) {
      auto item = LookupItem(ri.storage_index, true);
      if (!item.ok()) continue;  // ReadTensor reports it.
      uint64_t box = DTypeSize(item->dtype);
      for (int64_t l : ri.lengths) box *= static_cast<uint64_t>(l);
      progress.bytes_total += box;
    } else {
      auto item = LookupItem(ri.storage_index, false);
      if (item.ok()) progress.bytes_total += item->info.length;
    }
  }
  for (const ReadItem& ri : plan.items) {
    if (ri.type == LoadItemType::kTensor) {
      ROCKSDCP_RETURN_IF_ERROR(ReadTensor(ri, planner, &progress));
    } else {
      ROCKSDCP_RETURN_IF_ERROR(ReadBytes(ri, planner, &progress));
    }
    ++progress.items_done;
    if (options_.progress) options_.progress(progress);
  }
  return Status::OK();
}

}  // namespace rocksdcp
