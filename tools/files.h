// Files the CLI writes and reads outside a store: an output that appears
// whole or not at all, and a read-only mapping of an input.

#ifndef ROCKSDCP_TOOLS_FILES_H_
#define ROCKSDCP_TOOLS_FILES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "rocksdcp/status.h"

namespace rocksdcp::tools {

// An output file written under a temporary name in the same directory
// (".rocksdcp-tmp.<pid>.<n>") and renamed over `path` by Commit(), after an
// fsync: readers of `path` see the old file or the whole new one, never a
// part, and a failed or interrupted write leaves `path` as it was. Only the
// temporary file is ever removed: by the destructor, or, after
// RemoveOutFilesOnSignals, on Ctrl-C. A `path` that exists must be a regular
// file the user may write (as `cp` would require); a directory, device or
// read-only file is refused by Open() and left alone. A symlink is followed
// (the file it names is replaced), and a replaced file keeps its
// permissions. Errors name `path`.
// Not thread-safe; one OutFile open at a time per process (the signal
// handler knows one). Call order: Open, Write..., Commit.
class OutFile {
 public:
  explicit OutFile(std::string path);
  ~OutFile();  // Removes the temporary file unless committed.
  OutFile(const OutFile&) = delete;
  OutFile& operator=(const OutFile&) = delete;

  Status Open();
  Status Write(const void* data, size_t n);
  Status Write(std::string_view s) { return Write(s.data(), s.size()); }
  Status Commit();

 private:
  Status Error(std::string_view what, const std::string& path) const;

  std::string path_;
  std::string target_;  // path_, through a symlink.
  std::string temp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

// Makes SIGINT, SIGTERM and SIGHUP remove the temporary file of the OutFile
// being written before they end the process as they would have. For
// programs (the CLI) that own their signal handling.
void RemoveOutFilesOnSignals();

// A read-only, private mapping of a whole file. The pages are the page
// cache's: memory the kernel can drop, not a copy (ReleasePages). If another
// process truncates the file while it is mapped, reading past the new end
// raises SIGBUS: a file being rewritten must not be imported.
class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  // NotFound if `path` does not exist; IOError naming it otherwise.
  Status Open(const std::string& path);
  const uint8_t* data() const { return static_cast<const uint8_t*>(data_); }
  size_t size() const { return size_; }
  // Drops the mapping's pages from this process (MADV_DONTNEED): they stay
  // in the page cache, and a later read faults them back in, unchanged (the
  // mapping is never written). Safe while other threads read the mapping.
  // Keeps a long read of a large file from growing the process's RSS to
  // the file's size.
  void ReleasePages() const;

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace rocksdcp::tools

#endif  // ROCKSDCP_TOOLS_FILES_H_
