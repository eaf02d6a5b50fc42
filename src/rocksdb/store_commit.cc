// StoreImpl's writes: saves begun and ended, the commit of a checkpoint
// into a fresh column family, deletes, and the stop after a failed write.

#include <rocksdb/env.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "keys/keys.h"
#include "rocksdb/catalog_codec.h"
#include "rocksdb/rocksdb_status.h"
#include "rocksdb/store_impl.h"
#include "util/text.h"

namespace rocksdcp {

using util::Quote;

namespace {

int64_t NowUnixMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Status StoreImpl::BeginSave(const std::string& id, bool claim_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (claim_id && !saving_ids_.insert(id).second) {
    return Status::Busy("checkpoint " + Quote(id) +
                        " is already being saved by another writer of store " +
                        Quote(path_));
  }
  return Status::OK();
}

void StoreImpl::EndSave(const std::string& id, bool claimed_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (claimed_id) saving_ids_.erase(id);
}

std::string StoreImpl::FreshColumnFamilyName(const std::string& id) const {
  auto taken = [this](const std::string& name) {
    return cfs_.count(name) > 0 || handleless_cfs_.count(name) > 0;
  };
  if (!taken(id)) return id;
  for (uint64_t gen = 1;; ++gen) {
    std::string name = id + "~" + std::to_string(gen);
    if (!taken(name)) return name;
  }
}

Status StoreImpl::StopLocked(const rocksdb::Status& s,
                             const std::string& context) {
  Status error = FromRocksDB(s, context);
  if (stopped_.ok()) stopped_ = error;
  return error;
}

Status StoreImpl::FailedMetadataWriteLocked(const rocksdb::Status& s,
                                            const std::string& context,
                                            const std::string& cf_name) {
  const Status error = FromRocksDB(s, context);
  // Whether or not RocksDB wrote the MANIFEST record (and then deleted the
  // files it named), dropping the column family writes a fresh MANIFEST
  // from what RocksDB holds in memory, without that record. RocksDB keeps
  // failing ingestions with the first error all the same, so the store
  // stops, for that error.
  DropColumnFamilyLocked(cf_name).IgnoreError();
  stopped_ = error;
  return error;
}

Status StoreImpl::CheckWritableLocked(std::string_view what) const {
  if (stopped_.ok()) return Status::OK();
  return Status::IOError(std::string(what) + ": store " + Quote(path_) +
                         " stopped writing after an I/O error; reopen it to "
                         "go on (the error: " +
                         stopped_.message() + ")");
}

Status StoreImpl::DropColumnFamilyLocked(const std::string& name) {
  auto it = cfs_.find(name);
  if (it == cfs_.end()) return Status::OK();
  // A column family that is not dropped stays known, so that no new one is
  // given its name, and GC drops it later.
  const std::string what = "dropping column family " + Quote(name);
  ROCKSDCP_RETURN_IF_ERROR(CheckWritableLocked(what));
  // Readers holding the handle keep reading; RocksDB deletes the files once
  // the last handle goes.
  rocksdb::Status s = db_->DropColumnFamily(it->second.get());
  if (!s.ok()) return StopLocked(s, what);
  cfs_.erase(it);
  return Status::OK();
}

rocksdb::Status StoreImpl::WriteMetadataAndEntryLocked(
    rocksdb::ColumnFamilyHandle* cf, std::string_view metadata_value,
    const CheckpointInfo& info, rocksdb::WriteBatch* reused) {
  const std::string entry_key = keys::CatalogKey(info.id);
  const std::string entry = format::EncodeCatalogEntry(info);
  // Sized once: growing a batch copies what it holds.
  std::optional<rocksdb::WriteBatch> fresh;
  if (reused == nullptr) {
    fresh.emplace(metadata_value.size() + entry.size() + entry_key.size() +
                  keys::kMetadataKey.size() + 64);
  }
  rocksdb::WriteBatch& batch = reused != nullptr ? *reused : *fresh;
  batch.Clear();
  rocksdb::Status s = batch.Put(
      cf, rocksdb::Slice(keys::kMetadataKey.data(), keys::kMetadataKey.size()),
      rocksdb::Slice(metadata_value.data(), metadata_value.size()));
  if (s.ok()) s = batch.Put(default_cf_, entry_key, entry);
  if (!s.ok()) return s;
  rocksdb::WriteOptions wo;
  wo.sync = true;
  return db_->Write(wo, &batch);
}

void StoreImpl::FlushLargeMetadataLocked(rocksdb::ColumnFamilyHandle* cf,
                                         size_t metadata_bytes) {
  // A checkpoint's column family is never written again, so RocksDB would
  // keep its metadata in a memtable, and in the WAL, until the store closes;
  // and every read-only open (rocksdcp ls, a load in a new process)
  // replayed the WAL into memory again: for 100,000 items (29 MB of
  // metadata), `rocksdcp ls` took 0.14 s and 99 MB instead of 0.01 s and
  // 16 MB. Flushing the catalog too lets RocksDB delete the WAL. Small
  // values stay: a flush costs a table file and a few ms per save.
  if (metadata_bytes < kFlushMetadataBytes) return;
  rocksdb::FlushOptions options;
  options.wait = true;
  const rocksdb::Status s = db_->Flush(options, {cf, default_cf_});
  if (!s.ok()) {
    rocksdb::Log(rocksdb::InfoLogLevel::WARN_LEVEL,
                 db_->GetOptions().info_log.get(),
                 "rocksdcp: flushing the metadata of column family %s: %s",
                 cf->GetName().c_str(), s.ToString().c_str());
  }
}

Result<std::set<std::string>> StoreImpl::KeptColumnFamiliesLocked() {
  ROCKSDCP_ASSIGN_OR_RETURN(auto catalog, ReadCatalog());
  return KeptColumnFamiliesLocked(catalog);
}

Result<std::set<std::string>> StoreImpl::KeptColumnFamiliesLocked(
    const std::map<std::string, CheckpointInfo>& catalog) {
  std::set<std::string> kept(pinned_cfs_.begin(), pinned_cfs_.end());
  for (const auto& [id, info] : catalog) {
    if (!info.damage.empty()) {
      return Status::Corruption("store " + Quote(path_) + ": " + info.damage);
    }
    kept.insert(info.column_family);
    kept.insert(info.referenced_column_families.begin(),
                info.referenced_column_families.end());
  }
  return kept;
}

void StoreImpl::DropUnkeptLocked(const std::vector<std::string>& candidates) {
  auto kept = KeptColumnFamiliesLocked();
  if (!kept.ok()) return;  // GC's, once the catalog is repaired.
  for (const std::string& name : candidates) {
    if (kept->count(name) == 0) DropColumnFamilyLocked(name).IgnoreError();
  }
}

Status StoreImpl::CheckIngestedKeyRanges(
    rocksdb::ColumnFamilyHandle* cf,
    std::vector<std::pair<std::string, std::string>> want) const {
  rocksdb::ColumnFamilyMetaData meta;
  db_->GetColumnFamilyMetaData(cf, &meta);
  std::vector<std::pair<std::string, std::string>> got;
  for (const rocksdb::LevelMetaData& level : meta.levels) {
    for (const rocksdb::SstFileMetaData& file : level.files) {
      got.emplace_back(file.smallestkey, file.largestkey);
    }
  }
  std::sort(want.begin(), want.end());
  std::sort(got.begin(), got.end());
  if (got == want) return Status::OK();
  return Status::IOError(
      "RocksDB recorded key ranges for the ingested files that differ from "
      "the keys written into them (a read error while it scanned them)");
}

Result<std::string> StoreImpl::ReplacedColumnFamilyLocked(
    const CommitRequest& req, const std::string& ctx) {
  const std::string& id = req.checkpoint_id;
  std::string old_value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), default_cf_,
                               keys::CatalogKey(id), &old_value);
  std::string old_cf;
  if (s.ok()) {
    if (!req.overwrite) {
      return Status::AlreadyExists(
          "checkpoint " + Quote(id) + " already exists in store " +
          Quote(path_) + "; save with overwrite = true to replace it");
    }
    auto old_info = format::DecodeCatalogEntry(old_value);
    // A corrupt old entry is replaced; its column family is left to GC.
    if (old_info.ok()) old_cf = old_info->column_family;
  } else if (!s.IsNotFound()) {
    return FromRocksDB(s, ctx + ": reading catalog");
  }
  if (!req.replaces.empty() && old_cf != req.replaces) {
    return Status::Aborted(ctx +
                           ": it was deleted or changed meanwhile; "
                           "nothing was committed");
  }
  return old_cf;
}

Status StoreImpl::CheckReferencesLocked(const CheckpointInfo& info,
                                        const std::string& ctx) const {
  // What an incremental save references must still be there, as the
  // save's pin on its base keeps it.
  for (const std::string& ref : info.referenced_column_families) {
    if (cfs_.count(ref) == 0 || pinned_cfs_.count(ref) == 0) {
      return Status::FailedPrecondition(
          ctx + ": it references column family " + Quote(ref) + ", which is " +
          (cfs_.count(ref) == 0 ? "no longer in the store"
                                : "not part of the save's base") +
          "; nothing was committed");
    }
  }
  return Status::OK();
}

Result<rocksdb::ColumnFamilyHandle*> StoreImpl::CreateColumnFamilyLocked(
    const std::string& cf_name, const std::string& ctx) {
  rocksdb::ColumnFamilyHandle* raw = nullptr;
  rocksdb::Status s = db_->CreateColumnFamily(
      rocksdb::ColumnFamilyOptions(CheckpointColumnFamilyOptions(block_cache_)),
      cf_name, &raw);
  // RocksDB can fail after creating the column family (writing the OPTIONS
  // file) and still hand out its handle: keep it, so that its name is not
  // given out again and GC drops it.
  if (raw != nullptr) {
    AdoptHandle(raw);
  } else if (!s.ok()) {
    // It can also fail after creating it without handing out the handle
    // (creating its directory): the name stays taken.
    handleless_cfs_.insert(cf_name);
  }
  if (!s.ok()) {
    return FailedMetadataWriteLocked(s, ctx + ": creating column family",
                                     cf_name);
  }
  return raw;
}

Status StoreImpl::IngestLocked(rocksdb::ColumnFamilyHandle* cf,
                               const CommitRequest& req,
                               const std::string& ctx) {
  const std::string what = ctx + ": ingesting " +
                           std::to_string(req.files.size()) +
                           " staging file(s)";
  rocksdb::IngestExternalFileArg arg;
  arg.column_family = cf;
  arg.external_files = req.files;
  arg.options.move_files = true;
  arg.options.failed_move_fall_back_to_copy = true;
  arg.options.verify_checksums_before_ingest = false;
  // A copy: dropping the column family destroys its handle.
  const std::string cf_name = cf->GetName();
  rocksdb::Status s = db_->IngestExternalFiles({arg});
  if (!s.ok()) return FailedMetadataWriteLocked(s, what, cf_name);
  if (Status st = CheckIngestedKeyRanges(cf, req.key_ranges); !st.ok()) {
    DropColumnFamilyLocked(cf_name).IgnoreError();  // Else GC's.
    return st.WithContext(what);
  }
  return Status::OK();
}

Result<CheckpointInfo> StoreImpl::Commit(CommitRequest req) {
  const std::string& id = req.checkpoint_id;
  const std::string ctx = "commit of checkpoint " + Quote(id);
  ROCKSDCP_RETURN_IF_ERROR(NeedDB(ctx));
  std::lock_guard<std::mutex> lock(mu_);
  ROCKSDCP_RETURN_IF_ERROR(CheckWritableLocked(ctx));

  ROCKSDCP_ASSIGN_OR_RETURN(const std::string old_cf,
                            ReplacedColumnFamilyLocked(req, ctx));
  ROCKSDCP_RETURN_IF_ERROR(CheckReferencesLocked(req.info, ctx));
  const std::string cf_name = FreshColumnFamilyName(id);
  ROCKSDCP_ASSIGN_OR_RETURN(rocksdb::ColumnFamilyHandle * raw,
                            CreateColumnFamilyLocked(cf_name, ctx));
  if (commit_hook_) commit_hook_("after_create_cf");
  if (!req.files.empty()) {
    ROCKSDCP_RETURN_IF_ERROR(IngestLocked(raw, req, ctx));
  }
  if (commit_hook_) commit_hook_("after_ingest");

  CheckpointInfo info = std::move(req.info);
  info.id = id;
  info.column_family = cf_name;
  info.state = CheckpointState::kCommitted;
  if (info.created_unix_micros == 0) info.created_unix_micros = NowUnixMicros();

  rocksdb::Status s =
      WriteMetadataAndEntryLocked(raw, req.metadata_value, info, req.batch);
  if (!s.ok()) {
    // The batch may be durable all the same (its WAL record written, the
    // sync failed): then the next open commits it. So its column family
    // stays, and with the store stopped, GC waits for that open to decide.
    return StopLocked(s, ctx + ": writing metadata and catalog entry");
  }
  if (commit_hook_) commit_hook_("after_write");
  FlushLargeMetadataLocked(raw, req.metadata_value.size());
  // Committed: the save's pins go (its references keep what it needs),
  // and so do the old column family and the base, unless a checkpoint
  // (this one, maybe) references them. One that is not dropped is GC's.
  std::vector<std::string> candidates = std::move(req.pinned);
  UnpinLocked(candidates);
  if (!old_cf.empty() && old_cf != cf_name) candidates.push_back(old_cf);
  DropUnkeptLocked(candidates);
  return info;
}

Status StoreImpl::Delete(std::string_view id_view) {
  const std::string id(id_view);
  if (read_only()) {
    return Status::FailedPrecondition("cannot delete checkpoint " + Quote(id) +
                                      ": store " + Quote(path_) +
                                      " is open read-only");
  }
  ROCKSDCP_RETURN_IF_ERROR(NeedDB("delete of checkpoint " + Quote(id)));
  // An id no save accepts can still key a (forged or damaged) catalog
  // entry, which List shows as damaged: Delete removes that entry too, so
  // that GC, which refuses while one is there, can run again.
  const Status valid = keys::ValidateCheckpointId(id);
  std::lock_guard<std::mutex> lock(mu_);
  ROCKSDCP_RETURN_IF_ERROR(
      CheckWritableLocked("delete of checkpoint " + Quote(id)));
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), default_cf_,
                               keys::CatalogKey(id), &value);
  if (s.IsNotFound()) {
    if (!valid.ok()) return valid;
    return Status::NotFound("checkpoint " + Quote(id) + " not found in store " +
                            Quote(path_));
  }
  if (!s.ok()) return FromRocksDB(s, "delete of checkpoint " + Quote(id));
  auto info = SoundCatalogEntry(id, value);
  // A damaged entry (it does not decode, names another checkpoint, or sits
  // under an invalid id) is removed alone: whatever column family it names
  // may be another's, so none is dropped here; GC drops the orphan.
  const bool sound = info.ok();
  if (sound) {
    // Dropping the column family of an entry another one names too would
    // destroy that checkpoint: only a damaged catalog has such entries.
    ROCKSDCP_ASSIGN_OR_RETURN(std::vector<std::string> sharing,
                              IdsNamingColumnFamily(info->column_family));
    if (sharing.size() > 1) {
      return Status::Corruption(
          "delete of checkpoint " + Quote(id) + " in store " + Quote(path_) +
          ": " + SharedColumnFamilyProblem(id, info->column_family, sharing) +
          "; deleting it would destroy the other, so nothing was deleted");
    }
  }
  rocksdb::WriteOptions wo;
  wo.sync = true;
  // The catalog entry goes first: once it is gone the checkpoint does not
  // exist, whatever happens to the column family.
  s = db_->Delete(wo, default_cf_, keys::CatalogKey(id));
  if (!s.ok()) {
    // Maybe durable all the same, as a commit's batch (see Commit).
    return StopLocked(s, "delete of checkpoint " + Quote(id) +
                             ": removing its catalog entry");
  }
  if (commit_hook_) commit_hook_("delete_after_catalog");
  // Deleted: its column family goes, unless another checkpoint references
  // it, and so do those it referenced that no other checkpoint needs. A
  // column family that is not dropped is GC's.
  if (sound) {
    std::vector<std::string> candidates = {info->column_family};
    candidates.insert(candidates.end(),
                      info->referenced_column_families.begin(),
                      info->referenced_column_families.end());
    DropUnkeptLocked(candidates);
  }
  return Status::OK();
}

}  // namespace rocksdcp
