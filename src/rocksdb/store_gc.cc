// StoreImpl::CollectGarbage: drops the column families the catalog does
// not name (as a checkpoint's own or one it references), that no save in
// progress pins, and removes the staging directories of writers that are gone;
// StoreImpl::ReclaimTornSaves, the same on a read-write open.

#include <rocksdb/env.h>

#include <filesystem>
#include <optional>
#include <set>

#include "rocksdb/rocksdb_status.h"
#include "rocksdb/store_impl.h"
#include "rocksdb/store_staging.h"
#include "util/file_lock.h"
#include "util/text.h"

namespace rocksdcp {

using util::Quote;

namespace fs = std::filesystem;

Result<GcReport> StoreImpl::CollectGarbage(bool dry_run) {
  if (read_only()) {
    return Status::FailedPrecondition("cannot collect garbage: store " +
                                      Quote(path_) + " is open read-only");
  }
  ROCKSDCP_RETURN_IF_ERROR(NeedDB("garbage collection"));
  // Under the lock, so that no commit lands between reading the catalog and
  // dropping what it does not name.
  std::lock_guard<std::mutex> lock(mu_);
  if (!dry_run) {
    ROCKSDCP_RETURN_IF_ERROR(
        CheckWritableLocked("garbage collection of store " + Quote(path_)));
  }
  GcReport report;
  ROCKSDCP_RETURN_IF_ERROR(DropOrphanColumnFamiliesLocked(dry_run, &report));
  ROCKSDCP_RETURN_IF_ERROR(RemoveDeadStagingLocked(dry_run, &report));
  return report;
}

void StoreImpl::ReclaimTornSaves() {
  std::lock_guard<std::mutex> lock(mu_);
  rocksdb::Logger* log = db_->GetOptions().info_log.get();
  // Each half on its own: a damaged catalog entry keeps every column family
  // (GC's refusal), but the staging files of writers that are gone are
  // garbage whatever the catalog says.
  const Status cfs = DropOrphanColumnFamiliesLocked(false, &reclaimed_);
  const Status staging = RemoveDeadStagingLocked(false, &reclaimed_);
  for (const Status* s : {&cfs, &staging}) {
    if (!s->ok()) {
      rocksdb::Log(rocksdb::InfoLogLevel::WARN_LEVEL, log,
                   "rocksdcp: reclaiming torn saves on open: %s",
                   s->ToString().c_str());
    }
  }
  if (!reclaimed_.dropped_column_families.empty() ||
      !reclaimed_.deleted_staging_files.empty()) {
    rocksdb::Log(rocksdb::InfoLogLevel::INFO_LEVEL, log,
                 "rocksdcp: reclaimed on open %zu column families and %zu "
                 "staging files that saves which never committed left, "
                 "%llu bytes",
                 reclaimed_.dropped_column_families.size(),
                 reclaimed_.deleted_staging_files.size(),
                 static_cast<unsigned long long>(reclaimed_.freed_bytes));
  }
}

Status StoreImpl::DropOrphanColumnFamiliesLocked(bool dry_run,
                                                 GcReport* report) {
  ROCKSDCP_ASSIGN_OR_RETURN(auto catalog, ReadCatalog());
  for (const auto& [id, info] : catalog) {
    if (!info.damage.empty()) {
      return Status::Corruption(
          "garbage collection of store " + Quote(path_) + ": " + info.damage +
          "; the column family it named can't be told from garbage, so "
          "nothing was collected (delete the entry, or verify the store)");
    }
  }
  // Every committed checkpoint's column family, those they reference, and
  // the bases of saves in progress (from the catalog read above: a
  // read-write open runs this too).
  ROCKSDCP_ASSIGN_OR_RETURN(const std::set<std::string> live,
                            KeptColumnFamiliesLocked(catalog));
  std::vector<std::string> orphans;
  for (const auto& [name, handle] : cfs_) {
    if (live.count(name) == 0) orphans.push_back(name);
  }
  for (const std::string& name : orphans) {
    rocksdb::ColumnFamilyMetaData meta;
    db_->GetColumnFamilyMetaData(cfs_[name].get(), &meta);
    report->freed_bytes += meta.size;
    report->dropped_column_families.push_back(name);
    if (dry_run) continue;
    ROCKSDCP_RETURN_IF_ERROR(DropColumnFamilyLocked(name).WithContext(
        "GC of store " + Quote(path_)));
    if (commit_hook_) commit_hook_("gc_after_drop_cf");
  }
  return Status::OK();
}

Status StoreImpl::RemoveDeadStagingLocked(bool dry_run, GcReport* report) {
  // Staging: each writer holds an flock on "<dir>.lock" beside its
  // directory for as long as it runs, in whatever process. A directory (or
  // lock file) whose lock we can take belongs to a writer that is gone.
  const std::string gc = "GC of store " + Quote(path_);
  std::vector<std::string> children;
  rocksdb::IOStatus io =
      fs_->GetChildren(staging_root_, rocksdb::IOOptions(), &children, nullptr);
  if (!io.ok() && !io.IsNotFound()) {
    return FromRocksDB(io, gc + ": listing " + staging_root_);
  }
  std::set<std::string> names;
  for (const std::string& child : children) {
    const fs::path p(child);
    names.insert(p.extension() == ".lock" ? p.stem().string() : child);
  }
  for (const std::string& name : names) {
    const std::string dir = (fs::path(staging_root_) / name).string();
    ROCKSDCP_ASSIGN_OR_RETURN(std::optional<util::FileLock> lock,
                              util::FileLock::TryAcquire(StagingLockPath(dir)));
    if (!lock) continue;  // A live writer's.
    std::vector<std::string> files;
    ROCKSDCP_RETURN_IF_ERROR(
        ListFilesUnder(*fs_, dir, &files, &report->freed_bytes)
            .WithContext(gc));
    report->deleted_staging_files.insert(report->deleted_staging_files.end(),
                                         files.begin(), files.end());
    if (dry_run) continue;
    if (commit_hook_) commit_hook_("gc_removing_staging");
    ROCKSDCP_RETURN_IF_ERROR(RemoveStagingDir(dir).WithContext(gc));
    lock->UnlinkAndRelease();
  }
  return Status::OK();
}

}  // namespace rocksdcp
