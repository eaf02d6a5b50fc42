// StoreImpl::Materialize: rewrites an incremental checkpoint so that it
// holds every piece itself, committed as an overwrite of it is, then drops
// what nothing needs any more.

#include <rocksdb/sst_file_writer.h>

#include <algorithm>
#include <filesystem>
#include <utility>

#include "format/checksum.h"
#include "format/metadata_codec.h"
#include "keys/keys.h"
#include "rocksdb/catalog_codec.h"
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

// One piece to copy.
struct Copy {
  std::string key;
  const MetadataIndex* index;
  uint32_t piece;
};

// Every piece of a checkpoint, in key order (an SST file's order), with
// what the metadata says of its item, and the progress of copying them.
struct PieceList {
  std::vector<Copy> copies;
  std::map<MetadataIndex, StoredItem> items;
  Progress done;
};

// The pieces of every item of `metadata`, which `copies` points into.
Result<PieceList> ListPieces(const Metadata& metadata,
                             const std::string& where) {
  PieceList list;
  ChunkFinder chunks;
  for (const auto& [index, value] : metadata.storage_data) {
    auto info = format::DecodeStorageInfo(value);
    if (!info.ok()) {
      return info.status().WithContext(where + ", item " +
                                       Quote(index.ToString()));
    }
    auto item = LookupStoredItem(
        metadata, index, info->kind == format::ItemKind::kTensor, chunks);
    if (!item.ok()) {
      return item.status().WithContext(where + ", item " +
                                       Quote(index.ToString()));
    }
    for (uint32_t p = 0; p < info->num_pieces; ++p) {
      list.copies.push_back({keys::PieceKey(index, p), &index, p});
    }
    list.done.bytes_total += info->length;
    ++list.done.items_total;
    list.items.emplace(index, std::move(item).value());
  }
  std::sort(list.copies.begin(), list.copies.end(),
            [](const Copy& a, const Copy& b) { return a.key < b.key; });
  return list;
}

// Writes every piece of `list` into the SST file `file`, each verified as
// a load verifies it, and bound to the same key as in the column family
// that holds it. Counts the referenced ones in `report`.
Status WritePiecesFile(StoreImpl& store, const CommittedCheckpoint& c,
                       PieceList& list, const std::string& file,
                       const std::string& where,
                       const ProgressCallback& progress,
                       MaterializeReport* report) {
  rocksdb::Options sst_options = CheckpointColumnFamilyOptions();
  sst_options.env = store.env();
  rocksdb::SstFileWriter sst(rocksdb::EnvOptions(), sst_options);
  ROCKSDCP_RETURN_IF_ERROR(
      FromRocksDB(sst.Open(file), where + ": opening " + file));
  rocksdb::ReadOptions ro;
  ro.verify_checksums = true;
  ro.fill_cache = false;
  rocksdb::PinnableSlice value, target;
  format::PieceDecodeBuffer decoded;
  for (const Copy& copy : list.copies) {
    const StoredItem& item = list.items.at(*copy.index);
    value.Reset();
    const rocksdb::Status s = store.db()->Get(ro, c.cf.get(), copy.key, &value);
    format::DecodedPiece piece;
    Status verified = VerifyPieceOrReference(
        store, c, ro, s, std::string_view(value.data(), value.size()), copy.key,
        *copy.index, item, copy.piece, &target, &decoded, &piece);
    if (!verified.ok()) {
      return verified.WithContext(where + ", item " +
                                  Quote(copy.index->ToString()) + ", piece " +
                                  std::to_string(copy.piece));
    }
    const bool referenced =
        format::IsPieceRef(std::string_view(value.data(), value.size()));
    const rocksdb::Slice bytes =
        referenced ? rocksdb::Slice(target) : rocksdb::Slice(value);
    ROCKSDCP_RETURN_IF_ERROR(
        FromRocksDB(sst.Put(copy.key, bytes), where + ": writing " + file));
    if (referenced) {
      ++report->pieces;
      report->bytes += piece.size;
    }
    list.done.bytes_done += piece.size;
    if (copy.piece + 1 == item.info.num_pieces) ++list.done.items_done;
    if (progress) progress(list.done);
  }
  target.Reset();
  value.Reset();
  return FromRocksDB(sst.Finish(), where + ": finishing " + file);
}

// Rewrites the storage infos of `metadata` for a checkpoint whose one file
// holds every piece: no references, and no piece offsets in the old files.
void DropReferencesAndOffsets(Metadata* metadata) {
  for (auto& [index, value] : metadata->storage_data) {
    auto info = format::DecodeStorageInfo(value, format::PieceHashes::kRead);
    if (!info.ok() || (info->sources.empty() && info->piece_offsets.empty())) {
      continue;
    }
    info->sources.clear();
    info->piece_sources.clear();
    info->piece_offsets.clear();
    info->file_first_key_xxh3 = 0;
    info->source_file_first_key_xxh3.clear();
    value = format::EncodeStorageInfo(*info);
  }
}

// The commit of checkpoint `c` (`id`) as an overwrite of itself with
// `metadata_value`, ingesting `file` if it holds any of `pieces`.
CommitRequest OverwriteWithItself(const std::string& id,
                                  const CommittedCheckpoint& c,
                                  const PieceList& pieces,
                                  const std::string& file,
                                  std::string_view metadata_value,
                                  const std::vector<std::string>& pinned) {
  CommitRequest request;
  request.checkpoint_id = id;
  request.overwrite = true;
  request.replaces = c.info.column_family;
  if (!pieces.copies.empty()) {
    request.files = {file};
    request.key_ranges = {
        {pieces.copies.front().key, pieces.copies.back().key}};
  }
  request.metadata_value = metadata_value;
  request.info = c.info;
  request.info.referenced_column_families.clear();
  request.info.referenced_bytes = 0;
  request.info.metadata_checksum = format::Xxh3(request.metadata_value);
  request.pinned = pinned;
  return request;
}

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
  // No save of the id meanwhile (Commit checks for deletes).
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

  auto looked_up = LookupCommitted(id, &pinned);
  if (!looked_up.ok()) return looked_up.status().WithContext(where);
  const CommittedCheckpoint c = std::move(looked_up).value();
  MaterializeReport report;
  if (c.info.referenced_column_families.empty()) return report;
  auto read = ReadCheckpointMetadata(*this, c);
  if (!read.ok()) return read.status().WithContext(where);
  Metadata metadata = std::move(read).value();

  // Pieces the checkpoint holds are copied too: it is rewritten into a
  // fresh column family, so that a failure at any point leaves it as it
  // was (an ingestion into its own column family that fails can't be
  // undone; see FailedMetadataWriteLocked).
  ROCKSDCP_ASSIGN_OR_RETURN(PieceList pieces, ListPieces(metadata, where));

  // Into a staging SST file.
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
  ROCKSDCP_RETURN_IF_ERROR(
      WritePiecesFile(*this, c, pieces, file, where, progress, &report));
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (commit_hook_) commit_hook_("materialize_copied");
  }

  // The metadata without references, committed as an overwrite of the
  // checkpoint with itself: a fresh column family, one synced batch.
  DropReferencesAndOffsets(&metadata);
  const std::string metadata_value = format::EncodeMetadata(metadata);
  auto committed =
      Commit(OverwriteWithItself(id, c, pieces, file, metadata_value, pinned));
  if (!committed.ok()) return committed.status().WithContext(where);
  pinned.clear();  // Commit released them.

  // What it referenced and nothing needs now is gone (its own old column
  // family too, unless another checkpoint references it).
  std::lock_guard<std::mutex> guard(mu_);
  for (const std::string& name : c.info.referenced_column_families) {
    if (cfs_.count(name) == 0) report.dropped_column_families.push_back(name);
  }
  return report;
}

}  // namespace rocksdcp
