#include "rocksdb/fault_fs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

namespace rocksdcp::testing {

namespace fs = std::filesystem;
using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;

namespace {

constexpr char kTrashName[] = ".faultfs-trash";

std::string Normal(const std::string& path) {
  fs::path p = fs::path(path).lexically_normal();
  if (p.filename().empty() && p.has_parent_path()) p = p.parent_path();
  return p.string();
}

std::string Parent(const std::string& path) {
  return fs::path(Normal(path)).parent_path().string();
}

std::optional<struct stat> Stat(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return std::nullopt;
  return st;
}

}  // namespace

const char* OpKindName(uint32_t kind) {
  switch (kind) {
    case kOpCreate:
      return "create";
    case kOpWrite:
      return "write";
    case kOpSync:
      return "sync";
    case kOpDirSync:
      return "dir-fsync";
    case kOpLinkRename:
      return "link/rename";
    case kOpRead:
      return "read";
    case kOpDelete:
      return "delete";
    default:
      return "?";
  }
}

FaultFs::FaultFs(const std::string& root, bool real_syncs)
    : FileSystemWrapper(rocksdb::FileSystem::Default()),
      root_(Normal(fs::weakly_canonical(root).string())),
      trash_((fs::path(root_) / kTrashName).string()),
      real_syncs_(real_syncs) {}

uint64_t FaultFs::Count(uint32_t kinds) const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t n = 0;
  for (int i = 0; i < kNumOpKinds; ++i) {
    if (kinds & (1u << i)) n += counts_[i];
  }
  return n;
}

void FaultFs::ResetCounts() {
  std::lock_guard<std::mutex> lock(mu_);
  counts_.fill(0);
}

void FaultFs::InjectFault(uint64_t n, uint32_t kinds, FaultType type,
                          bool sticky) {
  std::lock_guard<std::mutex> lock(mu_);
  fault_n_ = n;
  fault_kinds_ = kinds;
  fault_seen_ = 0;
  fault_type_ = type;
  fault_sticky_ = sticky;
}

void FaultFs::ClearFault() {
  std::lock_guard<std::mutex> lock(mu_);
  fault_kinds_ = 0;
}

uint64_t FaultFs::faults_injected() const {
  std::lock_guard<std::mutex> lock(mu_);
  return faults_injected_;
}

std::string FaultFs::last_fault() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_fault_;
}

void FaultFs::CutPowerAfter(uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  ops_until_power_cut_ = n;
}

bool FaultFs::power_is_off() const {
  std::lock_guard<std::mutex> lock(mu_);
  return power_off_;
}

IOStatus FaultFs::Admit(uint32_t kind, std::string_view verb,
                        const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string what = std::string(verb) + " " + path;
  if (!power_off_ && (kind & kOpMutating) && ops_until_power_cut_) {
    if (*ops_until_power_cut_ == 0) {
      power_off_ = true;
    } else {
      --*ops_until_power_cut_;
    }
  }
  if (power_off_) return IOStatus::IOError("power is off", what);
  if (kind == 0) return IOStatus::OK();
  for (int i = 0; i < kNumOpKinds; ++i) {
    if (kind == (1u << i)) ++counts_[i];
  }
  // ROCKSDCP_FAULT_FS_TRACE=1 lists every counted operation, to find what
  // the n-th one of a sweep is.
  static const bool trace = std::getenv("ROCKSDCP_FAULT_FS_TRACE") != nullptr;
  if (trace)
    std::fprintf(stderr, "faultfs: %s %s\n", OpKindName(kind), what.c_str());
  if ((kind & fault_kinds_) == 0) return IOStatus::OK();
  ++fault_seen_;
  if (fault_seen_ < fault_n_ || (fault_seen_ > fault_n_ && !fault_sticky_)) {
    return IOStatus::OK();
  }
  ++faults_injected_;
  last_fault_ = what;
  return fault_type_ == FaultType::kNoSpace
             ? IOStatus::NoSpace(what, "injected fault")
             : IOStatus::IOError(what, "injected fault (EIO)");
}

bool FaultFs::Tracked(const std::string& path) const {
  const std::string p = Normal(path);
  return p.size() > root_.size() && p.compare(0, root_.size(), root_) == 0 &&
         p[root_.size()] == '/' && p.compare(0, trash_.size(), trash_) != 0;
}

namespace {

// The entries of `dir` on disk, but the trash.
std::map<std::string, std::pair<bool, uint64_t>> ReadEntries(
    const std::string& dir) {
  std::map<std::string, std::pair<bool, uint64_t>> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name == kTrashName) continue;
    if (auto st = Stat(it->path().string())) {
      out[name] = {S_ISDIR(st->st_mode), st->st_ino};
    }
  }
  return out;
}

}  // namespace

void FaultFs::BeforeEntryChange(const std::string& path) {
  if (!Tracked(path)) return;
  const std::string dir = Parent(path);
  std::lock_guard<std::mutex> lock(mu_);
  if (durable_entries_.count(dir)) return;
  Listing& listing = durable_entries_[dir];
  for (const auto& [name, e] : ReadEntries(dir)) {
    listing[name] = Entry{e.first, e.second};
  }
}

void FaultFs::BeforeUnlink(const std::string& path) {
  if (!Tracked(path)) return;
  auto st = Stat(path);
  if (!st || S_ISDIR(st->st_mode)) return;
  std::error_code ec;
  fs::create_directories(trash_, ec);
  // Fails harmlessly if the inode is there already.
  ::link(path.c_str(), TrashPath(st->st_ino).c_str());
}

void FaultFs::FileCreated(const std::string& path) {
  if (!Tracked(path)) return;
  if (auto st = Stat(path)) {
    std::lock_guard<std::mutex> lock(mu_);
    durable_size_[st->st_ino] = 0;
  }
}

void FaultFs::FileSynced(const std::string& path) {
  if (!Tracked(path)) return;
  if (auto st = Stat(path)) {
    std::lock_guard<std::mutex> lock(mu_);
    durable_size_[st->st_ino] = static_cast<uint64_t>(st->st_size);
  }
}

void FaultFs::DirSynced(const std::string& dir) {
  const std::string d = Normal(dir);
  if (!Tracked(d + "/x")) return;
  Listing listing;
  for (const auto& [name, e] : ReadEntries(d)) {
    listing[name] = Entry{e.first, e.second};
  }
  std::lock_guard<std::mutex> lock(mu_);
  durable_entries_[d] = std::move(listing);
}

std::string FaultFs::TrashPath(uint64_t inode) const {
  return (fs::path(trash_) / std::to_string(inode)).string();
}

Status FaultFs::RestoreDir(const std::string& dir) {
  const auto now = ReadEntries(dir);
  auto it = durable_entries_.find(dir);
  if (it == durable_entries_.end()) {
    for (const auto& [name, e] : now) {
      if (e.first) ROCKSDCP_RETURN_IF_ERROR(RestoreDir(dir + "/" + name));
    }
    return Status::OK();
  }
  const Listing& want = it->second;
  std::error_code ec;
  for (const auto& [name, e] : now) {
    auto w = want.find(name);
    if (w == want.end() || w->second.is_dir != e.first ||
        (!e.first && w->second.inode != e.second)) {
      fs::remove_all(dir + "/" + name, ec);  // Its entry was never durable.
    }
  }
  for (const auto& [name, w] : want) {
    const std::string path = dir + "/" + name;
    if (w.is_dir) {
      fs::create_directory(path, ec);
      ROCKSDCP_RETURN_IF_ERROR(RestoreDir(path));
      continue;
    }
    auto n = now.find(name);
    if (n != now.end() && !n->second.first && n->second.second == w.inode) {
      continue;
    }
    const std::string kept = TrashPath(w.inode);
    // Not kept: removed behind the FaultFs's back (the POSIX staging lock
    // files), so there is nothing to bring back.
    if (!Stat(kept)) continue;
    if (::link(kept.c_str(), path.c_str()) != 0) {
      return Status::Internal("fault fs: cannot restore " + path + ": " +
                              std::strerror(errno));
    }
  }
  return Status::OK();
}

void FaultFs::AssumeDurable() {
  std::lock_guard<std::mutex> lock(mu_);
  std::error_code ec;
  fs::remove_all(trash_, ec);
  durable_entries_.clear();
  durable_size_.clear();
}

Status FaultFs::SimulatePowerLoss() {
  std::lock_guard<std::mutex> lock(mu_);
  ROCKSDCP_RETURN_IF_ERROR(RestoreDir(root_));
  std::error_code ec;
  for (fs::recursive_directory_iterator it(root_, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->path().filename().string() == kTrashName) {
      it.disable_recursion_pending();
      continue;
    }
    auto st = Stat(it->path().string());
    if (!st || !S_ISREG(st->st_mode)) continue;
    auto d = durable_size_.find(st->st_ino);
    if (d != durable_size_.end() &&
        static_cast<uint64_t>(st->st_size) > d->second &&
        ::truncate(it->path().c_str(), static_cast<off_t>(d->second)) != 0) {
      return Status::Internal("fault fs: cannot truncate " +
                              it->path().string());
    }
  }
  fs::remove_all(trash_, ec);
  durable_entries_.clear();
  durable_size_.clear();
  power_off_ = false;
  ops_until_power_cut_.reset();
  return Status::OK();
}

// ---- rocksdb::FileSystem ----

IOStatus FaultFs::NewSequentialFile(
    const std::string& f, const rocksdb::FileOptions& o,
    std::unique_ptr<rocksdb::FSSequentialFile>* r, IODebugContext* dbg) {
  IOStatus s = Admit(0, "open", f);
  if (s.ok()) s = target()->NewSequentialFile(f, o, r, dbg);
  if (s.ok()) *r = Wrap(std::move(*r), f);
  return s;
}

IOStatus FaultFs::NewRandomAccessFile(
    const std::string& f, const rocksdb::FileOptions& o,
    std::unique_ptr<rocksdb::FSRandomAccessFile>* r, IODebugContext* dbg) {
  if (o.use_direct_reads && refuse_direct_reads_) {
    return IOStatus::InvalidArgument("no O_DIRECT here: " + f);
  }
  IOStatus s = Admit(0, "open", f);
  if (s.ok()) s = target()->NewRandomAccessFile(f, o, r, dbg);
  if (s.ok()) *r = Wrap(std::move(*r), f);
  return s;
}

template <typename File, typename Op>
IOStatus FaultFs::OpenForWriting(uint32_t kind, std::string_view verb,
                                 const std::string& f, bool fresh,
                                 std::unique_ptr<File>* r, Op open) {
  IOStatus s = Admit(kind, verb, f);
  if (!s.ok()) return s;
  const bool existed = Stat(f).has_value();
  BeforeEntryChange(f);
  s = open();
  if (!s.ok()) return s;
  if (fresh || !existed) FileCreated(f);
  *r = Wrap(std::move(*r), f);
  return s;
}

IOStatus FaultFs::NewWritableFile(const std::string& f,
                                  const rocksdb::FileOptions& o,
                                  std::unique_ptr<rocksdb::FSWritableFile>* r,
                                  IODebugContext* dbg) {
  return OpenForWriting(kOpCreate, "create", f, /*fresh=*/true, r, [&] {
    return target()->NewWritableFile(f, o, r, dbg);
  });
}

IOStatus FaultFs::ReopenWritableFile(
    const std::string& f, const rocksdb::FileOptions& o,
    std::unique_ptr<rocksdb::FSWritableFile>* r, IODebugContext* dbg) {
  return OpenForWriting(kOpCreate, "reopen", f, /*fresh=*/false, r, [&] {
    return target()->ReopenWritableFile(f, o, r, dbg);
  });
}

IOStatus FaultFs::ReuseWritableFile(const std::string& f,
                                    const std::string& old_f,
                                    const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    IODebugContext* dbg) {
  return OpenForWriting(kOpLinkRename, "reuse", f, /*fresh=*/true, r, [&] {
    BeforeEntryChange(old_f);
    BeforeUnlink(old_f);
    return target()->ReuseWritableFile(f, old_f, o, r, dbg);
  });
}

IOStatus FaultFs::NewRandomRWFile(const std::string& f,
                                  const rocksdb::FileOptions& o,
                                  std::unique_ptr<rocksdb::FSRandomRWFile>* r,
                                  IODebugContext* dbg) {
  return OpenForWriting(
      kOpCreate, "open for writing", f, /*fresh=*/false, r,
      [&] { return target()->NewRandomRWFile(f, o, r, dbg); });
}

IOStatus FaultFs::NewDirectory(const std::string& d, const IOOptions& o,
                               std::unique_ptr<rocksdb::FSDirectory>* r,
                               IODebugContext* dbg) {
  IOStatus s = Admit(0, "open directory", d);
  if (s.ok()) s = target()->NewDirectory(d, o, r, dbg);
  if (s.ok()) *r = Wrap(std::move(*r), Normal(d));
  return s;
}

template <typename Op>
IOStatus FaultFs::ChangeEntries(uint32_t kind, std::string_view verb,
                                const std::string& path,
                                std::initializer_list<std::string> changed,
                                std::initializer_list<std::string> unlinked,
                                Op op) {
  IOStatus s = Admit(kind, verb, path);
  if (!s.ok()) return s;
  for (const std::string& p : changed) BeforeEntryChange(p);
  for (const std::string& p : unlinked) BeforeUnlink(p);
  return op();
}

IOStatus FaultFs::CreateDir(const std::string& d, const IOOptions& o,
                            IODebugContext* dbg) {
  return ChangeEntries(kOpCreate, "create directory", d, {d}, {},
                       [&] { return target()->CreateDir(d, o, dbg); });
}

IOStatus FaultFs::CreateDirIfMissing(const std::string& d, const IOOptions& o,
                                     IODebugContext* dbg) {
  return ChangeEntries(kOpCreate, "create directory", d, {d}, {},
                       [&] { return target()->CreateDirIfMissing(d, o, dbg); });
}

IOStatus FaultFs::DeleteFile(const std::string& f, const IOOptions& o,
                             IODebugContext* dbg) {
  return ChangeEntries(kOpDelete, "delete", f, {f}, {f},
                       [&] { return target()->DeleteFile(f, o, dbg); });
}

IOStatus FaultFs::DeleteDir(const std::string& d, const IOOptions& o,
                            IODebugContext* dbg) {
  return ChangeEntries(kOpDelete, "delete directory", d, {d}, {},
                       [&] { return target()->DeleteDir(d, o, dbg); });
}

IOStatus FaultFs::RenameFile(const std::string& src, const std::string& t,
                             const IOOptions& o, IODebugContext* dbg) {
  return ChangeEntries(kOpLinkRename, "rename to " + t + ":", src, {src, t},
                       {t, src},
                       [&] { return target()->RenameFile(src, t, o, dbg); });
}

IOStatus FaultFs::LinkFile(const std::string& src, const std::string& t,
                           const IOOptions& o, IODebugContext* dbg) {
  return ChangeEntries(kOpLinkRename, "link to " + t + ":", src, {t}, {},
                       [&] { return target()->LinkFile(src, t, o, dbg); });
}

IOStatus FaultFs::Truncate(const std::string& f, size_t size,
                           const IOOptions& o, IODebugContext* dbg) {
  IOStatus s = Admit(kOpWrite, "truncate", f);
  if (!s.ok()) return s;
  s = target()->Truncate(f, size, o, dbg);
  if (s.ok() && Tracked(f)) {
    if (auto st = Stat(f)) {
      std::lock_guard<std::mutex> lock(mu_);
      auto d = durable_size_.find(st->st_ino);
      if (d != durable_size_.end())
        d->second = std::min<uint64_t>(d->second, size);
    }
  }
  return s;
}

IOStatus FaultFs::NewLogger(const std::string& f, const IOOptions& o,
                            std::shared_ptr<rocksdb::Logger>* r,
                            IODebugContext* dbg) {
  // RocksDB's info log; its writes bypass the FileSystem, and nothing reads
  // it back, so only its entry is modelled.
  return ChangeEntries(0, "create log", f, {f}, {},
                       [&] { return target()->NewLogger(f, o, r, dbg); });
}

IOStatus FaultFs::LockFile(const std::string& f, const IOOptions& o,
                           rocksdb::FileLock** l, IODebugContext* dbg) {
  return ChangeEntries(0, "lock", f, {f}, {},
                       [&] { return target()->LockFile(f, o, l, dbg); });
}

}  // namespace rocksdcp::testing
