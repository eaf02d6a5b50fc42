#include "rocksdb/vetting_fs.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string_view>
#include <utility>
#include <vector>

#include "rocksdb/sst_vet.h"

namespace rocksdcp {
namespace {

bool IsTableFile(const std::string& path) {
  return path.ends_with(".sst") || path.ends_with(".ldb");
}

// An SST file whose reads are checked for the trailers of the data blocks
// they bring: a compressed block's claim is checked (CheckBlockClaim)
// before RocksDB, which reads a block and its trailer in one read, sees it.
class CheckedTableFile : public rocksdb::FSRandomAccessFileOwnerWrapper {
 public:
  CheckedTableFile(std::unique_ptr<rocksdb::FSRandomAccessFile> file,
                   std::string name, SstLayout layout, uint64_t limit)
      : FSRandomAccessFileOwnerWrapper(std::move(file)),
        name_(std::move(name)),
        layout_(std::move(layout)),
        limit_(limit) {}

  rocksdb::IOStatus Read(uint64_t offset, size_t n,
                         const rocksdb::IOOptions& options,
                         rocksdb::Slice* result, char* scratch,
                         rocksdb::IODebugContext* dbg) const override {
    rocksdb::IOStatus s =
        target()->Read(offset, n, options, result, scratch, dbg);
    if (s.ok()) s = Check(offset, *result, options, dbg);
    return s;
  }

  rocksdb::IOStatus MultiRead(rocksdb::FSReadRequest* reqs, size_t num_reqs,
                              const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = target()->MultiRead(reqs, num_reqs, options, dbg);
    if (!s.ok()) return s;
    for (size_t i = 0; i < num_reqs; ++i) {
      if (reqs[i].status.ok()) {
        reqs[i].status = Check(reqs[i].offset, reqs[i].result, options, dbg);
      }
    }
    return s;
  }

  // Through Read() above (FSRandomAccessFile's synchronous default).
  rocksdb::IOStatus ReadAsync(
      rocksdb::FSReadRequest& req, const rocksdb::IOOptions& opts,
      std::function<void(const rocksdb::FSReadRequest&, void*)> cb,
      void* cb_arg, void** io_handle, rocksdb::IOHandleDeleter* del_fn,
      rocksdb::IODebugContext* dbg) override {
    return FSRandomAccessFile::ReadAsync(req, opts, std::move(cb), cb_arg,
                                         io_handle, del_fn, dbg);
  }

 private:
  // Corruption if `data`, read at `offset`, holds the trailer of a data
  // block that claims more than limit_.
  rocksdb::IOStatus Check(uint64_t offset, const rocksdb::Slice& data,
                          const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) const {
    const auto& blocks = layout_.data_blocks;
    // The first block whose trailer is at or past `offset`.
    auto it = std::partition_point(blocks.begin(), blocks.end(),
                                   [offset](const SstLayout::Block& b) {
                                     return b.offset + b.size < offset;
                                   });
    for (; it != blocks.end() && it->offset + it->size - offset < data.size();
         ++it) {
      const auto type =
          static_cast<uint8_t>(data[it->offset + it->size - offset]);
      if (type == 0) continue;  // kNoCompression: its stored size
      const size_t head_size =
          static_cast<size_t>(std::min<uint64_t>(it->size, 5));
      std::string_view head;
      char buffer[5];
      if (it->offset >= offset) {
        head = std::string_view(data.data() + (it->offset - offset), head_size);
      } else {  // The block began in an earlier read.
        rocksdb::Slice got;
        rocksdb::IOStatus s =
            target()->Read(it->offset, head_size, options, &got, buffer, dbg);
        if (!s.ok()) return s;
        head = std::string_view(got.data(), got.size());
      }
      uint64_t claimed = 0;
      const Status vetted = CheckBlockClaim(
          type, head, it->size, layout_.format_version, limit_, name_,
          "data block at offset " + std::to_string(it->offset), &claimed);
      if (!vetted.ok()) return rocksdb::IOStatus::Corruption(vetted.message());
    }
    return rocksdb::IOStatus::OK();
  }

  const std::string name_;
  const SstLayout layout_;
  const uint64_t limit_;
};

}  // namespace

uint64_t BlockClaimLimit(uint64_t file_size) {
  const uint64_t by_file = file_size > kMaxBlockBytes / kMaxBlockClaimRatio
                               ? kMaxBlockBytes
                               : file_size * kMaxBlockClaimRatio;
  return std::max(kMinBlockClaimBytes, by_file);
}

VettingFileSystem::VettingFileSystem(
    const std::shared_ptr<rocksdb::FileSystem>& target)
    : FileSystemWrapper(target) {}

rocksdb::IOStatus VettingFileSystem::NewRandomAccessFile(
    const std::string& f, const rocksdb::FileOptions& o,
    std::unique_ptr<rocksdb::FSRandomAccessFile>* r,
    rocksdb::IODebugContext* dbg) {
  std::unique_ptr<rocksdb::FSRandomAccessFile> file;
  rocksdb::IOStatus s = target()->NewRandomAccessFile(f, o, &file, dbg);
  if (!s.ok() || !IsTableFile(f)) {
    *r = std::move(file);
    return s;
  }
  uint64_t size = 0;
  s = target()->GetFileSize(f, o.io_options, &size, dbg);
  // The vetting's reads are small and unaligned: through the page cache.
  std::unique_ptr<rocksdb::FSRandomAccessFile> buffered;
  if (s.ok() && o.use_direct_reads) {
    rocksdb::FileOptions plain(o);
    plain.use_direct_reads = false;
    s = target()->NewRandomAccessFile(f, plain, &buffered, dbg);
  }
  if (!s.ok()) return s;
  SstVetLimits limits;
  limits.max_block_bytes = BlockClaimLimit(size);
  limits.max_parsed_bytes = limits.max_block_bytes;
  SstLayout layout;
  const Status vetted =
      VetSstLayout(buffered ? *buffered : *file, size, limits, f, &layout);
  if (vetted.IsIOError()) return rocksdb::IOStatus::IOError(vetted.message());
  if (!vetted.ok()) {
    // NotSupported (a codec whose decompression no claim bounds) is as
    // unreadable here as a forged block.
    return rocksdb::IOStatus::Corruption(vetted.message());
  }
  *r = std::make_unique<CheckedTableFile>(std::move(file), f, std::move(layout),
                                          limits.max_block_bytes);
  return rocksdb::IOStatus::OK();
}

}  // namespace rocksdcp
