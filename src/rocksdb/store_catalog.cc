// StoreImpl's reads of the catalog: listing the committed checkpoints and
// looking one up.

#include <algorithm>

#include "keys/keys.h"
#include "rocksdb/catalog_codec.h"
#include "rocksdb/rocksdb_status.h"
#include "rocksdb/store_impl.h"
#include "util/text.h"

namespace rocksdcp {

using util::Quote;

Result<CheckpointInfo> StoreImpl::SoundCatalogEntry(const std::string& id,
                                                    std::string_view value) {
  const std::string key = keys::CatalogKey(id);
  if (Status valid = keys::ValidateCheckpointId(id); !valid.ok()) {
    // No save writes such a key and nothing loads it; Delete removes it.
    return Status::Corruption("catalog key " + Quote(key) +
                              " names an invalid id: " + valid.message());
  }
  auto entry = format::DecodeCatalogEntry(value);
  if (!entry.ok()) {
    // The decoder's message starts "catalog entry: ...".
    return Status::Corruption("key " + Quote(key) + ": " +
                              entry.status().message());
  }
  if (entry->id != id) {
    return Status::Corruption("catalog entry " + Quote(key) +
                              " names checkpoint " + Quote(entry->id));
  }
  return entry;
}

Result<std::map<std::string, CheckpointInfo>> StoreImpl::ReadCatalog() {
  std::map<std::string, CheckpointInfo> catalog;
  rocksdb::ReadOptions ro;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, default_cf_));
  const std::string prefix(keys::kCatalogPrefix);
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix);
       it->Next()) {
    const std::string key = it->key().ToString();
    // Every key under the prefix is listed, "checkpoint/" (an empty id)
    // too: one that no save writes is listed as damaged.
    std::string id = key.substr(prefix.size());
    auto entry = SoundCatalogEntry(
        id, std::string_view(it->value().data(), it->value().size()));
    CheckpointInfo info;
    if (entry.ok()) {
      info = std::move(entry).value();
    } else {
      info.damage = entry.status().message();
    }
    info.id = id;
    catalog.emplace(std::move(id), std::move(info));
  }
  if (!it->status().ok()) {
    return FromRocksDB(it->status(),
                       "store " + Quote(path_) + ": catalog scan");
  }
  return catalog;
}

void StoreImpl::AccountLocked(std::map<std::string, CheckpointInfo>& catalog,
                              const std::string* only) {
  // Who holds and who references each column family.
  std::map<std::string, int> holders, referrers;
  // While an entry is damaged, Delete drops nothing (see DropUnkeptLocked).
  bool damaged = false;
  for (const auto& [id, info] : catalog) {
    damaged |= !info.damage.empty();
    if (!info.damage.empty()) continue;
    ++holders[info.column_family];
    for (const std::string& cf : info.referenced_column_families) {
      ++referrers[cf];
    }
  }
  auto stored = [this](const std::string& cf) -> uint64_t {
    auto it = cfs_.find(cf);
    return it == cfs_.end() ? 0 : DiskBytes(it->second.get());
  };
  for (auto& [id, info] : catalog) {
    if (!info.damage.empty() || (only != nullptr && id != *only)) continue;
    info.stored_bytes = stored(info.column_family);
    if (damaged) continue;
    info.freed_by_delete = referrers.count(info.column_family) > 0 ||
                                   pinned_cfs_.count(info.column_family) > 0 ||
                                   holders[info.column_family] > 1
                               ? 0
                               : info.stored_bytes;
    for (const std::string& cf : info.referenced_column_families) {
      // A column family kept only for this checkpoint's references.
      if (holders.count(cf) == 0 && referrers[cf] == 1 &&
          pinned_cfs_.count(cf) == 0) {
        info.freed_by_delete += stored(cf);
      }
    }
  }
}

Result<std::vector<CheckpointInfo>> StoreImpl::List() {
  ROCKSDCP_RETURN_IF_ERROR(NeedDB("list"));
  ROCKSDCP_ASSIGN_OR_RETURN(auto catalog, ReadCatalog());
  {
    std::lock_guard<std::mutex> lock(mu_);
    AccountLocked(catalog);
  }
  std::vector<CheckpointInfo> out;
  out.reserve(catalog.size());
  for (auto& [id, info] : catalog) out.push_back(std::move(info));
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.created_unix_micros < b.created_unix_micros;
  });
  return out;
}

Result<CheckpointInfo> StoreImpl::Info(std::string_view id) {
  ROCKSDCP_ASSIGN_OR_RETURN(CommittedCheckpoint c,
                            LookupCommitted(std::string(id)));
  // What a delete would free depends on every other entry.
  ROCKSDCP_ASSIGN_OR_RETURN(auto catalog, ReadCatalog());
  std::lock_guard<std::mutex> lock(mu_);
  AccountLocked(catalog, &c.info.id);
  auto it = catalog.find(c.info.id);
  if (it != catalog.end() && it->second.damage.empty() &&
      it->second.column_family == c.info.column_family) {
    return std::move(it->second);
  }
  c.info.stored_bytes = DiskBytes(c.cf.get());
  return c.info;
}

void StoreImpl::UnpinColumnFamilies(const std::vector<std::string>& names) {
  std::lock_guard<std::mutex> lock(mu_);
  UnpinLocked(names);
}

void StoreImpl::UnpinLocked(const std::vector<std::string>& names) {
  // One pin each: other saves may pin the same column family.
  for (const std::string& name : names) {
    auto it = pinned_cfs_.find(name);
    if (it != pinned_cfs_.end()) pinned_cfs_.erase(it);
  }
}

Status StoreImpl::NotCommittedLocked(const std::string& id) const {
  const std::string where = "checkpoint " + Quote(id) + " in store " +
                            Quote(path_) + " is not committed";
  if (saving_ids_.count(id) > 0 || HasStagingDirFor(id)) {
    return Status::NotFound(where +
                            ": a save of it is still running, or did not "
                            "finish; it cannot be loaded");
  }
  if (cfs_.count(id) > 0) {
    // The catalog entry goes first when a checkpoint is deleted, and is
    // written last when one is saved.
    return Status::NotFound(
        where +
        ": the catalog has no entry for it, though its column family is "
        "still there (it was deleted, or its save never finished; garbage "
        "collection drops it); it cannot be loaded");
  }
  return Status::NotFound("checkpoint " + Quote(id) + " not found in store " +
                          Quote(path_));
}

Status StoreImpl::MissingColumnFamilyLocked(const std::string& id,
                                            const std::string& cf_name) const {
  if (options_.read_only && vanished_cfs_.count(cf_name) > 0) {
    // A read-only open beside a writer that was creating or dropping the
    // column family just then opens without it.
    return Status::NotFound(
        "checkpoint " + Quote(id) + " in store " + Quote(path_) +
        " changed while this read-only store opened (another process was "
        "saving or deleting it); open the store again to load it");
  }
  if (options_.read_only && !probing_) {
    // Its column family may have been created after this open listed them,
    // and the checkpoint deleted since: the store as it is now tells a race
    // from damage. (Only on this error path: an open costs milliseconds.)
    StoreOptions now_options;
    now_options.read_only = true;
    now_options.create_if_missing = false;
    auto now = StoreImpl::Open(path_, now_options, fs_);
    if (now.ok()) {
      static_cast<StoreImpl*>(now->get())->probing_ = true;
      Result<CheckpointInfo> again = (*now)->Info(id);
      if (again.ok()) {
        return Status::NotFound(
            "checkpoint " + Quote(id) + " in store " + Quote(path_) +
            " changed while this read-only store opened (another process "
            "was saving or deleting it); open the store again to load it");
      }
      if (again.status().IsNotFound()) {
        return Status::NotFound(
            "checkpoint " + Quote(id) + " in store " + Quote(path_) +
            " was deleted after this read-only store opened (by the process "
            "that writes the store); it cannot be loaded");
      }
    }
  }
  return Status::Corruption("checkpoint " + Quote(id) +
                            ": catalog names column family " + Quote(cf_name) +
                            ", which the store does not have");
}

CommittedCheckpoint StoreImpl::CommittedLocked(
    CheckpointInfo info,
    std::shared_ptr<rocksdb::ColumnFamilyHandle> cf) const {
  CommittedCheckpoint c;
  c.cf = std::move(cf);
  c.stored_bytes = StoredBytes(c.cf.get());
  for (const std::string& name : info.referenced_column_families) {
    auto source = cfs_.find(name);
    if (source == cfs_.end()) continue;
    c.sources[name] = {source->second, StoredBytes(source->second.get())};
  }
  c.info = std::move(info);
  return c;
}

Result<CommittedCheckpoint> StoreImpl::LookupCommitted(
    const std::string& id, std::vector<std::string>* pin_for_save) {
  ROCKSDCP_RETURN_IF_ERROR(NeedDB("lookup of checkpoint " + Quote(id)));
  ROCKSDCP_RETURN_IF_ERROR(keys::ValidateCheckpointId(id));
  std::lock_guard<std::mutex> lock(mu_);
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), default_cf_,
                               keys::CatalogKey(id), &value);
  if (s.IsNotFound()) return NotCommittedLocked(id);
  if (!s.ok()) {
    return FromRocksDB(s, "checkpoint " + Quote(id) + ": reading catalog");
  }
  auto info = SoundCatalogEntry(id, value);
  if (!info.ok()) {
    return Status::Corruption("checkpoint " + Quote(id) + ": " +
                              info.status().message() +
                              ": the catalog is damaged");
  }
  auto it = cfs_.find(info->column_family);
  if (it == cfs_.end()) {
    return MissingColumnFamilyLocked(id, info->column_family);
  }
  CommittedCheckpoint c = CommittedLocked(std::move(info).value(), it->second);
  if (pin_for_save != nullptr) {
    pin_for_save->push_back(c.info.column_family);
    for (const auto& [name, source] : c.sources) pin_for_save->push_back(name);
    for (const std::string& name : *pin_for_save) pinned_cfs_.insert(name);
  }
  return c;
}

uint64_t StoreImpl::StoredBytes(rocksdb::ColumnFamilyHandle* cf) const {
  rocksdb::ColumnFamilyMetaData files;
  db_->GetColumnFamilyMetaData(cf, &files);
  // Each file's size as the MANIFEST records it, but no more than the file
  // holds: a read-only open does not compare them (paranoid_checks is
  // off), and a forged MANIFEST could claim any size. One stat a file.
  uint64_t stored = 0;
  for (const rocksdb::LevelMetaData& level : files.levels) {
    for (const rocksdb::SstFileMetaData& f : level.files) {
      uint64_t on_disk = 0;
      const rocksdb::IOStatus s = fs_->GetFileSize(
          f.db_path + f.name, rocksdb::IOOptions(), &on_disk, nullptr);
      stored += s.ok() ? std::min<uint64_t>(f.size, on_disk) : 0;
    }
  }
  uint64_t memtables = 0;
  db_->GetIntProperty(cf, rocksdb::DB::Properties::kSizeAllMemTables,
                      &memtables);
  return stored + memtables;
}

uint64_t StoreImpl::DiskBytes(rocksdb::ColumnFamilyHandle* cf) const {
  rocksdb::ColumnFamilyMetaData files;
  db_->GetColumnFamilyMetaData(cf, &files);
  uint64_t bytes = 0;
  for (const rocksdb::LevelMetaData& level : files.levels) {
    for (const rocksdb::SstFileMetaData& f : level.files) bytes += f.size;
  }
  // Every key: the metadata key and piece keys sort after "".
  const std::string last(64, '\xff');
  uint64_t count = 0, memtable = 0;
  db_->GetApproximateMemTableStats(cf, rocksdb::Range("", last), &count,
                                   &memtable);
  return bytes + memtable;
}

Result<StoreImpl::OnDiskNow> StoreImpl::CheckpointOnDiskNow(
    const std::string& id) const {
  StoreOptions options;
  options.read_only = true;
  options.create_if_missing = false;
  ROCKSDCP_ASSIGN_OR_RETURN(auto now, StoreImpl::Open(path_, options, fs_));
  Result<CheckpointInfo> info = now->Info(id);
  if (!info.ok()) {
    if (info.status().IsNotFound()) return OnDiskNow::kGone;
    return info.status();
  }
  VerifyOptions verify;
  verify.checkpoint_ids = {id};
  verify.max_problems = 0;
  ROCKSDCP_ASSIGN_OR_RETURN(VerifyReport report, now->Verify(verify));
  return report.ok() ? OnDiskNow::kIntact : OnDiskNow::kDamaged;
}

Result<std::map<std::string, std::vector<std::string>>>
StoreImpl::IdsByColumnFamily() const {
  std::map<std::string, std::vector<std::string>> ids;
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(rocksdb::ReadOptions(), default_cf_));
  const std::string prefix(keys::kCatalogPrefix);
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix);
       it->Next()) {
    std::string id = it->key().ToString().substr(prefix.size());
    auto entry = SoundCatalogEntry(
        id, std::string_view(it->value().data(), it->value().size()));
    // Only sound entries: one that is damaged by itself (see ReadCatalog)
    // is reported as such, and deleting it drops no column family.
    if (entry.ok()) ids[entry->column_family].push_back(std::move(id));
  }
  if (!it->status().ok()) {
    return FromRocksDB(it->status(),
                       "store " + Quote(path_) + ": catalog scan");
  }
  return ids;
}

Result<std::vector<std::string>> StoreImpl::IdsNamingColumnFamily(
    const std::string& cf) const {
  ROCKSDCP_ASSIGN_OR_RETURN(auto all, IdsByColumnFamily());
  auto it = all.find(cf);
  if (it == all.end()) return std::vector<std::string>();
  return std::move(it->second);
}

std::string SharedColumnFamilyProblem(const std::string& id,
                                      const std::string& cf,
                                      const std::vector<std::string>& ids) {
  // A few by name: a catalog with thousands of aliases must not give each
  // of them a message naming all the others.
  constexpr size_t kNamed = 3;
  std::string others;
  size_t named = 0;
  size_t unnamed = 0;
  for (const std::string& other : ids) {
    if (other == id) continue;
    if (named == kNamed) {
      ++unnamed;
      continue;
    }
    others += (others.empty() ? "" : ", ") + Quote(other);
    ++named;
  }
  if (unnamed > 0) {
    others += " and " + std::to_string(unnamed) + " more";
  }
  return "checkpoint " + Quote(id) + " shares its column family " + Quote(cf) +
         " with checkpoint " + others +
         ": the catalog is damaged (each checkpoint has a column family of "
         "its own)";
}

}  // namespace rocksdcp
