// A saved item as a checkpoint's metadata describes it, and the checks a
// load makes on it and on its pieces.

#ifndef ROCKSDCP_SRC_ROCKSDB_STORED_ITEM_H_
#define ROCKSDCP_SRC_ROCKSDB_STORED_ITEM_H_

#include <rocksdb/options.h>
#include <rocksdb/slice.h>
#include <rocksdb/status.h>

#include <cstdint>
#include <map>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "format/piece_codec.h"
#include "rocksdb/catalog_codec.h"
#include "rocksdb/store_impl.h"
#include "rocksdcp/metadata.h"
#include "rocksdcp/status.h"
#include "rocksdcp/tensor.h"

namespace rocksdcp {

// A saved item, as a checkpoint's metadata describes it.
struct StoredItem {
  format::StorageInfo info;
  DType dtype = DType::kUInt8;
  std::vector<int64_t> chunk_sizes;
};

// The checks a load makes, shared with Store::Verify. Their errors are
// Corruption without context: the caller prefixes where (checkpoint, item,
// piece).

// Finds a tensor's chunk by its offsets, for LookupStoredItem: at the
// index's hint when the hint is right (as every writer's is), else in a
// map of the tensor's chunks built on its first miss. So N lookups take
// O(N log N) whatever forged hints say, not O(N^2). Holds pointers into
// one Metadata: use one per Metadata, on one thread.
class ChunkFinder {
 public:
  const ChunkStorageMetadata* Find(const TensorStorageMetadata& tensor,
                                   const MetadataIndex& index);

 private:
  std::unordered_map<
      const TensorStorageMetadata*,
      std::map<std::vector<int64_t>, const ChunkStorageMetadata*>>
      by_offsets_;
};

// Finds `index` in `metadata` and checks its storage info: its kind (a
// tensor chunk if `tensor`, else bytes) and, for a tensor, that the
// metadata has the chunk and that the info's length and piece size fit
// the chunk's elements. With format::PieceHashes::kRead, the info's piece
// hashes too (Verify checks them).
Result<StoredItem> LookupStoredItem(
    const Metadata& metadata, const MetadataIndex& index, bool tensor,
    ChunkFinder& chunks,
    format::PieceHashes hashes = format::PieceHashes::kSkip);
// Corruption unless what the storage entries of `metadata` claim fits in
// the `stored_bytes` the checkpoint really holds: their payload (the sum of
// their lengths, but for pieces held elsewhere; uncompressed pieces store
// their bytes as they are) and format::kMinStoredPieceBytes per piece (a
// reference takes more); and the payload referenced in each of `sources` fits
// in what that column family holds. Names the entry claiming the most. Checked
// before a load or Verify allocates or reads anything for an item, so forged
// lengths and piece counts can't make either take memory or time out of
// proportion to the store. An item flagged compressed counts 1 /
// format::kMaxCompressionRatio of its payload, the least its pieces store
// (DecodePiece refuses a piece that stores less). Entries whose storage info
// does not decode are left to LookupStoredItem.
Status CheckStorageFits(const Metadata& metadata, uint64_t stored_bytes,
                        const CommittedCheckpoint::Sources& sources);

// Reads the metadata of committed checkpoint `c` and checks it as a load
// does: there, matching the catalog's checksum, decoding within the limits
// of what `c` stores, and fitting it (CheckStorageFits). Corruption
// without context otherwise.
Result<Metadata> ReadCheckpointMetadata(StoreImpl& store,
                                        const CommittedCheckpoint& c);

// Verifies what a Get or MultiGet of piece `p` of `item` (at `key`)
// returned: that it is there, DecodePiece's checks (the FlatBuffers
// verifier, identifier, version and XXH3), and the piece's header against
// the metadata. `out` points into `value`, or into `buffer` if the piece
// is compressed.
Status VerifyPieceValue(const rocksdb::Status& s, std::string_view value,
                        std::string_view key, const MetadataIndex& index,
                        const StoredItem& item, uint32_t p,
                        format::PieceDecodeBuffer* buffer,
                        format::DecodedPiece* out);

// As VerifyPieceValue, for a checkpoint whose pieces may be references
// (incremental saves): when `value` is a PieceRef, checks it against the
// metadata (the column family the item's storage info names for piece
// `p`, the key, the length and the XXH3-128), fetches the piece it names
// from that column family into `target` with `ro`, and verifies that as
// VerifyPieceValue does; a reference to a reference is refused. `out`
// then points into `target`. Load trusts that a column family's piece at
// a key never changes (names are never reused while referenced); Verify
// also hashes the payload.
Status VerifyPieceOrReference(StoreImpl& store, const CommittedCheckpoint& c,
                              const rocksdb::ReadOptions& ro,
                              const rocksdb::Status& s, std::string_view value,
                              std::string_view key, const MetadataIndex& index,
                              const StoredItem& item, uint32_t p,
                              rocksdb::PinnableSlice* target,
                              format::PieceDecodeBuffer* buffer,
                              format::DecodedPiece* out);

// Reads piece `p` of `item` (at `key`), which the item's storage info says
// another column family holds, from there into `target`, and verifies it
// as VerifyPieceValue does; a reference there is refused. Loads read a
// referenced piece so, without the reference in the checkpoint's own
// column family (the storage info, checked against the catalog's
// checksum, says where the piece is); VerifyPieceOrReference checks the
// reference too.
// REQUIRES: item.info.SourceOf(p) != nullptr.
Status ReadReferencedPiece(StoreImpl& store, const CommittedCheckpoint& c,
                           const rocksdb::ReadOptions& ro, std::string_view key,
                           const MetadataIndex& index, const StoredItem& item,
                           uint32_t p, rocksdb::PinnableSlice* target,
                           format::PieceDecodeBuffer* buffer,
                           format::DecodedPiece* out);

}  // namespace rocksdcp

#endif  // ROCKSDCP_SRC_ROCKSDB_STORED_ITEM_H_
