// StoreImpl::Materialize: copies the pieces an incremental checkpoint
// references into its own column family, then commits it without
// references and drops what nothing needs any more.

#include <rocksdb/sst_file_writer.h>

#include <algorithm>
#include <filesystem>
#include <utility>

#include "format/catalog_codec.h"
#include "format/checksum.h"
#include "format/metadata_codec.h"
#include "keys/keys.h"
#include "rocksdb/rocksdb_status.h"
#include "rocksdb/store_impl.h"
#include "rocksdb/store_staging.h"
#include "rocksdb/stored_item.h"
#include "util/file_lock.h"
#include "util/text.h"

namespace rocksdcp {

using util::Quote;

namespace fs = std::filesystem;

namespace {

// One referenced piece to copy.
struct Copy {
  std::string key;
  const MetadataIndex* index;
  uint32_t piece;
};

}  // namespace

Result<MaterializeReport> StoreImpl::Materialize(
    std::string_view id_view, const ProgressCallback& progress) {
  const std::string id(id_view);
  const std::string where =
      "materialize of checkpoint " + Quote(id) + " in store " + Quote(path_);
  if (read_only()) {
    return Status::FailedPrecondition(where + ": the store is open read-only");
  }
  ROCKSDCP_RETURN_IF_ERROR(NeedDB(where));
  // No save of the id meanwhile (it could overwrite what is copied into).
  ROCKSDCP_RETURN_IF_ERROR(BeginSave(id, /*claim_id=*/true));
  std::vector<std::string> pinned;
  struct Release {
    StoreImpl* store;
    const std::string& id;
    std::vector<std::string>& pinned;
    ~Release() {
      store->UnpinColumnFamilies(pinned);
      store->EndSave(id, true);
    }
  } release{this, id, pinned};

  ROCKSDCP_ASSIGN_OR_RETURN(CommittedCheckpoint c,
                            LookupCommitted(id, &pinned));
  MaterializeReport report;
  if (c.info.referenced_column_families.empty()) return report;
  auto read = ReadCheckpointMetadata(*this, c);
  if (!read.ok()) return read.status().WithContext(where);
  Metadata metadata = std::move(read).value();

  // The referenced pieces, in key order (an SST file's order), with what
  // the metadata says of their items.
  std::vector<Copy> copies;
  std::map<MetadataIndex, StoredItem> items;
  ChunkFinder chunks;
  Progress done;
  for (const auto& [index, value] : metadata.storage_data) {
    auto info = format::DecodeStorageInfo(value);
    if (!info.ok()) {
      return info.status().WithContext(where + ", item " +
                                       Quote(index.ToString()));
    }
    if (info->sources.empty()) continue;
    auto item = LookupStoredItem(
        metadata, index, info->kind == format::ItemKind::kTensor, chunks);
    if (!item.ok()) {
      return item.status().WithContext(where + ", item " +
                                       Quote(index.ToString()));
    }
    for (uint32_t p = 0; p < info->num_pieces; ++p) {
      if (info->piece_sources[p] == 0) continue;
      copies.push_back({keys::PieceKey(index, p), &index, p});
      const uint64_t offset = uint64_t{p} * info->piece_bytes;
      done.bytes_total += std::min(info->piece_bytes, info->length - offset);
    }
    items.emplace(index, std::move(item).value());
  }
  std::sort(copies.begin(), copies.end(),
            [](const Copy& a, const Copy& b) { return a.key < b.key; });

  // Into a staging SST file, each piece verified as a load verifies it.
  const std::string dir =
      (fs::path(staging_root_) / StagingDirName(id, util::RandomHex(16)))
          .string();
  ROCKSDCP_ASSIGN_OR_RETURN(util::FileLock lock,
                            util::FileLock::Acquire(StagingLockPath(dir)));
  struct Cleanup {
    const StoreImpl* store;
    const std::string& dir;
    util::FileLock& lock;
    ~Cleanup() {
      store->RemoveStagingDir(dir).IgnoreError();  // Else GC's.
      lock.UnlinkAndRelease();
    }
  } cleanup{this, dir, lock};
  ROCKSDCP_RETURN_IF_ERROR(CreateDirs(dir, /*durable_entries=*/false)
                               .WithContext(where + ": staging directory"));
  const std::string file = (fs::path(dir) / "materialize.sst").string();
  rocksdb::Options sst_options = CheckpointColumnFamilyOptions();
  sst_options.env = env();
  rocksdb::SstFileWriter sst(rocksdb::EnvOptions(), sst_options);
  ROCKSDCP_RETURN_IF_ERROR(
      FromRocksDB(sst.Open(file), where + ": opening " + file));
  rocksdb::ReadOptions ro;
  ro.verify_checksums = true;
  ro.fill_cache = false;
  rocksdb::PinnableSlice value, target;
  for (const Copy& copy : copies) {
    const StoredItem& item = items.at(*copy.index);
    value.Reset();
    const rocksdb::Status s = db_->Get(ro, c.cf.get(), copy.key, &value);
    format::DecodedPiece piece;
    Status verified = VerifyPieceOrReference(
        *this, c, ro, s, std::string_view(value.data(), value.size()), copy.key,
        *copy.index, item, copy.piece, &target, &piece);
    if (!verified.ok()) {
      return verified.WithContext(where + ", item " +
                                  Quote(copy.index->ToString()) + ", piece " +
                                  std::to_string(copy.piece));
    }
    // The piece as its column family holds it: bound to the same key.
    const bool referenced =
        format::IsPieceRef(std::string_view(value.data(), value.size()));
    const rocksdb::Slice bytes =
        referenced ? rocksdb::Slice(target) : rocksdb::Slice(value);
    ROCKSDCP_RETURN_IF_ERROR(
        FromRocksDB(sst.Put(copy.key, bytes), where + ": writing " + file));
    ++report.pieces;
    report.bytes += piece.size;
    done.bytes_done += piece.size;
    if (progress) progress(done);
  }
  target.Reset();
  value.Reset();
  ROCKSDCP_RETURN_IF_ERROR(
      FromRocksDB(sst.Finish(), where + ": finishing " + file));

  // The metadata without references, and the entry that records it.
  for (auto& [index, value] : metadata.storage_data) {
    auto info = format::DecodeStorageInfo(value, format::PieceHashes::kRead);
    if (!info.ok() || info->sources.empty()) continue;
    info->sources.clear();
    info->piece_sources.clear();
    value = format::EncodeStorageInfo(*info);
  }
  const std::string metadata_value = format::EncodeMetadata(metadata);
  CheckpointInfo info = c.info;
  const std::vector<std::string> released =
      std::move(info.referenced_column_families);
  info.referenced_column_families.clear();
  info.referenced_bytes = 0;
  info.metadata_checksum = format::Xxh3(metadata_value);

  std::lock_guard<std::mutex> guard(mu_);
  ROCKSDCP_RETURN_IF_ERROR(CheckWritableLocked(where));
  // Still the checkpoint that was read: a Delete may have run meanwhile.
  std::string now;
  rocksdb::Status s =
      db_->Get(rocksdb::ReadOptions(), default_cf_, keys::CatalogKey(id), &now);
  if (!s.ok() && !s.IsNotFound()) return FromRocksDB(s, where);
  auto entry = s.ok() ? SoundCatalogEntry(id, now)
                      : Result<CheckpointInfo>(Status::NotFound(""));
  if (!entry.ok() || entry->column_family != c.info.column_family ||
      entry->metadata_checksum != c.info.metadata_checksum) {
    return Status::Aborted(where +
                           ": it was deleted or changed meanwhile; nothing "
                           "was changed");
  }
  rocksdb::IngestExternalFileArg arg;
  arg.column_family = c.cf.get();
  arg.external_files = {file};
  arg.options.move_files = true;
  arg.options.failed_move_fall_back_to_copy = true;
  s = db_->IngestExternalFiles({arg});
  if (!s.ok()) return StopLocked(s, where + ": ingesting the copied pieces");
  if (commit_hook_) commit_hook_("materialize_after_ingest");
  s = WriteMetadataAndEntryLocked(c.cf.get(), metadata_value, info);
  if (!s.ok()) {
    return StopLocked(s, where + ": writing metadata and catalog entry");
  }
  if (commit_hook_) commit_hook_("materialize_after_write");
  // Unpinned here (the Release above then finds nothing), so that what
  // nothing needs now goes.
  for (const std::string& name : pinned) {
    auto it = pinned_cfs_.find(name);
    if (it != pinned_cfs_.end()) pinned_cfs_.erase(it);
  }
  pinned.clear();
  DropUnkeptLocked(released);
  for (const std::string& name : released) {
    if (cfs_.count(name) == 0) report.dropped_column_families.push_back(name);
  }
  return report;
}

}  // namespace rocksdcp
