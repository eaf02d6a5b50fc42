#include "rocksdb/writer.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "format/checksum.h"
#include "format/metadata_codec.h"
#include "keys/keys.h"
#include "rocksdb/catalog_codec.h"
#include "rocksdb/store_impl.h"
#include "rocksdb/stored_item.h"
#include "util/ready_future.h"
#include "util/text.h"

namespace rocksdcp {

using util::Quote;
using util::RandomHex;

namespace fs = std::filesystem;

namespace {

// The first metadata buffer's size is the metadata's bound, at most this.
constexpr uint64_t kMaxMetadataBufferBytes = uint64_t{256} << 20;
// Room in the commit's batch for the catalog entry and the keys.
constexpr size_t kCatalogEntryRoom = 64 << 10;

}  // namespace

RocksDBStorageWriterImpl::RocksDBStorageWriterImpl(StoreImpl* store,
                                                   RocksDBWriterOptions options)
    : store_(store), options_(std::move(options)) {}

RocksDBStorageWriterImpl::~RocksDBStorageWriterImpl() { Abandon(); }

std::string RocksDBStorageWriterImpl::Where() const {
  return "save of checkpoint " + Quote(checkpoint_id_) + " to store " +
         Quote(store_->path());
}

void RocksDBStorageWriterImpl::Abandon() {
  if (!pinned_.empty()) {
    store_->UnpinColumnFamilies(pinned_);
    pinned_.clear();
  }
  base_id_.clear();
  base_cf_.clear();
  base_metadata_.reset();
  if (registered_) {
    store_->EndSave(checkpoint_id_, is_coordinator_);
    registered_ = false;
  }
  if (staging_lock_) {
    // Best effort; GC finds leftovers.
    store_->RemoveStagingDir(staging_dir_).IgnoreError();
    staging_lock_->UnlinkAndRelease();
    staging_lock_.reset();
  }
  set_up_ = false;
}

Status RocksDBStorageWriterImpl::Reset(std::string_view checkpoint_id) {
  return ResetWithSaveId(checkpoint_id, RandomHex(16));
}

Status RocksDBStorageWriterImpl::ResetWithSaveId(std::string_view checkpoint_id,
                                                 std::string_view save_id) {
  Abandon();
  has_id_ = false;
  committed_meta_.reset();
  plan_save_id_.clear();
  ROCKSDCP_RETURN_IF_ERROR(ValidateCheckpointId(checkpoint_id));
  const bool save_id_ok =
      !save_id.empty() && save_id.size() <= 64 &&
      std::all_of(save_id.begin(), save_id.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
               (c >= 'A' && c <= 'Z') || c == '_' || c == '-';
      });
  if (!save_id_ok) {
    return Status::InvalidArgument(
        "save of checkpoint " + Quote(checkpoint_id) + ": save id " +
        Quote(save_id) + " is not 1 to 64 characters of [0-9A-Za-z_-]");
  }
  checkpoint_id_ = std::string(checkpoint_id);
  save_id_ = std::string(save_id);
  // The staging directory's name is fresh whatever the save id: two
  // writers given one save id must not share a directory.
  staging_dir_ = (fs::path(store_->staging_root()) /
                  StagingDirName(checkpoint_id_, RandomHex(16)))
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
  if (is_coordinator_ && pinned_.empty()) {
    ROCKSDCP_RETURN_IF_ERROR(SetUpBase());
  }
  if (!staging_lock_) {
    // Lock first, then create: GC never sees the directory unlocked. The
    // name is fresh, so only GC can hold it, for a moment: wait it out.
    ROCKSDCP_ASSIGN_OR_RETURN(
        util::FileLock lock,
        util::FileLock::Acquire(StagingLockPath(staging_dir_)));
    staging_lock_ = std::move(lock);
  }
  // Not durable: staging files count only once ingested, and ingestion
  // syncs them and the store directory they are linked into.
  ROCKSDCP_RETURN_IF_ERROR(
      store_->CreateDirs(staging_dir_, /*durable_entries=*/false)
          .WithContext(Where() + ": cannot create staging directory"));
  set_up_ = true;
  return Status::OK();
}

Status RocksDBStorageWriterImpl::SetUpBase() {
  std::string base = options_.base;
  if (options_.base_on_newest) {
    ROCKSDCP_ASSIGN_OR_RETURN(std::vector<CheckpointInfo> all, store_->List());
    const CheckpointInfo* newest = nullptr;
    for (const CheckpointInfo& c : all) {
      if (!c.damage.empty()) continue;
      if (newest == nullptr ||
          std::tie(c.created_unix_micros, c.id) >
              std::tie(newest->created_unix_micros, newest->id)) {
        newest = &c;
      }
    }
    if (newest == nullptr) return Status::OK();  // A full save.
    base = newest->id;
  }
  if (base.empty()) return Status::OK();
  auto c = store_->LookupCommitted(base, &pinned_);
  if (!c.ok()) {
    return c.status().WithContext(Where() + ": base checkpoint " + Quote(base));
  }
  auto metadata = ReadCheckpointMetadata(*store_, *c);
  if (!metadata.ok()) {
    return metadata.status().WithContext(Where() + ": base checkpoint " +
                                         Quote(base));
  }
  base_id_ = base;
  base_cf_ = c->info.column_family;
  base_metadata_ = std::move(metadata).value();
  return Status::OK();
}

std::map<MetadataIndex, format::StorageInfo>
RocksDBStorageWriterImpl::BaseItemsFor(const SavePlan& plan) {
  std::map<MetadataIndex, format::StorageInfo> out;
  ChunkFinder chunks;
  for (const WriteItem& item : plan.items) {
    const bool tensor = item.type != WriteItemType::kByteIO;
    auto stored = LookupStoredItem(*base_metadata_, item.index, tensor, chunks,
                                   format::PieceHashes::kRead);
    // Not in the base, or not comparable: written whole.
    if (!stored.ok() || stored->info.piece_hashes.empty()) continue;
    if (tensor && (!item.tensor_data ||
                   stored->dtype != item.tensor_data->properties.dtype ||
                   stored->chunk_sizes != item.tensor_data->chunk.sizes)) {
      continue;
    }
    format::StorageInfo& info = stored->info;
    // Every piece's source by name: the base's own column family, or the
    // one it references, if pinned (forged metadata may name any).
    // And the file each source holds them in, for loads that read pieces
    // in place.
    std::vector<std::string> sources;
    std::vector<uint64_t> source_files;
    std::vector<uint32_t> piece_sources(info.num_pieces);
    bool pinned = true;
    for (uint32_t p = 0; p < info.num_pieces && pinned; ++p) {
      const std::string* src = info.SourceOf(p);
      const std::string& name = src == nullptr ? base_cf_ : *src;
      pinned = std::find(pinned_.begin(), pinned_.end(), name) != pinned_.end();
      auto at = std::find(sources.begin(), sources.end(), name);
      if (at == sources.end()) {
        at = sources.insert(sources.end(), name);
        const bool own = src == nullptr;
        const uint32_t k = own ? 0 : info.piece_sources[p] - 1;
        source_files.push_back(
            own ? info.file_first_key_xxh3
                : (info.source_file_first_key_xxh3.empty()
                       ? 0
                       : info.source_file_first_key_xxh3[k]));
      }
      piece_sources[p] = static_cast<uint32_t>(at - sources.begin()) + 1;
    }
    if (!pinned) continue;
    info.sources = std::move(sources);
    info.source_file_first_key_xxh3 = std::move(source_files);
    info.piece_sources = std::move(piece_sources);
    out.emplace(item.index, std::move(info));
  }
  return out;
}

Result<SavePlan> RocksDBStorageWriterImpl::PrepareLocalPlan(SavePlan plan) {
  return plan;
}

Result<std::vector<SavePlan>> RocksDBStorageWriterImpl::PrepareGlobalPlan(
    std::vector<SavePlan> plans) {
  // As DCP's FileSystemWriter does with its file prefixes: each rank's plan
  // names the prefix of that rank's staging files. In an incremental save,
  // it also carries the base's piece hashes of the items the rank writes:
  // followers open no RocksDB.
  // Every rank learns the coordinator's save id, which GetStorageMeta then
  // returns.
  // The ranks that take part are those planned: the checkpoint records
  // their number as its world size, whatever SetUpStorageWriter was told
  // (torch's driver tells a writer its rank, not the world's size, and
  // saves with a subgroup or, with no_dist, alone).
  world_size_ = static_cast<int>(plans.size());
  for (size_t i = 0; i < plans.size(); ++i) {
    format::RankPlan rank;
    rank.file_prefix = "rank" + std::to_string(i);
    rank.save_id = save_id_;
    if (base_metadata_) {
      rank.base_checkpoint_id = base_id_;
      rank.base_items = BaseItemsFor(plans[i]);
    }
    plans[i].storage_data = format::EncodeRankPlan(rank);
  }
  // Planned: the base's metadata is not needed any more (its pins are).
  base_metadata_.reset();
  return plans;
}

std::future<Result<std::vector<WriteResult>>>
RocksDBStorageWriterImpl::WriteData(const SavePlan& plan,
                                    SavePlanner& planner) {
  return util::ReadyFuture(WriteDataSync(plan, planner));
}

std::optional<StorageMeta> RocksDBStorageWriterImpl::GetStorageMeta() {
  if (!has_id_) return committed_meta_;
  StorageMeta meta;
  meta.checkpoint_id = checkpoint_id_;
  meta.save_id = plan_save_id_.empty() ? save_id_ : plan_save_id_;
  return meta;
}

struct RocksDBStorageWriterImpl::CommitFiles {
  using KeyRanges = std::map<std::string, std::pair<std::string, std::string>>;

  explicit CommitFiles(std::string staging_root)
      : staging_prefix(std::move(staging_root) + "/") {}

  // Widens `file`'s range to hold [first, last].
  void Add(std::string file, std::string first, std::string last) {
    if (last_file == ranges.end() || last_file->first != file) {
      last_file = ranges.find(file);
    }
    if (last_file == ranges.end()) {
      last_file =
          ranges.try_emplace(std::move(file), std::move(first), std::move(last))
              .first;
      return;
    }
    auto& [lo, hi] = last_file->second;
    if (first < lo) lo = std::move(first);
    if (hi < last) hi = std::move(last);
  }

  // Only files in this store's staging area are ever ingested.
  const std::string staging_prefix;
  // Each file's smallest and largest key: an item's pieces are adjacent,
  // in piece order.
  KeyRanges ranges;
  // The last item's file: a rank's items of one file come one after the
  // other, so most items find their file without a search.
  KeyRanges::iterator last_file = ranges.end();
  std::set<std::string> referenced;
};

Status RocksDBStorageWriterImpl::AddResult(const WriteResult& r,
                                           Metadata* metadata,
                                           CommitFiles* files,
                                           CommitRequest* request) const {
  auto info =
      format::DecodeStorageInfo(r.storage_data, format::PieceHashes::kRead);
  if (!info.ok()) {
    return info.status().WithContext(Where() + ": result of item " +
                                     Quote(r.index.ToString()));
  }
  if (info->file.rfind(files->staging_prefix, 0) != 0 ||
      info->file.find("/../") != std::string::npos) {
    return Status::InvalidArgument(Where() + ": item " +
                                   Quote(r.index.ToString()) +
                                   " names staging file " + Quote(info->file) +
                                   " outside the store's staging directory");
  }
  std::string first = keys::PieceKey(r.index, 0);
  std::string last = first;
  keys::SetKeyPiece(&last, std::max<uint32_t>(info->num_pieces, 1) - 1);
  files->Add(std::move(info->file), std::move(first), std::move(last));
  info->file.clear();
  // An incremental save's references: only to what its base pinned.
  for (const std::string& source : info->sources) {
    if (std::find(pinned_.begin(), pinned_.end(), source) == pinned_.end()) {
      return Status::InvalidArgument(
          Where() + ": item " + Quote(r.index.ToString()) +
          " references column family " + Quote(source) +
          ", which is not the save's base or one the base references");
    }
    files->referenced.insert(source);
  }
  for (uint32_t p = 0; p < info->piece_sources.size(); ++p) {
    if (info->piece_sources[p] == 0) continue;
    request->info.referenced_bytes += info->PieceLength(p);
  }
  auto [it, inserted] =
      metadata->storage_data.emplace(r.index, format::EncodeStorageInfo(*info));
  if (!inserted) {
    return Status::InvalidArgument(Where() + ": item " +
                                   Quote(r.index.ToString()) +
                                   " was written by more than one rank");
  }
  request->info.bytes += r.size_in_bytes;
  ++request->info.items;
  return Status::OK();
}

void RocksDBStorageWriterImpl::EncodeCommit(const Metadata& metadata,
                                            uint64_t metadata_bound,
                                            CommitRequest* request) {
  // Both sized once, as growing copies what they hold; pages never
  // touched cost nothing.
  if (metadata_fbb_ == nullptr) {
    metadata_fbb_ = std::make_unique<flatbuffers::FlatBufferBuilder>(
        std::min(metadata_bound, kMaxMetadataBufferBytes));
  }
  request->metadata_value =
      format::EncodeMetadata(metadata, metadata_fbb_.get());
  if (commit_batch_ == nullptr) {
    commit_batch_ = std::make_unique<rocksdb::WriteBatch>(
        request->metadata_value.size() + kCatalogEntryRoom);
  }
  request->info.metadata_checksum = format::Xxh3(request->metadata_value);
  request->batch = commit_batch_.get();
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
  CommitFiles files(store_->staging_root());
  metadata->storage_data.clear();
  for (const auto& rank_results : results) {
    for (const WriteResult& r : rank_results) {
      ROCKSDCP_RETURN_IF_ERROR(AddResult(r, metadata, &files, &request));
    }
  }
  request.info.referenced_column_families.assign(files.referenced.begin(),
                                                 files.referenced.end());
  metadata->storage_meta = GetStorageMeta();
  uint64_t metadata_bound = 0;
  ROCKSDCP_RETURN_IF_ERROR(format::CheckMetadataFits(*metadata,
                                                     format::kMaxMetadataBytes,
                                                     &metadata_bound)
                               .WithContext(Where()));
  for (auto& [file, range] : files.ranges) {
    request.files.push_back(file);
    request.key_ranges.push_back(std::move(range));
  }
  EncodeCommit(*metadata, metadata_bound, &request);

  request.pinned = pinned_;
  auto committed = store_->Commit(std::move(request));
  if (!options_.reuse_buffers) {
    metadata_fbb_.reset();
    commit_batch_.reset();
  }
  if (!committed.ok()) return committed.status().WithContext(Where());
  committed_meta_ = metadata->storage_meta;
  pinned_.clear();  // Commit released them.
  Abandon();  // Committed: release the id and remove the emptied staging dir.
  has_id_ = false;
  return Status::OK();
}

}  // namespace rocksdcp
