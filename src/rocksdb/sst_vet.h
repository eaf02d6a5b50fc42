// Vets an SST file before RocksDB may read it: the defence against
// decompression bombs (issue #38).
//
// RocksDB decompresses a block whole, allocating the size the block's
// header claims before it decompresses (and, for zlib and bzip2, growing
// past it), and has no option to bound that. A forged file can hold a block
// of a few KB that claims 1 GiB, and any read of it then costs gigabytes
// and seconds. VetSstFile parses the block-based table format (RocksDB 7.8,
// format_version 0-5) itself and checks what every block claims, without
// decompressing a data block:
//
//   footer -> metaindex block -> every meta block's trailer (and the
//   properties block: index type, delta-encoded index values)
//   footer -> index block [-> index partitions] -> every data block's
//   trailer and first bytes
//
// The blocks it parses (metaindex, properties, index and its partitions)
// it decompresses itself, into at most the size they claim.
//
// Work is bounded by the file: one read of each parsed block, and about one
// small read per data block, which must lie in the file in order and not
// overlap (as RocksDB writes them). A file it accepts may still be corrupt
// elsewhere (keys, checksums, values): RocksDB's own checks remain.
//
// Thread-safe: it keeps no state; the file must allow concurrent reads if
// calls share it.

#ifndef ROCKSDCP_SRC_ROCKSDB_SST_VET_H_
#define ROCKSDCP_SRC_ROCKSDB_SST_VET_H_

#include <rocksdb/file_system.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rocksdcp/status.h"

namespace rocksdcp {

struct SstVetLimits {
  // The largest size any block may have once decompressed: the size a
  // compressed block claims, or the stored size of an uncompressed one.
  // RocksDB allocates this much for each read of the block. Pass the
  // largest block a writer of the column family may write (a piece plus
  // its overhead for checkpoints; a few MiB for the catalog).
  // Default: 64 MiB.
  uint64_t max_block_bytes = 64ull << 20;

  // The most bytes, decompressed and in total, of the blocks the vetting
  // itself parses (metaindex, properties, index and index partitions). It
  // bounds the vetting's memory and time: a compressed index block can
  // claim far more than it stores. RocksDB writes about 20 bytes of index
  // per data block.
  // Default: 64 MiB.
  uint64_t max_parsed_bytes = 64ull << 20;
};

// OK if `file` (of `file_size` bytes) is a block-based table whose every
// block is within `limits`. Otherwise:
//   Corruption: the file is not a block-based table, a handle or a block is
//     malformed, or a block claims more than the limit; the message names
//     `name`, the block (kind and offset) and its claim against the limit;
//   NotSupported: a valid table the vetting can't bound (zlib, bzip2 or
//     xpress blocks, a compressed block of format_version 0-1 other than
//     snappy, an index of type kBinarySearchWithFirstKey);
//   IOError: a read failed.
[[nodiscard]] Status VetSstFile(rocksdb::FSRandomAccessFile& file,
                                uint64_t file_size, const SstVetLimits& limits,
                                const std::string& name);

// What VetSstLayout learnt of a file.
struct SstLayout {
  // The column family its properties name: "" if they name none, as the
  // files of SstFileWriter (the checkpoint data rocksdcp ingests) do.
  std::string column_family;
  uint32_t format_version = 0;
  struct Block {
    uint64_t offset;
    uint64_t size;  // without the trailer, which follows
  };
  // The data blocks, in file order, not overlapping.
  std::vector<Block> data_blocks;
};

// Vets as VetSstFile does, except the data blocks, which it lists in
// `layout` unread: the caller checks each (CheckBlockClaim) as it is read,
// at no extra read (vetting_fs.h).
[[nodiscard]] Status VetSstLayout(rocksdb::FSRandomAccessFile& file,
                                  uint64_t file_size,
                                  const SstVetLimits& limits,
                                  const std::string& name, SstLayout* layout);

// The check VetSstFile makes of each block: the size RocksDB allocates for
// the block of `stored_size` bytes, compression type `type`, whose first
// bytes (5, or all if fewer) are `head`, in a file of `format_version`, is
// at most `limit`. Sets *claimed to it. Errors as VetSstFile's, naming file
// `name` and block `what` ("data block at offset 4096").
[[nodiscard]] Status CheckBlockClaim(uint8_t type, std::string_view head,
                                     uint64_t stored_size,
                                     uint32_t format_version, uint64_t limit,
                                     const std::string& name,
                                     const std::string& what,
                                     uint64_t* claimed);

// The same for the file at `path` in `fs`.
[[nodiscard]] Status VetSstFile(rocksdb::FileSystem& fs,
                                const std::string& path,
                                const SstVetLimits& limits);

}  // namespace rocksdcp

#endif  // ROCKSDCP_SRC_ROCKSDB_SST_VET_H_
