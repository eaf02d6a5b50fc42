// An exclusive advisory lock on a file (flock), held while the object
// lives. Staging directories are guarded this way, so that GC in any
// process on the node leaves alone the files of a writer that is still
// running, and removes those of a writer that died.

#ifndef ROCKSDCP_SRC_UTIL_FILE_LOCK_H_
#define ROCKSDCP_SRC_UTIL_FILE_LOCK_H_

#include <optional>
#include <string>

#include "rocksdcp/status.h"

namespace rocksdcp::util {

class FileLock {
 public:
  // Creates `path` if needed and locks it without waiting. Returns nullopt
  // if another open file (in any process) holds the lock. The lock is taken
  // on the file that `path` names once locked: if the file was unlinked and
  // re-created meanwhile, it retries.
  static Result<std::optional<FileLock>> TryAcquire(const std::string& path);
  // The same, but waits while another open file holds the lock. For a
  // writer's own, freshly named lock file, which only GC may hold, and
  // only for as long as it takes to see there is no directory and unlink
  // the file (then this locks a new one): waiting, the writer can't mistake
  // GC's brief look for another writer.
  static Result<FileLock> Acquire(const std::string& path);

  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

  const std::string& path() const { return path_; }
  // Unlinks the lock file while still holding the lock, then releases it.
  void UnlinkAndRelease();

 private:
  FileLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  static Result<std::optional<FileLock>> Lock(const std::string& path,
                                              bool wait);
  void Release();

  std::string path_;
  int fd_ = -1;
};

}  // namespace rocksdcp::util

#endif  // ROCKSDCP_SRC_UTIL_FILE_LOCK_H_
