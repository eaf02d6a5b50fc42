// The store's staging directories (names, locks, listing and removal),
// and StoreImpl's directory helpers, all through the store's FileSystem.

#include "rocksdb/store_staging.h"

#include <cstdio>
#include <filesystem>
#include <optional>

#include "format/checksum.h"
#include "keys/keys.h"
#include "rocksdb/rocksdb_status.h"
#include "rocksdb/store_impl.h"

namespace rocksdcp {

namespace fs = std::filesystem;

namespace {

// The id as one path component: escaped as keys are, plus '/' and '.', so
// that the '.' before the save id is the only one. Escaping triples every
// byte outside printable ASCII, so a valid 128-byte id in another script
// (42 CJK characters, 32 emoji) would pass the 255-byte limit of a file
// name: a long escaped id keeps its first kMaxIdChars characters and ends
// in '~' and the XXH3 of the whole id, which stays one id's name.
std::string FileSafeId(std::string_view id) {
  constexpr size_t kMaxIdChars = 64;
  std::string out;
  for (char c : keys::EscapeFqn(id)) {
    if (c == '/') {
      out += "%2F";
    } else if (c == '.') {
      out += "%2E";
    } else {
      out += c;
    }
  }
  if (out.size() <= kMaxIdChars + 17) return out;
  size_t keep = kMaxIdChars;
  // Never cut an escape "%XX" in two.
  if (out[keep - 1] == '%') keep -= 1;
  if (out[keep - 2] == '%') keep -= 2;
  char hash[17];
  std::snprintf(hash, sizeof(hash), "%016llx",
                static_cast<unsigned long long>(format::Xxh3(id)));
  return out.substr(0, keep) + "~" + hash;
}

// Whether `path` is a directory; nullopt if it does not exist, which is no
// error here (POSIX's IsDirectory reports it as an IOError, not NotFound).
Result<std::optional<bool>> IsDirectory(rocksdb::FileSystem& fs,
                                        const std::string& path) {
  const rocksdb::IOOptions io;
  rocksdb::IOStatus s = fs.FileExists(path, io, nullptr);
  if (s.IsNotFound()) return std::optional<bool>();
  bool is_dir = false;
  if (s.ok()) s = fs.IsDirectory(path, io, &is_dir, nullptr);
  if (!s.ok()) return FromRocksDB(s, "reading " + path);
  return std::optional<bool>(is_dir);
}

// Removes `path`, a file or a directory with everything under it.
Status RemoveTree(rocksdb::FileSystem& fs, const std::string& path) {
  const rocksdb::IOOptions io;
  ROCKSDCP_ASSIGN_OR_RETURN(std::optional<bool> is_dir, IsDirectory(fs, path));
  if (!is_dir) return Status::OK();
  rocksdb::IOStatus s;
  if (*is_dir) {
    std::vector<std::string> children;
    s = fs.GetChildren(path, io, &children, nullptr);
    if (!s.ok()) return FromRocksDB(s, "listing " + path);
    for (const std::string& child : children) {
      ROCKSDCP_RETURN_IF_ERROR(
          RemoveTree(fs, (fs::path(path) / child).string()));
    }
    s = fs.DeleteDir(path, io, nullptr);
  } else {
    s = fs.DeleteFile(path, io, nullptr);
  }
  if (!s.ok() && !s.IsNotFound()) {
    return FromRocksDB(s, "cannot remove " + path);
  }
  return Status::OK();
}

}  // namespace

std::string StagingDirName(std::string_view id, std::string_view save_id) {
  return FileSafeId(id) + "." + std::string(save_id);
}

std::string StagingLockPath(const std::string& staging_dir) {
  return staging_dir + ".lock";
}

Status ListFilesUnder(rocksdb::FileSystem& fs, const std::string& path,
                      std::vector<std::string>* files, uint64_t* bytes) {
  const rocksdb::IOOptions io;
  ROCKSDCP_ASSIGN_OR_RETURN(std::optional<bool> is_dir, IsDirectory(fs, path));
  if (!is_dir) return Status::OK();
  rocksdb::IOStatus s;
  if (!*is_dir) {
    uint64_t size = 0;
    s = fs.GetFileSize(path, io, &size, nullptr);
    if (s.IsNotFound()) return Status::OK();
    if (!s.ok()) return FromRocksDB(s, "reading the size of " + path);
    files->push_back(path);
    *bytes += size;
    return Status::OK();
  }
  std::vector<std::string> children;
  s = fs.GetChildren(path, io, &children, nullptr);
  if (s.IsNotFound()) return Status::OK();
  if (!s.ok()) return FromRocksDB(s, "listing " + path);
  for (const std::string& child : children) {
    ROCKSDCP_RETURN_IF_ERROR(
        ListFilesUnder(fs, (fs::path(path) / child).string(), files, bytes));
  }
  return Status::OK();
}

bool StoreImpl::HasStagingDirFor(const std::string& id) const {
  const std::string prefix = FileSafeId(id) + ".";
  std::vector<std::string> names;
  // Unreadable counts as absent: this only picks a NotFound message.
  fs_->GetChildren(staging_root_, rocksdb::IOOptions(), &names, nullptr)
      .PermitUncheckedError();
  for (const std::string& name : names) {
    if (name.size() > prefix.size() && name.rfind(prefix, 0) == 0 &&
        name.find('.', prefix.size()) == std::string::npos) {
      return true;
    }
  }
  return false;
}

Status StoreImpl::RemoveStagingDir(const std::string& dir) const {
  return RemoveTree(*fs_, dir);
}

Status StoreImpl::CreateDirs(const std::string& dir,
                             bool durable_entries) const {
  const rocksdb::IOOptions io;
  fs::path path = fs::path(dir).lexically_normal();
  if (path.filename().empty()) path = path.parent_path();  // "a/b/" -> "a/b"
  const bool exists = fs_->FileExists(path.string(), io, nullptr).ok();
  if (!exists) {
    if (path.has_parent_path() && path.parent_path() != path) {
      ROCKSDCP_RETURN_IF_ERROR(
          CreateDirs(path.parent_path().string(), durable_entries));
    }
    rocksdb::IOStatus s = fs_->CreateDirIfMissing(path.string(), io, nullptr);
    if (!s.ok()) return FromRocksDB(s, "creating directory " + path.string());
  }
  // Existing, it may still be a crashed process's new directory, whose
  // entry never reached the disk: fsync its parent all the same.
  if (!durable_entries || !path.has_parent_path()) return Status::OK();
  rocksdb::IOStatus s;
  std::unique_ptr<rocksdb::FSDirectory> parent;
  const std::string parent_path = path.parent_path().string();
  s = fs_->NewDirectory(parent_path, io, &parent, nullptr);
  if (s.ok()) s = parent->Fsync(io, nullptr);
  if (s.ok()) s = parent->Close(io, nullptr);
  if (!s.ok()) return FromRocksDB(s, "syncing directory " + parent_path);
  return Status::OK();
}

}  // namespace rocksdcp
