#include "util/file_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace rocksdcp::util {

Result<std::optional<FileLock>> FileLock::TryAcquire(const std::string& path) {
  return Lock(path, /*wait=*/false);
}

Result<FileLock> FileLock::Acquire(const std::string& path) {
  ROCKSDCP_ASSIGN_OR_RETURN(std::optional<FileLock> lock,
                            Lock(path, /*wait=*/true));
  return std::move(*lock);  // Waiting, it never comes back empty.
}

Result<std::optional<FileLock>> FileLock::Lock(const std::string& path,
                                               bool wait) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      return Status::IOError("cannot open lock file " + path + ": " +
                             std::strerror(errno));
    }
    int locked;
    do {
      locked = ::flock(fd, wait ? LOCK_EX : LOCK_EX | LOCK_NB);
    } while (locked != 0 && errno == EINTR);
    if (locked != 0) {
      const int err = errno;
      ::close(fd);
      if (err == EWOULDBLOCK) return std::optional<FileLock>();
      return Status::IOError("cannot lock " + path + ": " + std::strerror(err));
    }
    // Someone may have unlinked the file between our open and flock (GC
    // removing a dead writer's lock): then we hold a lock nobody else can
    // find, so start again.
    struct stat held, named;
    if (::fstat(fd, &held) == 0 && ::stat(path.c_str(), &named) == 0 &&
        held.st_ino == named.st_ino && held.st_dev == named.st_dev) {
      return std::optional<FileLock>(FileLock(path, fd));
    }
    ::close(fd);
  }
  return Status::IOError("cannot lock " + path +
                         ": it keeps being replaced by another process");
}

FileLock::FileLock(FileLock&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_) {
  other.fd_ = -1;
}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    Release();
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

FileLock::~FileLock() { Release(); }

void FileLock::Release() {
  if (fd_ >= 0) ::close(fd_);  // Closing the last descriptor unlocks.
  fd_ = -1;
}

void FileLock::UnlinkAndRelease() {
  if (fd_ >= 0) ::unlink(path_.c_str());
  Release();
}

}  // namespace rocksdcp::util
