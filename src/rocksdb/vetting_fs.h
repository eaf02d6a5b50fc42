// The store's file system: every SST file RocksDB opens is vetted first
// (sst_vet.h), so that no forged file makes RocksDB allocate for a block
// more than the file could hold (issue #38's decompression bombs).
//
// The rule: no block of a file of S bytes may decompress to more than
// max(kMinBlockClaimBytes, min(kMaxBlockClaimRatio x S, kMaxBlockBytes)).
// So RocksDB never allocates for a block more than 16 MiB + 32 times the
// file's bytes, nor more than the largest value a writer writes (a
// metadata value, under 2 GiB); a forged block of a few KiB that claims
// 1 GiB is refused:
//   - the index, meta and properties blocks when the file is opened
//     (RocksDB reads them then), by VetSstLayout, which parses them within
//     the same bound;
//   - a data block as it is read: RocksDB reads a block with its trailer
//     (compression type) in one read, and the check looks at the trailers
//     each read brings, and at the block's first bytes (the size it
//     claims), at no extra read unless the block began in an earlier one.
// A refused block reads as Corruption naming the file and the block, before
// RocksDB decompresses anything of it.
//
// Why a ratio and not "no compressed block outside the catalog": rocksdcp
// writes checkpoint column families uncompressed, but a store opened by
// stock `ldb` (default options: snappy) has the metadata its WAL held
// flushed compressed. Snappy can't inflate more than about 21x; RocksDB's
// index and catalog blocks are a few KiB.

#ifndef ROCKSDCP_SRC_ROCKSDB_VETTING_FS_H_
#define ROCKSDCP_SRC_ROCKSDB_VETTING_FS_H_

#include <rocksdb/file_system.h>

#include <cstdint>
#include <memory>
#include <string>

#include "format/metadata_codec.h"

namespace rocksdcp {

// What any block may claim, however small its file.
inline constexpr uint64_t kMinBlockClaimBytes = 16ull << 20;
// What a block may claim per byte of its file, past kMinBlockClaimBytes.
inline constexpr uint64_t kMaxBlockClaimRatio = 32;
// What any block may hold or claim: the largest value a writer writes (a
// metadata value; a piece is at most 1 GiB), its key and block overhead.
inline constexpr uint64_t kMaxBlockBytes =
    format::kMaxMetadataBytes + (1 << 20);

// The most a block of a file of `file_size` bytes may claim (the rule above).
uint64_t BlockClaimLimit(uint64_t file_size);

class VettingFileSystem : public rocksdb::FileSystemWrapper {
 public:
  explicit VettingFileSystem(
      const std::shared_ptr<rocksdb::FileSystem>& target);

  static const char* kClassName() { return "RocksdcpVettingFileSystem"; }
  const char* Name() const override { return kClassName(); }

  rocksdb::IOStatus NewRandomAccessFile(
      const std::string& f, const rocksdb::FileOptions& o,
      std::unique_ptr<rocksdb::FSRandomAccessFile>* r,
      rocksdb::IODebugContext* dbg) override;
};

}  // namespace rocksdcp

#endif  // ROCKSDCP_SRC_ROCKSDB_VETTING_FS_H_
