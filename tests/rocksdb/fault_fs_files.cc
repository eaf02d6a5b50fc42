// The wrappers of a FaultFs's open files: each operation asks the FaultFs
// first (FaultFs::Admit), and syncs tell it what became durable.

#include <memory>
#include <string>
#include <utility>

#include "rocksdb/fault_fs.h"

namespace rocksdcp::testing {

using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;

namespace {

// Runs `op` if the FaultFs admits the operation (see FaultFs::Admit).
template <typename Op>
IOStatus Admitted(FaultFs* fs, uint32_t kind, std::string_view verb,
                  const std::string& path, Op op) {
  IOStatus s = fs->Admit(kind, verb, path);
  return s.ok() ? op() : s;
}

class WritableFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  WritableFile(std::unique_ptr<rocksdb::FSWritableFile> f, std::string path,
               FaultFs* fs)
      : FSWritableFileOwnerWrapper(std::move(f)),
        path_(std::move(path)),
        fs_(fs) {}

  IOStatus Append(const rocksdb::Slice& data, const IOOptions& o,
                  IODebugContext* dbg) override {
    return Admitted(fs_, kOpWrite, "append to", path_,
                    [&] { return target()->Append(data, o, dbg); });
  }
  IOStatus Append(const rocksdb::Slice& data, const IOOptions& o,
                  const rocksdb::DataVerificationInfo& info,
                  IODebugContext* dbg) override {
    return Admitted(fs_, kOpWrite, "append to", path_,
                    [&] { return target()->Append(data, o, info, dbg); });
  }
  IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                            const IOOptions& o, IODebugContext* dbg) override {
    return Admitted(fs_, kOpWrite, "write to", path_, [&] {
      return target()->PositionedAppend(data, offset, o, dbg);
    });
  }
  IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                            const IOOptions& o,
                            const rocksdb::DataVerificationInfo& info,
                            IODebugContext* dbg) override {
    return Admitted(fs_, kOpWrite, "write to", path_, [&] {
      return target()->PositionedAppend(data, offset, o, info, dbg);
    });
  }
  IOStatus Truncate(uint64_t size, const IOOptions& o,
                    IODebugContext* dbg) override {
    return Admitted(fs_, kOpWrite, "truncate", path_,
                    [&] { return target()->Truncate(size, o, dbg); });
  }
  IOStatus Sync(const IOOptions& o, IODebugContext* dbg) override {
    return DoSync(o, dbg);
  }
  IOStatus Fsync(const IOOptions& o, IODebugContext* dbg) override {
    return DoSync(o, dbg);
  }
  // sync_file_range starts writeback; it makes nothing durable.
  IOStatus RangeSync(uint64_t offset, uint64_t n, const IOOptions& o,
                     IODebugContext* dbg) override {
    return Admitted(fs_, 0, "range-sync", path_,
                    [&] { return target()->RangeSync(offset, n, o, dbg); });
  }
  IOStatus Flush(const IOOptions& o, IODebugContext* dbg) override {
    return Admitted(fs_, 0, "flush", path_,
                    [&] { return target()->Flush(o, dbg); });
  }
  IOStatus Close(const IOOptions& o, IODebugContext* dbg) override {
    IOStatus s = fs_->Admit(0, "close", path_);
    // Closed either way: the descriptor must not leak.
    IOStatus closed = target()->Close(o, dbg);
    return s.ok() ? closed : s;
  }

 private:
  IOStatus DoSync(const IOOptions& o, IODebugContext* dbg) {
    IOStatus s = fs_->Admit(kOpSync, "sync", path_);
    if (s.ok() && fs_->real_syncs()) s = target()->Sync(o, dbg);
    if (s.ok()) fs_->FileSynced(path_);
    return s;
  }

  const std::string path_;
  FaultFs* const fs_;
};

class RandomAccessFile : public rocksdb::FSRandomAccessFileOwnerWrapper {
 public:
  RandomAccessFile(std::unique_ptr<rocksdb::FSRandomAccessFile> f,
                   std::string path, FaultFs* fs)
      : FSRandomAccessFileOwnerWrapper(std::move(f)),
        path_(std::move(path)),
        fs_(fs) {}

  IOStatus Read(uint64_t offset, size_t n, const IOOptions& o,
                rocksdb::Slice* result, char* scratch,
                IODebugContext* dbg) const override {
    return Admitted(fs_, kOpRead, "read", path_, [&] {
      return target()->Read(offset, n, o, result, scratch, dbg);
    });
  }
  IOStatus MultiRead(rocksdb::FSReadRequest* reqs, size_t num_reqs,
                     const IOOptions& o, IODebugContext* dbg) override {
    IOStatus s = fs_->Admit(kOpRead, "read", path_);
    if (s.ok()) return target()->MultiRead(reqs, num_reqs, o, dbg);
    for (size_t i = 0; i < num_reqs; ++i) reqs[i].status = s;
    return s;
  }

 private:
  const std::string path_;
  FaultFs* const fs_;
};

class SequentialFile : public rocksdb::FSSequentialFileOwnerWrapper {
 public:
  SequentialFile(std::unique_ptr<rocksdb::FSSequentialFile> f, std::string path,
                 FaultFs* fs)
      : FSSequentialFileOwnerWrapper(std::move(f)),
        path_(std::move(path)),
        fs_(fs) {}

  IOStatus Read(size_t n, const IOOptions& o, rocksdb::Slice* result,
                char* scratch, IODebugContext* dbg) override {
    return Admitted(fs_, kOpRead, "read", path_,
                    [&] { return target()->Read(n, o, result, scratch, dbg); });
  }
  IOStatus PositionedRead(uint64_t offset, size_t n, const IOOptions& o,
                          rocksdb::Slice* result, char* scratch,
                          IODebugContext* dbg) override {
    return Admitted(fs_, kOpRead, "read", path_, [&] {
      return target()->PositionedRead(offset, n, o, result, scratch, dbg);
    });
  }

 private:
  const std::string path_;
  FaultFs* const fs_;
};

class RandomRWFile : public rocksdb::FSRandomRWFileOwnerWrapper {
 public:
  RandomRWFile(std::unique_ptr<rocksdb::FSRandomRWFile> f, std::string path,
               FaultFs* fs)
      : FSRandomRWFileOwnerWrapper(std::move(f)),
        path_(std::move(path)),
        fs_(fs) {}

  IOStatus Write(uint64_t offset, const rocksdb::Slice& data,
                 const IOOptions& o, IODebugContext* dbg) override {
    return Admitted(fs_, kOpWrite, "write to", path_,
                    [&] { return target()->Write(offset, data, o, dbg); });
  }
  IOStatus Read(uint64_t offset, size_t n, const IOOptions& o,
                rocksdb::Slice* result, char* scratch,
                IODebugContext* dbg) const override {
    return Admitted(fs_, kOpRead, "read", path_, [&] {
      return target()->Read(offset, n, o, result, scratch, dbg);
    });
  }
  IOStatus Sync(const IOOptions& o, IODebugContext* dbg) override {
    IOStatus s = fs_->Admit(kOpSync, "sync", path_);
    if (s.ok() && fs_->real_syncs()) s = target()->Sync(o, dbg);
    if (s.ok()) fs_->FileSynced(path_);
    return s;
  }
  IOStatus Fsync(const IOOptions& o, IODebugContext* dbg) override {
    return Sync(o, dbg);
  }

 private:
  const std::string path_;
  FaultFs* const fs_;
};

class Directory : public rocksdb::FSDirectoryWrapper {
 public:
  Directory(std::unique_ptr<rocksdb::FSDirectory> d, std::string path,
            FaultFs* fs)
      : FSDirectoryWrapper(std::move(d)), path_(std::move(path)), fs_(fs) {}

  IOStatus Fsync(const IOOptions& o, IODebugContext* dbg) override {
    return FsyncWithDirOptions(o, dbg, rocksdb::DirFsyncOptions());
  }
  IOStatus FsyncWithDirOptions(
      const IOOptions& o, IODebugContext* dbg,
      const rocksdb::DirFsyncOptions& options) override {
    IOStatus s = fs_->Admit(kOpDirSync, "fsync directory", path_);
    if (s.ok() && fs_->real_syncs()) {
      s = FSDirectoryWrapper::FsyncWithDirOptions(o, dbg, options);
    }
    if (s.ok()) fs_->DirSynced(path_);
    return s;
  }

 private:
  const std::string path_;
  FaultFs* const fs_;
};

}  // namespace

std::unique_ptr<rocksdb::FSWritableFile> FaultFs::Wrap(
    std::unique_ptr<rocksdb::FSWritableFile> f, const std::string& path) {
  return std::make_unique<WritableFile>(std::move(f), path, this);
}

std::unique_ptr<rocksdb::FSRandomAccessFile> FaultFs::Wrap(
    std::unique_ptr<rocksdb::FSRandomAccessFile> f, const std::string& path) {
  return std::make_unique<RandomAccessFile>(std::move(f), path, this);
}

std::unique_ptr<rocksdb::FSSequentialFile> FaultFs::Wrap(
    std::unique_ptr<rocksdb::FSSequentialFile> f, const std::string& path) {
  return std::make_unique<SequentialFile>(std::move(f), path, this);
}

std::unique_ptr<rocksdb::FSRandomRWFile> FaultFs::Wrap(
    std::unique_ptr<rocksdb::FSRandomRWFile> f, const std::string& path) {
  return std::make_unique<RandomRWFile>(std::move(f), path, this);
}

std::unique_ptr<rocksdb::FSDirectory> FaultFs::Wrap(
    std::unique_ptr<rocksdb::FSDirectory> d, const std::string& path) {
  return std::make_unique<Directory>(std::move(d), path, this);
}

}  // namespace rocksdcp::testing
