#include "files.h"

#include <fcntl.h>
#include <libgen.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "checkpoint_items.h"

namespace rocksdcp::tools {
namespace {

std::string DirName(const std::string& path) {
  std::string copy = path;
  return ::dirname(copy.data());
}

// The temporary file of the OutFile being written, for the signal handler
// to remove: a fixed buffer and a flag, all an async-signal-safe handler
// may touch.
char g_temp_path[PATH_MAX + 64];
volatile sig_atomic_t g_temp_set = 0;

void SetActiveTemp(const std::string& path) {
  g_temp_set = 0;
  if (path.size() >= sizeof(g_temp_path)) return;
  std::memcpy(g_temp_path, path.c_str(), path.size() + 1);
  g_temp_set = 1;
}

void ClearActiveTemp() { g_temp_set = 0; }

extern "C" void RemoveTempAndDie(int sig) {
  if (g_temp_set) ::unlink(g_temp_path);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

void RemoveOutFilesOnSignals() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, RemoveTempAndDie);
}

OutFile::OutFile(std::string path) : path_(std::move(path)) {}

OutFile::~OutFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_path_.empty()) {
    ClearActiveTemp();
    ::unlink(temp_path_.c_str());
  }
}

Status OutFile::Error(std::string_view what, const std::string& path) const {
  const int err = errno;
  return Status::IOError(std::string(what) + " " + Quoted(path) + ": " +
                         std::strerror(err));
}

Status OutFile::Open() {
  struct stat st;
  const bool exists = ::stat(path_.c_str(), &st) == 0;
  if (exists) {
    if (!S_ISREG(st.st_mode)) {
      return Status::InvalidArgument("cannot write " + Quoted(path_) +
                                     ": not a regular file");
    }
    if (::access(path_.c_str(), W_OK) != 0) {
      return Error("cannot write", path_);
    }
    // Through a symlink, as `cp` writes: the file it names is replaced.
    char resolved[PATH_MAX];
    if (::realpath(path_.c_str(), resolved) == nullptr) {
      return Error("cannot write", path_);
    }
    target_ = resolved;
  } else if (errno != ENOENT) {
    return Error("cannot write", path_);
  } else {
    target_ = path_;
  }
  // A short name of our own beside the target (O_EXCL never opens
  // another's file), hidden, and removed on failure or Ctrl-C
  // (RemoveOutFilesOnSignals).
  const std::string base =
      DirName(target_) + "/.rocksdcp-tmp." + std::to_string(::getpid()) + ".";
  for (int attempt = 0; fd_ < 0; ++attempt) {
    temp_path_ = base + std::to_string(attempt);
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                 0666);
    if (fd_ < 0 && (errno != EEXIST || attempt == 99)) {
      Status s = Error("cannot create a file beside", path_);
      temp_path_.clear();
      return s;
    }
  }
  SetActiveTemp(temp_path_);
  // A replaced file keeps its permissions: a private file stays private.
  if (exists && ::fchmod(fd_, st.st_mode & 07777) != 0) {
    return Error("cannot write", path_);
  }
  return Status::OK();
}

Status OutFile::Write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Error("cannot write", path_);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::OK();
}

Status OutFile::Commit() {
  if (::fsync(fd_) != 0) return Error("cannot write", path_);
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) return Error("cannot write", path_);
  if (::rename(temp_path_.c_str(), target_.c_str()) != 0) {
    return Error("cannot write", path_);
  }
  committed_ = true;
  ClearActiveTemp();
  // The rename itself is durable once the directory is synced.
  const int dir =
      ::open(DirName(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return Status::OK();
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::ReleasePages() const {
  if (data_ != nullptr) ::madvise(data_, size_, MADV_DONTNEED);
}

Status MappedFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string message =
        "cannot open " + Quoted(path) + ": " + std::strerror(err);
    return err == ENOENT ? Status::NotFound(message) : Status::IOError(message);
  }
  struct stat st;
  Status s;
  if (::fstat(fd, &st) != 0) {
    s = Status::IOError("cannot stat " + Quoted(path) + ": " +
                        std::strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    s = Status::InvalidArgument("cannot read " + Quoted(path) +
                                ": not a regular file");
  } else if (st.st_size > 0) {
    size_ = static_cast<size_t>(st.st_size);
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      s = Status::IOError("cannot map " + Quoted(path) + ": " +
                          std::strerror(errno));
      size_ = 0;
    } else {
      data_ = p;
    }
  }
  ::close(fd);
  return s;
}

}  // namespace rocksdcp::tools
