#include "rocksdb/writer.h"

#include <rocksdb/sst_file_writer.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <set>
#include <system_error>

#include "format/catalog_codec.h"
#include "format/checksum.h"
#include "format/metadata_codec.h"
#include "keys/keys.h"
#include "rocksdb/rocksdb_status.h"
#include "util/text.h"
#include "rocksdb/store_impl.h"
#include "util/ready_future.h"
#include "util/strided.h"

namespace rocksdcp {

using util::Quote;
using util::RandomHex;

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxCheckpointIdBytes = 128;

std::string ShapeString(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(v[i]);
  }
  return s + "]";
}

}  // namespace

Status RocksDBStorageWriter::ValidateCheckpointId(std::string_view id) {
  if (id.empty()) {
    return Status::InvalidArgument("checkpoint id is empty");
  }
  if (id.size() > kMaxCheckpointIdBytes) {
    return Status::InvalidArgument(
        "checkpoint id '" + std::string(id.substr(0, 32)) + "...' is " +
        std::to_string(id.size()) + " bytes; the limit is " +
        std::to_string(kMaxCheckpointIdBytes));
  }
  for (size_t i = 0; i < id.size(); ++i) {
    const auto c = static_cast<unsigned char>(id[i]);
    if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%02x", c);
      return Status::InvalidArgument(
          "checkpoint id contains control character " + std::string(hex) +
          " at byte " + std::to_string(i));
    }
  }
  if (id == "default") {
    return Status::InvalidArgument(
        "checkpoint id 'default' is reserved: it is RocksDB's default column "
        "family, which holds the store's catalog");
  }
  return Status::OK();
}

RocksDBStorageWriterImpl::RocksDBStorageWriterImpl(StoreImpl* store,
                                                   RocksDBWriterOptions options)
    : store_(store), options_(std::move(options)) {}

RocksDBStorageWriterImpl::~RocksDBStorageWriterImpl() { Abandon(); }

std::string RocksDBStorageWriterImpl::Where() const {
  return "save of checkpoint " + Quote(checkpoint_id_) + " to store " +
         Quote(store_->path());
}

void RocksDBStorageWriterImpl::Abandon() {
  if (registered_) {
    store_->EndSave(checkpoint_id_, is_coordinator_);
    registered_ = false;
  }
  if (staging_lock_) {
    std::error_code ec;
    fs::remove_all(staging_dir_, ec);  // Best effort; GC finds leftovers.
    staging_lock_->UnlinkAndRelease();
    staging_lock_.reset();
  }
  set_up_ = false;
}

Status RocksDBStorageWriterImpl::Reset(std::string_view checkpoint_id) {
  Abandon();
  has_id_ = false;
  ROCKSDCP_RETURN_IF_ERROR(ValidateCheckpointId(checkpoint_id));
  checkpoint_id_ = std::string(checkpoint_id);
  save_id_ = RandomHex(16);
  staging_dir_ = (fs::path(store_->staging_root()) /
                  StagingDirName(checkpoint_id_, save_id_))
                     .string();
  has_id_ = true;
  return Status::OK();
}

Status RocksDBStorageWriterImpl::SetUpStorageWriter(bool is_coordinator,
                                                    int rank, int world_size) {
  if (!has_id_) {
    return Status::FailedPrecondition(
        "SetUpStorageWriter called before Reset(checkpoint_id)");
  }
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return Status::InvalidArgument("bad rank " + std::to_string(rank) +
                                   " of world size " +
                                   std::to_string(world_size));
  }
  if (is_coordinator && store_->follower()) {
    return Status::FailedPrecondition(
        Where() + ": rank " + std::to_string(rank) +
        " is the coordinator, but its store is open as a follower; the "
        "coordinator needs the store open read-write");
  }
  is_coordinator_ = is_coordinator;
  rank_ = rank;
  world_size_ = world_size;
  if (!registered_) {
    ROCKSDCP_RETURN_IF_ERROR(
        store_->BeginSave(checkpoint_id_, is_coordinator_));
    registered_ = true;
  }
  if (is_coordinator_) {
    // Fail early, before any byte is written, when the id is taken. Commit
    // checks again under the store's lock.
    if (!options_.overwrite) {
      auto existing = store_->Info(checkpoint_id_);
      if (existing.ok()) {
        return Status::AlreadyExists(
            "checkpoint " + Quote(checkpoint_id_) +
            " already exists in store " + Quote(store_->path()) +
            "; save with overwrite = true to replace it");
      }
    }
  }
  if (!staging_lock_) {
    // Lock first, then create: GC never sees the directory unlocked.
    ROCKSDCP_ASSIGN_OR_RETURN(
        std::optional<util::FileLock> lock,
        util::FileLock::TryAcquire(StagingLockPath(staging_dir_)));
    if (!lock) {
      return Status::Internal(Where() + ": staging lock " +
                              StagingLockPath(staging_dir_) +
                              " is held by someone else");
    }
    staging_lock_ = std::move(lock);
  }
  std::error_code ec;
  fs::create_directories(staging_dir_, ec);
  if (ec) {
    return Status::IOError(Where() + ": cannot create staging directory " +
                           staging_dir_ + ": " + ec.message());
  }
  set_up_ = true;
  return Status::OK();
}

Result<SavePlan> RocksDBStorageWriterImpl::PrepareLocalPlan(SavePlan plan) {
  return plan;
}

Result<std::vector<SavePlan>> RocksDBStorageWriterImpl::PrepareGlobalPlan(
    std::vector<SavePlan> plans) {
  // As DCP's FileSystemWriter does with its file prefixes: each rank's plan
  // names the prefix of that rank's staging files.
  for (size_t i = 0; i < plans.size(); ++i) {
    plans[i].storage_data = "rank" + std::to_string(i);
  }
  return plans;
}

std::future<Result<std::vector<WriteResult>>>
RocksDBStorageWriterImpl::WriteData(const SavePlan& plan,
                                    SavePlanner& planner) {
  return util::ReadyFuture(WriteDataSync(plan, planner));
}

Result<std::vector<WriteResult>> RocksDBStorageWriterImpl::WriteDataSync(
    const SavePlan& plan, SavePlanner& planner) {
  if (!set_up_) {
    return Status::FailedPrecondition(
        "WriteData called before SetUpStorageWriter");
  }
  // SST files need their keys in order; each item's pieces are contiguous
  // in key order because '#' ends every item's key prefix.
  struct Planned {
    const WriteItem* item;
    std::string first_key;
  };
  std::vector<Planned> order;
  order.reserve(plan.items.size());
  for (const WriteItem& item : plan.items) {
    order.push_back({&item, keys::PieceKey(item.index, 0)});
  }
  std::sort(order.begin(), order.end(),
            [](const Planned& a, const Planned& b) {
              return a.first_key < b.first_key;
            });
  for (size_t i = 1; i < order.size(); ++i) {
    if (order[i].first_key == order[i - 1].first_key) {
      return Status::InvalidArgument(Where() + ": plan holds item " +
                                     order[i].item->index.ToString() +
                                     " twice");
    }
  }

  Progress progress;
  progress.items_total = plan.items.size();
  for (const WriteItem& item : plan.items) {
    progress.bytes_total += item.TensorStorageSize();
  }

  const std::string prefix =
      plan.storage_data.empty() ? "rank" + std::to_string(rank_)
                                : plan.storage_data;
  const rocksdb::Options sst_options = CheckpointColumnFamilyOptions();
  std::unique_ptr<rocksdb::SstFileWriter> sst;
  std::string file_path;
  uint64_t file_bytes = 0;
  int file_number = 0;

  auto close_file = [&]() -> Status {
    if (!sst) return Status::OK();
    rocksdb::Status s = sst->Finish();  // Syncs the file.
    sst.reset();
    return FromRocksDB(s, Where() + ": finishing staging file " + file_path);
  };
  auto open_file = [&]() -> Status {
    ROCKSDCP_RETURN_IF_ERROR(close_file());
    file_path = (fs::path(staging_dir_) /
                 (prefix + "-" + std::to_string(file_number++) + ".sst"))
                    .string();
    sst = std::make_unique<rocksdb::SstFileWriter>(rocksdb::EnvOptions(),
                                                   sst_options);
    file_bytes = 0;
    return FromRocksDB(sst->Open(file_path),
                       Where() + ": opening staging file " + file_path);
  };

  std::vector<WriteResult> results;
  results.reserve(order.size());
  for (const Planned& planned : order) {
    const WriteItem& item = *planned.item;
    const std::string what =
        Where() + ", item " + Quote(item.index.ToString());
    auto resolved = planner.ResolveData(item);
    if (!resolved.ok()) return resolved.status().WithContext(what);

    format::PieceHeader header;
    format::StorageInfo info;
    const TensorView* view = std::get_if<TensorView>(&*resolved);
    std::string_view bytes;
    uint64_t total = 0;
    uint64_t piece_bytes = options_.max_piece_bytes;
    if (item.type == WriteItemType::kByteIO) {
      if (view != nullptr) {
        return Status::InvalidArgument(what +
                                       ": planner resolved a byte item to a "
                                       "tensor");
      }
      bytes = std::get<std::string_view>(*resolved);
      total = bytes.size();
      header.kind = format::ItemKind::kBytes;
    } else {
      if (view == nullptr || !item.tensor_data) {
        return Status::InvalidArgument(
            what + ": planner resolved a tensor item to bytes");
      }
      ROCKSDCP_RETURN_IF_ERROR(view->Validate(item.index.fqn));
      const TensorWriteData& td = *item.tensor_data;
      if (view->dtype != td.properties.dtype ||
          view->sizes != td.chunk.sizes) {
        return Status::InvalidArgument(
            what + ": planned " + std::string(DTypeName(td.properties.dtype)) +
            ShapeString(td.chunk.sizes) + " but the state dict holds " +
            std::string(DTypeName(view->dtype)) + ShapeString(view->sizes));
      }
      const uint64_t elem = DTypeSize(view->dtype);
      total = view->nbytes();
      // Pieces end on element boundaries, so a reader can copy whole
      // elements out of each.
      piece_bytes = std::max<uint64_t>(elem, piece_bytes - piece_bytes % elem);
      header.kind = format::ItemKind::kTensor;
      header.dtype = view->dtype;
      header.chunk_offsets = td.chunk.offsets;
      header.chunk_sizes = td.chunk.sizes;
    }
    const uint64_t num_pieces =
        total == 0 ? 1 : (total + piece_bytes - 1) / piece_bytes;
    if (num_pieces > UINT32_MAX) {
      return Status::InvalidArgument(what + ": needs more than 2^32 pieces");
    }
    header.num_pieces = static_cast<uint32_t>(num_pieces);

    // An item stays within one staging file, so its WriteResult can name it.
    if (!sst || file_bytes >= options_.target_file_bytes) {
      ROCKSDCP_RETURN_IF_ERROR(open_file());
    }
    for (uint32_t p = 0; p < header.num_pieces; ++p) {
      header.piece = p;
      header.byte_offset = p * piece_bytes;
      header.byte_length = std::min(piece_bytes, total - header.byte_offset);
      std::string_view value =
          encoder_.Encode(header, [&](uint8_t* dst) {
            if (view != nullptr) {
              const uint64_t elem = DTypeSize(view->dtype);
              util::GatherElements(*view, header.byte_offset / elem,
                                   header.byte_length / elem, dst);
            } else if (header.byte_length > 0) {
              std::memcpy(dst, bytes.data() + header.byte_offset,
                          header.byte_length);
            }
          });
      rocksdb::Status s = sst->Put(keys::PieceKey(item.index, p),
                                   rocksdb::Slice(value.data(), value.size()));
      if (!s.ok()) {
        return FromRocksDB(s, what + ": writing piece " + std::to_string(p) +
                                  " to " + file_path);
      }
      file_bytes += value.size();
      progress.bytes_done += header.byte_length;
      if (item.type == WriteItemType::kByteIO) {
        progress.bytes_total += header.byte_length;
      }
      if (options_.progress) options_.progress(progress);
    }
    ++progress.items_done;

    info.kind = header.kind;
    info.length = total;
    info.num_pieces = header.num_pieces;
    info.piece_bytes = piece_bytes;
    info.file = file_path;
    results.push_back(
        WriteResult{item.index, total, format::EncodeStorageInfo(info)});
  }
  ROCKSDCP_RETURN_IF_ERROR(close_file());
  if (options_.progress) options_.progress(progress);
  return results;
}

std::optional<StorageMeta> RocksDBStorageWriterImpl::GetStorageMeta() {
  if (!has_id_) return std::nullopt;
  StorageMeta meta;
  meta.checkpoint_id = checkpoint_id_;
  meta.save_id = save_id_;
  return meta;
}

Status RocksDBStorageWriterImpl::Finish(
    Metadata* metadata, const std::vector<std::vector<WriteResult>>& results) {
  if (!set_up_ || !is_coordinator_) {
    return Status::FailedPrecondition(
        "Finish must be called on the coordinator after SetUpStorageWriter");
  }
  CommitRequest request;
  request.checkpoint_id = checkpoint_id_;
  request.overwrite = options_.overwrite;
  request.info.world_size = world_size_;

  std::set<std::string> files;
  metadata->storage_data.clear();
  const std::string staging_prefix = store_->staging_root() + "/";
  for (const auto& rank_results : results) {
    for (const WriteResult& r : rank_results) {
      auto info = format::DecodeStorageInfo(r.storage_data);
      if (!info.ok()) {
        return info.status().WithContext(Where() + ": result of item " +
                                         Quote(r.index.ToString()));
      }
      // Only files in this store's staging area are ever ingested.
      if (info->file.rfind(staging_prefix, 0) != 0 ||
          info->file.find("/../") != std::string::npos) {
        return Status::InvalidArgument(
            Where() + ": item " + Quote(r.index.ToString()) +
            " names staging file " + Quote(info->file) +
            " outside the store's staging directory");
      }
      files.insert(info->file);
      info->file.clear();
      auto [it, inserted] = metadata->storage_data.emplace(
          r.index, format::EncodeStorageInfo(*info));
      if (!inserted) {
        return Status::InvalidArgument(Where() + ": item " +
                                       Quote(r.index.ToString()) +
                                       " was written by more than one rank");
      }
      request.info.bytes += r.size_in_bytes;
      ++request.info.items;
    }
  }
  metadata->storage_meta = GetStorageMeta();
  request.files.assign(files.begin(), files.end());
  request.metadata_value = format::EncodeMetadata(*metadata);
  request.info.metadata_checksum = format::Xxh3(request.metadata_value);

  auto committed = store_->Commit(std::move(request));
  if (!committed.ok()) return committed.status();
  Abandon();  // Committed: release the id and remove the emptied staging dir.
  has_id_ = false;
  return Status::OK();
}

}  // namespace rocksdcp
